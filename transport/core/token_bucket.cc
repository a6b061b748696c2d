#include "transport/core/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace tictac::transport {

TokenBucket::TokenBucket(double rate_gbps, size_t burst_bytes)
    : bytes_per_ns_(rate_gbps > 0 ? rate_gbps / 8.0 : 0),
      burst_(static_cast<double>(std::max<size_t>(burst_bytes, 1))),
      tokens_(burst_) {}

void TokenBucket::refill(Clock::time_point now) {
  if (!started_) {
    started_ = true;
    last_ = now;
    return;
  }
  if (now <= last_) return;
  double ns = std::chrono::duration<double, std::nano>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + ns * bytes_per_ns_);
  last_ = now;
}

bool TokenBucket::consume(size_t bytes, Clock::time_point now, Clock::time_point* ready_at) {
  refill(now);
  double need = std::min(static_cast<double>(bytes), burst_);
  if (tokens_ + 1e-6 >= need) {  // tolerance: ready_at rounds the wait to whole ns
    tokens_ -= static_cast<double>(bytes);
    return true;
  }
  if (ready_at != nullptr) {
    double wait_ns = std::ceil((need - tokens_) / bytes_per_ns_);
    *ready_at = std::max(now, last_) + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double, std::nano>(wait_ns));
  }
  return false;
}

}  // namespace tictac::transport
