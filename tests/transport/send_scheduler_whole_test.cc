// Unit tests of SendScheduler::sendWhole, the short path of an idle scheduler:
// it must hand an op out exactly as enqueue() + next() would, or not at all.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "transport/core/send_scheduler.h"

namespace tictac::transport {
namespace {

SchedulerOptions opts(size_t chunk, size_t window) {
  SchedulerOptions o;
  o.chunk_bytes = chunk;
  o.window_bytes = window;
  return o;
}

TEST(SendSchedulerWhole, IdleOpIsHandedOutAsItsOnlyChunk) {
  SendScheduler s(opts(16, 64));
  auto c = s.sendWhole(SendRequest{7, 3, 16, 2});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->op_id, 7u);
  EXPECT_EQ(c->peer, 2u);
  EXPECT_EQ(c->priority, 3u);
  EXPECT_EQ(c->offset, 0u);
  EXPECT_EQ(c->length, 16u);
  EXPECT_TRUE(c->last);
  // Charged to the window and known until acked, like a chunk from next().
  EXPECT_EQ(s.inFlightBytes(), 16u);
  EXPECT_EQ(s.knownOps(), 1u);
  EXPECT_EQ(s.queuedOps(), 0u);
  EXPECT_FALSE(s.next().has_value());
  s.ack(7, 16);
  EXPECT_EQ(s.inFlightBytes(), 0u);
  EXPECT_EQ(s.knownOps(), 0u);
}

TEST(SendSchedulerWhole, CountsLikeEnqueueAndNext) {
  SendScheduler whole(opts(16, 64)), queued(opts(16, 64));
  ASSERT_TRUE(whole.sendWhole(SendRequest{1, 5, 10, 1}).has_value());
  ASSERT_TRUE(queued.enqueue(SendRequest{1, 5, 10, 1}, SendScheduler::kUntimed).isOk());
  ASSERT_TRUE(queued.next().has_value());
  auto a = whole.counters().at(5), b = queued.counters().at(5);
  EXPECT_EQ(a.bytes_sent, b.bytes_sent);
  EXPECT_EQ(a.chunks, b.chunks);
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.queue_delay_us_sum, b.queue_delay_us_sum);
  EXPECT_EQ(whole.inFlightBytes(), queued.inFlightBytes());
}

TEST(SendSchedulerWhole, DeclinesUnlessIdleUnpacedAndOneChunk) {
  SendScheduler s(opts(16, 64));
  EXPECT_FALSE(s.sendWhole(SendRequest{1, 0, 17, 1}).has_value());  // two chunks
  EXPECT_EQ(s.knownOps(), 0u);
  ASSERT_TRUE(s.sendWhole(SendRequest{2, 0, 8, 1}).has_value());
  // Op 2 awaits its ack: the scheduler is not idle, a new op must queue so
  // that priorities order it against whatever comes next.
  EXPECT_FALSE(s.sendWhole(SendRequest{3, 0, 8, 1}).has_value());
  EXPECT_EQ(s.knownOps(), 1u);
  EXPECT_EQ(s.inFlightBytes(), 8u);

  SchedulerOptions paced = opts(16, 64);
  paced.rate_gbps = 1.0;
  SendScheduler p(paced);
  EXPECT_FALSE(p.sendWhole(SendRequest{1, 0, 8, 1}).has_value());
  EXPECT_EQ(p.knownOps(), 0u);
}

TEST(SendSchedulerWhole, ZeroByteOpIsForgottenAtOnce) {
  SendScheduler s(opts(16, 64));
  auto c = s.sendWhole(SendRequest{4, 0, 0, 1});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->length, 0u);
  EXPECT_TRUE(c->last);
  EXPECT_EQ(s.knownOps(), 0u);  // nothing to ack, as next() does for a 0-byte op
  EXPECT_TRUE(s.sendWhole(SendRequest{4, 0, 0, 1}).has_value());  // the id is free again
}

TEST(SendSchedulerWhole, DropAndFailPeerReturnTheCredit) {
  SendScheduler s(opts(16, 64));
  ASSERT_TRUE(s.sendWhole(SendRequest{1, 0, 12, 9}).has_value());
  EXPECT_TRUE(s.drop(1));
  EXPECT_EQ(s.inFlightBytes(), 0u);
  ASSERT_TRUE(s.sendWhole(SendRequest{2, 0, 12, 9}).has_value());
  std::vector<uint64_t> dropped;
  s.failPeer(9, &dropped);
  EXPECT_EQ(dropped, std::vector<uint64_t>{2});
  EXPECT_EQ(s.inFlightBytes(), 0u);
  EXPECT_EQ(s.knownOps(), 0u);
}

}  // namespace
}  // namespace tictac::transport
