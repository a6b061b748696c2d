// transport/core/send_scheduler.h: the backend-independent send scheduler.
//
// One SendScheduler per (context, device), shared by all peers of that device.
// It decides WHICH bytes go on the wire next and WHEN; it moves no data and
// knows no backend. The channel enqueues whole tensor sends (ops), then pulls
// chunks with next() and hands each one to the backend, and calls ack() when
// the receiver is known to hold a chunk's bytes.
//
//   enqueue(op) --> PriorityLanes (one FIFO per priority, lower = more urgent)
//                      | next(): most urgent op, cut at chunk_bytes
//                      v
//          window check (bytes handed out and not yet acked <= window_bytes)
//          token bucket (rate_gbps; optional)
//                      v
//                   Chunk --> backend ... receiver ... ack(op, length)
//
// Semantics
// - Strict priority at chunk granularity: an op more urgent than the one being
//   cut goes next at the next chunk boundary. The window is enforced before a
//   chunk is handed to the backend, so a newly urgent op waits behind at most
//   window_bytes (+ one chunk when chunk_bytes > window_bytes) of older bytes.
// - The window always admits a chunk when nothing is in flight, even a chunk
//   bigger than the window (no deadlock).
// - Priorities order, they never gate: every queued op is sent eventually, in
//   (priority, enqueue) order, whatever the other priorities present.
// - 0-byte ops yield one 0-length chunk with last = true; such an op is
//   finished as soon as that chunk leaves next() (nothing to ack).
// - Every chunk returned by next() holds window credit until ack() returns it
//   (ack when the receiver confirmed the bytes, or when the backend failed the
//   chunk). failPeer() returns the credit of its peer's ops itself.
//
// Threading: NOT thread safe and no internal locks. Every call must come from
// the one thread that owns the scheduler (the channel's progress context).
// No call blocks, allocates per chunk in steady state, or invokes callbacks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <optional>
#include <vector>

#include "tictac/transport/status.h"
#include "transport/core/int_map.h"
#include "transport/core/priority_lanes.h"
#include "transport/core/token_bucket.h"

