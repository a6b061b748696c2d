// Verbs backend: QPs paired over the core's bootstrap (cm=tcp), one per
// priority class and peer, and the class options (class_bounds & co).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

Status checkRecvBytes(uint32_t recv_bytes) {
  if (recv_bytes >= kMinRecvBytes) return Status::ok();
  return {StatusCode::kProtocolError, "the peer advertises receive buffers of " +
                                          std::to_string(recv_bytes) + " bytes, below the " +
                                          std::to_string(kMinRecvBytes) + " every peer keeps"};
}

namespace {

// The QPs that this thread's last localAddress() created (see backend.h).
struct LastBlob {
  const void* backend = nullptr;
  uint32_t qpn = 0;  // the class-0 QP
};
thread_local LastBlob t_last;

// "a,b,c" -> numbers in [lo, hi]; false on anything else.
bool parseList(const std::string& text, uint32_t lo, uint32_t hi, std::vector<uint32_t>* out) {
  out->clear();
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(at, end - at);
    char* stop = nullptr;
    if (item.empty() || !std::isdigit(static_cast<unsigned char>(item[0]))) return false;
    unsigned long v = std::strtoul(item.c_str(), &stop, 10);
    if (*stop != '\0' || v < lo || v > hi) return false;
    out->push_back(static_cast<uint32_t>(v));
    at = end + 1;
  }
  return !out->empty();
}

}  // namespace

bool optionText(const BackendOptions& o, const char* key, std::string* out) {
  if (auto it = o.config.find(key); it != o.config.end()) {
    *out = it->second;
    return true;
  }
  std::string env = "TICTAC_VERBS_";
  for (const char* k = key; *k; ++k) env += static_cast<char>(std::toupper(*k));
  const char* e = std::getenv(env.c_str());
  if (e == nullptr) return false;
  *out = e;
  return true;
}

Status VerbsBackend::parseClasses(const BackendOptions& o) {
  std::string text;
  std::vector<uint32_t> v;
  if (optionText(o, "class_bounds", &text)) {
    if (!parseList(text, 0, UINT32_MAX, &v) || v.size() >= kMaxClasses ||
        std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) != v.end()) {
      return {StatusCode::kInvalidArgument, "verbs class_bounds '" + text + "' must be 1.." +
                                                std::to_string(kMaxClasses - 1) +
                                                " strictly ascending priorities, comma separated"};
    }
    tune_.class_bounds = v;
  }
  const size_t n = classCount();
  // Defaults: class i of n gets DSCP CS(n-1-i) and SL n-1-i (the most urgent
  // class the highest); one class keeps traffic_class and sl.
  tune_.class_tc.assign(n, tune_.traffic_class);
  tune_.class_sl.assign(n, tune_.sl);
  for (size_t i = 0; n > 1 && i < n; ++i) {
    tune_.class_tc[i] = static_cast<uint8_t>((n - 1 - i) * 8 << 2);
    tune_.class_sl[i] = static_cast<uint8_t>(n - 1 - i);
  }
  for (auto [key, hi, dst] : {std::tuple{"class_traffic_class", 255u, &tune_.class_tc},
                              std::tuple{"class_sl", 15u, &tune_.class_sl}}) {
    if (!optionText(o, key, &text)) continue;
    if (!parseList(text, 0, hi, &v) || v.size() != n) {
      return {StatusCode::kInvalidArgument,
              std::string("verbs ") + key + " '" + text + "' must list " + std::to_string(n) +
                  " values in 0.." + std::to_string(hi) + " (one per class of class_bounds)"};
    }
    dst->assign(v.begin(), v.end());
  }
  return Status::ok();
}

