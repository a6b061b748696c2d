// Unit tests of SendScheduler (TokenBucket's own are in token_bucket_test.cc).
// Deterministic: every time point is injected, nothing depends on the wall clock.
#include "transport/core/send_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tests/transport/send_scheduler_util.h"

namespace tictac::transport {
namespace {

using namespace sched_test;  // NOLINT: the shared helpers

TEST(SendScheduler, DefaultsAreTheHeaderConstants) {
  SendScheduler s;
  EXPECT_EQ(s.options().chunk_bytes, kDefaultChunkBytes);
  EXPECT_EQ(s.options().window_bytes, kDefaultWindowBytes);
  EXPECT_EQ(s.options().max_queued, kDefaultMaxQueuedOps);
  SendScheduler fixed(opts(0, 0, 0));  // invalid values fall back to the defaults
  EXPECT_EQ(fixed.options().chunk_bytes, kDefaultChunkBytes);
  EXPECT_EQ(fixed.options().window_bytes, kDefaultWindowBytes);
}

TEST(SendScheduler, CutsOpsIntoChunks) {
  SendScheduler s(opts(4, 100));
  enqueueOk(s, 1, 0, 10);
  std::vector<Chunk> chunks;
  while (auto c = s.next(kT0)) chunks.push_back(*c);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].offset, 0u);
  EXPECT_EQ(chunks[1].offset, 4u);
  EXPECT_EQ(chunks[2].offset, 8u);
  EXPECT_EQ(chunks[2].length, 2u);
  EXPECT_FALSE(chunks[1].last);
  EXPECT_TRUE(chunks[2].last);
  EXPECT_EQ(s.inFlightBytes(), 10u);
  EXPECT_EQ(s.queuedOps(), 0u);
  EXPECT_EQ(s.knownOps(), 1u);  // awaiting acks
}

TEST(SendScheduler, FifoWithinLevelAndStrictOrderAcrossLevels) {
  SendScheduler s(opts(8, 1 << 20));
  enqueueOk(s, 1, kMax, 8);
  enqueueOk(s, 2, 5, 8);
  enqueueOk(s, 3, 0, 8);
  enqueueOk(s, 4, 5, 8);
  enqueueOk(s, 5, 0, 8);
  enqueueOk(s, 6, kMax - 1, 8);
  EXPECT_EQ(drainAcking(s), (std::vector<uint64_t>{3, 5, 2, 4, 6, 1}));
}

TEST(SendScheduler, NeverWaitsForAbsentPriorities) {
  SendScheduler s(opts(8, 64));
  enqueueOk(s, 1, kMax, 8);  // nothing more urgent exists: it goes at once
  auto c = s.next(kT0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->op_id, 1u);
}

TEST(SendScheduler, UrgentOvertakesBulkAtNextChunkBoundary) {
  SendScheduler s(opts(100, 200));
  enqueueOk(s, 1, 10, 1000);  // bulk: 10 chunks
  auto a = s.next(kT0);
  auto b = s.next(kT0);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(s.next(kT0).has_value());  // window (2 chunks) full
  enqueueOk(s, 2, 1, 150);                // urgent arrives mid-op
  s.ack(1, 100);
  auto u = s.next(kT0);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->op_id, 2u);  // the very next chunk is the urgent one
  EXPECT_EQ(u->length, 100u);
  s.ack(1, 100);
  auto u2 = s.next(kT0);
  ASSERT_TRUE(u2.has_value());
  EXPECT_EQ(u2->op_id, 2u);
  EXPECT_TRUE(u2->last);
  s.ack(2, 150);
  auto resumed = s.next(kT0);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->op_id, 1u);
  EXPECT_EQ(resumed->offset, 200u);  // bulk resumes where it stopped
}

TEST(SendScheduler, WindowBoundsBytesInFlightAndAckReleases) {
  SendScheduler s(opts(100, 300));
  enqueueOk(s, 1, 0, 1000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.next(kT0).has_value());
  EXPECT_EQ(s.inFlightBytes(), 300u);
  Clock::time_point retry{};
  EXPECT_FALSE(s.next(kT0, &retry).has_value());
  EXPECT_EQ(retry, Clock::time_point::max());  // only an ack can help
  s.ack(1, 50);                                // partial ack: not enough for a chunk
  EXPECT_FALSE(s.next(kT0).has_value());
  s.ack(1, 50);
  EXPECT_EQ(s.inFlightBytes(), 200u);
  auto c = s.next(kT0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->offset, 300u);
  s.ack(99, 100);     // unknown op: ignored
  s.ack(1, 1 << 20);  // excess: only the op's own credit is returned
  EXPECT_EQ(s.inFlightBytes(), 0u);
}

