// tests/transport/send_scheduler_util.h: what the SendScheduler unit tests
// share: a fixed start time (every time point is injected), options, and
// helpers that enqueue and drain.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "transport/core/send_scheduler.h"

namespace tictac::transport::sched_test {

using Clock = SendScheduler::Clock;
using std::chrono::microseconds;
using std::chrono::nanoseconds;
inline const Clock::time_point kT0 = Clock::time_point{} + std::chrono::seconds(1000);
inline constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();

inline SchedulerOptions opts(size_t chunk, size_t window, size_t max_queued = 1000) {
  SchedulerOptions o;
  o.chunk_bytes = chunk;
  o.window_bytes = window;
  o.max_queued = max_queued;
  return o;
}

inline void enqueueOk(SendScheduler& s, uint64_t id, uint32_t prio, size_t bytes, uint64_t peer = 1,
                      Clock::time_point t = kT0) {
  Status st = s.enqueue(SendRequest{id, prio, bytes, peer}, t);
  ASSERT_TRUE(st.isOk()) << st.toString();
}

// Pulls chunks (acking each at once) until nothing is left; returns op ids in chunk order.
inline std::vector<uint64_t> drainAcking(SendScheduler& s) {
  std::vector<uint64_t> order;
  while (auto c = s.next(kT0)) {
    order.push_back(c->op_id);
    s.ack(c->op_id, c->length);
  }
  return order;
}

}  // namespace tictac::transport::sched_test
