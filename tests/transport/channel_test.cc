// Channel conformance tests in one process, parameterised over backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "tests/transport/backend_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

class ChannelTest : public BackendTest {};

// Sends one tensor a->b and checks the bytes on arrival.
void roundTrip(Pair& p, size_t size, uint64_t id) {
  std::vector<char> src(size), dst(size, 0);
  fillPattern(src.data(), size, id);
  expectDelivered(p, post(p, {id, 1, ""}, src.data(), dst.data(), size), src.data(), dst.data(),
                  size);
}

TEST_P(ChannelTest, IntactDataAcrossSizes) {
  Pair p = makePair(GetParam(), false);
  uint64_t id = 1;
  for (size_t size : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{65536}, size_t{65537},
                      size_t{1} << 20, (size_t{1} << 20) + 3, size_t{8} << 20, size_t{64} << 20}) {
    roundTrip(p, size, id++);
  }
}

TEST_P(ChannelTest, SendBeforeExpectLandsWhenExpectArrives) {
  Pair p = makePair(GetParam(), false);
  for (size_t size : {size_t{0}, size_t{100}, size_t{3} << 20}) {
    std::vector<char> src(size), dst(size, 0);
    fillPattern(src.data(), size, size + 5);
    Transfer t;
    t.send = p.ab->send({77, static_cast<uint32_t>(size), ""}, src.data(), size);
    ASSERT_TRUE(t.send);
    spin(p, 2000);  // let the chunks reach b unexpected
    t.expect = p.ba->expect({77, static_cast<uint32_t>(size), ""}, dst.data(), size);
    ASSERT_NO_FATAL_FAILURE(expectDelivered(p, t, src.data(), dst.data(), size));
  }
}

TEST_P(ChannelTest, CompletionsFireExactlyOnceAndNeverInline) {
  Pair p = makePair(GetParam(), false);
  constexpr int kOps = 50;
  std::vector<std::vector<char>> src(kOps, std::vector<char>(20000, 3));
  std::vector<std::vector<char>> dst(kOps, std::vector<char>(20000));
  std::vector<std::atomic<int>> fired(2 * kOps);
  bool posting = false;
  std::atomic<int> inline_calls{0};
  for (int i = 0; i < kOps; ++i) {
    posting = true;
    auto e = p.ba->expect({uint64_t(i), 0, ""}, dst[i].data(), 20000, [&, i](const Status& s) {
      if (posting) inline_calls++;
      EXPECT_TRUE(s.isOk()) << s.toString();
      fired[2 * i]++;
    });
    auto s = p.ab->send({uint64_t(i), 0, ""}, src[i].data(), 20000, i % 3, [&, i](const Status& s) {
      if (posting) inline_calls++;
      EXPECT_TRUE(s.isOk()) << s.toString();
      fired[2 * i + 1]++;
    });
    posting = false;
    ASSERT_TRUE(e && s);
    spin(p, 1);
  }
  ASSERT_TRUE(driveUntil(p, [&] {
    for (auto& f : fired) {
      if (f.load() == 0) return false;
    }
    return true;
  }));
  spin(p, 500);
  for (auto& f : fired) EXPECT_EQ(f.load(), 1);
  EXPECT_EQ(inline_calls.load(), 0);
}

TEST_P(ChannelTest, UrgentOvertakesBulk) {
  Pair p = makePair(GetParam(), false, [](ContextOptions& o) {
    o.chunk_bytes = 64 << 10;
    o.window_bytes = 128 << 10;
  });
  const size_t bulk = 16 << 20, small = 4096;
  std::vector<std::string> order;
  ASSERT_NO_FATAL_FAILURE(
      raceUrgentPastBulk(p, {{1, 0, ""}, bulk, 1000}, {{2, 0, ""}, small, 1}, 20, order));
  EXPECT_EQ(order[0], "urgent");
  EXPECT_EQ(order[1], "bulk");
  auto stats = p.a->priorityStats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].priority, 1u);
  EXPECT_EQ(stats[0].bytes_sent, small);
  EXPECT_EQ(stats[1].bytes_sent, bulk);
}