TEST(SendScheduler, ChunkBiggerThanWindowStillGoesOneAtATime) {
  SendScheduler s(opts(1000, 10));
  enqueueOk(s, 1, 0, 2500);
  auto c = s.next(kT0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->length, 1000u);
  EXPECT_FALSE(s.next(kT0).has_value());
  s.ack(1, 1000);
  EXPECT_EQ(drainAcking(s), (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(s.knownOps(), 0u);
}

TEST(SendScheduler, ZeroByteOps) {
  SendScheduler s(opts(100, 100));
  enqueueOk(s, 1, 0, 100);
  enqueueOk(s, 2, 1, 0);
  ASSERT_TRUE(s.next(kT0).has_value());  // window now full
  auto z = s.next(kT0);                  // a 0-byte chunk needs no credit
  ASSERT_TRUE(z.has_value());
  EXPECT_EQ(z->op_id, 2u);
  EXPECT_EQ(z->length, 0u);
  EXPECT_EQ(z->offset, 0u);
  EXPECT_TRUE(z->last);
  EXPECT_EQ(s.inFlightBytes(), 100u);
  EXPECT_EQ(s.knownOps(), 1u);  // op 2 is finished and forgotten
  EXPECT_FALSE(s.cancel(2));
}

TEST(SendScheduler, CancelMidOp) {
  SendScheduler s(opts(100, 1000));
  enqueueOk(s, 1, 0, 1000);
  enqueueOk(s, 2, 1, 100);
  ASSERT_EQ(s.next(kT0)->op_id, 1u);
  ASSERT_EQ(s.next(kT0)->op_id, 1u);
  EXPECT_TRUE(s.cancel(1));
  EXPECT_FALSE(s.cancel(1));  // no unsent bytes left
  EXPECT_FALSE(s.cancel(42));
  EXPECT_EQ(s.inFlightBytes(), 200u);  // its chunks on the wire keep their credit
  auto c = s.next(kT0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->op_id, 2u);
  EXPECT_FALSE(s.next(kT0).has_value());
  EXPECT_FALSE(s.cancel(2));  // all its chunks were handed out
  s.ack(1, 200);
  s.ack(2, 100);
  EXPECT_EQ(s.inFlightBytes(), 0u);
  EXPECT_EQ(s.knownOps(), 0u);
  enqueueOk(s, 1, 0, 10);  // the id is free again
}

TEST(SendScheduler, DropReturnsTheCreditOfAnOpThatWillNeverBeAcked) {
  SendScheduler s(opts(100, 200));
  enqueueOk(s, 1, 0, 1000);
  enqueueOk(s, 2, 1, 100);
  ASSERT_TRUE(s.next(kT0) && s.next(kT0));
  EXPECT_FALSE(s.next(kT0).has_value());  // window full of op 1
  EXPECT_TRUE(s.drop(1));
  EXPECT_EQ(s.inFlightBytes(), 0u);
  EXPECT_EQ(s.queuedOps(), 1u);
  EXPECT_FALSE(s.drop(1));
  s.ack(1, 100);  // a late ack changes nothing
  EXPECT_EQ(drainAcking(s), (std::vector<uint64_t>{2}));
  EXPECT_FALSE(s.drop(2));  // finished
  EXPECT_EQ(s.knownOps(), 0u);
}

TEST(SendScheduler, FailPeerDropsQueuedAndInFlightOps) {
  SendScheduler s(opts(100, 1000));
  enqueueOk(s, 1, 0, 300, /*peer=*/7);
  enqueueOk(s, 2, 1, 100, /*peer=*/8);
  enqueueOk(s, 3, 2, 100, /*peer=*/7);
  enqueueOk(s, 4, 3, 100, /*peer=*/7);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(s.next(kT0).has_value());  // 1 x3, 2
  EXPECT_EQ(s.inFlightBytes(), 400u);
  std::vector<uint64_t> dropped;
  s.failPeer(7, &dropped);
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(s.inFlightBytes(), 100u);  // only peer 8's chunk is left
  EXPECT_EQ(s.queuedOps(), 0u);
  s.ack(1, 100);  // a late ack for the failed peer changes nothing
  EXPECT_EQ(s.inFlightBytes(), 100u);
  s.failPeer(7, nullptr);
  s.ack(2, 100);
  EXPECT_EQ(s.knownOps(), 0u);
}

TEST(SendScheduler, BackPressureAndDuplicateIds) {
  SendScheduler s(opts(100, 1000, /*max_queued=*/3));
  for (uint64_t id = 1; id <= 3; ++id) enqueueOk(s, id, 0, 100);
  Status full = s.enqueue(SendRequest{4, 0, 100, 1}, kT0);
  EXPECT_EQ(full.code(), StatusCode::kNoResource);
  EXPECT_EQ(s.queuedOps(), 3u);  // nothing was queued
  EXPECT_EQ(s.enqueue(SendRequest{1, 0, 100, 1}, kT0).code(), StatusCode::kNoResource);
  ASSERT_TRUE(s.next(kT0).has_value());  // op 1 fully handed out: one queue place frees
  EXPECT_EQ(s.enqueue(SendRequest{1, 0, 5, 1}, kT0).code(), StatusCode::kInvalidArgument);
  enqueueOk(s, 4, 0, 100);
  EXPECT_EQ(drainAcking(s), (std::vector<uint64_t>{2, 3, 4}));
}

}  // namespace
}  // namespace tictac::transport
