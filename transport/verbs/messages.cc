// Verbs backend: the SEND messages' records on both sides (caller's thread,
// under the core's lock): the receiver walks the records of each SEND; each
// side batches the handshakes of one core pass to a peer: the sender the kRts
// of the chunks the core posted, the receiver the kCts of the receives the
// core started.
//
// Why the batch: in the soft-RoCE guest rxe does all the work of a SEND (its
// packet, the peer's receive, the ACK) inside the sender's ibv_post_send,
// about 55 us each, while the sender's CPU is also the one moving the data.
// A 64 KiB transfer paid one such handshake SEND per 1 ms of WRITE; the core
// posts the chunks a completion pass admitted back to back (four at a time
// in tictac-perf --test bw), so they share one SEND now. The receiver's kCts
// for them share one SEND too (a SEND each was 2201 instead of 545 SENDs for
// 2000 64 KiB tensors; docs/perf.md, Soft-RoCE / Session 14).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

void VerbsBackend::deferRecord(Conn& c, Work w) {
  if (tune_.rts_batch <= 1) {  // no batching: a SEND each, now
    if (stats_.on && w.mh.kind == static_cast<uint8_t>(MsgKind::kRts)) ++stats_.rts_msgs;
    queueWork(c, std::move(w));
    return;
  }
  c.records.push_back(w);
  records_deferred_ = true;
  if (c.records.size() >= tune_.rts_batch) flushRecords(c);
}

bool VerbsBackend::flushAllRecords() {
  if (!records_deferred_ && !adverts_check_) return false;
  records_deferred_ = adverts_check_ = false;
  for (auto& [qpn, c] : conns_) {
    if (!c->adverts_held.empty()) releaseAdverts(*c);
    if (!c->records.empty()) flushRecords(*c);
  }
  return true;
}

void VerbsBackend::flushRecords(Conn& c) {
  if (c.records.empty()) return;
  records_scratch_.clear();
  records_scratch_.swap(c.records);  // queueWork may kill the Conn (which clears records)
  const auto rts =
      !stats_.on
          ? 0
          : std::count_if(records_scratch_.begin(), records_scratch_.end(), [](const Work& w) {
              return w.mh.kind == static_cast<uint8_t>(MsgKind::kRts);
            });
  if (records_scratch_.size() == 1 || !postRecordBatch(c, records_scratch_)) {
    if (stats_.on) stats_.rts_msgs += static_cast<uint64_t>(rts);  // a SEND each
    for (auto& w : records_scratch_) {
      if (c.dead) break;  // killConn failed their transfers already
      queueWork(c, w);
    }
  } else if (stats_.on && rts > 0) {
    ++stats_.rts_msgs;  // one SEND for all
  }
  records_scratch_.clear();
  std::swap(c.records, records_scratch_);  // keep both capacities
}

// One SEND of every record, when it can go at once (nothing queued before it,
// room in the send queue, and inline or a free bounce slot). False: the
// caller queues them one by one.
bool VerbsBackend::postRecordBatch(Conn& c, const std::vector<Work>& works) {
  if (!c.backlog.empty() || c.dead || !c.connected || c.sq_used >= tune_.sq_depth) return false;
  size_t total = 0;
  for (const Work& w : works) total += recordBytes(msgHdrBytes(w.mh.kind) + w.mh.hdr_len);
  if (total > c.send_bytes) return false;
  const bool inl = total <= max_inline_ && total <= kInlineBuf;
  if (!inl && c.free_slots.empty()) return false;
  alignas(8) char stack[kInlineBuf];
  const int slot = inl ? -1 : static_cast<int>(c.free_slots.back());
  char* p = inl ? stack : c.sbuf.data() + size_t(slot) * tune_.recv_bytes;
  size_t off = 0;
  for (const Work& w : works) {
    size_t n = packMsg(p + off, w.mh, w.hdr, w.mh.hdr_len, nullptr, 0);
    std::memset(p + off + n, 0, recordBytes(n) - n);
    off += recordBytes(n);
  }
  uint64_t id = allocWork();
  Work& b = works_[id];
  b = works.front();  // its fail_send/fail_recv: a failed SEND kills the Conn, which fails the rest
  b.live = true;
  b.slot = slot;
  b.posted_ns = 0;
  if (postSend(c, id, p, total, inl) != 0) {
    freeWork(id);
    return false;
  }
  if (slot >= 0) c.free_slots.pop_back();
  for (const Work& w : works) noteTx(c, w.mh.kind, w.hdr, w.mh.hdr_len);
  if (stats_.on) {
    b.posted_ns = Stats::nowNs();
    stats_.onMsgPosted(b.posted_ns);
    if (inl) ++stats_.inline_sends;
    for (const Work& w : works) stats_.onCtsOut(w.rts_ns, b.posted_ns);
  }
  c.sq_used++;
  sq_total_++;
  return true;
}

