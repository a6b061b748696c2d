// The express send (see ContextImpl::startExpress): a small tensor into an
// idle context goes from send() to the backend in one step, and its backend
// completion finishes it (caller's thread or progress context, core_mu_ held).
// The express expect (ContextImpl::landExpress) is its receiving half.
//
// Why: a ping-pong's reply is latency-bound, and in the soft-RoCE guest each
// table the regular path touches (scheduler op, send key, registration
// lookup below copiedPayloadMax, post record) costs a fraction of a
// microsecond a turn (docs/perf.md, "Session 18"; up to kInlineMax since
// session 19). Nothing else is in flight then, so nothing can be overtaken:
// no scheduling decision is skipped, only its bookkeeping.
//
// startExpress(): a send of 1..express_bytes_ bytes into a context with no
// send in flight (the scheduler knows no op, no express send pending),
// unpaced, on a backend that posts from send() and confirms the delivery of
// such payloads. It is posted here as the tensor's only chunk (kFlagLast |
// kFlagNoAck) and held in express_ alone: no scheduler op, no send-key entry,
// no post record, and a registration lookup only above copiedPayloadMax (a
// failed one fails the send). Its backend completion (onSendDone) or a lost
// peer (failPeer) ends it with endExpress. It cannot be canceled (all handed,
// as any op whose last chunk was posted). False: take startSend().
//
// landExpress(): the receiving half of a ping-pong. One expect at a time is
// held in xexpect_ alone, outside recvs_ and expect_index_ (no hash insert,
// lookup or erase). onData() lands a chunk for it here when the chunk is the
// whole tensor, in place, of the expected size: copied, acked unless
// kFlagNoAck, and finished. Anything else about it (another chunk shape, a
// size mismatch, an abort, its peer's loss, cancel()) first promotes it into
// the tables, whose regular path then handles it. True: landed and finished.
#include <cstring>

#include "transport/core/context_impl.h"

namespace tictac::transport {

bool ContextImpl::startExpress(Submission& s) {
  Peer* peer = livePeer(s.peer);
  PeerKey key{s.peer, s.key.iteration, s.key.id};
  // A lost peer, or a failed send of the same tensor still held by the
  // backend: startSend() reports it.
  if (peer == nullptr || send_keys_.find(key) != nullptr) return false;
  // Above copiedPayloadMax the payload is sent from its registration; a
  // failed one fails the send, as in startSend() (not tried twice).
  const MemoryRegion* region = nullptr;
  if (s.len > copied_max_) {
    Result<const MemoryRegion*> reg = cache_->lookup(s.buf, s.len);
    if (!reg) {
      failSend(s, reg.status());
      return true;
    }
    region = reg.value();
  }
  if (!backend_->confirmsDelivery(s.len, region)) return false;
  wire::Header h;
  h.type = static_cast<uint8_t>(wire::MsgType::kData);
  h.flags = wire::kFlagLast | wire::kFlagNoAck;  // the completion confirms it
  h.src_peer = peer->my_id_there;
  h.iteration = s.key.iteration;
  h.tensor_id = s.key.id;
  h.op_id = s.id;  // a receiver's ack or nack of it finds no op: ignored, as for any finished send
  h.total_len = s.len;
  h.length = static_cast<uint32_t>(s.len);
  const uint64_t token = next_token_++;
  // The backend copies the header (and, by copiedPayloadMax, the payload
  // before the completion): h may die with this frame.
  Status st = backend_->post(s.peer, wire::asBytes(h), s.buf, s.len, region, token, s.prio);
  if (!st) {
    failSend(s, lostOr(s.peer, st));
    return true;
  }
  queued_sends_.fetch_sub(1);
  sched_->countUnscheduled(s.prio, s.len);  // priorityStats() as for a scheduled send
  express_.token = token;
  express_.key = key;
  express_.handle = std::move(handleOf(s));  // made now, after the post
  express_.cb = std::move(s.cb);
  return true;
}

void ContextImpl::endExpress(Status st) {
  complete(express_.handle, express_.cb, std::move(st));
  express_ = Express{};
}

bool ContextImpl::landExpress(const wire::Header& h, Incoming& in, Peer& peer) {
  RecvOp& r = xexpect_;
  const bool whole = (h.flags & wire::kFlagLast) != 0 && h.offset == 0 && h.length == h.total_len &&
                     h.total_len == r.len && (in.data != nullptr || h.length == 0);
  if (!whole) {  // a chunk, a rendezvous payload or a size mismatch: the tables handle it
    promoteExpect();
    return false;
  }
  if (h.length > 0) std::memcpy(r.dst, in.data, h.length);
  if ((h.flags & wire::kFlagNoAck) == 0) peer.acks.push_back({h.op_id, 0, h.length});
  xexpect_id_ = 0;
  complete(r.handle, r.cb, Status::ok());
  return true;
}

void ContextImpl::promoteExpect() {
  if (xexpect_id_ == 0) return;
  expect_index_.insert(xexpect_.key, xexpect_id_);
  recvs_.insert(xexpect_id_, std::move(xexpect_));
  xexpect_id_ = 0;
}

}  // namespace tictac::transport