TEST_P(ChannelTest, SizeMismatchRejectedOnBothSides) {
  Pair p = makePair(GetParam(), false);
  std::vector<char> src(300000, 1), dst(1000);
  auto e = p.ba->expect({9, 0, ""}, dst.data(), dst.size());  // smaller than sent
  auto s = p.ab->send({9, 0, ""}, src.data(), src.size());
  ASSERT_TRUE(e && s);
  ASSERT_TRUE(driveUntilDone(p, {s.value(), e.value()}));
  EXPECT_EQ(e.value()->status().code(), StatusCode::kSizeMismatch);
  EXPECT_EQ(s.value()->status().code(), StatusCode::kSizeMismatch);
  roundTrip(p, 5000, 10);  // the channel still works
}

TEST_P(ChannelTest, CancelExpectAndQueuedSend) {
  Pair p = makePair(GetParam(), false);
  std::vector<char> dst(100);
  auto e = p.ba->expect({5, 0, ""}, dst.data(), dst.size());
  ASSERT_TRUE(e);
  EXPECT_TRUE(p.ba->cancel(e.value()));
  ASSERT_TRUE(driveUntilDone(p, {e.value()}));
  EXPECT_EQ(e.value()->status().code(), StatusCode::kCanceled);
  EXPECT_FALSE(p.ba->cancel(e.value()));  // finished: too late
  // On a backend that posts from send() (verbs) a send's first window leaves
  // inside send(); one queued behind a window-filling send can be canceled
  // on every backend.
  std::vector<char> head(p.a->options().window_bytes, 3), src(1 << 20, 4);
  std::vector<char> head_dst(head.size());
  auto he = p.ba->expect({7, 0, ""}, head_dst.data(), head_dst.size());
  auto h = p.ab->send({7, 0, ""}, head.data(), head.size());
  auto s = p.ab->send({6, 0, ""}, src.data(), src.size());
  ASSERT_TRUE(he && h && s);
  EXPECT_TRUE(p.ab->cancel(s.value()));
  ASSERT_TRUE(driveUntilDone(p, {s.value(), h.value(), he.value()}));
  EXPECT_EQ(s.value()->status().code(), StatusCode::kCanceled);
  EXPECT_TRUE(h.value()->status().ok()) << h.value()->status().toString();
  EXPECT_EQ(head_dst, head);
  roundTrip(p, 1000, 11);
}

TEST_P(ChannelTest, BackPressureIsAStatus) {
  Pair p = makePair(GetParam(), false, [](ContextOptions& o) { o.max_queued = 4; });
  // Twice the window: a send posted from send() (verbs) keeps half its bytes
  // queued, so every send stays counted.
  std::vector<char> src(2 * p.a->options().window_bytes);
  std::vector<OpHandle> ops;
  Status last;
  for (int i = 0; i < 10; ++i) {
    auto s = p.ab->send({uint64_t(100 + i), 0, ""}, src.data(), src.size());
    if (!s) {
      last = s.status();
      break;
    }
    ops.push_back(s.value());
  }
  EXPECT_EQ(ops.size(), 4u);
  EXPECT_EQ(last.code(), StatusCode::kNoResource);
}

