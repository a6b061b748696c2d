// Verbs backend diagnostics (see stats.h).
#include "transport/verbs/stats.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tictac::transport::verbs {

uint64_t Stats::nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void Stats::init() {
  const char* e = std::getenv("TICTAC_VERBS_STATS");
  on = e != nullptr && std::strcmp(e, "1") == 0;
}

void Stats::onProgressEnter(uint64_t now) {
  ++progress_calls;
  if (last_return_ns != 0 && now > last_return_ns) {
    uint64_t gap = now - last_return_ns;
    if (gap > 1000000) ++gaps_over_1ms;
    if (gap > gap_max_ns) gap_max_ns = gap;
  }
}

void Stats::onSendCqe(uint64_t posted_ns, uint64_t now) {
  ++send_cqes;
  if (posted_ns == 0 || now < posted_ns) return;
  uint64_t d = now - posted_ns;
  send_ns += d;
  if (d > send_max_ns) send_max_ns = d;
  if (d > 1000000) ++sends_over_1ms;
}

void Stats::onSleep(uint64_t ns, bool timed_out) {
  ++sleeps;
  if (timed_out) ++sleep_timeouts;
  sleep_ns += ns;
  if (ns > sleep_max_ns) sleep_max_ns = ns;
}

void Stats::print(const char* who) const {
  if (!on) return;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  std::fprintf(
      stderr,
      "{\"verbs_stats\":\"%s\",\"progress_calls\":%llu,\"sleeps\":%llu,"
      "\"sleep_timeouts\":%llu,\"sleep_us\":%.0f,\"sleep_max_us\":%.0f,"
      "\"gaps_over_1ms\":%llu,\"gap_max_us\":%.0f,\"send_cqes\":%llu,\"recv_cqes\":%llu,"
      "\"send_mean_us\":%.1f,\"send_max_us\":%.0f,\"sends_over_1ms\":%llu,"
      "\"backlog_waits\":%llu}\n",
      who, static_cast<unsigned long long>(progress_calls), static_cast<unsigned long long>(sleeps),
      static_cast<unsigned long long>(sleep_timeouts), us(sleep_ns), us(sleep_max_ns),
      static_cast<unsigned long long>(gaps_over_1ms), us(gap_max_ns),
      static_cast<unsigned long long>(send_cqes), static_cast<unsigned long long>(recv_cqes),
      send_cqes ? us(send_ns) / static_cast<double>(send_cqes) : 0.0, us(send_max_ns),
      static_cast<unsigned long long>(sends_over_1ms),
      static_cast<unsigned long long>(backlog_waits));
}

}  // namespace tictac::transport::verbs
