// transport/verbs/stats.h: diagnostic counters of the verbs backend (internal).
//
// Filled in the progress context by VerbsBackend when TICTAC_VERBS_STATS=1
// (otherwise untouched and free: only a flag test per event). Printed as one
// JSON line to stderr when the backend is destroyed, so a benchmark run in
// the soft-RoCE guest shows where time goes: how often and how long the idle
// path slept on the completion channel, how long a posted work request took
// to complete (post -> CQE), and the longest gap between two progress() calls
// (a gap of a guest tick means the caller itself was not running).
#pragma once

#include <cstdint>

namespace tictac::transport::verbs {

// Durations in 0.5 us buckets up to 128 us (the last one holds the rest):
// the median of a ping-pong's per-message steps, which a mean of a few
// millisecond outliers hides.
struct Histogram {
  static constexpr unsigned kBuckets = 256;
  uint32_t bucket[kBuckets] = {};
  uint64_t count = 0;
  void add(uint64_t ns);
  double medianUs() const;  // bucket midpoint; 0 when empty
};

struct Stats {
  bool on = false;
  uint64_t progress_calls = 0;
  uint64_t sleeps = 0;          // ppoll on the completion channel
  uint64_t sleep_timeouts = 0;  // ... that ended without an event
  uint64_t sleep_ns = 0, sleep_max_ns = 0;
  uint64_t gaps_over_1ms = 0, gap_max_ns = 0;  // between progress() calls
  uint64_t send_cqes = 0, recv_cqes = 0;
  uint64_t send_ns = 0, send_max_ns = 0, sends_over_1ms = 0;  // post -> CQE
  uint64_t backlog_waits = 0;    // work that could not be posted at once
  uint64_t inline_sends = 0;     // SENDs posted with IBV_SEND_INLINE
  uint64_t direct_sends = 0;     // ... of which posted at once by post() (no backlog pass)
  uint64_t zero_copy_sends = 0;  // eager SENDs of a payload from registered memory
  uint64_t compact_sends = 0;    // eager SENDs of the payload alone (compact.h)
  // Rendezvous sender: kRts queued -> its kCts arrived, and the stretches in
  // which no RDMA WRITE was in flight while a transfer waited for its kCts
  // (the wire idles on the handshake: a pipeline bubble), from the last
  // WRITE's completion being polled to the next WRITE's ibv_post_send call.
  uint64_t cts = 0, cts_ns = 0, cts_max_ns = 0;
  uint64_t bubbles = 0, bubble_ns = 0;
  // Rendezvous sender: transfers awaiting their kCts when another kRts is
  // queued (sum and max), and WRITEs waiting in the backlog when one is posted.
  uint64_t rts_msgs = 0;  // SENDs that carried kRts (fewer than rts: batches)
  // Adverts (advert.cc): sent by this receiver; declined and chunks written
  // into one by this sender.
  uint64_t adverts = 0, adverts_declined = 0, advert_writes = 0;
  uint64_t rts = 0, rts_pending_sum = 0, rts_pending_max = 0, wq_sum = 0, wq_posts = 0;
  // Rendezvous receiver: kRts polled -> its kCts posted.
  uint64_t cts_out = 0, cts_out_ns = 0, cts_out_max_ns = 0;
  // Turnaround: an eager message's receive completion polled -> the next
  // SEND posted (a ping-pong server's answer: the user-space path per message).
  uint64_t turns = 0, turn_ns = 0, turn_max_ns = 0, recv_polled_ns = 0;
  // Turnarounds; SENDs and WRITEs post -> CQE; ibv_post_send() of an inline
  // SEND (on rxe the syscall runs the kernel's send path).
  Histogram turn_hist, send_hist, post_hist;
  uint64_t first_enter_ns = 0;  // first progress() call (mean pass = span / calls)
  uint32_t writes_in_flight = 0;
  uint64_t bubble_since_ns = 0;  // 0: no bubble open
  uint64_t last_return_ns = 0;

  static uint64_t nowNs();
  // Reads TICTAC_VERBS_STATS (1 = on).
  void init();
  void onProgressEnter(uint64_t now);
  void onSendCqe(uint64_t posted_ns, uint64_t now);
  void onSleep(uint64_t ns, bool timed_out);
  void onCts(uint64_t rts_ns, uint64_t now);
  // A kCts posted (rts_ns: when its kRts was polled; 0: not a kCts).
  void onCtsOut(uint64_t rts_ns, uint64_t posted_ns);
  void onWritePosted(uint64_t now);
  // A WRITE completed; `waiting`: a transfer still awaits its kCts.
  void onWriteDone(uint64_t now, bool waiting);
  // A SEND was posted at `now` (closes a turnaround opened by a receive).
  void onMsgPosted(uint64_t now);
  // One JSON line on stderr (when on).
  void print(const char* who) const;
};

}  // namespace tictac::transport::verbs
