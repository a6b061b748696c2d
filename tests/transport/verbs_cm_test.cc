// The verbs backend with rdma_cm connection setup (cm=rdmacm; suite 'verbs',
// run inside tools/softroce-vm, whose rxed0 sits on the dummy interface d0 at
// 192.0.2.1: rdma_cm cannot route over rxe on lo).
//
// This binary also holds the channel conformance suites (channel_test.cc,
// channel_more_test.cc) run with TICTAC_TEST_BACKENDS=verbs-cm: intact data
// 0 B..64 MiB, urgent overtakes bulk, completions once and never inline,
// registration cache, progress thread, over QPs that rdma_cm connected. On a host without an RDMA
// device every case skips; inside the guest (TICTAC_GUEST set) a missing device is a failure.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tests/transport/verbs_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The guest's rdma_cm address (tools/softroce-vm-init); TICTAC_TEST_CM_ADDRESS overrides.
std::string cmAddress() {
  const char* e = std::getenv("TICTAC_TEST_CM_ADDRESS");
  return e != nullptr && *e ? e : "192.0.2.1";
}

ContextOptions cmOptions() {
  ContextOptions o;
  o.backend = "verbs";
  o.backend_config = {{"cm", "rdmacm"}, {"address", cmAddress()}};
  return o;
}

const bool registered = registerBackendHelper({"verbs-cm", cmOptions, verbsViable});

TEST(VerbsCm, BadCmOptionsAreInvalidArguments) {
  ASSERT_TRUE(registered);
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"cm", "carrier-pigeon"}, {"cm_timeout_ms", "5"}, {"cm_timeout_ms", "x"}}) {
    ContextOptions o = cmOptions();
    o.backend_config[key] = value;
    auto c = Context::create(o);
    ASSERT_FALSE(c) << key;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().toString();
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().toString();
  }
  ContextOptions o = cmOptions();
  o.backend_config["address"] = "not-an-ip";
  auto c = Context::create(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().toString();
}

// rxe on lo: rdma_cm cannot resolve the route; creation says so quickly.
TEST(VerbsCm, LoopbackFailsClearlyAtCreate) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  ContextOptions o = cmOptions();
  o.backend_config["address"] = "127.0.0.1";
  auto t0 = Clock::now();
  auto c = Context::create(o);
  auto took = Clock::now() - t0;
  ASSERT_FALSE(c) << "rdma_cm over rxe on lo unexpectedly worked";
  EXPECT_EQ(c.status().code(), StatusCode::kNoDevice) << c.status().toString();
  EXPECT_NE(c.status().message().find("rdma_cm"), std::string::npos) << c.status().toString();
  EXPECT_LT(took, 12s);
}

// One side rdma_cm, the other QP numbers over the bootstrap: both fail
// with a message naming the cause, neither hangs.
TEST(VerbsCm, MixedModesFailClearly) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  auto a = Context::create(cmOptions());
  ContextOptions tcp;
  tcp.backend = "verbs";
  tcp.backend_config = {{"address", "127.0.0.1"}};
  auto b = Context::create(tcp);
  ASSERT_TRUE(a && b) << (a ? b.status() : a.status()).toString();
  auto l = a.value()->listen(0, "127.0.0.1");
  ASSERT_TRUE(l);
  Result<std::shared_ptr<Channel>> acc = Status(StatusCode::kTimeout, "not run");
  std::thread t([&] { acc = l.value()->accept(20s); });
  auto con = b.value()->connect("127.0.0.1", l.value()->port());
  t.join();
  ASSERT_FALSE(con);
  ASSERT_FALSE(acc);
  EXPECT_EQ(con.status().code(), StatusCode::kProtocolError) << con.status().toString();
  EXPECT_NE(con.status().message().find("same cm"), std::string::npos) << con.status().toString();
  EXPECT_NE(acc.status().message().find("same cm"), std::string::npos) << acc.status().toString();
}

// Channels set up concurrently (two clients, and one client twice) pair
// their QPs by listener and token, whatever the order of the calls.
TEST(VerbsCm, ConcurrentSetupsPairCorrectly) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  auto s = Context::create(cmOptions());
  auto c1 = Context::create(cmOptions());
  auto c2 = Context::create(cmOptions());
  ASSERT_TRUE(s && c1 && c2);
  auto l = s.value()->listen(0, "127.0.0.1");
  ASSERT_TRUE(l);
  uint16_t port = l.value()->port();
  std::vector<Result<std::shared_ptr<Channel>>> out(3, Status(StatusCode::kTimeout, "not run"));
  std::vector<std::shared_ptr<Context>> who{c1.value(), c1.value(), c2.value()};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&, i] { out[i] = who[i]->connect("127.0.0.1", port); });
  std::vector<std::shared_ptr<Channel>> acc;
  for (int i = 0; i < 3; ++i) {
    auto a = l.value()->accept(30s);
    ASSERT_TRUE(a) << a.status().toString();
    acc.push_back(a.value());
  }
  for (auto& t : ts) t.join();
  for (auto& o : out) ASSERT_TRUE(o) << o.status().toString();
  // Each client channel reaches exactly one accepted channel, intact: send a
  // distinct tensor on each and expect it on every accepted channel. A QP
  // paired with the wrong peer fails the core's sender check (protocol error).
  for (int i = 0; i < 3; ++i) {
    size_t len = 100000 + 4096 * static_cast<size_t>(i);
    std::vector<char> src(len), dst(len);
    fillPattern(src.data(), len, 90 + i);
    auto snd = out[i].value()->send({uint64_t(50 + i), 1, ""}, src.data(), len);
    ASSERT_TRUE(snd);
    std::vector<std::vector<char>> bufs(3, std::vector<char>(len));
    std::vector<OpHandle> exps;
    for (auto& ch : acc) {
      auto e = ch->expect({uint64_t(50 + i), 1, ""}, bufs[exps.size()].data(), len);
      ASSERT_TRUE(e);
      exps.push_back(e.value());
    }
    auto until = Clock::now() + 30s;
    auto landed = [&] {
      for (auto& e : exps) {
        if (e->done() && e->status().isOk()) return true;
      }
      return false;
    };
    while (!(snd.value()->done() && landed()) && Clock::now() < until) {
      for (auto& c : {s.value(), c1.value(), c2.value()}) c->progress();
    }
    ASSERT_TRUE(snd.value()->done() && landed()) << i;
    EXPECT_TRUE(snd.value()->status().isOk()) << snd.value()->status().toString();
    int hits = 0;
    for (size_t k = 0; k < exps.size(); ++k) {
      if (exps[k]->done() && exps[k]->status().isOk()) {
        ++hits;
        EXPECT_EQ(checksum(src.data(), len), checksum(bufs[k].data(), len));
      } else {
        acc[k]->cancel(exps[k]);
      }
    }
    EXPECT_EQ(hits, 1) << i;
    for (int k = 0; k < 200; ++k) {
      for (auto& c : {s.value(), c1.value(), c2.value()}) c->progress();
    }
  }
}

