// Verbs backend: posting messages and rendezvous writes, the per-QP backlog
// (caller's thread, under the core's lock). The receiving side: receive.cc.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

Status peerGone(PeerId peer) {
  return {StatusCode::kPeerLost, "verbs: no live connection to peer " + std::to_string(peer)};
}

Work VerbsBackend::makeMsg(Conn& c, const MsgHdr& mh, std::span<const std::byte> header,
                           const void* data) {
  Work w;
  w.kind = Work::kMsg;
  w.qpn = c.qpn;
  w.mh = mh;
  w.mh.hdr_len = static_cast<uint16_t>(header.size());
  if (!header.empty()) std::memcpy(w.hdr, header.data(), header.size());
  w.data = static_cast<const char*>(data);
  w.len = mh.kind == static_cast<uint8_t>(MsgKind::kEager) ? mh.len : 0;
  return w;
}

Status VerbsBackend::post(PeerId peer, std::span<const std::byte> header, const void* data,
                          size_t len, const MemoryRegion* region, uint64_t token,
                          uint32_t priority) {
  Conn* c = connOf(peer, classOf(priority));
  if (c == nullptr) return peerGone(peer);
  if (header.size() > kMaxCoreHeader) {
    return {StatusCode::kInvalidArgument, "verbs: header of " + std::to_string(header.size()) +
                                              " bytes exceeds " + std::to_string(kMaxCoreHeader)};
  }
  // The receiver offered this tensor's buffer, or withdrew it mid-tensor (advert.cc).
  if (!c->adverts_in.empty() || !c->adverts_cut.empty()) {
    Status st = Status::ok();
    if (postToAdvert(*c, header, data, len, region, token, &st)) return st;
  }
  MsgHdr mh;
  mh.len = len;
  if (sizeof(EagerHdr) + header.size() + len <= c->send_bytes) {
    mh.kind = static_cast<uint8_t>(MsgKind::kEager);
    if (!c->records.empty()) flushRecords(*c);  // messages to a peer keep their order
    if (postInlineNow(*c, mh, header, data, token)) return Status::ok();
    Work w = makeMsg(*c, mh, header, data);
    w.token = token;
    w.report = true;
    // A payload in registered memory is sent from there (postWork).
    if (region != nullptr && len >= kZeroCopyEager && c->two_sge) {
      w.lkey = mrOf(region)->lkey;
      w.zero_copy = true;
    }
    queueWork(*c, std::move(w));
    return Status::ok();
  }
  ibv_mr* own = nullptr;
  uint32_t lkey = 0;
  if (region != nullptr) {
    lkey = mrOf(region)->lkey;
  } else {
    auto m = regTemp(data, len);
    if (!m) return m.status();
    own = m.value();
    lkey = own->lkey;
  }
  uint64_t sid = next_send_id_++;
  rsends_[sid] = RndvSend{token, c->qpn, static_cast<const char*>(data), len,
                          lkey,  own,    stats_.on ? Stats::nowNs() : 0};
  if (stats_.on) {
    ++stats_.rts;
    stats_.rts_pending_sum += rsends_.size();
    stats_.rts_pending_max = std::max<uint64_t>(stats_.rts_pending_max, rsends_.size());
  }
  mh.kind = static_cast<uint8_t>(MsgKind::kRts);
  mh.send_id = sid;
  Work w = makeMsg(*c, mh, header, nullptr);
  w.fail_send = sid;
  deferRecord(*c, std::move(w));
  return Status::ok();
}

// A kCts arrived for one of our transfers: write it, in pieces of at most the
// port's max message size, the last one WITH IMMEDIATE (and reported).
void VerbsBackend::queueWrite(Conn& c, RndvSendArgs a) {
  const size_t piece = std::max<size_t>(
      4096, std::min<size_t>({dev_->port_attr.max_msg_sz, 1u << 30, tune_.write_piece}));
  for (size_t off = 0; off < a.len; off += piece) {
    Work w;
    w.kind = Work::kWrite;
    w.qpn = c.qpn;
    w.data = a.data + off;
    w.len = std::min(piece, a.len - off);
    w.lkey = a.lkey;
    w.raddr = a.raddr + off;
    w.rkey = a.rkey;
    if (off + w.len == a.len) {
      w.with_imm = a.with_imm;
      w.imm = a.imm;
      w.token = a.token;
      w.report = true;
      w.own_mr = a.own_mr;
    }
    queueWork(c, std::move(w));
  }
}

