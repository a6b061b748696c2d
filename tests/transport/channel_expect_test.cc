// Expect matching over every backend: the express expect (one expect held
// outside the core's tables, transport/core/express.cc) and the tables it is
// promoted into must land every arrival shape and order alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tests/transport/backend_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

class ChannelExpectTest : public BackendTest {};

std::vector<char> pattern(size_t len, uint64_t seed) {
  std::vector<char> v(len);
  fillPattern(v.data(), len, seed);
  return v;
}

// The sender (a) cuts tensors into 4 KiB chunks, the receiver (b) keeps the
// default chunk size: an expect of up to a receiver chunk takes the express
// slot even when its tensor arrives in several chunks.
Pair smallChunkSender(const std::string& backend, bool progress_thread = false) {
  int made = 0;
  return makePair(backend, progress_thread, [&made](ContextOptions& o) {
    if (made++ == 0) o.chunk_bytes = 4096;
  });
}

// The express expect (one expect held outside the tables, transport/core/
// express.cc): the first expect posted takes it, later ones the tables. Its
// tensor arriving in chunks promotes it into the tables; all land intact in
// any arrival order, and a duplicate of it is refused.
TEST_P(ChannelExpectTest, ExpectsLandWhateverTheArrivalOrderAndShape) {
  Pair p = smallChunkSender(GetParam());
  const std::vector<size_t> sizes = {10005, 8, 0, 4096};  // the first: 3 chunks
  std::vector<std::vector<char>> src, dst;
  std::vector<OpHandle> expects, sends;
  int fired = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.push_back(pattern(sizes[i], 40 + i));
    dst.emplace_back(sizes[i]);
    auto e =
        p.ba->expect({40 + i, 1, ""}, dst[i].data(), sizes[i], [&](const Status&) { fired++; });
    ASSERT_TRUE(e) << e.status().toString();
    expects.push_back(e.value());
  }
  auto dup = p.ba->expect({40, 1, ""}, dst[0].data(), sizes[0]);  // the express one's key
  ASSERT_TRUE(dup);
  for (size_t i = sizes.size(); i-- > 0;) {  // last posted arrives first
    auto s = p.ab->send({40 + i, 1, ""}, src[i].data(), sizes[i], 0);
    ASSERT_TRUE(s) << s.status().toString();
    sends.push_back(s.value());
  }
  ASSERT_TRUE(driveUntil(p, [&] {
    for (auto& op : expects) {
      if (!op->done()) return false;
    }
    for (auto& op : sends) {
      if (!op->done()) return false;
    }
    return dup.value()->done();
  }));
  EXPECT_EQ(dup.value()->status().code(), StatusCode::kInvalidArgument);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(expects[i]->status().isOk()) << i << ": " << expects[i]->status().toString();
    EXPECT_EQ(checksum(dst[i].data(), sizes[i]), checksum(src[i].data(), sizes[i])) << i;
  }
  for (auto& op : sends) EXPECT_TRUE(op->status().isOk()) << op->status().toString();
  spin(p, 20);
  EXPECT_EQ(fired, static_cast<int>(sizes.size()));  // each callback exactly once
}

// Its own path: a whole tensor lands and finishes a callback-less expect; a
// whole tensor of another size fails it; canceled, its key can be expected
// again.
TEST_P(ChannelExpectTest, TheExpressExpectLandsFailsAndCancels) {
  Pair p = smallChunkSender(GetParam());
  auto src = pattern(16, 60);
  std::vector<char> dst(8);
  for (uint64_t i = 0; i < 3; ++i) {  // a few round trips: the slot is reused
    std::fill(dst.begin(), dst.end(), 0);
    auto e = p.ba->expect({60 + i, 2, ""}, dst.data(), 8);
    auto s = p.ab->send({60 + i, 2, ""}, src.data(), 8, 0);
    ASSERT_TRUE(e && s);
    ASSERT_TRUE(driveUntilDone(p, {e.value(), s.value()}));
    EXPECT_TRUE(e.value()->status().isOk()) << e.value()->status().toString();
    EXPECT_EQ(checksum(dst.data(), 8), checksum(src.data(), 8));
  }
  auto small = p.ba->expect({70, 2, ""}, dst.data(), 8);
  auto big = p.ab->send({70, 2, ""}, src.data(), 16, 0);
  ASSERT_TRUE(small && big);
  ASSERT_TRUE(driveUntilDone(p, {small.value(), big.value()}));
  EXPECT_EQ(small.value()->status().code(), StatusCode::kSizeMismatch);
  auto c = p.ba->expect({71, 2, ""}, dst.data(), 8);
  ASSERT_TRUE(c);
  EXPECT_TRUE(p.ba->cancel(c.value()));
  ASSERT_TRUE(driveUntil(p, [&] { return c.value()->done(); }));
  EXPECT_EQ(c.value()->status().code(), StatusCode::kCanceled);
  auto again = p.ba->expect({71, 2, ""}, dst.data(), 8);
  auto s = p.ab->send({71, 2, ""}, src.data(), 8, 0);
  ASSERT_TRUE(again && s);
  ASSERT_TRUE(driveUntilDone(p, {again.value(), s.value()}));
  EXPECT_TRUE(again.value()->status().isOk()) << again.value()->status().toString();
}

