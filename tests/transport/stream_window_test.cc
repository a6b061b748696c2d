// Unit tests of SendScheduler's streaming window: one priority streaming alone
// for bulk_after gets bulk_window_bytes in flight; any other priority, or an
// idle start, narrows it to window_bytes at once. Deterministic: every time
// point is injected.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "transport/core/send_scheduler.h"

namespace tictac::transport {
namespace {

using Clock = SendScheduler::Clock;
using std::chrono::milliseconds;
const Clock::time_point kT0 = Clock::time_point{} + std::chrono::seconds(1000);
constexpr size_t kChunk = 100;

SchedulerOptions streamOpts() {
  SchedulerOptions o;
  o.chunk_bytes = kChunk;
  o.window_bytes = 2 * kChunk;
  o.bulk_window_bytes = 8 * kChunk;
  o.bulk_after = milliseconds(50);
  o.max_queued = 1000;
  return o;
}

// Hands out chunks at `now` without acking; returns how many.
int pullAll(SendScheduler& s, Clock::time_point now) {
  int n = 0;
  while (s.next(now)) ++n;
  return n;
}

void enqueueOk(SendScheduler& s, uint64_t id, uint32_t prio, size_t bytes, Clock::time_point t) {
  Status st = s.enqueue(SendRequest{id, prio, bytes, 1}, t);
  ASSERT_TRUE(st.isOk()) << st.toString();
}

TEST(StreamWindow, OnePriorityWidensAfterBulkAfter) {
  SendScheduler s(streamOpts());
  enqueueOk(s, 1, 7, 100 * kChunk, kT0);
  EXPECT_EQ(s.windowAt(kT0), 2 * kChunk);
  EXPECT_EQ(pullAll(s, kT0), 2);                     // narrow window at the start
  EXPECT_EQ(pullAll(s, kT0 + milliseconds(49)), 0);  // still narrow
  EXPECT_EQ(s.windowAt(kT0 + milliseconds(50)), 8 * kChunk);
  EXPECT_EQ(pullAll(s, kT0 + milliseconds(50)), 6);  // widened to 8 chunks in flight
  EXPECT_EQ(s.inFlightBytes(), 8 * kChunk);
  EXPECT_FALSE(s.mayAdmit());  // bulk window full: no clock read needed
}

TEST(StreamWindow, AnotherPriorityNarrowsAtOnceAndBoundsTheBulk) {
  SendScheduler s(streamOpts());
  enqueueOk(s, 1, 7, 100 * kChunk, kT0);
  auto t = kT0 + milliseconds(60);
  EXPECT_EQ(pullAll(s, t), 8);
  // An urgent op arrives: it goes next (the window admits it only once the
  // bytes ahead of it drain below the narrow window) and the bulk is narrowed.
  enqueueOk(s, 2, 1, kChunk, t);
  EXPECT_EQ(s.windowAt(t), 2 * kChunk);
  EXPECT_FALSE(s.next(t).has_value());
  for (int i = 0; i < 7; ++i) s.ack(1, kChunk);
  auto c = s.next(t);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->op_id, 2u);
  EXPECT_FALSE(s.next(t).has_value());  // bulk + urgent in flight fill the narrow window
  // The bulk streams alone again, but its clock restarted when it was cut again.
  s.ack(2, kChunk);
  s.ack(1, kChunk);
  auto later = t + milliseconds(10);
  EXPECT_EQ(pullAll(s, later), 2);  // narrow
  EXPECT_EQ(pullAll(s, later + milliseconds(50)), 6);
}

TEST(StreamWindow, AlternatingPrioritiesNeverWiden) {
  SendScheduler s(streamOpts());
  enqueueOk(s, 1, 5, 1000 * kChunk, kT0);
  uint64_t id = 2;
  for (int ms = 0; ms <= 500; ms += 1) {
    auto t = kT0 + milliseconds(ms);
    enqueueOk(s, id++, 1, kChunk, t);  // one urgent tensor per millisecond
    while (auto c = s.next(t)) {
      EXPECT_LE(s.inFlightBytes(), 2 * kChunk) << "at " << ms << " ms";
      s.ack(c->op_id, c->length);
      if (c->priority == 5) break;  // one bulk chunk per millisecond
    }
  }
}

TEST(StreamWindow, IdleStartIsNarrow) {
  SendScheduler s(streamOpts());
  enqueueOk(s, 1, 3, 4 * kChunk, kT0);
  auto t = kT0 + milliseconds(100);
  EXPECT_EQ(pullAll(s, t), 4);  // streamed alone long enough: wide
  for (int i = 0; i < 4; ++i) s.ack(1, kChunk);
  EXPECT_EQ(s.knownOps(), 0u);
  // Same priority, but after idling: a fresh burst starts narrow.
  auto t2 = t + milliseconds(500);
  enqueueOk(s, 2, 3, 10 * kChunk, t2);
  EXPECT_EQ(pullAll(s, t2), 2);
  EXPECT_EQ(pullAll(s, t2 + milliseconds(50)), 6);
}

TEST(StreamWindow, BulkWindowAtOrBelowWindowTurnsItOff) {
  SchedulerOptions o = streamOpts();
  o.bulk_window_bytes = kChunk;  // below the window: raised to it
  SendScheduler s(o);
  EXPECT_EQ(s.options().bulk_window_bytes, 2 * kChunk);
  enqueueOk(s, 1, 7, 100 * kChunk, kT0);
  EXPECT_EQ(pullAll(s, kT0 + milliseconds(500)), 2);
  EXPECT_EQ(s.windowAt(kT0 + std::chrono::hours(1)), 2 * kChunk);
}

TEST(StreamWindow, DefaultsAreSanitized) {
  SchedulerOptions o;
  o.bulk_window_bytes = 0;
  o.bulk_after = milliseconds(-5);
  SendScheduler s(o);
  EXPECT_EQ(s.options().bulk_window_bytes, kDefaultBulkWindowBytes);
  EXPECT_EQ(s.options().bulk_after, kDefaultBulkAfter);
  EXPECT_GE(s.options().bulk_window_bytes, s.options().window_bytes);
}

}  // namespace
}  // namespace tictac::transport