std::vector<uint8_t> VerbsBackend::localAddress() {
  if (cm_) return cmLocalAddress();
  std::vector<uint32_t> group;
  std::vector<ClassQp> extra;
  t_last = {this, 0};  // until this blob exists: addPeer() takes no other thread's
  for (size_t k = 0; k < classCount(); ++k) {
    auto c = newConn();
    if (!c) {
      for (uint32_t q : group) dropConn(q);
      return {};  // the peer's addPeer rejects an empty blob; ours finds no QP
    }
    c.value()->cls = static_cast<uint8_t>(k);
    group.push_back(c.value()->qpn);
    if (k > 0) extra.push_back({c.value()->qpn, c.value()->psn});
  }
  const Conn& first = *conns_.at(group[0]);
  AddressBlob b;
  b.roce = dev_->roce ? 1 : 0;
  b.mtu = static_cast<uint8_t>(dev_->port_attr.active_mtu);
  b.qpn = first.qpn;
  b.psn = first.psn;
  b.lid = dev_->port_attr.lid;
  b.classes = static_cast<uint16_t>(group.size());
  b.recv_bytes = tune_.recv_bytes;
  std::memcpy(b.gid, dev_->gid.raw, 16);
  unconnected_.push_back(group);
  t_last = {this, group[0]};
  auto* p = reinterpret_cast<const uint8_t*>(&b);
  std::vector<uint8_t> out(p, p + sizeof(b));
  auto* q = reinterpret_cast<const uint8_t*>(extra.data());
  out.insert(out.end(), q, q + extra.size() * sizeof(ClassQp));
  return out;
}

void VerbsBackend::discardAddress(std::span<const uint8_t> local) {
  AddressBlob b;
  if (local.size() < sizeof(b)) return;
  std::memcpy(&b, local.data(), sizeof(b));
  if (cm_) {
    CmBlob cb;
    if (local.size() < sizeof(b) + sizeof(cb)) return;
    std::memcpy(&cb, local.data() + sizeof(b), sizeof(cb));
    cm_->issued.erase(cb.token);
    auto& pend = cm_->pending;  // a request the peer sent for it before failing
    for (auto it = pend.begin(); it != pend.end();) {
      if (it->token != cb.token) {
        ++it;
        continue;
      }
      dropConn(it->qpn);
      cm_->link->forget(it->id);
      it = pend.erase(it);
    }
    return;
  }
  for (auto it = unconnected_.begin(); it != unconnected_.end(); ++it) {
    if ((*it)[0] != b.qpn) continue;
    auto first = conns_.find(b.qpn);  // and its psn: a number reused meanwhile is not it
    if (first == conns_.end() || first->second->psn != b.psn) return;
    for (uint32_t q : *it) dropConn(q);
    unconnected_.erase(it);
    return;
  }
}

Status VerbsBackend::addPeer(PeerId peer, std::span<const uint8_t> remote) {
  if (cm_) return addPeerCm(peer, remote);
  AddressBlob rb;
  if (remote.size() < sizeof(rb)) {
    return {StatusCode::kProtocolError, "verbs address of " + std::to_string(remote.size()) +
                                            " bytes (expected " + std::to_string(sizeof(rb)) + ")"};
  }
  std::memcpy(&rb, remote.data(), sizeof(rb));
  uint32_t cm_magic = 0;  // a cm=rdmacm blob: AddressBlob + CmBlob (a QP number is 24 bits)
  if (remote.size() == sizeof(rb) + sizeof(CmBlob)) {
    std::memcpy(&cm_magic, remote.data() + sizeof(rb), sizeof(cm_magic));
  }
  if (cm_magic == kCmMagic) {
    return {StatusCode::kProtocolError,
            "the peer connects by rdma_cm (cm=rdmacm), this side by "
            "QP numbers over the bootstrap (cm=tcp): set the same cm"};
  }
  if (rb.magic != kBlobMagic || rb.version != kBlobVersion) {
    return {StatusCode::kProtocolError, "verbs address blob has a bad magic or version"};
  }
  if (Status s = checkRecvBytes(rb.recv_bytes); !s) return s;
  const size_t theirs = rb.classes == 0 ? 1 : rb.classes;
  if (theirs != classCount()) {
    return {StatusCode::kProtocolError, "the peer makes " + std::to_string(theirs) +
                                            " QPs per peer (class_bounds), this side " +
                                            std::to_string(classCount()) +
                                            ": set the same class_bounds on both"};
  }
  if (remote.size() != sizeof(rb) + (theirs - 1) * sizeof(ClassQp)) {
    return {StatusCode::kProtocolError,
            "verbs address of " + std::to_string(remote.size()) + " bytes (expected " +
                std::to_string(sizeof(rb) + (theirs - 1) * sizeof(ClassQp)) + ")"};
  }
  if (rb.roce != (dev_->roce ? 1 : 0)) {
    return {StatusCode::kProtocolError, "peer's link layer differs (RoCE vs InfiniBand)"};
  }
  if (unconnected_.empty() || (t_last.backend == this && t_last.qpn == 0)) {
    return {StatusCode::kIoError, "no local QP for the peer (this side's address failed)"};
  }
  auto pick = unconnected_.begin();
  for (auto it = unconnected_.begin(); it != unconnected_.end(); ++it) {
    if (t_last.backend == this && (*it)[0] == t_last.qpn) pick = it;
  }
  std::vector<uint32_t> group = std::move(*pick);
  unconnected_.erase(pick);
  for (size_t k = 0; k < group.size(); ++k) {
    Conn& c = *conns_.at(group[k]);
    c.peer = peer;
    c.send_bytes = std::min(rb.recv_bytes, tune_.recv_bytes);
    AddressBlob r = rb;
    if (k > 0) {
      ClassQp q;
      std::memcpy(&q, remote.data() + sizeof(rb) + (k - 1) * sizeof(q), sizeof(q));
      r.qpn = q.qpn;
      r.psn = q.psn;
    }
    if (Status s = connectQp(c, r); !s) {
      for (uint32_t q : group) dropConn(q);
      return s;
    }
  }
  for (uint32_t q : group) conns_.at(q)->connected = true;
  peers_[peer] = std::move(group);
  forgetHot();
  return Status::ok();
}