// A and B connect to each other at the same time: one backend is the active
// side of both rdma_cm connections, the other gets two requests from the same
// listener and tells them apart by the token of the blob each one answers.
TEST(VerbsCm, MutualConnectsPairByToken) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  auto a = Context::create(cmOptions());
  auto b = Context::create(cmOptions());
  ASSERT_TRUE(a && b);
  auto la = a.value()->listen(0, "127.0.0.1");
  auto lb = b.value()->listen(0, "127.0.0.1");
  ASSERT_TRUE(la && lb);
  Result<std::shared_ptr<Channel>> ab_acc = Status(StatusCode::kTimeout, "not run"),
                                   ba_acc = ab_acc, ab_con = ab_acc, ba_con = ab_acc;
  std::thread t1([&] { ab_acc = lb.value()->accept(30s); });  // b accepts a's connect
  std::thread t2([&] { ba_acc = la.value()->accept(30s); });  // a accepts b's connect
  std::thread t3([&] { ab_con = a.value()->connect("127.0.0.1", lb.value()->port()); });
  ba_con = b.value()->connect("127.0.0.1", la.value()->port());
  t1.join();
  t2.join();
  t3.join();
  ASSERT_TRUE(ab_acc && ba_acc && ab_con && ba_con);
  // Pairs: (ab_con at a, ab_acc at b) and (ba_con at b, ba_acc at a).
  struct Way {
    Channel* from;
    Channel* to;
  };
  int way = 0;
  for (Way w : {Way{ab_con.value().get(), ab_acc.value().get()},
                Way{ba_con.value().get(), ba_acc.value().get()},
                Way{ab_acc.value().get(), ab_con.value().get()},
                Way{ba_acc.value().get(), ba_con.value().get()}}) {
    const size_t len = 300000;
    std::vector<char> src(len), dst(len);
    fillPattern(src.data(), len, len);
    auto e = w.to->expect({7, 7, ""}, dst.data(), len);
    auto s = w.from->send({7, 7, ""}, src.data(), len);
    ASSERT_TRUE(e && s);
    auto until = Clock::now() + 30s;
    while (!(e.value()->done() && s.value()->done()) && Clock::now() < until) {
      a.value()->progress();
      b.value()->progress();
    }
    ASSERT_TRUE(e.value()->done() && s.value()->done())
        << "way " << way << ": expect done " << e.value()->done() << ", send done "
        << s.value()->done();
    ++way;
    EXPECT_TRUE(e.value()->status().isOk()) << e.value()->status().toString();
    EXPECT_TRUE(s.value()->status().isOk()) << s.value()->status().toString();
    EXPECT_EQ(checksum(src.data(), len), checksum(dst.data(), len));
  }
}

TEST(VerbsCm, KilledPeerFailsPendingOpsWithin5s) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  uint16_t port = 0;
  pid_t pid = forkHoldingPeer(cmOptions(), &port);
  ASSERT_GT(pid, 0);
  auto ctx = Context::create(cmOptions());
  ASSERT_TRUE(ctx) << ctx.status().toString();
  auto ch = ctx.value()->connect("127.0.0.1", port);
  ASSERT_TRUE(ch) << ch.status().toString();
  std::vector<char> big(8 << 20, 1), in(1000);
  auto s1 = ch.value()->send({1, 0, ""}, big.data(), big.size());  // never expected there
  auto e = ch.value()->expect({3, 0, ""}, in.data(), in.size());   // never sent
  ASSERT_TRUE(s1 && e);
  for (int i = 0; i < 2000; ++i) ctx.value()->progress();
  ASSERT_FALSE(s1.value()->done());
  ASSERT_FALSE(e.value()->done());
  ::kill(pid, SIGKILL);
  auto killed = Clock::now();
  int st = 0;
  ::waitpid(pid, &st, 0);
  while (Clock::now() - killed < 10s && !(s1.value()->done() && e.value()->done())) {
    ctx.value()->progress();
  }
  auto took = Clock::now() - killed;
  for (auto& o : {s1.value(), e.value()}) {
    ASSERT_TRUE(o->done());
    EXPECT_EQ(o->status().code(), StatusCode::kPeerLost) << o->status().toString();
  }
  EXPECT_LT(took, 5s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms";
}

}  // namespace
}  // namespace tictac::transport::test
