// Verbs backend: setup, QP creation and connection, peer teardown.
#include "transport/verbs/backend.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "transport/verbs/factory.h"

namespace tictac::transport::verbs {

namespace {

Status verbsError(const std::string& what, int err) {
  return {StatusCode::kIoError, what + ": " + std::strerror(err)};
}

// The QP that this thread's last localAddress() created (see backend.h).
struct LastBlob {
  const void* backend = nullptr;
  uint32_t qpn = 0;
};
thread_local LastBlob t_last;

// A numeric option: BackendOptions::config[key], else TICTAC_VERBS_<KEY>.
Status parseU32(const BackendOptions& o, const char* key, uint32_t lo, uint32_t hi, uint32_t* out) {
  std::string text;
  if (auto it = o.config.find(key); it != o.config.end()) {
    text = it->second;
  } else {
    std::string env = "TICTAC_VERBS_";
    for (const char* k = key; *k; ++k) env += static_cast<char>(std::toupper(*k));
    const char* e = std::getenv(env.c_str());
    if (e == nullptr) return Status::ok();
    text = e;
  }
  char* end = nullptr;
  unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi) {
    return {StatusCode::kInvalidArgument, std::string("verbs ") + key + " '" + text +
                                              "' must be in " + std::to_string(lo) + ".." +
                                              std::to_string(hi)};
  }
  *out = static_cast<uint32_t>(v);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Backend>> create(const BackendOptions& options, BackendEvents* events) {
  auto b = std::make_unique<VerbsBackend>(events);
  if (Status s = b->init(options); !s) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

Status VerbsBackend::init(const BackendOptions& options) {
  uint32_t tc = 0, sl = 0;
  const uint32_t min_recv = sizeof(MsgHdr) + kMaxCoreHeader + kInlineMax;
  for (Status s :
       {parseU32(options, "eager_bytes", min_recv, 1u << 20, &tune_.recv_bytes),
        parseU32(options, "sq_depth", 8, 16384, &tune_.sq_depth),
        parseU32(options, "rq_depth", 8, 16384, &tune_.rq_depth),
        parseU32(options, "repost_batch", 1, 16384, &tune_.repost_batch),
        parseU32(options, "traffic_class", 0, 255, &tc), parseU32(options, "sl", 0, 15, &sl),
        parseU32(options, "idle_spins", 0, 1u << 30, &tune_.idle_spins),
        parseU32(options, "idle_spin_us", 0, 10000000, &tune_.idle_spin_us),
        parseU32(options, "idle_block_us", 0, 1000000, &tune_.idle_block_us),
        parseU32(options, "idle_yield_us", 0, 1000000, &tune_.idle_yield_us),
        parseU32(options, "rndv_spin_us", 0, Tuning::kNever, &tune_.rndv_spin_us),
        parseU32(options, "rndv_nap_us", 0, 100000, &tune_.rndv_nap_us),
        parseU32(options, "write_piece_bytes", 4096, 1u << 30, &tune_.write_piece),
        parseU32(options, "write_queue_bytes", 4096, 1u << 30, &tune_.write_queue),
        parseU32(options, "rts_batch", 1, 32, &tune_.rts_batch),
        parseU32(options, "qp_timeout", 1, 31, &tune_.qp_timeout)}) {
    if (!s) return s;
  }
  stats_.init();
  tune_.traffic_class = static_cast<uint8_t>(tc);
  tune_.sl = static_cast<uint8_t>(sl);
  auto cfg = deviceConfig(options);
  if (!cfg) return cfg.status();
  if (Status s = initCm(options, &cfg.value()); !s) return s;
  auto dev = Device::open(cfg.value());
  if (!dev) return dev.status();
  dev_ = std::move(dev.value());
  if (tune_.rndv_nap_us == Tuning::kAuto) tune_.rndv_nap_us = dev_->software ? Tuning::kSoftNapUs : 0;
  return Status::ok();
}

VerbsBackend::~VerbsBackend() {
  removeUnmapHook(hook_, hook_arg_);
  stats_.print("backend");
  if (!dev_) return;
  for (auto& [qpn, c] : conns_) {
    if (c->qp != nullptr) destroyConn(*c);
  }
  conns_.clear();
  for (auto& [id, s] : rsends_) {
    if (s.own_mr != nullptr) ibv_dereg_mr(s.own_mr);
  }
  for (auto& [id, r] : rrecvs_) {
    if (r.own_mr != nullptr) ibv_dereg_mr(r.own_mr);
  }
  drainChannel();
  if (unacked_events_ > 0) ibv_ack_cq_events(dev_->cq, unacked_events_);
  dev_.reset();
}

Result<VerbsBackend::Conn*> VerbsBackend::newConn(const QpMaker& make, bool post_recvs) {
  auto c = std::make_unique<Conn>();
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = dev_->cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = tune_.sq_depth;
  ia.cap.max_recv_wr = tune_.rq_depth;
  ia.cap.max_recv_sge = 1;
  // Two send SGEs (zero-copy eager SENDs: headers + payload) and inline
  // data, else what a device with less takes: either one alone, then neither.
  for (auto [sge, inl] : {std::pair{2u, 256u}, {1u, 256u}, {2u, 0u}, {1u, 0u}}) {
    ia.cap.max_send_sge = sge;
    ia.cap.max_inline_data = inl;
    c->qp = make ? make(&ia) : ibv_create_qp(dev_->pd, &ia);
    if (c->qp != nullptr) break;
  }
  if (c->qp == nullptr) return verbsError("ibv_create_qp", errno);
  max_inline_ = ia.cap.max_inline_data;
  c->two_sge = ia.cap.max_send_sge >= 2;
  c->qpn = c->qp->qp_num;
  c->psn = std::random_device()() & 0xffffff;
  Conn* raw = c.get();
  conns_[c->qpn] = std::move(c);
  int total = static_cast<int>(conns_.size() * (tune_.sq_depth + tune_.rq_depth));
  if (Status s = dev_->reserveCq(total + 64); !s) {
    dropConn(raw->qpn);
    return s;
  }
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.pkey_index = 0;
  at.port_num = dev_->port;
  at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int rc = ibv_modify_qp(raw->qp, &at,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    dropConn(raw->qpn);
    return verbsError("ibv_modify_qp(INIT)", rc);
  }
  raw->rbuf.resize(size_t{tune_.rq_depth} * tune_.recv_bytes);
  raw->sbuf.resize(size_t{tune_.sq_depth} * tune_.recv_bytes);
  raw->rmr = ibv_reg_mr(dev_->pd, raw->rbuf.data(), raw->rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  raw->smr = ibv_reg_mr(dev_->pd, raw->sbuf.data(), raw->sbuf.size(), 0);
  if (raw->rmr == nullptr || raw->smr == nullptr) {
    int err = errno;
    dropConn(raw->qpn);
    return verbsError("ibv_reg_mr (message buffers)", err);
  }
  for (uint32_t i = tune_.sq_depth; i > 0; --i) raw->free_slots.push_back(i - 1);
  for (uint32_t i = 0; post_recvs && i < tune_.rq_depth; ++i) repost(*raw, i);
  return raw;
}

std::vector<uint8_t> VerbsBackend::localAddress() {
  if (cm_) return cmLocalAddress();
  auto c = newConn();
  if (!c) return {};  // the peer's addPeer rejects an empty blob; ours finds no QP
  AddressBlob b;
  b.roce = dev_->roce ? 1 : 0;
  b.mtu = static_cast<uint8_t>(dev_->port_attr.active_mtu);
  b.qpn = c.value()->qpn;
  b.psn = c.value()->psn;
  b.lid = dev_->port_attr.lid;
  b.recv_bytes = tune_.recv_bytes;
  std::memcpy(b.gid, dev_->gid.raw, 16);
  unconnected_.push_back(b.qpn);
  t_last = {this, b.qpn};
  auto* p = reinterpret_cast<const uint8_t*>(&b);
  return {p, p + sizeof(b)};
}

Status VerbsBackend::addPeer(PeerId peer, std::span<const uint8_t> remote) {
  if (cm_) return addPeerCm(peer, remote);
  AddressBlob rb;
  if (remote.size() == sizeof(rb) + sizeof(CmBlob)) {
    return {StatusCode::kProtocolError,
            "the peer connects by rdma_cm (cm=rdmacm), this side by "
            "QP numbers over the bootstrap (cm=tcp): set the same cm"};
  }
  if (remote.size() != sizeof(rb)) {
    return {StatusCode::kProtocolError, "verbs address of " + std::to_string(remote.size()) +
                                            " bytes (expected " + std::to_string(sizeof(rb)) + ")"};
  }
  std::memcpy(&rb, remote.data(), sizeof(rb));
  if (rb.magic != kBlobMagic || rb.version != kBlobVersion) {
    return {StatusCode::kProtocolError, "verbs address blob has a bad magic or version"};
  }
  if (rb.roce != (dev_->roce ? 1 : 0)) {
    return {StatusCode::kProtocolError, "peer's link layer differs (RoCE vs InfiniBand)"};
  }
  if (unconnected_.empty()) return {StatusCode::kIoError, "no local QP for the peer"};
  uint32_t qpn = unconnected_.front();
  for (uint32_t q : unconnected_) {
    if (t_last.backend == this && q == t_last.qpn) qpn = q;
  }
  std::erase(unconnected_, qpn);
  Conn& c = *conns_.at(qpn);
  c.peer = peer;
  c.send_bytes = std::min(rb.recv_bytes, tune_.recv_bytes);
  if (Status s = connectQp(c, rb); !s) {
    dropConn(qpn);
    return s;
  }
  c.connected = true;
  peers_[peer] = qpn;
  return Status::ok();
}

Status VerbsBackend::connectQp(Conn& c, const AddressBlob& rb) {
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = std::min(dev_->port_attr.active_mtu, static_cast<ibv_mtu>(rb.mtu));
  at.dest_qp_num = rb.qpn;
  at.rq_psn = rb.psn;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 1;  // 0.01 ms
  at.ah_attr.port_num = dev_->port;
  at.ah_attr.sl = tune_.sl;
  at.ah_attr.dlid = rb.lid;
  if (dev_->roce || dev_->gid_index > 0) {
    at.ah_attr.is_global = 1;
    std::memcpy(at.ah_attr.grh.dgid.raw, rb.gid, 16);
    at.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev_->gid_index);
    at.ah_attr.grh.hop_limit = 64;
    at.ah_attr.grh.traffic_class = tune_.traffic_class;
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
  Conn* c = connByQpn(it->second);
  peers_.erase(it);
  if (c != nullptr) killConn(*c, Status(StatusCode::kPeerLost, "peer removed"));
}

// Moves the QP to ERR (posted work flushes with errors through the CQ) and
// fails everything still waiting on it outside the QP.
void VerbsBackend::killConn(Conn& c, const Status& why) {
  if (c.dead) return;
  c.dead = true;
  reap_ = true;
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(c.qp, &at, IBV_QP_STATE);
  c.rts_pending.clear();  // their transfers are in rsends_, failed below
  for (auto* q : {&c.backlog, &c.wbacklog}) {
    while (!q->empty()) {
      uint64_t id = q->front();
      q->pop_front();
      if (id >= works_.size() || !works_[id].live) continue;
      failSendWork(works_[id], why);
      freeWork(id);
    }
  }
  std::vector<uint64_t> sends;
  for (auto& [id, s] : rsends_) {
    if (s.qpn == c.qpn) sends.push_back(id);
  }
  for (uint64_t id : sends) finishRndvSend(id, why);
  std::vector<uint32_t> recvs;
  for (auto& [id, r] : rrecvs_) {
    if (r.qpn == c.qpn) recvs.push_back(id);
  }
  for (uint32_t id : recvs) finishRecv(id, why);
}

void VerbsBackend::destroyConn(Conn& c) {
  if (c.qp != nullptr) ibv_destroy_qp(c.qp);
  if (c.rmr != nullptr) ibv_dereg_mr(c.rmr);
  if (c.smr != nullptr) ibv_dereg_mr(c.smr);
  c.qp = nullptr;
  c.rmr = c.smr = nullptr;
}

void VerbsBackend::dropConn(uint32_t qpn) {
  auto it = conns_.find(qpn);
  if (it == conns_.end()) return;
  destroyConn(*it->second);
  conns_.erase(it);
}

VerbsBackend::Conn* VerbsBackend::connByQpn(uint32_t qpn) {
  auto it = conns_.find(qpn);
  return it == conns_.end() ? nullptr : it->second.get();
}

VerbsBackend::Conn* VerbsBackend::connOf(PeerId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return nullptr;
  Conn* c = connByQpn(it->second);
  return c != nullptr && !c->dead ? c : nullptr;
}

}  // namespace tictac::transport::verbs
