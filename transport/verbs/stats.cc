// Verbs backend diagnostics (see stats.h).
#include "transport/verbs/stats.h"

#include <time.h>

#include <algorithm>
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
  if (first_enter_ns == 0) first_enter_ns = now;
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
  send_hist.add(d);
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

void Stats::onCtsOut(uint64_t rts_ns, uint64_t posted_ns) {
  if (rts_ns == 0 || posted_ns < rts_ns) return;
  uint64_t d = posted_ns - rts_ns;
  ++cts_out;
  cts_out_ns += d;
  cts_out_max_ns = std::max(cts_out_max_ns, d);
}

void Stats::onCts(uint64_t rts_ns, uint64_t now) {
  if (rts_ns == 0 || now < rts_ns) return;
  ++cts;
  cts_ns += now - rts_ns;
  if (now - rts_ns > cts_max_ns) cts_max_ns = now - rts_ns;
}

void Stats::onWritePosted(uint64_t now) {
  if (writes_in_flight++ == 0 && bubble_since_ns != 0) {
    ++bubbles;
    bubble_ns += now - bubble_since_ns;
    bubble_since_ns = 0;
  }
}

void Stats::onWriteDone(uint64_t now, bool waiting) {
  if (writes_in_flight > 0 && --writes_in_flight == 0 && waiting) bubble_since_ns = now;
}

void Histogram::add(uint64_t ns) {
  ++bucket[std::min<uint64_t>(ns / 500, kBuckets - 1)];
  ++count;
}

double Histogram::medianUs() const {
  uint64_t seen = 0;
  for (unsigned i = 0; i < kBuckets; ++i) {
    seen += bucket[i];
    if (2 * seen >= count && count > 0) return 0.5 * i + 0.25;
  }
  return 0;
}

void Stats::onMsgPosted(uint64_t now) {
  if (recv_polled_ns == 0 || now < recv_polled_ns) return;
  uint64_t d = now - recv_polled_ns;
  recv_polled_ns = 0;
  turn_hist.add(d);
  ++turns;
  turn_ns += d;
  if (d > turn_max_ns) turn_max_ns = d;
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
      "\"backlog_waits\":%llu,\"inline_sends\":%llu,\"direct_sends\":%llu,\"zero_copy_sends\":%llu,"
      "\"compact_sends\":%llu,"
      "\"cts\":%llu,\"cts_mean_"
      "us\":%.1f,"
      "\"cts_max_us\":%.0f,\"bubbles\":%llu,\"bubble_us\":%.0f,\"rts_pending_mean\":%.1f,"
      "\"rts_pending_max\":%llu,\"rts_msgs\":%llu,\"wq_mean\":%.1f,\"cts_out\":%llu,\"cts_out_mean_"
      "us\":%.1f,"
      "\"cts_out_max_us\":%.0f,\"turns\":%llu,\"turn_mean_us\":%.2f,\"turn_max_us\":%.0f,"
      "\"turn_p50_us\":%.2f,\"send_p50_us\":%.2f,\"post_p50_us\":%.2f,"
      "\"pass_mean_us\":%.3f,\"adverts\":%llu,\"adverts_declined\":%llu,"
      "\"advert_writes\":%llu}\n",
      who, static_cast<unsigned long long>(progress_calls), static_cast<unsigned long long>(sleeps),
      static_cast<unsigned long long>(sleep_timeouts), us(sleep_ns), us(sleep_max_ns),
      static_cast<unsigned long long>(gaps_over_1ms), us(gap_max_ns),
      static_cast<unsigned long long>(send_cqes), static_cast<unsigned long long>(recv_cqes),
      send_cqes ? us(send_ns) / static_cast<double>(send_cqes) : 0.0, us(send_max_ns),
      static_cast<unsigned long long>(sends_over_1ms),
      static_cast<unsigned long long>(backlog_waits), static_cast<unsigned long long>(inline_sends),
      static_cast<unsigned long long>(direct_sends),
      static_cast<unsigned long long>(zero_copy_sends),
      static_cast<unsigned long long>(compact_sends), static_cast<unsigned long long>(cts),
      cts ? us(cts_ns) / static_cast<double>(cts) : 0.0, us(cts_max_ns),
      static_cast<unsigned long long>(bubbles), us(bubble_ns),
      rts ? static_cast<double>(rts_pending_sum) / static_cast<double>(rts) : 0.0,
      static_cast<unsigned long long>(rts_pending_max), static_cast<unsigned long long>(rts_msgs),
      wq_posts ? static_cast<double>(wq_sum) / static_cast<double>(wq_posts) : 0.0,
      static_cast<unsigned long long>(cts_out),
      cts_out ? us(cts_out_ns) / static_cast<double>(cts_out) : 0.0, us(cts_out_max_ns),
      static_cast<unsigned long long>(turns),
      turns ? us(turn_ns) / static_cast<double>(turns) : 0.0, us(turn_max_ns), turn_hist.medianUs(),
      send_hist.medianUs(), post_hist.medianUs(),
      progress_calls && last_return_ns > first_enter_ns
          ? us(last_return_ns - first_enter_ns) / static_cast<double>(progress_calls)
          : 0.0,
      static_cast<unsigned long long>(adverts), static_cast<unsigned long long>(adverts_declined),
      static_cast<unsigned long long>(advert_writes));
}

}  // namespace tictac::transport::verbs
