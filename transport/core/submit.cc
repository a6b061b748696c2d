// Entry points that any thread may call (send, expect, cancel) and the
// draining of their submissions into the core (progress context).
#include <algorithm>
#include <cassert>

#include "transport/core/context_impl.h"

namespace tictac::transport {

OpHandle ContextImpl::newHandle(uint64_t id) {
  return std::make_shared<Op>(pump_fn_, id);
}

Result<Priority> ContextImpl::checkSend(const TensorKey& key, const void* buf, size_t len,
                                        std::optional<Priority> prio) {
  if (buf == nullptr && len > 0) {
    return Status(StatusCode::kInvalidArgument,
                  "send: null buffer with " + std::to_string(len) + " bytes");
  }
  if (len > (size_t{1} << 48)) return Status(StatusCode::kInvalidArgument, "send: size too large");
  if (prio) return *prio;
  if (opts_.hints) {
    if (auto h = opts_.hints->priorityOf(key)) return *h;
  }
  return opts_.default_priority;
}

Status ContextImpl::reserveSends(size_t n) {
  // A compare-exchange: a batch refused here never holds slots another
  // thread's send() would have fitted into.
  size_t cur = queued_sends_.load();
  do {
    if (n > opts_.max_queued - std::min(cur, opts_.max_queued)) {
      return Status(StatusCode::kNoResource,
                    "send queue limit of " + std::to_string(opts_.max_queued) + " sends reached");
    }
  } while (!queued_sends_.compare_exchange_weak(cur, cur + n));
  return Status::ok();
}

Result<OpHandle> ContextImpl::send(uint32_t peer, const TensorKey& key, const void* buf, size_t len,
                                   std::optional<Priority> prio, Completion cb) {
  Result<Priority> p = checkSend(key, buf, len, prio);
  if (!p) return p.status();
  if (Status st = reserveSends(1); !st) return st;
  uint64_t id = next_id_++;
  char* src = const_cast<char*>(static_cast<const char*>(buf));
  OpHandle h;  // written by handleOf() before submit() returns
  Submission s{true, id, peer, key, src, len, p.value(), std::move(cb), nullptr, &h};
  submit(s);
  assert(h);
  return h;
}

Result<std::vector<OpHandle>> ContextImpl::sendBatch(uint32_t peer, std::vector<SendItem>& items) {
  const size_t n = items.size();
  if (n == 0) return std::vector<OpHandle>{};
  if (n > opts_.max_queued) {
    return Status(StatusCode::kInvalidArgument, "a batch of " + std::to_string(n) +
                                                    " sends exceeds max_queued (" +
                                                    std::to_string(opts_.max_queued) + ")");
  }
  std::vector<OpHandle> handles(n);  // written by handleOf()
  std::vector<Submission> subs;
  subs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    SendItem& it = items[i];
    Result<Priority> p = checkSend(it.tensor, it.buf, it.len, it.priority);
    if (!p) {
      return Status(p.status().code(),
                    "item " + std::to_string(i) + " of the batch: " + p.status().message());
    }
    char* src = const_cast<char*>(static_cast<const char*>(it.buf));
    subs.push_back(Submission{true, 0, peer, std::move(it.tensor), src, it.len, p.value(),
                              std::move(it.completion), nullptr, &handles[i]});
  }
  if (Status st = reserveSends(n); !st) return st;  // last: nothing above holds a slot
  for (auto& s : subs) s.id = next_id_++;
  // All of them enter the scheduler in one pass (here, or in the drain of the
  // progress thread's next pass) before it hands out a chunk.
  if (!startBatchNow(subs)) queueSubmissions(subs);
  wakeSleepers();
  return handles;
}

Result<OpHandle> ContextImpl::expect(uint32_t peer, const TensorKey& key, void* dst, size_t len,
                                     Completion cb) {
  if (dst == nullptr && len > 0) {
    return Status(StatusCode::kInvalidArgument,
                  "expect: null buffer with " + std::to_string(len) + " bytes");
  }
  uint64_t id = next_id_++;
  OpHandle h;  // written by handleOf() before submit() returns
  Submission s{false, id, peer, key, static_cast<char*>(dst), len, 0, std::move(cb), nullptr, &h};
  submit(s);
  assert(h);
  return h;
}

void ContextImpl::submit(Submission& s) {
  if (!startNow(s)) queueSubmissions({&s, 1});
  wakeSleepers();  // either way the op waits for a pass
}

void ContextImpl::queueSubmissions(std::span<Submission> subs) {
  for (auto& s : subs) {
    handleOf(s);
    s.user = nullptr;  // the caller's frame is gone when the queue is drained
  }
  std::lock_guard<std::mutex> lock(sub_mu_);  // one hold: one drain takes them all
  for (auto& s : subs) subs_.push_back(std::move(s));
  sub_pending_.store(true, std::memory_order_release);
}

