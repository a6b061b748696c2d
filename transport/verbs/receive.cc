// Verbs backend: landing retained payloads (caller's thread, under the core's
// lock): an eager one is copied, a rendezvous one is answered with a kCts
// (the sender then WRITEs WITH IMMEDIATE into dst), an unwanted one with a
// dropping kCts; finishRecv() reports a receive once.
#include <algorithm>
#include <cstring>
#include <memory>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

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
  ibv_mr* mr = region != nullptr ? const_cast<ibv_mr*>(mrOf(region)) : nullptr;
  if (mr == nullptr) {
    auto m = regTemp(dst, len);
    if (!m) {
      release(owned.release());
      return m.status();
    }
    mr = own = m.value();
  }
  uint32_t rkey = mr->rkey;
  Window win;
  if (tune_.windows != 0) {  // the peer may write dst alone, until the WRITE lands
    auto w = bindWindow(*c, mr, reinterpret_cast<uintptr_t>(dst), len);
    if (!w) {
      if (own != nullptr) ibv_dereg_mr(own);
      release(owned.release());
      return w.status();
    }
    win = w.value();
    rkey = win.rkey;
  }
  const uint32_t rid = newImmediate();
  rrecvs_[rid] = RndvRecv{token, c->qpn, own, win};
  MsgHdr mh;
  mh.kind = static_cast<uint8_t>(MsgKind::kCts);
  mh.recv_id = rid;
  mh.len = len;
  mh.send_id = r->send_id;
  mh.addr = reinterpret_cast<uintptr_t>(dst);
  mh.rkey = rkey;
  Work w = makeMsg(*c, mh, {}, nullptr);
  w.fail_recv = rid;
  w.rts_ns = r->arrived_ns;
  deferRecord(*c, std::move(w));  // with the pass's other handshakes to this peer
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

void VerbsBackend::finishRecv(uint32_t recv_id, const Status& st) {
  auto it = rrecvs_.find(recv_id);
  if (it == rrecvs_.end()) return;
  const RndvRecv r = it->second;
  rrecvs_.erase(it);
  if (closeWindow(r.qpn, r.win, st, r.token, 0, false, r.own_mr)) return;  // reported then
  if (r.own_mr != nullptr) ibv_dereg_mr(r.own_mr);
  recvs_done_.emplace_back(r.token, st);
}

}  // namespace tictac::transport::verbs
