// The verbs backend's tests (suite 'verbs', run inside tools/softroce-vm).
//
// This binary also holds the backend-parameterised channel suites
// (channel_test.cc, channel_more_test.cc) run with TICTAC_TEST_BACKENDS=verbs:
// the helper registered here makes "verbs" one of their parameters. On a host
// without an RDMA device every case skips with the reason; inside the guest
// (TICTAC_GUEST set) a missing device is a failure.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tests/transport/verbs_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const bool registered = registerBackendHelper({"verbs", verbsLoOptions, verbsViable});

TEST(VerbsBackend, UnknownDeviceIsNoDevice) {
  ASSERT_TRUE(registered);
  ContextOptions o = verbsLoOptions();
  o.device = "no-such-rdma-device";
  auto c = Context::create(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().code(), StatusCode::kNoDevice) << c.status().toString();
  EXPECT_FALSE(c.status().message().empty());
}

TEST(VerbsBackend, BadOptionsAreInvalidArguments) {
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"gid_index", "abc"},
                                                        {"eager_bytes", "12"},
                                                        {"sq_depth", "0"},
                                                        {"sl", "99"},
                                                        {"idle_yield_us", "2000000"},
                                                        {"idle_block_us", "-1"}}) {
    ContextOptions o = verbsLoOptions();
    o.backend_config[key] = value;
    auto c = Context::create(o);
    ASSERT_FALSE(c) << key;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().toString();
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().toString();
  }
}

TEST(VerbsBackend, GidIndexOverrideIsChecked) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  ContextOptions o = verbsLoOptions();
  o.backend_config = {{"gid_index", "999"}};
  auto c = Context::create(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().toString();
  // The environment overrides the automatic choice; the option overrides both.
  ::setenv("TICTAC_VERBS_GID_INDEX", "998", 1);
  auto env = Context::create(verbsLoOptions());
  ContextOptions opt = verbsLoOptions();
  opt.backend_config["gid_index"] = "0";
  auto both = Context::create(opt);
  ::unsetenv("TICTAC_VERBS_GID_INDEX");
  ASSERT_FALSE(env);
  EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument) << env.status().toString();
  EXPECT_TRUE(both) << both.status().toString();
}

TEST(VerbsBackend, SmallEagerAndLargeRendezvousInterleave) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p =
      makePair("verbs", false, [](ContextOptions& o) { o.backend_config["eager_bytes"] = "4300"; });
  std::vector<size_t> sizes{0, 100, 4096, 4097, 300000, 5, 2 << 20};
  std::vector<std::vector<char>> src, dst;
  std::vector<OpHandle> ops;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.emplace_back(sizes[i]);
    dst.emplace_back(sizes[i]);
    fillPattern(src[i].data(), sizes[i], i + 40);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto s = p.ab->send({i, 2, ""}, src[i].data(), sizes[i], Priority(i % 2));
    ASSERT_TRUE(s);
    ops.push_back(s.value());
  }
  spin(p, 200);  // some land unexpected (stashed), the rest after expect
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto e = p.ba->expect({i, 2, ""}, dst[i].data(), sizes[i]);
    ASSERT_TRUE(e);
    ops.push_back(e.value());
  }
  ASSERT_TRUE(driveUntil(p, [&] {
    for (auto& o : ops) {
      if (!o->done()) return false;
    }
    return true;
  }));
  for (auto& o : ops) EXPECT_TRUE(o->status().isOk()) << o->status().toString();
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(checksum(src[i].data(), sizes[i]), checksum(dst[i].data(), sizes[i])) << sizes[i];
  }
}

// Receive buffers land a message's first 256 bytes in a dense array of heads
// and the rest in the buffer (VerbsBackend::recvSges): every length around
// that split arrives intact, taken at once or kept by the backend (stashed)
// until its expect.
TEST(VerbsBackend, MessagesAroundTheReceiveHeadSplitLandIntact) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p = makePair("verbs", false);
  for (bool stash : {false, true}) {
    std::vector<size_t> sizes;
    for (size_t len = 100; len <= 400; len += 3) sizes.push_back(len);
    std::vector<std::vector<char>> src(sizes.size()), dst(sizes.size());
    std::vector<OpHandle> ops;
    auto expectAll = [&] {
      for (size_t i = 0; i < sizes.size(); ++i) {
        auto e = p.ba->expect({i, stash ? 4u : 3u, ""}, dst[i].data(), sizes[i]);
        ASSERT_TRUE(e);
        ops.push_back(e.value());
      }
    };
    for (size_t i = 0; i < sizes.size(); ++i) {
      src[i].resize(sizes[i]);
      dst[i].assign(sizes[i], 0);
      fillPattern(src[i].data(), sizes[i], i + 70);
    }
    if (!stash) {
      ASSERT_NO_FATAL_FAILURE(expectAll());
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto s = p.ab->send({i, stash ? 4u : 3u, ""}, src[i].data(), sizes[i]);
      ASSERT_TRUE(s);
      ops.push_back(s.value());
    }
    if (stash) {
      spin(p, 200);
      ASSERT_NO_FATAL_FAILURE(expectAll());
    }
    auto allDone = [&] {
      return std::all_of(ops.begin(), ops.end(), [](const OpHandle& o) { return o->done(); });
    };
    ASSERT_TRUE(driveUntil(p, allDone)) << "stash " << stash;
    for (auto& o : ops) EXPECT_TRUE(o->status().isOk()) << o->status().toString();
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(src[i], dst[i]) << sizes[i] << " bytes, stash " << stash;
    }
  }
}

