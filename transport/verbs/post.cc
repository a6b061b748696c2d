// Verbs backend: posting messages and rendezvous writes, the per-QP backlog,
// landing retained payloads (caller's thread, under the core's lock).
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

namespace {
Status peerGone(PeerId peer) {
  return {StatusCode::kPeerLost, "verbs: no live connection to peer " + std::to_string(peer)};
}
}  // namespace

VerbsBackend::Work VerbsBackend::makeMsg(Conn& c, const MsgHdr& mh,
                                         std::span<const std::byte> header, const void* data) {
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
                          size_t len, const MemoryRegion* region, uint64_t token) {
  Conn* c = connOf(peer);
  if (c == nullptr) return peerGone(peer);
  if (header.size() > kMaxCoreHeader) {
    return {StatusCode::kInvalidArgument, "verbs: header of " + std::to_string(header.size()) +
                                              " bytes exceeds " + std::to_string(kMaxCoreHeader)};
  }
  MsgHdr mh;
  mh.len = len;
  if (sizeof(MsgHdr) + header.size() + len <= c->send_bytes) {
    mh.kind = static_cast<uint8_t>(MsgKind::kEager);
    Work w = makeMsg(*c, mh, header, data);
    w.token = token;
    w.report = true;
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
  rsends_[sid] = RndvSend{token, c->qpn, static_cast<const char*>(data), len, lkey, own};
  mh.kind = static_cast<uint8_t>(MsgKind::kRts);
  mh.send_id = sid;
  Work w = makeMsg(*c, mh, header, nullptr);
  w.fail_send = sid;
  queueWork(*c, std::move(w));
  return Status::ok();
}

// A kCts arrived for one of our transfers: write it, in pieces of at most the
// port's max message size, the last one WITH IMMEDIATE (and reported).
void VerbsBackend::queueWrite(Conn& c, RndvSendArgs a) {
  const size_t piece =
      std::max<size_t>(4096, std::min<size_t>(dev_->port_attr.max_msg_sz, 1u << 30));
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
      w.with_imm = true;
      w.imm = a.imm;
      w.token = a.token;
      w.report = true;
      w.own_mr = a.own_mr;
    }
    queueWork(c, std::move(w));
  }
}

uint64_t VerbsBackend::queueWork(Conn& c, Work w) {
  uint64_t id = next_work_++;
  works_.emplace(id, std::move(w));
  c.backlog.push_back(id);
  flush(c);
  return id;
}

void VerbsBackend::flush(Conn& c) {
  while (!c.dead && c.connected && !c.backlog.empty() && c.sq_used < tune_.sq_depth) {
    uint64_t id = c.backlog.front();
    auto wt = works_.find(id);
    if (wt == works_.end()) {
      c.backlog.pop_front();
      continue;
    }
    int rc = postWork(c, wt->second, id);
    if (rc == ENOMEM) return;  // the provider's queue is full: retry after completions
    if (rc != 0) {             // unusable QP: fail this work and the connection
      Status st(StatusCode::kIoError, std::string("verbs: ibv_post_send: ") + std::strerror(rc));
      if (!c.reported) {
        c.reported = true;
        pending_peer_errors_.emplace_back(c.peer, st);
      }
      killConn(c, st);  // fails the backlog, this work included
      return;
    }
    c.backlog.pop_front();
  }
  if (stats_.on && !c.backlog.empty()) ++stats_.backlog_waits;
}

