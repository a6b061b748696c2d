// Verbs backend: rkeys scoped per transfer (windows=1; caller's thread,
// under the core's lock).
//
// Without windows, a kCts or an advert hands the peer the rkey of the whole
// registration (the registration cache's region, or a temporary one), which
// stays valid for remote writes as long as the region stays registered: a
// hostile or buggy peer could write any part of it at any later time. With
// windows, registrations get no remote access at all (memory.cc); each
// transfer's buffer is offered through a type-2 memory window bound on the
// peer's QP over exactly [addr, addr + len), and the window is invalidated
// (IBV_WR_LOCAL_INV) when the transfer ends. The receive or advert is reported
// done only when that invalidation has completed, so once the core hands the
// buffer back to its user, the peer can no longer write it; a write after
// it, or through the registration, fails the peer's QP (remote access error)
// and leaves the buffer untouched. (A write outside a live window is the
// NIC's to refuse: rxe checks it against the registration only,
// docs/softroce.md section 6f.)
//
// Both are work requests on the QP's send queue (Work::kBind, kInval), queued
// in the Conn's backlog like a SEND: the bind thus leaves before the kCts or
// kAdv record that names its rkey (postRecordBatch and postInlineNow wait for
// an empty backlog). When the QP dies, its windows are deallocated instead
// (an errored QP accepts no more writes); the transfer's data, if it all
// arrived, is still reported intact.
#include <cerrno>
#include <utility>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

Status VerbsBackend::checkWindows() const {
  if (tune_.windows == 0) return Status::ok();
  const auto caps = dev_->dev_attr.device_cap_flags;
  if (dev_->dev_attr.max_mw > 0 &&
      (caps & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0) {
    return Status::ok();
  }
  return {StatusCode::kUnsupported, "verbs windows=1 needs type-2 memory windows, which device " +
                                        dev_->name + " does not offer"};
}

Result<Window> VerbsBackend::bindWindow(Conn& c, ibv_mr* mr, uint64_t addr, size_t len) {
  Window win;
  if (!free_windows_.empty()) {
    win = free_windows_.back();
    free_windows_.pop_back();
  } else {
    win.mw = ibv_alloc_mw(dev_->pd, IBV_MW_TYPE_2);
    if (win.mw == nullptr) return verbsError("verbs: ibv_alloc_mw", errno);
    win.rkey = win.mw->rkey;
  }
  win.rkey = ibv_inc_rkey(win.rkey);  // a new key each binding: an old rkey stays dead
  Work w;
  w.kind = Work::kBind;
  w.qpn = c.qpn;
  w.win = win;
  w.bind_mr = mr;
  w.raddr = addr;
  w.len = len;
  queueWork(c, std::move(w));
  if (c.dead) {  // the post failed and killed the connection
    dropWindow(win);
    return peerGone(c.peer);
  }
  return win;
}

bool VerbsBackend::closeWindow(uint32_t qpn, Window win, const Status& st, uint64_t token,
                               uint64_t bytes, bool advert, ibv_mr* own_mr) {
  Conn* c = win.mw != nullptr && st ? connByQpn(qpn) : nullptr;
  if (c == nullptr || c->dead) {  // no window, a failure, or a QP that takes no more writes
    dropWindow(win);
    return false;
  }
  Work w;
  w.kind = Work::kInval;
  w.qpn = qpn;
  w.win = win;
  w.token = token;
  w.len = bytes;
  w.advert_end = advert;
  w.own_mr = own_mr;
  queueWork(*c, std::move(w));  // should the QP die first, failSendWork reports it
  return true;
}

void VerbsBackend::windowClosed(Work& w, bool invalidated) {
  if (w.win.mw != nullptr && invalidated) {
    free_windows_.push_back(w.win);
  } else {
    dropWindow(w.win);  // before own_mr is deregistered: a bound window holds its MR
  }
  w.win = Window{};
  // Every byte had arrived before the window was closed; if the invalidation
  // failed, its QP is in error and takes no more writes either.
  if (w.advert_end) {
    adverts_done_.push_back(AdvertDone{w.token, w.len, Status::ok()});
  } else {
    recvs_done_.emplace_back(w.token, Status::ok());
  }
}

void VerbsBackend::dropWindow(Window win) {
  if (win.mw != nullptr) (void)ibv_dealloc_mw(win.mw);
}

int VerbsBackend::postWindowWork(Conn& c, Work& w, uint64_t id) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (w.kind == Work::kBind) {
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind_mw.mw = w.win.mw;
    wr.bind_mw.rkey = w.win.rkey;
    wr.bind_mw.bind_info.mr = w.bind_mr;
    wr.bind_mw.bind_info.addr = w.raddr;
    wr.bind_mw.bind_info.length = w.len;
    wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  } else {
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.invalidate_rkey = w.win.rkey;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(c.qp, &wr, &bad);
  if (rc != 0) return rc;
  // The next bind names the window by its current rkey (rxe's provider reads
  // it from mw->rkey, which a type-2 bind posted here does not update).
  if (w.kind == Work::kBind) w.win.mw->rkey = w.win.rkey;
  if (stats_.on) w.posted_ns = Stats::nowNs();
  c.sq_used++;
  sq_total_++;
  return 0;
}

void VerbsBackend::dropPostedWindows(uint32_t qpn) {
  // A kBind's window is its transfer's (dropped with it); a kInval's is its own.
  for (Work& w : works_) {
    if (!w.live || w.kind != Work::kInval || (qpn != 0 && w.qpn != qpn)) continue;
    dropWindow(std::exchange(w.win, Window{}));
    if (qpn == 0 && w.own_mr != nullptr) ibv_dereg_mr(std::exchange(w.own_mr, nullptr));
  }
}

void VerbsBackend::freeWindows() {
  for (auto& [id, r] : rrecvs_) dropWindow(std::exchange(r.win, Window{}));
  for (auto& [imm, a] : adverts_out_) dropWindow(std::exchange(a.win, Window{}));
  dropPostedWindows(0);
  for (Window& win : free_windows_) dropWindow(win);
  free_windows_.clear();
}

}  // namespace tictac::transport::verbs