bool ContextImpl::startBatchNow(std::span<Submission> subs) {
  // startNow() for a batch: every op is enqueued before the one pump(), and
  // none takes the express or whole-send shortcuts.
  if (opts_.progress_thread) return false;
  std::unique_lock<std::mutex> lock(core_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (sub_pending_.load(std::memory_order_acquire)) drainSubmissions();
  const bool idle = posts_from_send_ && sched_->knownOps() == 0;
  for (auto& s : subs) startSend(s);
  if (idle) pump();  // as startNow(): into an idle scheduler the first chunk leaves now
  return true;
}

bool ContextImpl::startNow(Submission& s) {
  // Skips the submission queue (a lock, a copy, a swap and a later pass):
  // the op enters the core's tables and the scheduler here, as
  // drainSubmissions() would do it. Chunks leave in the next progress(),
  // except on a backend that posts from send() (Backend::postsFromSend): a
  // send into an idle scheduler (nothing queued, nothing in flight) goes to
  // it at once, as the next progress() would post it first, so a ping-pong's
  // reply leaves before the caller's next expect(): posted by startSend()
  // when it fits one chunk (the short path), else by pump(). Under contention sends
  // only queue (pumping from every send lengthened the urgent tail of the
  // guest's prio test). Completions (failures included) still run only from
  // progress().
  if (opts_.progress_thread) return false;
  std::unique_lock<std::mutex> lock(core_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (sub_pending_.load(std::memory_order_acquire)) drainSubmissions();
  if (s.is_send) {
    bool idle = posts_from_send_ && sched_->knownOps() == 0;
    if (idle && express_.token == 0 && s.len > 0 && s.len <= express_bytes_ && !sched_->paced() &&
        startExpress(s)) {
      return true;
    }
    startSend(s, idle && !sched_->paced());
    if (idle) pump();
  } else {
    startExpect(s);
  }
  return true;
}

void ContextImpl::drainSubmissions() {
  // core_mu_ held: subs_run_ is ours. Swapping keeps both vectors' capacity.
  {
    std::lock_guard<std::mutex> lock(sub_mu_);
    subs_run_.swap(subs_);
    sub_pending_.store(!lost_.empty(), std::memory_order_relaxed);
  }
  for (auto& s : subs_run_) {
    if (s.is_send) {
      startSend(s);
    } else {
      startExpect(s);
    }
  }
  subs_run_.clear();
  handleLostPeers();
}

void ContextImpl::failSend(Submission& s, Status st) {
  queued_sends_.fetch_sub(1);
  ready_.emplace_back(std::move(handleOf(s)), std::move(s.cb), std::move(st));
}

void ContextImpl::startSend(Submission& s, bool at_once) {
  auto fail = [&](Status st) { failSend(s, std::move(st)); };
  if (livePeer(s.peer) == nullptr) {
    return fail(Status(StatusCode::kPeerLost, "send: channel to peer is closed"));
  }
  PeerKey key{s.peer, s.key.iteration, s.key.id};
  if ((express_.token != 0 && express_.key == key) || !send_keys_.insert(key, true).second) {
    return fail(Status(StatusCode::kInvalidArgument,
                       "send: tensor " + std::to_string(s.key.id) + " iteration " +
                           std::to_string(s.key.iteration) + " is already being sent"));
  }
  // A payload the backend copies needs no registration (copiedPayloadMax).
  Result<const MemoryRegion*> reg = static_cast<const MemoryRegion*>(nullptr);
  if (s.len > copied_max_) reg = cache_->lookup(s.buf, s.len);
  if (!reg) {
    send_keys_.erase(key);
    return fail(reg.status());
  }
  // An op into an idle, unpaced scheduler that fits one chunk is handed out
  // whole and posted here, without a pass through the lanes and pumpChunks().
  SendRequest req{s.id, s.prio, s.len, s.peer};
  std::optional<Chunk> whole = at_once ? sched_->sendWhole(req) : std::nullopt;
  if (!whole) {
    Status st = sched_->enqueue(req, at_once ? SendScheduler::kUntimed : SendScheduler::now());
    if (!st) {
      send_keys_.erase(key);
      return fail(st);
    }
  }
  SendOp& op = sends_.insert(s.id, SendOp{});
  op.handle = std::move(handleOf(s));
  op.cb = std::move(s.cb);
  op.peer = s.peer;
  op.tensor = s.key.id;
  op.iteration = s.key.iteration;
  op.buf = s.buf;
  op.len = s.len;
  op.priority = s.prio;
  op.region = reg.value();
  op.in_sched = true;
  if (whole) postChunk(op, *whole);
}

bool ContextImpl::cancel(uint32_t peer, const OpHandle& op) {
  bool canceled = cancelOp(peer, op);
  if (canceled) wakeSleepers();  // the completion waits for a pass
  return canceled;
}

bool ContextImpl::cancelOp(uint32_t peer, const OpHandle& op) {
  if (!op) return false;
  std::lock_guard<std::mutex> lock(core_mu_);
  drainSubmissions();
  uint64_t id = op->id();
  if (xexpect_id_ == id && xexpect_.key.peer == peer) promoteExpect();  // then canceled as any
  if (SendOp* so = sends_.find(id); so != nullptr && so->peer == peer) {
    if (so->failed || so->all_handed) return false;
    failSend(id, Status(StatusCode::kCanceled, "send canceled"), true);
    return true;
  }
  if (RecvOp* r = recvs_.find(id); r != nullptr && r->key.peer == peer) {
    if (r->failed || r->started) return false;
    failExpect(id, Status(StatusCode::kCanceled, "expect canceled"));
    return true;
  }
  return false;
}

}  // namespace tictac::transport
