// The context's peers: the bootstrap handshake that admits one (setupPeer),
// lost peers (onPeerError from the backend, the monitor's notices; failed in
// the progress context by handleLostPeers), lookups, and close.
#include <unistd.h>

#include "transport/core/bootstrap.h"
#include "transport/core/context_impl.h"

namespace tictac::transport {

Result<uint32_t> ContextImpl::setupPeer(int fd, bool initiator, const std::string& name) {
  uint32_t id;
  bootstrap::Hello mine;
  {
    std::lock_guard<std::mutex> lock(core_mu_);
    id = next_peer_++;
    mine.job_token = opts_.job_token;
    mine.assigned_id = id;
    mine.backend = backend_->name();
    mine.address = backend_->localAddress();
  }
  auto deadline = std::chrono::steady_clock::now() + opts_.connect_timeout;
  // The peer is added before the handshake's last step (kReady both ways): a
  // message the peer sends once its own setup returned would otherwise be
  // dropped here as coming from an unknown peer, if it beat this thread to
  // core_mu_ (the data path does not go through this bootstrap link).
  bool added = false;
  auto admit = [&](const bootstrap::Hello& h) {
    std::lock_guard<std::mutex> lock(core_mu_);
    if (Status s = backend_->addPeer(id, h.address); !s) return s;
    Peer& p = peers_[id];
    if (peer_index_.size() <= id) peer_index_.resize(size_t{id} + 1, nullptr);
    peer_index_[id] = &p;
    p.name = name;
    p.my_id_there = h.assigned_id;
    added = true;
    return Status::ok();
  };
  auto theirs = bootstrap::handshake(fd, initiator, mine, deadline, admit);
  if (!theirs) {
    ::close(fd);
    std::lock_guard<std::mutex> lock(core_mu_);
    if (added) {
      failPeer(id, theirs.status());  // the peer never confirmed: undo the addition
    } else {
      backend_->discardAddress(mine.address);  // e.g. a stranger's connection: no QP kept
    }
    return theirs.status();
  }
  monitor_->add(id, fd);
  // Failed between its admission and now (a protocol error on the data
  // path): its link came after failPeer's removal; close it now.
  if (!peerAlive(id)) {
    monitor_->remove(id);
    return Status(StatusCode::kPeerLost, "peer " + name + " failed during its setup");
  }
  return id;
}

void ContextImpl::handleLostPeers() {
  {
    std::lock_guard<std::mutex> lock(sub_mu_);
    dying_.swap(lost_);  // both empty between passes
  }
  if (dying_.empty()) return;
  // A peer that closed gracefully flushed its acks before its kBye: take in
  // what already arrived on the data path before failing what is left. An
  // operation the backend fails meanwhile takes the peer-lost status (lostOr).
  for (int i = 0; i < 16 && backend_->progress() > 0; ++i) {
  }
  for (auto& [peer, why] : dying_) failPeer(peer, why);
  dying_.clear();
}

void ContextImpl::onPeerError(PeerId peer, const Status& status) {
  std::lock_guard<std::mutex> lock(sub_mu_);
  lost_.emplace_back(peer, Status(StatusCode::kPeerLost, status.message()));
  sub_pending_ = true;
}

Status ContextImpl::lostOr(uint32_t peer, const Status& s) {
  for (const auto& [who, why] : dying_) {
    if (who == peer) return why;
  }
  std::lock_guard<std::mutex> lock(sub_mu_);
  for (const auto& [who, why] : lost_) {
    if (who == peer) return why;
  }
  return s;
}

bool ContextImpl::peerAlive(uint32_t peer) {
  std::lock_guard<std::mutex> lock(core_mu_);
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second.alive;
}

std::string ContextImpl::peerName(uint32_t peer) {
  std::lock_guard<std::mutex> lock(core_mu_);
  auto it = peers_.find(peer);
  return it == peers_.end() ? std::string() : it->second.name;
}

void ContextImpl::closePeer(uint32_t peer) {
  flushBeforeClose(peer);
  monitor_->remove(peer);
  std::lock_guard<std::mutex> lock(core_mu_);
  drainSubmissions();
  failPeer(peer, Status(StatusCode::kCanceled, "channel closed"));
  wakeSleepers();  // the failed ops' completions wait for a pass
}

}  // namespace tictac::transport