uint64_t VerbsBackend::queueWork(Conn& c, Work w) {
  uint64_t id = allocWork();
  w.live = true;
  works_[id] = w;
  auto& q = w.kind == Work::kWrite || w.after_writes ? c.wbacklog : c.backlog;
  q.push_back(id);
  flush(c);
  // A peer that takes nothing (no receives posted: RNR retries forever) while
  // its own messages keep making ours (acks, kCts) would grow this queue
  // without end; one that stays above kMaxQueuedWorks for 30 s is failed.
  if (c.backlog.size() + c.wbacklog.size() <= kMaxQueuedWorks) {
    c.over_since_ns = 0;
  } else if (c.over_since_ns == 0) {
    c.over_since_ns = Stats::nowNs();
  } else if (Stats::nowNs() - c.over_since_ns > kStallNs) {
    peerBroke(c, Status(StatusCode::kProtocolError,
                        "verbs: peer took too few of our messages: over " +
                            std::to_string(kMaxQueuedWorks) + " stayed queued to it for " +
                            std::to_string(kStallNs / 1'000'000'000) + " s"));
  }
  return id;
}

void VerbsBackend::freeWork(uint64_t id) {
  works_[id].live = false;
  free_works_.push_back(static_cast<uint32_t>(id));
}

bool VerbsBackend::inFlight() const {
  return sendsInFlight() || !rrecvs_.empty();
}

bool VerbsBackend::sendsInFlight() const {
  return sq_total_ > 0 || !rsends_.empty() || records_deferred_;
}

void VerbsBackend::flush(Conn& c) {
  // SENDs first (they are small and a peer waits for them), then WRITEs while
  // fewer than write_queue bytes of them are in the send queue.
  for (auto* q : {&c.backlog, &c.wbacklog}) {
    const bool writes = q == &c.wbacklog;
    while (!c.dead && c.connected && !q->empty() && c.sq_used < tune_.sq_depth) {
      uint64_t id = q->front();
      if (id >= works_.size() || !works_[id].live) {
        q->pop_front();
        continue;
      }
      if (writes && c.wbytes > 0 && c.wbytes + works_[id].len > tune_.write_queue) break;
      int rc = postWork(c, works_[id], id);
      if (rc == ENOMEM) break;  // the provider's queue (or the bounce slots) is full
      if (rc != 0) {            // unusable QP: fail this work and the connection
        Status st(StatusCode::kIoError, std::string("verbs: ibv_post_send: ") + std::strerror(rc));
        peerBroke(c, st);
        killConn(c, st);  // fails the backlogs, this work included
        return;
      }
      q->pop_front();
    }
  }
  if (!c.backlog.empty() || !c.wbacklog.empty()) backlogged_ = true;
  if (stats_.on && !c.backlog.empty()) ++stats_.backlog_waits;
}

int VerbsBackend::postWork(Conn& c, Work& w, uint64_t id) {
  if (w.kind == Work::kBind || w.kind == Work::kInval) return postWindowWork(c, w, id);
  int slot = -1;
  int rc = 0;
  bool inline_ok = false;
  uint64_t write_start_ns = 0;
  const bool eager = w.kind == Work::kMsg && w.mh.kind == static_cast<uint8_t>(MsgKind::kEager);
  const CompactPlan cp = eager ? compactPlan(c.tx_base, w.hdr, w.mh.hdr_len) : CompactPlan{};
  const bool compact = cp.compact;
  if (w.kind == Work::kMsg) {
    // An inline SEND is copied into the WQE by ibv_post_send: built on the
    // stack, it needs no bounce slot (and none is held until its completion).
    alignas(8) char inl[kInlineBuf];
    size_t total = compact ? w.len : msgHdrBytes(w.mh.kind) + w.mh.hdr_len + w.len;
    inline_ok = total <= max_inline_ && total <= sizeof(inl);
    // A compact payload in registered memory is sent from there: no slot.
    const bool direct = compact && w.zero_copy && !inline_ok;
    if (!inline_ok && !direct && c.free_slots.empty()) return ENOMEM;
    if (!inline_ok && !direct) slot = static_cast<int>(c.free_slots.back());
    char* p = inline_ok   ? inl
              : slot >= 0 ? c.sbuf.data() + size_t(slot) * tune_.recv_bytes
                          : nullptr;
    if (compact) {
      if (!direct && w.len > 0) std::memcpy(p, w.data, w.len);
      rc = postCompact(c, id, direct ? w.data : p, w.len, direct ? w.lkey : c.smr->lkey, inline_ok,
                       cp.imm);
      if (rc == 0 && stats_.on) stats_.zero_copy_sends += direct;
    } else if (!inline_ok && w.zero_copy) {
      // Zero copy: the headers from the bounce slot, the payload from the
      // caller's registered buffer (held until this SEND completes).
      size_t head = packMsg(p, w.mh, w.hdr, w.mh.hdr_len, nullptr, 0);
      ibv_sge sge[2] = {
          {reinterpret_cast<uintptr_t>(p), static_cast<uint32_t>(head), c.smr->lkey},
          {reinterpret_cast<uintptr_t>(w.data), static_cast<uint32_t>(w.len), w.lkey}};
      ibv_send_wr wr = signaledWr(id, sge, IBV_WR_SEND, 0);
      wr.num_sge = 2;
      ibv_send_wr* bad = nullptr;
      rc = ibv_post_send(c.qp, &wr, &bad);
      if (rc == 0) ++c.posted;
      if (rc == 0 && stats_.on) ++stats_.zero_copy_sends;
    } else {
      packMsg(p, w.mh, w.hdr, w.mh.hdr_len, w.data, w.len);
      rc = postSend(c, id, p, total, inline_ok);
    }
  } else {
    ibv_sge sge{reinterpret_cast<uintptr_t>(w.data), static_cast<uint32_t>(w.len), w.lkey};
    ibv_send_wr wr =
        signaledWr(id, &sge, w.with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, 0);
    ibv_send_wr* bad = nullptr;
    // A bubble ends when the WRITE is handed to the device: on rxe the whole
    // WRITE runs inside this call (a 64 KiB one took 0.9-1.6 ms in the guest).
    write_start_ns = stats_.on ? Stats::nowNs() : 0;
    wr.imm_data = htonl(w.imm);
    wr.wr.rdma.remote_addr = w.raddr;
    wr.wr.rdma.rkey = w.rkey;
    rc = ibv_post_send(c.qp, &wr, &bad);
    if (rc == 0) ++c.posted;
  }
  if (rc != 0) return rc;
  if (w.kind == Work::kMsg) noteTx(c, w.mh.kind, w.hdr, w.mh.hdr_len);
  if (cp.eligible) compactUpdate(c.tx_base, cp.h);
  if (stats_.on) {
    w.posted_ns = Stats::nowNs();
    if (w.kind == Work::kWrite) {
      stats_.onWritePosted(write_start_ns);
      ++stats_.wq_posts;
      stats_.wq_sum += c.wbacklog.size() - 1;
    }
    stats_.onCtsOut(w.rts_ns, w.posted_ns);
    if (inline_ok) ++stats_.inline_sends;
    if (w.kind == Work::kMsg) stats_.onMsgPosted(w.posted_ns);
  }
  if (slot >= 0) c.free_slots.pop_back();
  w.slot = slot;
  if (w.kind == Work::kWrite) c.wbytes += w.len;
  c.sq_used++;
  sq_total_++;
  return 0;
}

void VerbsBackend::failSendWork(Work& w, const Status& st) {
  if (w.kind == Work::kInval) windowClosed(w, false);
  if (w.report) sends_done_.emplace_back(w.token, st);
  if (w.fail_send != 0) finishRndvSend(w.fail_send, st);
  if (w.fail_recv != 0) finishRecv(w.fail_recv, st);
  if (w.own_mr != nullptr) ibv_dereg_mr(w.own_mr);
  w.own_mr = nullptr;
  w.report = false;
}

void VerbsBackend::finishRndvSend(uint64_t send_id, const Status& st) {
  auto it = rsends_.find(send_id);
  if (it == rsends_.end()) return;
  if (it->second.own_mr != nullptr) ibv_dereg_mr(it->second.own_mr);
  sends_done_.emplace_back(it->second.token, st);
  rsends_.erase(it);
}

}  // namespace tictac::transport::verbs
