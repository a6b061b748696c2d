// transport/core/token_bucket.h: payload pacing for the send scheduler.
//
// A token bucket in bytes: it fills at rate_gbps (10^9 bit/s of payload) up to
// burst_bytes and starts full. A send of n bytes may start when the bucket
// holds min(n, burst) tokens and then takes n, so sends bigger than the burst
// are possible (the balance goes negative and must refill first) and the
// long-run rate is exact. Time is passed in by the caller (tests inject it).
// Plain data structure: no locks, one owner thread.
#pragma once

#include <chrono>
#include <cstddef>

namespace tictac::transport {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  // rate_gbps <= 0 disables pacing (every tryConsume succeeds).
  // burst_bytes of 0 is treated as 1 byte.
  TokenBucket(double rate_gbps, size_t burst_bytes);

  bool enabled() const { return bytes_per_ns_ > 0; }

  // Takes `bytes` if the bucket allows a send at `now` and returns true.
  // Otherwise returns false and sets *ready_at (if given) to the earliest time
  // at which the same call would succeed. Times earlier than the latest one
  // seen add no tokens.
  bool tryConsume(size_t bytes, Clock::time_point now, Clock::time_point* ready_at = nullptr) {
    return !enabled() || consume(bytes, now, ready_at);  // unpaced: no call
  }

  double tokens() const { return tokens_; }  // current balance in bytes (may be < 0)

 private:
  bool consume(size_t bytes, Clock::time_point now, Clock::time_point* ready_at);
  void refill(Clock::time_point now);

  double bytes_per_ns_ = 0;
  double burst_ = 1;
  double tokens_ = 1;
  bool started_ = false;
  Clock::time_point last_{};
};

}  // namespace tictac::transport
