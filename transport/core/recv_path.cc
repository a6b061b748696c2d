// Receive path: header validation, landing chunks, stash, acks (progress context).
//
// Validate the wire header, land the chunk in the expected buffer (or keep it
// with the backend until expect()), ack it unless it is flagged kFlagNoAck and
// landed (a kept or dropped chunk is always acked). A dropped payload is
// released only after the control messages of that progress pass left
// (release_after_ctrl_), so a nack reaches the sender before the backend
// completes the sender's post of a rejected chunk.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "transport/core/context_impl.h"

namespace tictac::transport {

void ContextImpl::onMessage(PeerId from, std::span<const std::byte> raw, Incoming& in) {
  wire::Header h;
  Status st = wire::decodeHeader(raw, in.length, &h);
  if (st && from != kUnknownPeer && from != h.src_peer) {
    st = Status(StatusCode::kProtocolError, "wire header names another peer");
  }
  if (st && livePeer(h.src_peer) == nullptr) return;  // late message of a gone peer
  if (st && h.type != static_cast<uint8_t>(wire::MsgType::kData) && h.length > 0 &&
      in.data == nullptr) {  // a backend hands control payloads in place only if sent eagerly
    st = Status(StatusCode::kProtocolError, "control message sent with a rendezvous payload");
  }
  if (!st) {
    if (from != kUnknownPeer) onPeerError(from, st);
    return;  // without a trustworthy peer id there is no one to blame: dropped
  }
  switch (static_cast<wire::MsgType>(h.type)) {
    case wire::MsgType::kData:
      return onData(h, in);
    case wire::MsgType::kAck:
      return onAcks(h, in);
    case wire::MsgType::kNack:
      return onNack(h);
    case wire::MsgType::kAbort: {
      PeerKey key{h.src_peer, h.iteration, h.tensor_id};
      findPeer(h.src_peer)->rejected.insert(h.op_id);
      dropStash(key);
      if (isExpressExpect(key)) promoteExpect();
      if (const uint64_t* rid = expect_index_.find(key)) {
        failExpect(*rid, Status(static_cast<StatusCode>(h.status),
                                "sender canceled tensor " + std::to_string(h.tensor_id)));
      }
      return;
    }
  }
}

void ContextImpl::onData(const wire::Header& h, Incoming& in) {
  PeerKey key{h.src_peer, h.iteration, h.tensor_id};
  Peer& peer = *findPeer(h.src_peer);  // onMessage() checked it
  bool in_place = in.data != nullptr || h.length == 0;
  if (!peer.rejected.empty() && peer.rejected.contains(h.op_id)) {  // dropped, but acked
    peer.acks.push_back({h.op_id, h.offset, h.length});
    if (!in_place) in.retain_into = &release_after_ctrl_.emplace_back(nullptr);
    if (h.flags & wire::kFlagLast) peer.rejected.erase(h.op_id);
    return;
  }
  if (isExpressExpect(key) && landExpress(h, in, peer)) return;
  const uint64_t* found = expect_index_.find(key);
  if (found == nullptr) {
    // No expect yet: the backend keeps the bytes; ack now (flagged or not) so
    // an unexpected tensor never holds the sender's window (its send completes
    // only once the backend delivered the data, when the expect comes). What
    // that holds here is bounded per peer (max_unexpected_bytes): past it the
    // peer is failed, the chunk dropped.
    size_t held = kStashedChunkBytes + (in.data != nullptr ? h.length : 0);
    if (peer.over_limit) return;                                   // failing: dropped
    if (held > opts_.max_unexpected_bytes - peer.stashed_bytes) {  // never above the limit
      peer.over_limit = true;
      return onPeerError(h.src_peer, Status(StatusCode::kProtocolError,
                                            "peer sent more than max_unexpected_bytes (" +
                                                std::to_string(opts_.max_unexpected_bytes) +
                                                ") of tensors not yet expected"));
    }
    peer.stashed_bytes += held;
    peer.stashed_chunks++;
    auto& q = stash_[key];
    q.push_back(Stashed{h, nullptr, held});
    in.retain_into = &q.back().desc;  // deque: the slot stays where it is
    peer.acks.push_back({h.op_id, h.offset, h.length});
    return;
  }
  uint64_t rid = *found;
  RecvOp& r = *recvs_.find(rid);
  if (h.total_len != r.len) {
    queueCtrl(h.src_peer, wire::MsgType::kNack, h, StatusCode::kSizeMismatch);
    if (!(h.flags & wire::kFlagLast)) peer.rejected.insert(h.op_id);
    peer.acks.push_back({h.op_id, h.offset, h.length});
    if (!in_place) in.retain_into = &release_after_ctrl_.emplace_back(nullptr);
    failExpect(rid, Status(StatusCode::kSizeMismatch, "tensor " + std::to_string(h.tensor_id) +
                                                          ": expected " + std::to_string(r.len) +
                                                          " bytes, sender has " +
                                                          std::to_string(h.total_len)));
    return;
  }
  land(r, rid, h, &in, nullptr, (h.flags & wire::kFlagNoAck) == 0);
}

// Lands one chunk: in place now (memcpy), or through backend.receive() later.
void ContextImpl::land(RecvOp& r, uint64_t rid, const wire::Header& h, Incoming* in, void* desc,
                       bool ack) {
  // A sender sends each byte of a tensor once: chunks adding up to more than
  // the expect (a chunk sent twice) would complete it "ok" with part of the
  // buffer never written. The expect fails instead; the rest of that send is
  // dropped (acked, as after a size mismatch).
  if (h.length > r.len - r.chunk_bytes) {
    if (desc != nullptr) backend_->release(desc);
    if (Peer* p = ack ? findPeer(h.src_peer) : nullptr) {
      p->acks.push_back({h.op_id, h.offset, h.length});
    }
    Peer* from = livePeer(h.src_peer);
    if (from != nullptr && !(h.flags & wire::kFlagLast)) from->rejected.insert(h.op_id);
    failExpect(rid,
               Status(StatusCode::kProtocolError,
                      "tensor " + std::to_string(h.tensor_id) + ": chunks add up to more " +
                          "than its " + std::to_string(r.len) + " bytes (a chunk sent twice)"));
    return;
  }
  r.chunk_bytes += h.length;
  // Data on the usual path: the advert crossed it, or had not left yet
  // (a backend may hold adverts back); withdraw it so that its end follows.
  if (r.advert != 0 && !r.started) unadverts_.push_back(r.advert);
  r.started = true;
  bool last = (h.flags & wire::kFlagLast) != 0;
  if (in != nullptr && (in->data != nullptr || h.length == 0)) {
    if (h.length > 0) std::memcpy(r.dst + h.offset, in->data, h.length);
    r.received += h.length;
    r.seen_last |= last;
    if (Peer* p = ack ? findPeer(h.src_peer) : nullptr) {
      p->acks.push_back({h.op_id, h.offset, h.length});
    }
    tryFinishExpect(rid);
    return;
  }
  r.pending++;
  to_land_.push_back(Landing{rid, h.src_peer, h.op_id, h.length, ack, last, desc, h.offset});
  if (in != nullptr) in->retain_into = &to_land_.back().desc;  // deque: stable slot
}

unsigned ContextImpl::startLandings() {
  unsigned n = 0;
  // Nothing below adds to to_land_ (receive() reports only from progress()).
  for (; !to_land_.empty(); to_land_.pop_front()) {
    Landing& l = to_land_.front();
    RecvOp* rp = recvs_.find(l.recv_op);
    if (rp == nullptr || rp->failed) {
      backend_->release(l.desc);
      if (rp != nullptr) {
        rp->pending--;
        tryFinishExpect(l.recv_op);
      }
      continue;
    }
    RecvOp& r = *rp;
    uint64_t token = next_token_++;
    landings_.insert(token, l);
    Status st = backend_->receive(l.desc, r.dst + l.offset, l.len, r.region, token);
    if (!st) {
      landings_.erase(token);
      r.pending--;
      failExpect(l.recv_op, st);
    }
    ++n;
  }
  return n;
}

void ContextImpl::onReceiveDone(uint64_t token, const Status& status) {
  Landing* lt = landings_.find(token);
  if (lt == nullptr) return;
  Landing l = *lt;
  landings_.erase(token);
  RecvOp* rp = recvs_.find(l.recv_op);
  if (rp == nullptr) return;
  RecvOp& r = *rp;
  r.pending--;
  if (!status) {
    failExpect(l.recv_op, lostOr(l.peer, status));
    return;
  }
  r.received += l.len;
  r.seen_last |= l.last;
  if (Peer* p = l.ack ? livePeer(l.peer) : nullptr) {
    p->acks.push_back({l.send_op, l.offset, l.len});
  }
  tryFinishExpect(l.recv_op);
}

void ContextImpl::advertise(RecvOp& r, uint64_t id) {
  if (r.region == nullptr || r.len == 0) return;
  const uint64_t token = next_token_++;
  if (!backend_->advertise(r.key.peer, r.key.iteration, r.key.tensor, r.dst, r.len, r.region,
                           token)) {
    return;
  }
  r.advert = token;
  r.pending++;
  landings_.insert(token, Landing{id, r.key.peer, 0, r.len, false, true, nullptr, 0});
}

void ContextImpl::onAdvertDone(uint64_t token, size_t bytes, const Status& status) {
  Landing* lt = landings_.find(token);
  if (lt == nullptr) return;
  const Landing l = *lt;
  landings_.erase(token);
  RecvOp* rp = recvs_.find(l.recv_op);
  if (rp == nullptr || rp->advert != token) return;
  RecvOp& r = *rp;
  r.advert = 0;
  r.pending--;
  if (!status) {
    failExpect(l.recv_op, lostOr(l.peer, status));
    return;
  }
  if (r.failed && bytes >= r.len) {  // written whole after the expect was canceled
    handOver(l.recv_op);
    return tryFinishExpect(l.recv_op);
  }
  r.received += std::min(bytes, r.len);
  r.started |= bytes > 0;
  r.seen_last |= bytes >= r.len;
  tryFinishExpect(l.recv_op);
}

void ContextImpl::handOver(uint64_t id) {
  const RecvOp& old = *recvs_.find(id);
  const PeerKey key = old.key;
  const char* src = old.dst;  // the user's buffer: still theirs until old completes
  const size_t len = old.len;
  if (isExpressExpect(key)) promoteExpect();  // may move recvs_'s entries
  const uint64_t* next = expect_index_.find(key);
  RecvOp* n = next != nullptr ? recvs_.find(*next) : nullptr;
  if (n == nullptr || n->started || n->failed || n->len != len) return;
  if (n->advert != 0) unadverts_.push_back(n->advert);  // the peer has sent it already
  std::memcpy(n->dst, src, len);
  n->started = n->seen_last = true;
  n->received = len;
  tryFinishExpect(*next);
}

void ContextImpl::failExpect(uint64_t id, const Status& s) {
  RecvOp* r = recvs_.find(id);
  if (r == nullptr || r->failed) return;
  r->failed = s;
  if (r->advert != 0) unadverts_.push_back(r->advert);  // onAdvertDone still follows
  expect_index_.erase(r->key);
  tryFinishExpect(id);
}

void ContextImpl::tryFinishExpect(uint64_t id) {
  RecvOp* rp = recvs_.find(id);
  if (rp == nullptr) return;
  RecvOp& r = *rp;
  if (r.pending > 0) return;  // the backend still writes into the buffer
  bool done = r.seen_last && r.received >= r.len;
  if (!done && !r.failed) return;
  if (!r.failed) expect_index_.erase(r.key);
  Status st = r.failed ? *r.failed : Status::ok();
  complete(r.handle, r.cb, std::move(st));
  recvs_.erase(id);
}

void ContextImpl::dropStash(const PeerKey& key) {
  auto it = stash_.find(key);
  if (it == stash_.end()) return;
  unstash(key.peer, it->second);
  for (auto& s : it->second) backend_->release(s.desc);
  stash_.erase(it);
}

void ContextImpl::unstash(uint32_t peer, const std::deque<Stashed>& q) {
  Peer* p = findPeer(peer);
  if (p == nullptr) return;
  for (const auto& s : q) {
    assert(p->stashed_bytes >= s.held && p->stashed_chunks > 0);
    p->stashed_bytes -= s.held;
    p->stashed_chunks--;
  }
}

}  // namespace tictac::transport