// A sender's cancel of a tensor whose chunks are still queued aborts the
// express expect waiting for it (the abort promotes it first).
TEST_P(ChannelExpectTest, ASenderCancelAbortsTheExpressExpect) {
  int made = 0;
  Pair p = makePair(GetParam(), false, [&made](ContextOptions& o) {
    if (made++ == 0) {
      o.chunk_bytes = 4096;
      o.window_bytes = 8192;  // the sender holds most chunks back
    }
  });
  const size_t len = 256 << 10;
  auto src = pattern(len, 80);
  std::vector<char> dst(len);
  auto e = p.ba->expect({80, 3, ""}, dst.data(), len);
  auto s = p.ab->send({80, 3, ""}, src.data(), len, 0);
  ASSERT_TRUE(e && s);
  spin(p, 2);
  ASSERT_TRUE(p.ab->cancel(s.value())) << "256 KiB in 4 KiB chunks through an 8 KiB window";
  ASSERT_TRUE(driveUntilDone(p, {e.value(), s.value()}));
  EXPECT_EQ(s.value()->status().code(), StatusCode::kCanceled);
  EXPECT_EQ(e.value()->status().code(), StatusCode::kCanceled) << e.value()->status().toString();
}

// With progress threads, a blocked Op::wait() on a callback-less expect is
// woken by the inline finish (under the engine lock, Op::mu_ inside it).
TEST_P(ChannelExpectTest, ABlockedWaitIsWokenByTheInlineFinish) {
  Pair p = smallChunkSender(GetParam(), true);
  auto src = pattern(8, 90);
  for (uint64_t i = 0; i < 20; ++i) {
    std::vector<char> dst(8);
    auto e = p.ba->expect({90 + i, 4, ""}, dst.data(), 8);
    ASSERT_TRUE(e);
    std::thread sender([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      auto s = p.ab->send({90 + i, 4, ""}, src.data(), 8, 0);
      if (s) (void)s.value()->wait(std::chrono::seconds(10));
    });
    Status st = e.value()->wait(std::chrono::seconds(10));
    sender.join();
    EXPECT_TRUE(st.isOk()) << i << ": " << st.toString();
    EXPECT_EQ(checksum(dst.data(), 8), checksum(src.data(), 8)) << i;
  }
}

// Completions do not nest: a callback that waits for an op not yet done
// (which only a later completion pass could finish) gets kInvalidArgument at
// once instead of hanging the progress thread or spinning its pump; one that
// waits for a done op gets its status.
TEST_P(ChannelExpectTest, WaitInsideACallbackForAPendingOpIsRefused) {
  for (bool thread : {false, true}) {
    Pair p = makePair(GetParam(), thread);
    static char src[8] = "x", dst[8], never[8];
    auto pending = p.ba->expect({2, 0, ""}, never, sizeof(never));  // a never sends it
    ASSERT_TRUE(pending);
    std::atomic<int> inner{-1}, done_inner{-1};
    auto e = p.ba->expect({1, 0, ""}, dst, sizeof(dst), [&](const Status&) {
      inner = static_cast<int>(pending.value()->wait(5s).code());
    });
    auto s = p.ab->send({1, 0, ""}, src, sizeof(src));
    ASSERT_TRUE(e && s);
    // inner is set inside e's callback, before e turns done: e2's callback,
    // run by another thread's pass meanwhile, would find e not yet done.
    ASSERT_TRUE(driveUntil(
        p, [&] { return inner >= 0 && e.value()->done(); }, 30s))
        << "thread " << thread;
    EXPECT_EQ(inner, static_cast<int>(StatusCode::kInvalidArgument)) << "thread " << thread;
    auto e2 = p.ba->expect({3, 0, ""}, dst, sizeof(dst), [&](const Status&) {
      done_inner = static_cast<int>(e.value()->wait(5s).code());  // e is done
    });
    auto s2 = p.ab->send({3, 0, ""}, src, sizeof(src));
    ASSERT_TRUE(e2 && s2);
    ASSERT_TRUE(driveUntil(
        p, [&] { return done_inner >= 0; }, 30s));
    EXPECT_EQ(done_inner, static_cast<int>(StatusCode::kOk));
    EXPECT_TRUE(s.value()->wait(30s).isOk());
    EXPECT_TRUE(s2.value()->wait(30s).isOk());
  }
}

TICTAC_INSTANTIATE_BACKENDS(ChannelExpectTest);

}  // namespace
}  // namespace tictac::transport::test
