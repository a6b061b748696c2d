// Verbs backend: completions, incoming messages, wake-up (progress context).
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

char* VerbsBackend::recvBuf(Conn& c, uint32_t index) const {
  return c.rbuf.data() + size_t{index} * tune_.recv_bytes;
}

char* VerbsBackend::recvHead(Conn& c, uint32_t index) const {
  return recvBuf(c, tune_.rq_depth) + size_t{index} * kRecvHead;  // the heads follow the buffers
}

int VerbsBackend::recvSges(Conn& c, uint32_t index, ibv_sge* sge) const {
  char* buf = recvBuf(c, index);
  if (!c.split_recv) {
    sge[0] = ibv_sge{reinterpret_cast<uintptr_t>(buf), tune_.recv_bytes, c.rmr->lkey};
    return 1;
  }
  sge[0] = ibv_sge{reinterpret_cast<uintptr_t>(recvHead(c, index)), kRecvHead, c.rmr->lkey};
  sge[1] = ibv_sge{reinterpret_cast<uintptr_t>(buf + kRecvHead), tune_.recv_bytes - kRecvHead,
                   c.rmr->lkey};
  return 2;
}

const char* VerbsBackend::recvView(Conn& c, uint32_t index, size_t len) const {
  char* buf = recvBuf(c, index);
  if (!c.split_recv) return buf;
  if (len <= kRecvHead) return recvHead(c, index);
  std::memcpy(buf, recvHead(c, index), kRecvHead);  // the rest follows it in place
  return buf;
}

void VerbsBackend::repost(Conn& c, uint32_t index) {
  ibv_sge sge[2];
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvBit | index;
  wr.sg_list = sge;
  wr.num_sge = recvSges(c, index, sge);
  if (ibv_post_recv(c.qp, &wr, &bad) == 0) c.rq_posted++;
}

unsigned VerbsBackend::drainChannel() {
  unsigned n = 0;
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(dev_->channel, &cq, &ctx) == 0) {
    ++n;
    if (++unacked_events_ >= 64) {
      ibv_ack_cq_events(dev_->cq, unacked_events_);
      unacked_events_ = 0;
    }
  }
  return n;
}

unsigned VerbsBackend::progress() {
  unsigned n = 0;
  if (stats_.on) stats_.onProgressEnter(Stats::nowNs());
  if (records_deferred_ || adverts_check_)
    flushAllRecords();  // the handshakes since the last call, one SEND a peer
  // Sleep or yield only when nothing is in flight: a posted work request or
  // a rendezvous (kRts awaiting its kCts, kCts awaiting the WRITE) completes
  // soon, and a caller polling for it must not pay a wake-up (nor a syscall).
  // Nor before idle_spin_us of idleness (not only idle_spins calls): a wake-up
  // from the channel costs far more than a round trip in the soft-RoCE guest,
  // and how long idle_spins calls last depends on the caller's own work. The
  // clock is read once the calls are spun and then every 16th call.
  if (idle_ >= tune_.idle_spins) {
    if (idle_ == tune_.idle_spins) {
      idle_since_ns_ = Stats::nowNs();
      idle_ns_ = 0;
    } else if ((idle_ & 15) == 0) {
      idle_ns_ = Stats::nowNs() - idle_since_ns_;
    }
  }
  // An advert outstanding naps too (its WRITEs may be under way), but it
  // does not keep the caller from sleeping below: it can wait for a tensor
  // the peer sends much later.
  if (tune_.rndv_nap_us > 0 && idle_ >= Tuning::kNapAfter &&
      (!rrecvs_.empty() || !adverts_out_.empty()) && !sendsInFlight()) {
    timespec nap{0, long{tune_.rndv_nap_us} * 1000};  // <= 0.1 s (init checks): rndv_nap_us
    ::nanosleep(&nap, nullptr);
  }
  // A rendezvous receive alone may let it sleep (rndv_spin_us, see Tuning).
  const bool rndv_only = !rrecvs_.empty() && tune_.rndv_spin_us != Tuning::kNever;
  const uint64_t spin_ns =
      uint64_t{rndv_only ? std::min(tune_.idle_spin_us, tune_.rndv_spin_us) : tune_.idle_spin_us} *
      1000;
  bool idle = idle_ >= tune_.idle_spins && idle_ns_ >= spin_ns &&
              (rndv_only ? !sendsInFlight() : !inFlight());
  if (idle && idle_ns_ < spin_ns + uint64_t{tune_.idle_yield_us} * 1000) {
    // Keep the CPU but let the kernel run: rxe's deferred work (tasklets,
    // ksoftirqd) and a peer on the same CPU get it now, not at the next tick.
    ::sched_yield();
  } else if (idle && tune_.idle_block_us > 0) {
    for (auto& [qpn, c] : conns_) {  // every buffer posted before a sleep
      if (!c->to_repost.empty() && !c->dead) repostBatch(*c);
    }
    idle_ = 0;
    idle_ns_ = 0;
    if (arm()) {  // nothing pending: sleep on the CQ channel instead of spinning
      pollfd p{dev_->channel->fd, POLLIN, 0};
      timespec ts{tune_.idle_block_us / 1000000, (tune_.idle_block_us % 1000000) * 1000L};
      uint64_t t0 = stats_.on ? Stats::nowNs() : 0;
      int rc = ::ppoll(&p, 1, &ts, nullptr);
      if (stats_.on) stats_.onSleep(Stats::nowNs() - t0, rc == 0);
    }
  }
  if (armed_) {
    drainChannel();
    armed_ = false;
  }
  if (!polled_.empty()) {
    std::vector<ibv_wc> early;
    early.swap(polled_);
    for (auto& wc : early) onCompletion(wc);
    n += static_cast<unsigned>(early.size());
  }
  ibv_wc wcs[32];
  for (int round = 0; round < 8; ++round) {
    int got = ibv_poll_cq(dev_->cq, 32, wcs);
    for (int i = 0; i < got; ++i) onCompletion(wcs[i]);
    if (got > 0) n += static_cast<unsigned>(got);
    if (got < 32) break;
  }
  if (backlogged_) {  // flush() sets it again for a Conn that keeps a backlog
    backlogged_ = false;
    for (auto& [qpn, c] : conns_) {
      if (!c->backlog.empty() || !c->wbacklog.empty()) flush(*c);
    }
  }
  for (auto& [peer, st] : pending_peer_errors_) events_->onPeerError(peer, st);
  n += static_cast<unsigned>(pending_peer_errors_.size());
  pending_peer_errors_.clear();
  if (!sends_done_.empty() || !recvs_done_.empty()) {
    n += deliverDeferred(sends_done_, recvs_done_, events_);
  }
  if (!adverts_done_.empty()) {
    for (auto& d : adverts_done_) events_->onAdvertDone(d.token, d.bytes, d.status);
    n += static_cast<unsigned>(adverts_done_.size());
    adverts_done_.clear();
  }
  if (reap_) {
    reap_ = false;
    for (auto it = conns_.begin(); it != conns_.end();) {  // flushed dead QPs go away
      Conn& c = *it->second;
      if (c.dead && c.sq_used == 0 && c.rq_posted == 0) {
        destroyConn(c);
        it = conns_.erase(it);
      } else {
        reap_ |= c.dead;
        ++it;
      }
    }
  }
  if (n != 0) {
    idle_ = 0;
    idle_ns_ = 0;
  } else {
    idle_++;
  }
  if (stats_.on) stats_.last_return_ns = Stats::nowNs();
  return n;
}