namespace tictac::transport {

// Defaults (see docs/perf.md "Transport scheduler" for the reasoning and the
// measurements behind them). A 512 KiB chunk amortises a rendezvous handshake
// per chunk (measured against 256 KiB and 1 MiB); a 1 MiB window (2 chunks)
// covers the bandwidth-delay product of loopback / shm links while bounding
// priority inversion to 1 MiB.
inline constexpr size_t kDefaultChunkBytes = size_t{512} * 1024;
inline constexpr size_t kDefaultWindowBytes = size_t{1024} * 1024;
inline constexpr size_t kDefaultMaxQueuedOps = 65536;
// ContextOptions::max_unexpected_bytes when 0, and what a stashed chunk counts
// besides a payload held in memory: its record, and for the first chunk of a
// tensor a hash node and a deque block (~700 bytes), and a backend descriptor.
inline constexpr size_t kDefaultMaxUnexpectedBytes = size_t{1} << 30;
inline constexpr size_t kStashedChunkBytes = 1024;

struct SchedulerOptions {
  size_t chunk_bytes = kDefaultChunkBytes;    // > 0; ops are cut into pieces of this size
  size_t window_bytes = kDefaultWindowBytes;  // > 0; bytes handed out and not yet acked
  double rate_gbps = 0;                       // payload pacing in 10^9 bit/s; 0 = unpaced
  size_t max_queued = kDefaultMaxQueuedOps;   // ops with unsent bytes before kNoResource
  size_t burst_bytes = 0;                     // token-bucket depth; 0 = one chunk
};

// One tensor send. op_id must be unique among the ops the scheduler still knows.
struct SendRequest {
  uint64_t op_id;
  uint32_t priority;  // lower = more urgent; any 32-bit value
  size_t bytes;       // 0 allowed
  uint64_t peer;      // opaque peer key (used by failPeer and copied to chunks)
};

// A piece of an op to hand to the backend: bytes [offset, offset + length).
struct Chunk {
  uint64_t op_id;
  uint64_t peer;
  uint32_t priority;
  size_t offset;
  size_t length;
  bool last;  // the op's final chunk (its last byte, or the 0-byte op's only chunk)
};

class SendScheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // Clock::now() without the out-of-line call into libstdc++ (the same
  // clock, CLOCK_MONOTONIC): read on every send and every pump.
  static Clock::time_point now() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return Clock::time_point(std::chrono::seconds(ts.tv_sec) +
                             std::chrono::nanoseconds(ts.tv_nsec));
  }

  struct PriorityCounters {
    uint64_t bytes_sent = 0;        // payload bytes handed out by next()
    uint64_t chunks = 0;            // chunks handed out
    uint64_t ops = 0;               // ops whose last chunk was handed out
    double queue_delay_us_sum = 0;  // sum over started ops of (first chunk - enqueue)
    double queue_delay_us_max = 0;  // max of the same
  };

  // Invalid options (chunk_bytes or window_bytes of 0, negative rate) are
  // replaced by the defaults; options() returns what is in effect.
  explicit SendScheduler(const SchedulerOptions& options = {});

  // "No clock read": as an enqueue time, the op's queueing delay counts as 0
  // (for an op the caller hands out at once: a send into an idle, unpaced
  // scheduler); as next()'s *now, read the clock only if needed. (A guest
  // whose clocksource is the HPET pays about 0.8 us per read: docs/perf.md.)
  static constexpr Clock::time_point kUntimed{};

  // Queues an op. kOk; kNoResource when max_queued ops already have unsent
  // bytes (nothing is queued: retry after next() drained some); kInvalidArgument
  // when op_id is already known. `now` is the enqueue time for queueing delay
  // (or kUntimed, above).
  Status enqueue(const SendRequest& request, Clock::time_point now);
  Status enqueue(const SendRequest& request) { return enqueue(request, now()); }

  // The next chunk to hand to the backend, or nullopt when nothing is queued,
  // the window is full, or pacing holds it. On nullopt, *retry_at (if given) is
  // the time pacing allows the next chunk, or Clock::time_point::max() when
  // only an enqueue() or ack() can change the answer. A returned chunk counts
  // against the window until ack().
  std::optional<Chunk> next(Clock::time_point now, Clock::time_point* retry_at = nullptr) {
    return next(&now, retry_at);
  }
  std::optional<Chunk> next() { return next(now()); }
  // The same; *now may be kUntimed: it is read (and kept there for the
  // caller's next call) only when pacing or a timed op's first chunk needs it.
  std::optional<Chunk> next(Clock::time_point* now, Clock::time_point* retry_at);
  bool paced() const { return bucket_.enabled(); }

  // The short path of an idle scheduler: when it knows no op, is unpaced and
  // the op fits one chunk, the op is handed out whole at once, exactly as
  // enqueue(request, kUntimed) followed by next() would hand it out (counted,
  // charged to the window, acked as any chunk), without passing through the
  // lanes. Returns its only chunk; nullopt (nothing changed: enqueue() it)
  // otherwise, or when op_id is already known.
  std::optional<Chunk> sendWhole(const SendRequest& request);

  // The receiver confirmed `length` bytes of op (or the backend failed them):
  // returns that much window credit. Unknown ops (finished, failed peer) and
  // excess lengths are ignored. An op is forgotten once all of its chunks were
  // handed out and acked.
  void ack(uint64_t op_id, size_t length);

  // Drops the op's unsent chunks. Its chunks already handed out keep their
  // credit until acked. Returns false if the op is unknown or has no unsent
  // bytes left (all chunks handed out: it can no longer be stopped here).
  bool cancel(uint64_t op_id);

  // Forgets the op entirely: drops its unsent chunks and returns the credit
  // of its chunks in flight. For an op whose remaining acks will never come
  // (it failed, the receiver rejected it); without this its credit would stay
  // taken. Calling it for an op already finished is harmless (returns false).
  bool drop(uint64_t op_id);

  // Forgets every op of `peer` (queued or awaiting acks) and returns the window
  // credit of its chunks in flight (their acks will never come). The ids are
  // appended to *dropped_ops if given, in no particular order.
  void failPeer(uint64_t peer, std::vector<uint64_t>* dropped_ops);

  size_t inFlightBytes() const { return in_flight_; }
  // False when next() would certainly return nullopt without looking at the
  // clock: nothing queued, or the window holds at least window_bytes (only an
  // ack() or enqueue() can change that; a 0-byte chunk then waits for the ack
  // too). Lets an idle or window-bound caller skip the clock read.
  bool mayAdmit() const {
    return lanes_.size() > 0 && (in_flight_ == 0 || in_flight_ < options_.window_bytes);
  }
  size_t queuedOps() const { return lanes_.size(); }    // ops with unsent bytes
  size_t knownOps() const { return op_index_.size(); }  // queued or awaiting acks
  const SchedulerOptions& options() const { return options_; }

  // Per priority level ever enqueued (levels are kept once seen).
  std::map<uint32_t, PriorityCounters> counters() const;
  // Counts an op of `bytes` sent in one chunk without passing through the
  // scheduler (the core's express send): as sendWhole() counts it, and no
  // queueing delay. The op is not known afterwards (knownOps()).
  void countUnscheduled(uint32_t priority, size_t bytes) {
    PriorityCounters& c = levels_[counterIndex(priority)].second;
    c.bytes_sent += bytes;
    c.chunks += 1;
    c.ops += 1;
  }

 private:
  struct Op {
    uint64_t op_id = 0;
    uint64_t peer = 0;
    size_t bytes = 0;
    size_t sent = 0;       // bytes handed out by next()
    size_t in_flight = 0;  // handed out and not yet acked
    uint32_t priority = 0;
    uint32_t counter = 0;  // index into levels_
    bool started = false;
    bool queued = false;  // still in lanes_
    Clock::time_point enqueued_at{};
  };

  // The slot of a new op made from `request` (indexed, not queued, nothing
  // sent); kNone, changing nothing, when its op_id is already known.
  uint32_t newOp(const SendRequest& request);
  // Hands out the op's next `length` bytes (counted, charged to the window;
  // the last chunk counts the op, and forgets a 0-byte one: nothing to ack).
  // next() and sendWhole() share it; the lanes are the caller's.
  Chunk handOut(uint32_t slot, size_t length);
  void forget(uint32_t slot);
  uint32_t counterIndex(uint32_t priority);

  SchedulerOptions options_;
  PriorityLanes<uint32_t> lanes_;  // op slots with unsent bytes
  std::vector<Op> ops_;            // slot pool
  std::vector<uint32_t> free_slots_;
  IntMap<uint64_t> op_index_;     // op_id -> slot
  IntMap<uint32_t> level_index_;  // priority -> index into levels_
  std::vector<std::pair<uint32_t, PriorityCounters>> levels_;
  TokenBucket bucket_;
  size_t in_flight_ = 0;
};

}  // namespace tictac::transport