Status VerbsBackend::connectQp(Conn& c, const AddressBlob& rb) {
  if (rb.mtu < IBV_MTU_256 || rb.mtu > IBV_MTU_4096) {
    return {StatusCode::kProtocolError,
            "verbs: peer's path MTU code " + std::to_string(rb.mtu) + " is not 1..5"};
  }
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = std::min(dev_->port_attr.active_mtu, static_cast<ibv_mtu>(rb.mtu));
  at.dest_qp_num = rb.qpn;
  at.rq_psn = rb.psn;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 1;  // 0.01 ms
  at.ah_attr.port_num = dev_->port;
  at.ah_attr.sl = tune_.class_sl[c.cls];  // parseClasses sized both lists
  at.ah_attr.dlid = rb.lid;
  if (dev_->roce || dev_->gid_index > 0) {
    at.ah_attr.is_global = 1;
    std::memcpy(at.ah_attr.grh.dgid.raw, rb.gid, 16);
    at.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev_->gid_index);
    at.ah_attr.grh.hop_limit = 64;
    at.ah_attr.grh.traffic_class = tune_.class_tc[c.cls];
  }
  int rc = ibv_modify_qp(c.qp, &at,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) return verbsError("ibv_modify_qp(RTR) to QP 0x" + std::to_string(rb.qpn), rc);
  at = {};
  at.qp_state = IBV_QPS_RTS;
  at.timeout = static_cast<uint8_t>(tune_.qp_timeout);  // 4.096 us * 2^timeout
  at.retry_cnt = 7;
  at.rnr_retry = 7;  // RNR: retry forever (a busy receiver is not a dead one)
  at.sq_psn = c.psn;
  at.max_rd_atomic = 1;
  rc = ibv_modify_qp(c.qp, &at,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return verbsError("ibv_modify_qp(RTS)", rc);
  return Status::ok();
}

void VerbsBackend::removePeer(PeerId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  std::vector<uint32_t> qpns = std::move(it->second);
  peers_.erase(it);
  forgetHot();
  for (uint32_t q : qpns) {
    if (Conn* c = connByQpn(q); c != nullptr)
      killConn(*c, Status(StatusCode::kPeerLost, "peer removed"));
  }
}

std::vector<VerbsBackend::ClassQpInfo> VerbsBackend::peerQps(PeerId peer) const {
  std::vector<ClassQpInfo> out;
  auto it = peers_.find(peer);
  if (it == peers_.end()) return out;
  for (uint32_t q : it->second) {
    const Conn& c = *conns_.at(q);
    out.push_back({c.qp, c.cls, c.posted, c.compact, c.adverts_in.size(), c.last_rkey});
  }
  return out;
}

}  // namespace tictac::transport::verbs