void VerbsBackend::onCompletion(const ibv_wc& wc) {
  if ((wc.wr_id & kRecvBit) == 0) return onSendCompletion(wc);
  Conn* c = connByQpn(wc.qp_num);
  if (c == nullptr) return;
  c->rq_posted--;
  if (stats_.on) ++stats_.recv_cqes;
  if (wc.status != IBV_WC_SUCCESS) {
    if (!c->dead && !c->reported) {
      c->reported = true;
      events_->onPeerError(
          c->peer, Status(StatusCode::kIoError,
                          std::string("verbs: receive failed: ") + ibv_wc_status_str(wc.status)));
    }
    return;
  }
  if (!c->dead) onRecv(*c, wc);
  if (c->dead) return;
  c->to_repost.push_back(static_cast<uint32_t>(wc.wr_id & 0xffffffffu));
  uint32_t batch = std::max<uint32_t>(1, std::min(tune_.repost_batch, tune_.rq_depth / 4));
  if (c->to_repost.size() >= batch) repostBatch(*c);
}

void VerbsBackend::onSendCompletion(const ibv_wc& wc) {
  if (wc.wr_id >= works_.size() || !works_[wc.wr_id].live) return;
  // A reference, not a copy (a Work holds a 128-byte header): nothing below
  // allocates a work, and the slot is freed once w is no longer read.
  Work& w = works_[wc.wr_id];
  sq_total_--;
  if (stats_.on) {
    uint64_t now = Stats::nowNs();
    stats_.onSendCqe(w.posted_ns, now);
    if (w.kind == Work::kWrite) stats_.onWriteDone(now, !rsends_.empty());
  }
  Conn* c = connByQpn(w.qpn);
  if (c != nullptr) {
    c->sq_used--;
    if (w.kind == Work::kWrite) c->wbytes -= std::min(c->wbytes, w.len);
    if (w.slot >= 0) c->free_slots.push_back(static_cast<uint32_t>(w.slot));
  }
  if (wc.status == IBV_WC_SUCCESS) {
    if (w.kind == Work::kInval) windowClosed(w, true);
    if (w.report) sends_done_.emplace_back(w.token, Status::ok());
    if (w.own_mr != nullptr) ibv_dereg_mr(w.own_mr);
    freeWork(wc.wr_id);
    return;
  }
  static constexpr const char* kWhat[] = {"send", "RDMA write", "memory window bind",
                                          "memory window invalidation"};
  Status st(StatusCode::kPeerLost,
            std::string("verbs: ") + kWhat[w.kind] + " failed: " + ibv_wc_status_str(wc.status));
  failSendWork(w, st);
  freeWork(wc.wr_id);
  if (c != nullptr && !c->dead) {
    if (!c->reported) {
      c->reported = true;
      events_->onPeerError(c->peer, st);
    }
    killConn(*c, st);
  }
}

int VerbsBackend::eventFd() {
  return dev_->channel->fd;
}

bool VerbsBackend::arm() {
  // Deferred kRts/kCts leave now; the notification requested below covers their
  // completions (a false return would let the core's worker sleep blind).
  flushAllRecords();
  if (!sends_done_.empty() || !recvs_done_.empty() || !polled_.empty() ||
      !pending_peer_errors_.empty() || !adverts_done_.empty()) {
    return false;
  }
  if (armed_) drainChannel();  // an event of the previous arm (else: no syscall)
  if (ibv_req_notify_cq(dev_->cq, 0) != 0) return false;
  armed_ = true;
  ibv_wc wcs[16];
  int got = ibv_poll_cq(dev_->cq, 16, wcs);
  if (got > 0) {
    polled_.assign(wcs, wcs + got);
    return false;
  }
  return true;
}

}  // namespace tictac::transport::verbs
