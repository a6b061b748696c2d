// Expect posting (matching stashed chunks) and the control messages (acks,
// nacks, aborts) flushed once per progress() call (progress context).
#include "transport/core/context_impl.h"

namespace tictac::transport {

void ContextImpl::startExpect(Submission& s) {
  PeerKey key{s.peer, s.key.iteration, s.key.id};
  auto fail = [&](Status st) {
    ready_.push_back(Ready{std::move(handleOf(s)), std::move(s.cb), std::move(st)});
  };
  if (livePeer(s.peer) == nullptr) {
    return fail(Status(StatusCode::kPeerLost, "expect: channel to peer is closed"));
  }
  if (isExpressExpect(key) || expect_index_.find(key) != nullptr) {
    return fail(Status(StatusCode::kInvalidArgument,
                       "expect: tensor " + std::to_string(s.key.id) + " iteration " +
                           std::to_string(s.key.iteration) + " is already expected"));
  }
  // A payload the backend copies lands without a registration (copiedPayloadMax).
  Result<const MemoryRegion*> reg = static_cast<const MemoryRegion*>(nullptr);
  if (s.len > copied_max_) reg = cache_->lookup(s.buf, s.len);
  if (!reg) return fail(reg.status());
  auto st = stash_.empty() ? stash_.end() : stash_.find(key);
  // The express slot is for a tensor that can land whole: at most a chunk.
  const bool express = xexpect_id_ == 0 && st == stash_.end() && s.len <= opts_.chunk_bytes;
  RecvOp& added = express ? (xexpect_ = RecvOp{}) : recvs_.insert(s.id, RecvOp{});
  added.handle = std::move(handleOf(s));
  added.cb = std::move(s.cb);
  added.key = key;
  added.dst = s.buf;
  added.len = s.len;
  added.region = reg.value();
  if (&added == &xexpect_) {  // nothing of it arrived yet: the express expect (express.cc)
    xexpect_id_ = s.id;
    return;
  }
  expect_index_.insert(key, s.id);
  if (st == stash_.end()) return advertise(added, s.id);
  std::deque<Stashed> q = std::move(st->second);
  stash_.erase(st);
  unstash(s.peer, q);
  const wire::Header& first = q.front().h;
  if (first.total_len != s.len) {
    bool last_seen = false;
    for (auto& c : q) {
      last_seen |= (c.h.flags & wire::kFlagLast) != 0;
      releaseLater(c.desc);  // after the nack (see release_after_ctrl_)
    }
    queueCtrl(s.peer, wire::MsgType::kNack, first, StatusCode::kSizeMismatch);
    if (!last_seen) findPeer(s.peer)->rejected.insert(first.op_id);
    failExpect(s.id,
               Status(StatusCode::kSizeMismatch,
                      "tensor " + std::to_string(s.key.id) + ": expected " + std::to_string(s.len) +
                          " bytes, sender has " + std::to_string(first.total_len)));
    return;
  }
  for (auto& c : q) land(added, s.id, c.h, nullptr, c.desc, false);
}

void ContextImpl::queueCtrl(uint32_t peer, wire::MsgType type, const wire::Header& about,
                            StatusCode code, uint32_t priority) {
  Peer* p = livePeer(peer);
  if (p == nullptr) return;
  wire::Header h;
  h.type = static_cast<uint8_t>(type);
  h.src_peer = p->my_id_there;
  h.tensor_id = about.tensor_id;
  h.iteration = about.iteration;
  h.op_id = about.op_id;
  h.status = static_cast<int32_t>(code);
  p->ctrl.emplace_back(h, priority);
}

unsigned ContextImpl::flushControl() {
  unsigned n = 0;
  for (uint64_t token : unadverts_) backend_->unadvertise(token);
  n += static_cast<unsigned>(unadverts_.size());
  unadverts_.clear();
  for (auto& [id, peer] : peers_) {
    if (!peer.alive || (peer.acks.empty() && peer.ctrl.empty())) continue;
    for (auto& [h, prio] : peer.ctrl) {
      uint64_t token = next_token_++;
      Post& pt = posts_.insert(token, Post{h, 0, id, {}});
      if (!backend_->post(id, wire::asBytes(pt.h), nullptr, 0, nullptr, token, prio)) {
        posts_.erase(token);
      }
      ++n;
    }
    peer.ctrl.clear();
    for (size_t i = 0; i < peer.acks.size(); i += wire::kMaxAckEntries) {
      size_t cnt = std::min(wire::kMaxAckEntries, peer.acks.size() - i);
      Post post;
      post.h.type = static_cast<uint8_t>(wire::MsgType::kAck);
      post.h.src_peer = peer.my_id_there;
      post.h.length = static_cast<uint32_t>(cnt * sizeof(wire::AckEntry));
      post.peer = id;
      post.acks.assign(peer.acks.begin() + static_cast<long>(i),
                       peer.acks.begin() + static_cast<long>(i + cnt));
      uint64_t token = next_token_++;
      Post& pt = posts_.insert(token, std::move(post));
      Status st =
          backend_->post(id, wire::asBytes(pt.h), pt.acks.data(), pt.h.length, nullptr, token, 0);
      if (!st) posts_.erase(token);
      ++n;
    }
    peer.acks.clear();
  }
  // After the nacks above: releasing may complete the sender's post.
  for (; !release_after_ctrl_.empty(); release_after_ctrl_.pop_front()) {
    if (release_after_ctrl_.front() != nullptr) backend_->release(release_after_ctrl_.front());
  }
  return n;
}

void ContextImpl::releaseLater(void* desc) {
  if (desc != nullptr) release_after_ctrl_.push_back(desc);
}

bool ContextImpl::controlPending(uint32_t peer) {
  for (auto& [id, p] : peers_) {
    if ((peer == 0 || id == peer) && p.alive && (!p.acks.empty() || !p.ctrl.empty())) return true;
  }
  bool pending = false;
  posts_.forEach([&](uint64_t, const Post& post) {
    if (post.op != 0 || (peer != 0 && post.peer != peer)) return;
    auto pit = peers_.find(post.peer);
    pending |= pit != peers_.end() && pit->second.alive;
  });
  return pending;
}

void ContextImpl::flushBeforeClose(uint32_t peer) {
  auto deadline = std::chrono::steady_clock::now() + kCloseFlushTimeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(core_mu_);
      flushControl();
      backend_->progress();
      flushControl();  // acks for data that landed during this progress
      if (!controlPending(peer)) return;
    }
    if (std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::yield();
  }
}

}  // namespace tictac::transport