int VerbsBackend::postWork(Conn& c, Work& w, uint64_t id) {
  ibv_sge sge{};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  uint32_t slot = 0;
  if (w.kind == Work::kMsg) {
    if (c.free_slots.empty()) return ENOMEM;
    slot = c.free_slots.back();
    char* p = c.sbuf.data() + size_t{slot} * tune_.recv_bytes;
    std::memcpy(p, &w.mh, sizeof(MsgHdr));
    std::memcpy(p + sizeof(MsgHdr), w.hdr, w.mh.hdr_len);
    if (w.len > 0) std::memcpy(p + sizeof(MsgHdr) + w.mh.hdr_len, w.data, w.len);
    sge.addr = reinterpret_cast<uintptr_t>(p);
    sge.length = static_cast<uint32_t>(sizeof(MsgHdr) + w.mh.hdr_len + w.len);
    sge.lkey = c.smr->lkey;
    wr.opcode = IBV_WR_SEND;
    if (sge.length <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
  } else {
    sge.addr = reinterpret_cast<uintptr_t>(w.data);
    sge.length = static_cast<uint32_t>(w.len);
    sge.lkey = w.lkey;
    wr.opcode = w.with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.imm_data = htonl(w.imm);
    wr.wr.rdma.remote_addr = w.raddr;
    wr.wr.rdma.rkey = w.rkey;
  }
  int rc = ibv_post_send(c.qp, &wr, &bad);
  if (rc != 0) return rc;
  if (stats_.on) w.posted_ns = Stats::nowNs();
  if (w.kind == Work::kMsg) {
    c.free_slots.pop_back();
    w.slot = static_cast<int>(slot);
  }
  c.sq_used++;
  return 0;
}

Status VerbsBackend::receive(void* desc, void* dst, size_t len, const MemoryRegion* region,
                             uint64_t token) {
  auto* r = static_cast<Retained*>(desc);
  if (!r->rndv) {
    if (len > 0) std::memcpy(dst, r->copy.data(), std::min(len, r->copy.size()));
    delete r;
    recvs_done_.emplace_back(token, Status::ok());
    return Status::ok();
  }
  std::unique_ptr<Retained> owned(r);
  Conn* c = connByQpn(r->qpn);
  if (c == nullptr || c->dead || !c->connected) return peerGone(c ? c->peer : 0);
  if (len != r->len) {
    release(owned.release());
    return {StatusCode::kInvalidArgument, "verbs: receive of " + std::to_string(len) +
                                              " bytes for a payload of " + std::to_string(r->len)};
  }
  ibv_mr* own = nullptr;
  uint32_t rkey = 0;
  if (region != nullptr) {
    rkey = mrOf(region)->rkey;
  } else {
    auto m = regTemp(dst, len);
    if (!m) {
      release(owned.release());
      return m.status();
    }
    own = m.value();
    rkey = own->rkey;
  }
  uint32_t rid = next_recv_id_++;
  while (rid == 0 || rrecvs_.count(rid) != 0) rid = next_recv_id_++;
  rrecvs_[rid] = RndvRecv{token, c->qpn, own};
  MsgHdr mh;
  mh.kind = static_cast<uint8_t>(MsgKind::kCts);
  mh.recv_id = rid;
  mh.len = len;
  mh.send_id = r->send_id;
  mh.addr = reinterpret_cast<uintptr_t>(dst);
  mh.rkey = rkey;
  Work w = makeMsg(*c, mh, {}, nullptr);
  w.fail_recv = rid;
  queueWork(*c, std::move(w));
  return Status::ok();
}

void VerbsBackend::release(void* desc) {
  auto* r = static_cast<Retained*>(desc);
  if (r == nullptr) return;
  if (r->rndv) {  // tell the sender its payload is not wanted (its post completes)
    Conn* c = connByQpn(r->qpn);
    if (c != nullptr && !c->dead && c->connected) {
      MsgHdr mh;
      mh.kind = static_cast<uint8_t>(MsgKind::kCts);
      mh.flags = kFlagDrop;
      mh.send_id = r->send_id;
      queueWork(*c, makeMsg(*c, mh, {}, nullptr));
    }
  }
  delete r;
}

void VerbsBackend::failSendWork(Work& w, const Status& st) {
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

void VerbsBackend::finishRecv(uint32_t recv_id, const Status& st) {
  auto it = rrecvs_.find(recv_id);
  if (it == rrecvs_.end()) return;
  if (it->second.own_mr != nullptr) ibv_dereg_mr(it->second.own_mr);
  recvs_done_.emplace_back(it->second.token, st);
  rrecvs_.erase(it);
}

}  // namespace tictac::transport::verbs