void VerbsBackend::onRecv(Conn& c, const ibv_wc& wc) {
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    const uint32_t imm = ntohl(wc.imm_data);
    if (!adverts_out_.empty() && finishAdvert(c.qpn, imm, UINT64_MAX, Status::ok(), true)) return;
    // A receive's kCts went to this connection only: another peer (or a
    // made-up immediate) cannot complete it.
    auto r = rrecvs_.find(imm);
    if (r == rrecvs_.end() || r->second.qpn != c.qpn) {
      return peerBroke(c, Status(StatusCode::kProtocolError,
                                 "verbs: a write with immediate " + std::to_string(imm) +
                                     " names no receive or advert of this connection"));
    }
    finishRecv(imm, Status::ok());
    return;
  }
  const char* buf = recvView(c, static_cast<uint32_t>(wc.wr_id & 0xffffffffu), wc.byte_len);
  if ((wc.wc_flags & IBV_WC_WITH_IMM) != 0) {
    onCompact(c, buf, wc.byte_len, ntohl(wc.imm_data));
    return;
  }
  size_t left = wc.byte_len;
  for (;;) {
    size_t used = recordBytes(onMsg(c, buf, left));
    if (used == 0 || used >= left || c.dead) return;
    buf += used;
    left -= used;
  }
}

size_t VerbsBackend::onMsg(Conn& c, const char* buf, size_t bytes) {
  ++c.rx_records;  // as the sender counted it (noteTx)
  MsgHdr mh;
  const size_t head = bytes > 0 ? msgHdrBytes(static_cast<uint8_t>(buf[0])) : sizeof(MsgHdr);
  bool ok = bytes >= head;
  size_t need = 0;
  if (ok && head == sizeof(EagerHdr)) {
    EagerHdr eh;
    std::memcpy(&eh, buf, sizeof(eh));
    mh.kind = eh.kind;
    mh.hdr_len = eh.hdr_len;
    mh.len = eh.len;
    need = head + mh.hdr_len + mh.len;
  } else if (ok) {
    std::memcpy(&mh, buf, sizeof(mh));
    need = head + mh.hdr_len;
  }
  ok = ok && mh.hdr_len <= kMaxCoreHeader && mh.len <= (uint64_t{1} << 48) && bytes >= need;
  if (!ok) {
    peerBroke(c, Status(StatusCode::kProtocolError,
                        "verbs: malformed message of " + std::to_string(bytes) + " bytes"));
    return 0;
  }
  std::span<const std::byte> header(reinterpret_cast<const std::byte*>(buf + head), mh.hdr_len);
  switch (static_cast<MsgKind>(mh.kind)) {
    case MsgKind::kEager: {
      compactNote(c.rx_base, header.data(), header.size());
      deliverEager(c, header, buf + head + mh.hdr_len, mh.len);
      return need;
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
      return need;
    }
    case MsgKind::kAdv: {
      AdvBody body;
      if (mh.hdr_len != sizeof(body)) break;  // reported below
      std::memcpy(&body, buf + head, sizeof(body));
      onAdvert(c, mh, body);
      return need;
    }
    case MsgKind::kAdvEnd:
      finishAdvert(c.qpn, mh.recv_id, mh.len, Status::ok(), true);
      return need;
    case MsgKind::kAdvRevoke:
      onAdvertRevoke(c, mh);
      return need;
    case MsgKind::kCts: {
      auto it = rsends_.find(mh.send_id);
      if (it == rsends_.end() || it->second.qpn != c.qpn) return need;  // failed meanwhile
      if ((mh.flags & kFlagDrop) != 0) {
        finishRndvSend(mh.send_id, Status::ok());
        return need;
      }
      RndvSend s = it->second;
      if (mh.len != s.len) {
        finishRndvSend(mh.send_id,
                       Status(StatusCode::kProtocolError,
                              "verbs: peer offered " + std::to_string(mh.len) + " bytes for a " +
                                  std::to_string(s.len) + "-byte payload"));
        return need;
      }
      if (stats_.on) stats_.onCts(it->second.rts_ns, Stats::nowNs());
      rsends_.erase(it);
      c.last_rkey = mh.rkey;
      queueWrite(
          c, RndvSendArgs{s.token, s.data, s.len, s.lkey, s.own_mr, mh.addr, mh.rkey, mh.recv_id});
      return need;
    }
  }
  peerBroke(c, Status(StatusCode::kProtocolError,
                      "verbs: unknown or malformed message kind " + std::to_string(mh.kind)));
  return 0;
}

void VerbsBackend::peerBroke(Conn& c, Status why) {
  if (c.reported) return;
  c.reported = true;
  pending_peer_errors_.emplace_back(c.peer, std::move(why));
}

void VerbsBackend::onCompact(Conn& c, const char* buf, size_t len, uint32_t imm) {
  ++c.rx_records;
  wire::Header h;
  if (!compactDecode(c.rx_base, imm, static_cast<uint32_t>(len), &h)) {
    peerBroke(c, Status(StatusCode::kProtocolError, "verbs: compact message before any full one"));
    return;
  }
  compactUpdate(c.rx_base, h);
  deliverEager(c, wire::asBytes(h), buf, len);
}

void VerbsBackend::deliverEager(Conn& c, std::span<const std::byte> header, const char* data,
                                size_t len) {
  if (stats_.on && stats_.recv_polled_ns == 0) stats_.recv_polled_ns = Stats::nowNs();
  Incoming in;
  in.length = len;
  in.data = data;
  events_->onMessage(c.peer, header, in);
  if (in.retain_into != nullptr) {
    auto* r = new Retained();
    r->copy.assign(data, data + len);
    *in.retain_into = r;
  }
}

}  // namespace tictac::transport::verbs
