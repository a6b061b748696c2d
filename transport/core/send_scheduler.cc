#include "transport/core/send_scheduler.h"

#include <algorithm>
#include <string>

namespace tictac::transport {
namespace {

SchedulerOptions sanitized(SchedulerOptions o) {
  if (o.chunk_bytes == 0) o.chunk_bytes = kDefaultChunkBytes;
  if (o.window_bytes == 0) o.window_bytes = kDefaultWindowBytes;
  if (!(o.rate_gbps >= 0)) o.rate_gbps = 0;  // negative or NaN: unpaced
  if (o.max_queued == 0) o.max_queued = kDefaultMaxQueuedOps;
  return o;
}

}  // namespace

SendScheduler::SendScheduler(const SchedulerOptions& options)
    : options_(sanitized(options)),
      bucket_(options_.rate_gbps,
              options_.burst_bytes != 0 ? options_.burst_bytes : options_.chunk_bytes) {}

uint32_t SendScheduler::counterIndex(uint32_t priority) {
  uint32_t index = level_index_.find(priority);
  if (index != IntMap<uint32_t>::kNone) return index;
  index = static_cast<uint32_t>(levels_.size());
  levels_.push_back({priority, PriorityCounters{}});
  level_index_.insert(priority, index);
  return index;
}

Status SendScheduler::enqueue(const SendRequest& request, Clock::time_point now) {
  if (lanes_.size() >= options_.max_queued) {
    return Status(StatusCode::kNoResource,
                  "send queue full (" + std::to_string(options_.max_queued) + " ops queued)");
  }
  uint32_t slot = newOp(request);
  if (slot == IntMap<uint64_t>::kNone) {
    return Status(StatusCode::kInvalidArgument,
                  "op id " + std::to_string(request.op_id) + " already queued");
  }
  Op& op = ops_[slot];
  op.queued = true;
  op.enqueued_at = now;
  lanes_.push(request.priority, slot);
  return Status::ok();
}

uint32_t SendScheduler::newOp(const SendRequest& request) {
  uint32_t slot = free_slots_.empty() ? static_cast<uint32_t>(ops_.size()) : free_slots_.back();
  if (!op_index_.insert(request.op_id, slot)) return IntMap<uint64_t>::kNone;
  if (slot == ops_.size()) {
    ops_.emplace_back();
  } else {
    free_slots_.pop_back();
  }
  Op& op = ops_[slot];
  op = Op{};
  op.op_id = request.op_id;
  op.peer = request.peer;
  op.bytes = request.bytes;
  op.priority = request.priority;
  op.counter = counterIndex(request.priority);
  return slot;
}

std::optional<Chunk> SendScheduler::sendWhole(const SendRequest& request) {
  if (op_index_.size() != 0 || paced() || request.bytes > options_.chunk_bytes) return std::nullopt;
  uint32_t slot = newOp(request);
  if (slot == IntMap<uint64_t>::kNone) return std::nullopt;
  ops_[slot].started = true;  // untimed: no queueing delay (the sums stay as they are)
  return handOut(slot, request.bytes);
}

Chunk SendScheduler::handOut(uint32_t slot, size_t length) {
  Op& op = ops_[slot];
  Chunk chunk{op.op_id, op.peer, op.priority, op.sent, length, op.sent + length == op.bytes};
  PriorityCounters& c = levels_[op.counter].second;
  c.bytes_sent += length;
  c.chunks += 1;
  op.sent += length;
  op.in_flight += length;
  in_flight_ += length;
  if (chunk.last) {
    c.ops += 1;
    op.queued = false;
    if (op.in_flight == 0) forget(slot);  // 0-byte op: nothing to ack
  }
  return chunk;
}

std::optional<Chunk> SendScheduler::next(Clock::time_point* now, Clock::time_point* retry_at) {
  if (retry_at != nullptr) *retry_at = Clock::time_point::max();
  if (lanes_.empty()) return std::nullopt;
  uint32_t slot = lanes_.front();
  Op& op = ops_[slot];
  size_t length = std::min(options_.chunk_bytes, op.bytes - op.sent);
  // The window: a chunk always fits when nothing is in flight.
  if (in_flight_ != 0 && in_flight_ + length > options_.window_bytes) return std::nullopt;
  auto clock = [now] {
    if (*now == kUntimed) *now = SendScheduler::now();
    return *now;
  };
  // paced() first: an unpaced bucket admits everything, and the clock stays unread.
  if (paced() && !bucket_.tryConsume(length, clock(), retry_at)) return std::nullopt;

  if (!op.started) {
    PriorityCounters& c = levels_[op.counter].second;
    op.started = true;
    double delay_us = 0;  // an untimed op was handed out at once
    if (op.enqueued_at != kUntimed) {
      delay_us = std::chrono::duration<double, std::micro>(clock() - op.enqueued_at).count();
    }
    delay_us = std::max(delay_us, 0.0);
    c.queue_delay_us_sum += delay_us;
    c.queue_delay_us_max = std::max(c.queue_delay_us_max, delay_us);
  }
  Chunk chunk = handOut(slot, length);
  if (chunk.last) lanes_.pop();
  return chunk;
}

void SendScheduler::ack(uint64_t op_id, size_t length) {
  uint32_t slot = op_index_.find(op_id);
  if (slot == IntMap<uint64_t>::kNone) return;
  Op& op = ops_[slot];
  size_t credit = std::min(length, op.in_flight);
  op.in_flight -= credit;
  in_flight_ -= credit;
  if (op.in_flight == 0 && !op.queued) forget(slot);
}

bool SendScheduler::cancel(uint64_t op_id) {
  uint32_t slot = op_index_.find(op_id);
  if (slot == IntMap<uint64_t>::kNone) return false;
  Op& op = ops_[slot];
  if (!op.queued) return false;
  lanes_.remove_if(op.priority, [slot](uint32_t s) { return s == slot; });
  op.queued = false;
  if (op.in_flight == 0) forget(slot);
  return true;
}

bool SendScheduler::drop(uint64_t op_id) {
  uint32_t slot = op_index_.find(op_id);
  if (slot == IntMap<uint64_t>::kNone) return false;
  Op& op = ops_[slot];
  if (op.queued) lanes_.remove_if(op.priority, [slot](uint32_t s) { return s == slot; });
  in_flight_ -= op.in_flight;
  forget(slot);
  return true;
}

void SendScheduler::failPeer(uint64_t peer, std::vector<uint64_t>* dropped_ops) {
  lanes_.remove_if([this, peer](uint32_t s) { return ops_[s].peer == peer; });
  for (uint32_t slot = 0; slot < ops_.size(); ++slot) {
    Op& op = ops_[slot];
    if (op.peer != peer || op_index_.find(op.op_id) != slot) continue;  // other peer, or free slot
    if (dropped_ops != nullptr) dropped_ops->push_back(op.op_id);
    in_flight_ -= op.in_flight;
    op.in_flight = 0;
    op.queued = false;
    forget(slot);
  }
}

void SendScheduler::forget(uint32_t slot) {
  op_index_.erase(ops_[slot].op_id);
  free_slots_.push_back(slot);
}

std::map<uint32_t, SendScheduler::PriorityCounters> SendScheduler::counters() const {
  std::map<uint32_t, PriorityCounters> out;
  for (const auto& [priority, c] : levels_) out.emplace(priority, c);
  return out;
}

}  // namespace tictac::transport