// The idle paths (yield, then a short sleep on the completion channel after
// every idle call) must never lose a wake-up: a ping-pong completes intact.
TEST(VerbsBackend, IdleYieldAndSleepLoseNoMessage) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p = makePair("verbs", false, [](ContextOptions& o) {
    o.backend_config["idle_spins"] = "0";
    o.backend_config["idle_yield_us"] = "300";
    o.backend_config["idle_block_us"] = "200";
  });
  for (uint64_t i = 0; i < 40; ++i) {
    size_t len = i % 2 ? 4096 : 8;
    std::vector<char> ping(len), got(len), back(len);
    fillPattern(ping.data(), len, i + 7);
    auto e = p.ba->expect({i, 9, ""}, got.data(), len);
    auto s = p.ab->send({i, 9, ""}, ping.data(), len, 0);
    ASSERT_TRUE(e && s);
    ASSERT_TRUE(driveUntil(p, [&] { return e.value()->done() && s.value()->done(); })) << i;
    ASSERT_TRUE(e.value()->status().isOk()) << e.value()->status().toString();
    auto e2 = p.ab->expect({i, 10, ""}, back.data(), len);
    auto s2 = p.ba->send({i, 10, ""}, got.data(), len, 0);
    ASSERT_TRUE(e2 && s2);
    ASSERT_TRUE(driveUntil(p, [&] { return e2.value()->done() && s2.value()->done(); })) << i;
    ASSERT_TRUE(e2.value()->status().isOk()) << e2.value()->status().toString();
    EXPECT_EQ(checksum(ping.data(), len), checksum(back.data(), len)) << i;
  }
}

TEST(VerbsBackend, KilledPeerFailsPendingOpsWithin5s) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  uint16_t port = 0;
  pid_t pid = forkHoldingPeer(verbsLoOptions(), &port);
  ASSERT_GT(pid, 0);
  auto ctx = Context::create(verbsLoOptions());
  ASSERT_TRUE(ctx) << ctx.status().toString();
  auto ch = ctx.value()->connect("127.0.0.1", port);
  ASSERT_TRUE(ch) << ch.status().toString();
  std::vector<char> big(8 << 20, 1), small(64), in(1000);
  auto s1 = ch.value()->send({1, 0, ""}, big.data(), big.size());  // never expected there
  auto s2 = ch.value()->send({2, 0, ""}, small.data(), small.size());
  auto e = ch.value()->expect({3, 0, ""}, in.data(), in.size());  // never sent
  ASSERT_TRUE(s1 && s2 && e);
  for (int i = 0; i < 2000; ++i) ctx.value()->progress();
  // The small unexpected send may complete (the peer keeps and acks it); the
  // rendezvous send waits for an expect that never comes, the expect for data.
  std::vector<OpHandle> ops{s1.value(), e.value()};
  if (!s2.value()->done()) ops.push_back(s2.value());
  ASSERT_FALSE(s1.value()->done());
  ASSERT_FALSE(e.value()->done());
  ::kill(pid, SIGKILL);
  auto killed = Clock::now();
  int st = 0;
  ::waitpid(pid, &st, 0);
  while (Clock::now() - killed < 10s) {
    ctx.value()->progress();
    bool all = true;
    for (auto& o : ops) all = all && o->done();
    if (all) break;
  }
  auto took = Clock::now() - killed;
  for (auto& o : ops) {
    ASSERT_TRUE(o->done());
    EXPECT_EQ(o->status().code(), StatusCode::kPeerLost) << o->status().toString();
  }
  EXPECT_LT(took, 5s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms";
}

}  // namespace
}  // namespace tictac::transport::test
