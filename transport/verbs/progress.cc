// Verbs backend: completions, incoming messages, wake-up (progress context).
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

void VerbsBackend::repost(Conn& c, uint32_t index) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(c.rbuf.data() + size_t{index} * tune_.recv_bytes);
  sge.length = tune_.recv_bytes;
  sge.lkey = c.rmr->lkey;
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvBit | index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
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
  const uint64_t spin_ns = uint64_t{tune_.idle_spin_us} * 1000;
  bool idle = idle_ >= tune_.idle_spins && idle_ns_ >= spin_ns && !inFlight();
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
  Work w = works_[wc.wr_id];
  freeWork(wc.wr_id);
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
    if (w.report) sends_done_.emplace_back(w.token, Status::ok());
    if (w.own_mr != nullptr) ibv_dereg_mr(w.own_mr);
    return;
  }
  Status st(StatusCode::kPeerLost, std::string("verbs: ") +
                                       (w.kind == Work::kWrite ? "RDMA write" : "send") +
                                       " failed: " + ibv_wc_status_str(wc.status));
  failSendWork(w, st);
  if (c != nullptr && !c->dead) {
    if (!c->reported) {
      c->reported = true;
      events_->onPeerError(c->peer, st);
    }
    killConn(*c, st);
  }
}

void VerbsBackend::onRecv(Conn& c, const ibv_wc& wc) {
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    finishRecv(ntohl(wc.imm_data), Status::ok());
    return;
  }
  const char* buf = c.rbuf.data() + (wc.wr_id & 0xffffffffu) * size_t{tune_.recv_bytes};
  MsgHdr mh;
  bool ok = wc.byte_len >= sizeof(MsgHdr);
  if (ok) {
    std::memcpy(&mh, buf, sizeof(mh));
    size_t need = sizeof(MsgHdr) + mh.hdr_len;
    if (mh.kind == static_cast<uint8_t>(MsgKind::kEager)) need += mh.len;
    ok = mh.hdr_len <= kMaxCoreHeader && mh.len <= (uint64_t{1} << 48) && wc.byte_len >= need;
  }
  if (!ok) {
    if (!c.reported) {
      c.reported = true;
      events_->onPeerError(
          c.peer, Status(StatusCode::kProtocolError,
                         "verbs: malformed message of " + std::to_string(wc.byte_len) + " bytes"));
    }
    return;
  }
  std::span<const std::byte> header(reinterpret_cast<const std::byte*>(buf + sizeof(MsgHdr)),
                                    mh.hdr_len);
  switch (static_cast<MsgKind>(mh.kind)) {
    case MsgKind::kEager: {
      if (stats_.on && stats_.recv_polled_ns == 0) stats_.recv_polled_ns = Stats::nowNs();
      Incoming in;
      in.length = mh.len;
      in.data = buf + sizeof(MsgHdr) + mh.hdr_len;
      events_->onMessage(c.peer, header, in);
      if (in.retain_into != nullptr) {
        auto* r = new Retained();
        auto* p = static_cast<const char*>(in.data);
        r->copy.assign(p, p + mh.len);
        *in.retain_into = r;
      }
      return;
    }
    case MsgKind::kRts: {
      Incoming in;
      in.length = mh.len;
      events_->onMessage(c.peer, header, in);
      auto* r = new Retained();
      r->rndv = true;
      r->qpn = c.qpn;
      r->send_id = mh.send_id;
      r->len = mh.len;
      if (stats_.on) r->arrived_ns = Stats::nowNs();
      if (in.retain_into != nullptr) {
        *in.retain_into = r;
      } else {
        release(r);  // not wanted: the sender's post completes
      }
      return;
    }
    case MsgKind::kCts: {
      auto it = rsends_.find(mh.send_id);
      if (it == rsends_.end() || it->second.qpn != c.qpn) return;  // failed meanwhile
      if ((mh.flags & kFlagDrop) != 0) {
        finishRndvSend(mh.send_id, Status::ok());
        return;
      }
      RndvSend s = it->second;
      if (mh.len != s.len) {
        finishRndvSend(mh.send_id,
                       Status(StatusCode::kProtocolError,
                              "verbs: peer offered " + std::to_string(mh.len) + " bytes for a " +
                                  std::to_string(s.len) + "-byte payload"));
        return;
      }
      if (stats_.on) stats_.onCts(it->second.rts_ns, Stats::nowNs());
      rsends_.erase(it);
      queueWrite(
          c, RndvSendArgs{s.token, s.data, s.len, s.lkey, s.own_mr, mh.addr, mh.rkey, mh.recv_id});
      return;
    }
  }
  if (!c.reported) {
    c.reported = true;
    events_->onPeerError(c.peer, Status(StatusCode::kProtocolError,
                                        "verbs: unknown message kind " + std::to_string(mh.kind)));
  }
}

int VerbsBackend::eventFd() {
  return dev_->channel->fd;
}

bool VerbsBackend::arm() {
  if (!sends_done_.empty() || !recvs_done_.empty() || !polled_.empty() ||
      !pending_peer_errors_.empty()) {
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
