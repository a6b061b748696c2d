// Unit tests of SendScheduler's clock: per-priority counters with their
// queueing delays, ops that never read the clock, and pacing (the token
// bucket's own tests are in token_bucket_test.cc). Deterministic: every time
// point is injected.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/transport/send_scheduler_util.h"
#include "transport/core/send_scheduler.h"

namespace tictac::transport {
namespace {

using namespace sched_test;  // NOLINT: the shared helpers

TEST(SendScheduler, CountersPerPriority) {
  SendScheduler s(opts(100, 10000));
  enqueueOk(s, 1, 3, 250, 1, kT0);
  enqueueOk(s, 2, 3, 0, 1, kT0 + microseconds(10));
  enqueueOk(s, 3, kMax, 100, 1, kT0);
  ASSERT_EQ(s.next(kT0 + microseconds(5))->op_id, 1u);   // delay 5 us
  ASSERT_EQ(s.next(kT0 + microseconds(40))->op_id, 1u);  // not a first chunk
  ASSERT_EQ(s.next(kT0 + microseconds(40))->op_id, 1u);
  ASSERT_EQ(s.next(kT0 + microseconds(50))->op_id, 2u);  // delay 40 us
  ASSERT_EQ(s.next(kT0 + microseconds(60))->op_id, 3u);  // delay 60 us
  auto c = s.counters();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[3].bytes_sent, 250u);
  EXPECT_EQ(c[3].chunks, 4u);
  EXPECT_EQ(c[3].ops, 2u);
  EXPECT_DOUBLE_EQ(c[3].queue_delay_us_sum, 45.0);
  EXPECT_DOUBLE_EQ(c[3].queue_delay_us_max, 40.0);
  EXPECT_EQ(c[kMax].ops, 1u);
  EXPECT_DOUBLE_EQ(c[kMax].queue_delay_us_max, 60.0);
}

// kUntimed: an op enqueued without a clock read counts no queueing delay;
// next(&now) with now == kUntimed leaves it unread when nothing needs it,
// and reads it (once, for the caller's next call) for a timed op's first
// chunk or for pacing.
TEST(SendScheduler, UntimedOpsAndLazyClock) {
  SendScheduler s(opts(100, 10000));
  enqueueOk(s, 1, 0, 50, 1, SendScheduler::kUntimed);
  Clock::time_point now = SendScheduler::kUntimed, retry{};
  ASSERT_EQ(s.next(&now, &retry)->op_id, 1u);
  EXPECT_EQ(now, SendScheduler::kUntimed);  // not read
  enqueueOk(s, 2, 0, 50, 1, SendScheduler::now() - std::chrono::seconds(5));
  ASSERT_EQ(s.next(&now, &retry)->op_id, 2u);
  EXPECT_NE(now, SendScheduler::kUntimed);  // read for op 2's queueing delay
  auto c = s.counters();
  EXPECT_EQ(c[0].ops, 2u);
  EXPECT_GE(c[0].queue_delay_us_max, 5e6);                             // op 2's
  EXPECT_DOUBLE_EQ(c[0].queue_delay_us_sum, c[0].queue_delay_us_max);  // op 1 added 0

  SchedulerOptions o = opts(100, 10000);
  o.rate_gbps = 8.0;
  SendScheduler paced(o);
  enqueueOk(paced, 1, 0, 50, 1, SendScheduler::kUntimed);
  Clock::time_point pnow = SendScheduler::kUntimed;
  ASSERT_TRUE(paced.next(&pnow, &retry).has_value());
  EXPECT_NE(pnow, SendScheduler::kUntimed);  // pacing needs the time
}

TEST(SendScheduler, PacingHoldsChunksUntilTokensRefill) {
  SchedulerOptions o = opts(1000, 1 << 20);
  o.rate_gbps = 8.0;  // 1 byte per ns; burst = one chunk
  SendScheduler s(o);
  enqueueOk(s, 1, 0, 10000);
  ASSERT_TRUE(s.next(kT0).has_value());
  Clock::time_point retry{};
  EXPECT_FALSE(s.next(kT0, &retry).has_value());
  EXPECT_EQ(retry, kT0 + nanoseconds(1000));
  EXPECT_FALSE(s.next(kT0 + nanoseconds(999)).has_value());
  ASSERT_TRUE(s.next(kT0 + nanoseconds(1000)).has_value());
  // Drive by retry_at: 8 more chunks take exactly 8 us at 8 Gbit/s.
  Clock::time_point now = kT0 + nanoseconds(1000);
  int sent = 0;
  while (sent < 8) {
    if (s.next(now, &retry)) {
      ++sent;
    } else {
      ASSERT_NE(retry, Clock::time_point::max());
      ASSERT_GT(retry, now);
      now = retry;
    }
  }
  EXPECT_EQ(now, kT0 + nanoseconds(9000));
}

}  // namespace
}  // namespace tictac::transport
