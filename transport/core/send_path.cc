// Send path: scheduler -> backend posts, acks, nacks, failures (progress context).
//
// scheduler.next() -> backend.post() -> the receiver acks each chunk once its
// bytes are in place -> scheduler.ack(); a send completes when every chunk is
// confirmed and every post finished. A chunk the backend confirmsDelivery()
// for is flagged kFlagNoAck and confirmed by its successful post completion or
// by an ack, whichever comes first (credited once: SendOp::credited).
#include <cstring>

#include "transport/core/context_impl.h"

namespace tictac::transport {

unsigned ContextImpl::pumpChunks() {
  unsigned n = 0;
  auto now = SendScheduler::kUntimed;  // read by next() only if pacing or a queue delay needs it
  auto retry = SendScheduler::Clock::time_point::max();
  while (auto c = sched_->next(&now, &retry)) {
    SendOp* found = sends_.find(c->op_id);
    if (found == nullptr) {  // cannot happen: ops leave the scheduler before sends_
      sched_->ack(c->op_id, c->length);
      continue;
    }
    if (postChunk(*found, *c)) ++n;
  }
  // next() ended on nullopt: retry is when pacing admits the next chunk (max
  // when only an ack or a new send can change that).
  pace_retry_.store(retry == SendScheduler::Clock::time_point::max()
                        ? INT64_MAX
                        : static_cast<int64_t>(retry.time_since_epoch().count()),
                    std::memory_order_relaxed);
  return n;
}

bool ContextImpl::postChunk(SendOp& op, const Chunk& c) {
  const Peer* peer = findPeer(op.peer);  // ops of a lost peer left the scheduler
  Post post;
  post.op = c.op_id;
  post.peer = op.peer;
  post.h.type = static_cast<uint8_t>(wire::MsgType::kData);
  post.h.flags = c.last ? wire::kFlagLast : 0;
  if (c.length > 0 && backend_->confirmsDelivery(c.length, op.region)) {
    post.h.flags |= wire::kFlagNoAck;
  }
  post.h.src_peer = peer->my_id_there;
  post.h.iteration = op.iteration;
  post.h.tensor_id = op.tensor;
  post.h.op_id = c.op_id;
  post.h.total_len = op.len;
  post.h.offset = c.offset;
  post.h.length = static_cast<uint32_t>(c.length);
  uint64_t token = next_token_++;
  Post& pt = posts_.insert(token, std::move(post));
  Status st = backend_->post(op.peer, wire::asBytes(pt.h), op.buf + c.offset, c.length, op.region,
                             token, op.priority);
  op.handed = c.offset + c.length;
  if (c.last) {
    op.all_handed = true;
    op.in_sched = false;
    queued_sends_.fetch_sub(1);
  }
  if (!st) {
    posts_.erase(token);
    sched_->ack(c.op_id, c.length);
    failSend(c.op_id, lostOr(op.peer, st), true);  // may erase op
    return false;
  }
  op.posts++;
  return true;
}

void ContextImpl::onSendDone(uint64_t token, const Status& status) {
  if (express_.token != 0 && token == express_.token) {
    return endExpress(status ? Status::ok() : lostOr(express_.key.peer, status));
  }
  Post* pt = posts_.find(token);
  if (pt == nullptr) return;
  const wire::Header& h = pt->h;
  uint64_t id = pt->op;
  size_t len = h.length;
  uint64_t offset = h.offset;
  bool data = h.type == static_cast<uint8_t>(wire::MsgType::kData);
  bool flagged = (h.flags & wire::kFlagNoAck) != 0;
  posts_.erase(token);
  if (!data) return;
  SendOp* found = sends_.find(id);
  if (found == nullptr) return;
  SendOp& op = *found;
  op.posts--;
  // Flagged and done: the peer holds the chunk (Backend::confirmsDelivery).
  // Failed: its ack may never come. Either way the credit returns once.
  if (flagged || !status) confirmChunk(id, op, offset, len);
  if (!status) failSend(id, lostOr(op.peer, status), true);
  tryFinishSend(id);
}

void ContextImpl::confirmChunk(uint64_t id, SendOp& op, uint64_t offset, size_t len) {
  size_t index = offset / opts_.chunk_bytes;  // < op.len / chunk: checked by the callers
  uint64_t* word = &op.credited0;
  if (index >= 64) {
    size_t w = index / 64 - 1;
    if (op.credited_more.size() <= w) op.credited_more.resize(w + 1, 0);
    word = &op.credited_more[w];
  }
  uint64_t bit = uint64_t{1} << (index % 64);
  if (*word & bit) return;  // the completion or the ack came first (or a duplicate ack)
  *word |= bit;
  sched_->ack(id, len);
  op.acked += len;
  if (len == 0) op.zero_acked = true;
}

bool ContextImpl::ackNamesAChunk(const SendOp& op, uint64_t offset, uint64_t bytes) const {
  if (op.len == 0) return offset == 0 && bytes == 0 && op.all_handed;
  size_t chunk = opts_.chunk_bytes;
  return offset < op.handed && offset % chunk == 0 &&
         bytes == std::min<uint64_t>(chunk, op.len - offset);
}

void ContextImpl::onAcks(const wire::Header& h, const Incoming& in) {
  size_t n = h.length / sizeof(wire::AckEntry);
  auto* e = static_cast<const wire::AckEntry*>(in.data);
  for (size_t i = 0; i < n; ++i) {
    wire::AckEntry a;
    std::memcpy(&a, e + i, sizeof(a));
    SendOp* found = sends_.find(a.op_id);
    if (found == nullptr || found->peer != h.src_peer) continue;  // finished or failed
    SendOp& op = *found;
    if (!ackNamesAChunk(op, a.offset, a.bytes)) {
      // A peer acking bytes it was never sent would free window credit (or,
      // with a huge offset, grow the credit bitmap without bound): its bug or
      // its malice ends the peer, not the process.
      failPeer(h.src_peer,
               Status(StatusCode::kProtocolError,
                      "peer acked a chunk never sent (op " + std::to_string(a.op_id) + ", offset " +
                          std::to_string(a.offset) + ", " + std::to_string(a.bytes) + " bytes)"));
      return;
    }
    confirmChunk(a.op_id, op, a.offset, a.bytes);
    tryFinishSend(a.op_id);
  }
}

void ContextImpl::onNack(const wire::Header& h) {
  SendOp* op = sends_.find(h.op_id);
  if (op == nullptr || op->tensor != h.tensor_id || op->peer != h.src_peer) return;
  auto code = static_cast<StatusCode>(h.status);
  std::string why = code == StatusCode::kSizeMismatch
                        ? "receiver expected a different size for tensor " +
                              std::to_string(h.tensor_id) + " (sent " + std::to_string(op->len) +
                              " bytes)"
                        : "receiver rejected tensor " + std::to_string(h.tensor_id);
  failSend(h.op_id, Status(code, why), false);
  tryFinishSend(h.op_id);
}

void ContextImpl::failSend(uint64_t id, const Status& s, bool tell_peer) {
  SendOp* found = sends_.find(id);
  if (found == nullptr) return;
  SendOp& op = *found;
  if (op.failed) return;
  op.failed = s;
  if (op.in_sched) {
    sched_->cancel(id);
    op.in_sched = false;
    queued_sends_.fetch_sub(1);
  }
  if (tell_peer && s.code() != StatusCode::kPeerLost) {
    wire::Header about;
    about.tensor_id = op.tensor;
    about.iteration = op.iteration;
    about.op_id = id;
    queueCtrl(op.peer, wire::MsgType::kAbort, about, StatusCode::kCanceled, op.priority);
  }
  tryFinishSend(id);
}

void ContextImpl::tryFinishSend(uint64_t id) {
  SendOp* found = sends_.find(id);
  if (found == nullptr) return;
  SendOp& op = *found;
  if (op.posts > 0) return;  // the backend still reads the buffer
  bool confirmed = op.all_handed && op.acked >= op.len && (op.len > 0 || op.zero_acked);
  if (!confirmed && !op.failed) return;
  // Not "acked => ok": a chunk that arrives before its expect is acked while
  // its bytes may still wait at the sender (rendezvous); only the backend's
  // completion of every post proves the buffer was read.
  Status st = op.failed ? *op.failed : Status::ok();
  sched_->drop(id);  // no-op for a finished op; returns the credit of a failed one
  send_keys_.erase(PeerKey{op.peer, op.iteration, op.tensor});
  complete(op.handle, op.cb, std::move(st));
  sends_.erase(id);
}

void ContextImpl::failPeer(uint32_t peer, const Status& why) {
  auto pit = peers_.find(peer);
  if (pit == peers_.end() || !pit->second.alive) return;
  pit->second.alive = false;
  pit->second.acks.clear();
  pit->second.ctrl.clear();
  // The peer is told (kBye on its bootstrap link): after a protocol error or
  // a limit it would otherwise wait for acks that never come. A link the
  // monitor lost or closePeer() removed is gone already; during destruction
  // the monitor is (its destructor said kBye on every link).
  if (monitor_) monitor_->remove(peer);
  backend_->removePeer(peer);  // its posts and receives complete later (with errors)
  if (express_.token != 0 && express_.key.peer == peer)
    endExpress(why);  // its completion finds none
  std::vector<uint64_t> dropped;
  sched_->failPeer(peer, &dropped);
  for (uint64_t id : sends_.idsWhere([&](const SendOp& op) { return op.peer == peer; })) {
    SendOp& op = *sends_.find(id);
    if (op.in_sched) {
      op.in_sched = false;
      queued_sends_.fetch_sub(1);
    }
    if (!op.failed) op.failed = why;
    op.posts = 0;  // removePeer below completes the backend's posts; their buffers are released
    tryFinishSend(id);
  }
  if (xexpect_id_ != 0 && xexpect_.key.peer == peer) promoteExpect();
  for (uint64_t id : recvs_.idsWhere([&](const RecvOp& r) { return r.key.peer == peer; })) {
    recvs_.find(id)->pending = 0;  // removePeer ended its receives; the buffer is released
    failExpect(id, why);
  }
  for (auto it = stash_.begin(); it != stash_.end();) {
    if (it->first.peer == peer) {
      for (auto& s : it->second) backend_->release(s.desc);
      it = stash_.erase(it);
    } else {
      ++it;
    }
  }
  // Its rejected ops: no chunk of them can come any more.
  pit->second.rejected = RejectedOps();  // clear() would keep a flood's buckets
  pit->second.stashed_bytes = pit->second.stashed_chunks = 0;
}

}  // namespace tictac::transport