TEST_P(ChannelTest, DuplicatePendingExpectFails) {
  Pair p = makePair(GetParam(), false);
  std::vector<char> a(10), b(10);
  auto e1 = p.ba->expect({3, 3, ""}, a.data(), 10);
  auto e2 = p.ba->expect({3, 3, ""}, b.data(), 10);
  ASSERT_TRUE(e1 && e2);
  ASSERT_TRUE(driveUntilDone(p, {e2.value()}));
  EXPECT_EQ(e2.value()->status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(e1.value()->done());
  EXPECT_TRUE(p.ba->cancel(e1.value()));
}

// 100000 bytes take the scheduler's path; 4096 and 8 may leave from send()
// itself (the express send, docs/thread_model.md: 4096 from its registration,
// 8 copied). Either way a second send of a tensor
// before the first completed is refused, the first still arrives, and once
// it completed the key is free again.
TEST_P(ChannelTest, DuplicatePendingSendFails) {
  Pair p = makePair(GetParam(), false);
  for (size_t len : {size_t{100000}, size_t{4096}, size_t{8}}) {
    std::vector<char> a(len, 1), dst(len);
    auto s1 = p.ab->send({len, 1, ""}, a.data(), a.size());
    auto s2 = p.ab->send({len, 1, ""}, a.data(), a.size());
    ASSERT_TRUE(s1 && s2);
    ASSERT_TRUE(driveUntilDone(p, {s2.value()}));
    EXPECT_EQ(s2.value()->status().code(), StatusCode::kInvalidArgument) << len;
    for (int round = 0; round < 2; ++round) {
      if (round == 1) s1 = p.ab->send({len, 1, ""}, a.data(), a.size());
      auto e = p.ba->expect({len, 1, ""}, dst.data(), dst.size());
      ASSERT_TRUE(s1 && e);
      ASSERT_TRUE(driveUntilDone(p, {s1.value(), e.value()}));
      EXPECT_TRUE(s1.value()->status().isOk()) << len << " " << s1.value()->status().toString();
      EXPECT_EQ(dst, a) << len;
      std::fill(dst.begin(), dst.end(), 0);
    }
  }
  // Every send that left counts in priorityStats(), express ones included
  // (chunks: 100000 bytes are one chunk at the default chunk size).
  auto stats = p.a->priorityStats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].bytes_sent, 2u * (100000u + 4096u + 8u));
  EXPECT_EQ(stats[0].ops, 6u);
  EXPECT_EQ(stats[0].chunks, 6u);
}

// A small send still pending when its channel closes (on verbs an express
// send: posted, its completion not yet polled) completes exactly once:
// ok if the completion came first, else canceled.
TEST_P(ChannelTest, SmallSendPendingAtCloseCompletesOnce) {
  Pair p = makePair(GetParam(), false);
  std::atomic<int> fired{0};
  std::vector<char> a(8, 3);
  auto s =
      p.ab->send({4, 0, ""}, a.data(), a.size(), std::nullopt, [&](const Status&) { fired++; });
  ASSERT_TRUE(s);
  p.ab->close();
  ASSERT_TRUE(driveUntilDone(p, {s.value()}, 5s));
  spin(p, 100);
  EXPECT_EQ(fired.load(), 1);
  StatusCode code = s.value()->status().code();
  EXPECT_TRUE(code == StatusCode::kOk || code == StatusCode::kCanceled)
      << s.value()->status().toString();
}

TEST_P(ChannelTest, DestroyingContextsCompletesPendingOpsOnce) {
  std::atomic<int> fired{0};
  std::vector<char> dst(100);
  {
    Pair p = makePair(GetParam(), false);
    auto e = p.ba->expect({1, 0, ""}, dst.data(), dst.size(), [&](const Status& s) {
      EXPECT_EQ(s.code(), StatusCode::kCanceled);
      fired++;
    });
    ASSERT_TRUE(e);
  }
  EXPECT_EQ(fired.load(), 1);
}

TEST_P(ChannelTest, ClosedChannelFailsPeerOps) {
  Pair p = makePair(GetParam(), false);
  std::vector<char> dst(100);
  auto e = p.ba->expect({1, 0, ""}, dst.data(), dst.size());
  ASSERT_TRUE(e);
  spin(p, 100);
  p.ab->close();
  ASSERT_TRUE(driveUntilDone(p, {e.value()}, 5s));
  EXPECT_EQ(e.value()->status().code(), StatusCode::kPeerLost);
  auto s = p.ab->send({1, 0, ""}, dst.data(), 10);
  ASSERT_TRUE(s);
  ASSERT_TRUE(driveUntilDone(p, {s.value()}));
  EXPECT_EQ(s.value()->status().code(), StatusCode::kPeerLost);
}

TICTAC_INSTANTIATE_BACKENDS(ChannelTest);

}  // namespace
}  // namespace tictac::transport::test
