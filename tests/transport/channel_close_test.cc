// Graceful close: a receiver that closes its channel (or destroys its context)
// right after its expect completed must not fail the sender's send of that
// tensor: the acks it owes are flushed before the bootstrap link closes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "tests/transport/backend_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

// (backend, how the receiver goes away, progress thread)
using Param = std::tuple<std::string, bool, bool>;

class ChannelCloseTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!backendHelper(std::get<0>(GetParam())).viable()) GTEST_SKIP() << "backend not available";
  }
};

// b goes away: its context destroyed, or only its channel to a closed.
void receiverGoesAway(Pair& p, bool destroy_context) {
  if (destroy_context) {
    p.ba.reset();
    p.b.reset();
  } else {
    p.ba->close();
  }
}

// Sends `len` bytes a -> b; b goes away as soon as its expect completed; the
// send must still complete kOk (every byte arrived and was acked).
void sendThenReceiverCloses(const Param& param, size_t len) {
  auto [backend, destroy_context, thread] = param;
  Pair p = makePair(backend, thread);
  std::vector<char> src(len), dst(len);
  fillPattern(src.data(), len, len);
  auto e = p.ba->expect({9, 3, ""}, dst.data(), len);
  auto s = p.ab->send({9, 3, ""}, src.data(), len);
  ASSERT_TRUE(e && s);
  // Drive only the receiver once the sender has handed out everything, so the
  // receiver's close follows its expect's completion as closely as possible.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!e.value()->done() && std::chrono::steady_clock::now() < deadline) {
    if (!thread) {
      p.a->progress();
      p.b->progress();
    }
  }
  ASSERT_TRUE(e.value()->done());
  ASSERT_TRUE(e.value()->status().isOk()) << e.value()->status().message();
  receiverGoesAway(p, destroy_context);
  Status st = s.value()->wait(10s);
  EXPECT_EQ(st.code(), StatusCode::kOk) << st.message();
  EXPECT_EQ(checksum(src.data(), len), checksum(dst.data(), len));
}

TEST_P(ChannelCloseTest, SmallSendCompletesOkWhenReceiverClosesAtOnce) {
  sendThenReceiverCloses(GetParam(), 4096);
}

TEST_P(ChannelCloseTest, ChunkedSendCompletesOkWhenReceiverClosesAtOnce) {
  sendThenReceiverCloses(GetParam(), size_t{3} << 20);
}

TEST_P(ChannelCloseTest, CloseStillFailsUnfinishedOps) {
  auto [backend, destroy_context, thread] = GetParam();
  // Chunks that arrive before their expect are kept and acked, so a send
  // completes without an expect; a long one through a small window does not
  // finish before the close.
  Pair p = makePair(backend, thread, [](ContextOptions& o) {
    o.chunk_bytes = 64 << 10;
    o.window_bytes = 64 << 10;
  });
  std::vector<char> src(size_t{64} << 20);
  auto s = p.ab->send({5, 0, ""}, src.data(), src.size());  // never expected by b
  ASSERT_TRUE(s);
  spin(p, 20);
  ASSERT_FALSE(s.value()->done());
  receiverGoesAway(p, destroy_context);
  Status st = s.value()->wait(10s);
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.message();
}

// A send canceled after some of its chunks were posted finishes before the
// acks of those chunks come back; their window credit must still be returned
// (else a few cancels fill the window and every later send stalls).
// (backend, progress thread): how the receiver goes away does not matter here.
class ChannelCreditTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {
 protected:
  void SetUp() override {
    if (!backendHelper(std::get<0>(GetParam())).viable()) GTEST_SKIP() << "backend not available";
  }
};

TEST_P(ChannelCreditTest, CanceledSendsDoNotLeakWindowCredit) {
  auto [backend, thread] = GetParam();
  Pair p = makePair(backend, thread, [](ContextOptions& o) {
    o.chunk_bytes = 64 << 10;
    o.window_bytes = 128 << 10;
  });
  const size_t big = 8 << 20;
  std::vector<char> src(big, 1), dst(big), small(1000, 2), small_dst(1000);
  for (uint32_t round = 0; round < 8; ++round) {
    auto e = p.ba->expect({1, round, ""}, dst.data(), big);
    auto s = p.ab->send({1, round, ""}, src.data(), big);
    ASSERT_TRUE(e && s);
    if (!thread) spin(p, 3);
    p.ab->cancel(s.value());
    ASSERT_TRUE(driveUntil(
        p, [&] { return s.value()->done(); }, 10s));
    p.ba->cancel(e.value());
    ASSERT_TRUE(driveUntil(
        p, [&] { return e.value()->done(); }, 10s));
    auto e2 = p.ba->expect({2, round, ""}, small_dst.data(), small.size());
    auto s2 = p.ab->send({2, round, ""}, small.data(), small.size());
    ASSERT_TRUE(e2 && s2);
    ASSERT_TRUE(driveUntil(
        p, [&] { return s2.value()->done() && e2.value()->done(); }, 10s))
        << "round " << round << ": a later send stalled";
    EXPECT_TRUE(s2.value()->status().isOk()) << s2.value()->status().message();
    EXPECT_TRUE(e2.value()->status().isOk()) << e2.value()->status().message();
  }
}

// rate_gbps paces the progress thread: 4 MiB at 0.5 Gb/s needs >= ~67 ms
// (one chunk of burst allowed) and must not stall (generous upper bound).
class ChannelPacingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!backendHelper(GetParam()).viable()) GTEST_SKIP() << "backend not available";
  }
};

TEST_P(ChannelPacingTest, PacedSendWithProgressThreadKeepsTheRate) {
  const std::string& backend = GetParam();
  Pair p = makePair(backend, true, [](ContextOptions& o) { o.rate_gbps = 0.5; });
  const size_t len = 4 << 20;
  std::vector<char> src(len, 3), dst(len);
  auto t0 = std::chrono::steady_clock::now();
  auto e = p.ba->expect({1, 0, ""}, dst.data(), len);
  auto s = p.ab->send({1, 0, ""}, src.data(), len);
  ASSERT_TRUE(e && s);
  ASSERT_TRUE(s.value()->wait(20s).isOk());
  ASSERT_TRUE(e.value()->wait(20s).isOk());
  auto took = std::chrono::steady_clock::now() - t0;
  // The token bucket starts full with one chunk of burst (the default chunk).
  double min_s = double(len - p.a->options().chunk_bytes) * 8 / 0.5e9;
  EXPECT_GE(std::chrono::duration<double>(took).count(), min_s * 0.95);
  EXPECT_LT(took, 10s);
  EXPECT_EQ(checksum(src.data(), len), checksum(dst.data(), len));
}

INSTANTIATE_TEST_SUITE_P(Backends, ChannelCloseTest,
                         ::testing::Combine(::testing::ValuesIn(selectedBackends()),
                                            ::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           for (auto& c : n)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           n += std::get<1>(info.param) ? "_destroy" : "_close";
                           n += std::get<2>(info.param) ? "_thread" : "_poll";
                           return n;
                         });

std::string backendName(const std::string& b) {
  std::string n = b;
  for (auto& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Backends, ChannelCreditTest,
                         ::testing::Combine(::testing::ValuesIn(selectedBackends()),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return backendName(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_thread" : "_poll");
                         });

INSTANTIATE_TEST_SUITE_P(Backends, ChannelPacingTest, ::testing::ValuesIn(selectedBackends()),
                         [](const auto& info) { return backendName(info.param); });

}  // namespace
}  // namespace tictac::transport::test
