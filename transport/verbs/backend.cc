// Verbs backend: setup, QP creation and connection, peer teardown.
#include "transport/verbs/backend.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>

#include "transport/verbs/config.h"
#include "transport/verbs/factory.h"
#if TICTAC_VERBS_HWLOC
#include "transport/topo/topology.h"
#endif

namespace tictac::transport::verbs {

Status verbsError(const std::string& what, int err) {
  return {StatusCode::kIoError, what + ": " + std::strerror(err)};
}

namespace {

// A numeric option: BackendOptions::config[key], else TICTAC_VERBS_<KEY>.
Status parseU32(const BackendOptions& o, const char* key, uint32_t lo, uint32_t hi, uint32_t* out) {
  std::string text;
  if (!optionText(o, key, &text)) return Status::ok();
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

// Every key of BackendOptions::config the backend reads (factory.h): any
// other is refused, so that a misspelt option is not silently ignored.
Status checkKeys(const BackendOptions& o) {
  static constexpr std::string_view kKeys[] = {
      "address",      "gid_index",           "eager_bytes",       "sq_depth",
      "rq_depth",     "repost_batch",        "traffic_class",     "sl",
      "class_bounds", "class_traffic_class", "class_sl",          "idle_spins",
      "idle_spin_us", "idle_block_us",       "idle_yield_us",     "rndv_spin_us",
      "rndv_nap_us",  "write_piece_bytes",   "write_queue_bytes", "rts_batch",
      "adverts",      "advert_batch",        "windows",           "qp_timeout",
      "cm",           "cm_timeout_ms"};
  for (const auto& [key, value] : o.config) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return {StatusCode::kInvalidArgument,
              "verbs: unknown option '" + key + "' (transport/verbs/factory.h lists the keys)"};
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Backend>> create(const BackendOptions& options, BackendEvents* events) {
  auto b = std::make_unique<VerbsBackend>(events);
  if (Status s = b->init(options); !s) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

Status VerbsBackend::init(const BackendOptions& options) {
  if (Status s = checkKeys(options); !s) return s;
  uint32_t tc = 0, sl = 0;
  const uint32_t min_recv = kMinRecvBytes;
  static_assert(kMinRecvBytes == sizeof(MsgHdr) + kMaxCoreHeader + kInlineMax);
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
        parseU32(options, "adverts", 0, 1, &tune_.adverts),
        parseU32(options, "advert_batch", 1, 4096, &tune_.advert_batch),
        parseU32(options, "windows", 0, 1, &tune_.windows),
        parseU32(options, "qp_timeout", 1, 31, &tune_.qp_timeout)}) {
    if (!s) return s;
  }
  stats_.init();
  tune_.traffic_class = static_cast<uint8_t>(tc);
  tune_.sl = static_cast<uint8_t>(sl);
  auto cfg = deviceConfig(options);
  if (!cfg) return cfg.status();
  if (Status s = parseClasses(options); !s) return s;
  if (Status s = initCm(options, &cfg.value()); !s) return s;
  if (cm_ && classCount() > 1) {
    return {StatusCode::kUnsupported,
            "verbs class_bounds (one QP per priority class) needs cm=tcp; cm=rdmacm makes one QP "
            "per peer"};
  }
  auto dev = Device::open(cfg.value());
  if (!dev) return dev.status();
  dev_ = std::move(dev.value());
  if (Status s = checkWindows(); !s) return s;
  if (tune_.rndv_nap_us == Tuning::kAuto)
    tune_.rndv_nap_us = dev_->software ? Tuning::kSoftNapUs : 0;
  return Status::ok();
}

VerbsBackend::~VerbsBackend() {
  removeUnmapHook(hook_, hook_arg_);
  stats_.print("backend");
  if (!dev_) return;
  freeWindows();  // before the registrations they are bound to
  for (auto& [qpn, c] : conns_) {
    if (c->qp != nullptr) destroyConn(*c);
  }
  conns_.clear();
  forgetHot();
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

Result<Conn*> VerbsBackend::newConn(const QpMaker& make, bool post_recvs) {
  auto c = std::make_unique<Conn>();
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = dev_->cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = tune_.sq_depth;
  ia.cap.max_recv_wr = tune_.rq_depth;
  // Two receive SGEs (recvSges), two send SGEs (zero-copy eager SENDs:
  // headers + payload) and inline data, else what a device with less takes:
  // one receive SGE, then either send feature alone, then neither.
  for (uint32_t rsge : {2u, 1u}) {
    ia.cap.max_recv_sge = rsge;
    for (auto [sge, inl] : {std::pair{2u, 256u}, {1u, 256u}, {2u, 0u}, {1u, 0u}}) {
      ia.cap.max_send_sge = sge;
      ia.cap.max_inline_data = inl;
      c->qp = make ? make(&ia) : ibv_create_qp(dev_->pd, &ia);
      if (c->qp != nullptr) break;
    }
    if (c->qp != nullptr) break;
  }
  if (c->qp == nullptr) return verbsError("ibv_create_qp", errno);
  max_inline_ = ia.cap.max_inline_data;
  c->two_sge = ia.cap.max_send_sge >= 2;
  c->split_recv = ia.cap.max_recv_sge >= 2;
  c->qpn = c->qp->qp_num;
  c->psn = std::random_device()() & 0xffffff;
  Conn* raw = c.get();
  // The device numbers live QPs uniquely. try_emplace leaves c alone when the
  // number is taken (emplace would build the node and free the Conn).
  if (!conns_.try_emplace(c->qpn, std::move(c)).second) {
    assert(false && "verbs: a QP number already has a Conn");
    destroyConn(*c);
    return Status(StatusCode::kIoError, "verbs: QP number " + std::to_string(raw->qpn) +
                                            " is already in use by a connection");
  }
  int total = static_cast<int>(conns_.size() * (tune_.sq_depth + tune_.rq_depth));
  if (Status s = dev_->reserveCq(total + 64); !s) {
    dropConn(raw->qpn);
    return s;
  }
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.pkey_index = 0;
  at.port_num = dev_->port;
  at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;  // no remote reads
  if (int rc = ibv_modify_qp(raw->qp, &at,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    dropConn(raw->qpn);
    return verbsError("ibv_modify_qp(INIT)", rc);
  }
  raw->rbuf.resize(size_t{tune_.rq_depth} * (tune_.recv_bytes + (raw->split_recv ? kRecvHead : 0)));
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

// Moves the QP to ERR (posted work flushes with errors through the CQ) and
// fails everything still waiting on it outside the QP.
void VerbsBackend::killConn(Conn& c, const Status& why) {
  if (c.dead) return;
  c.dead = true;
  reap_ = true;
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(c.qp, &at, IBV_QP_STATE);
  c.records.clear();  // their transfers are in rsends_, failed below
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
  c.adverts_held.clear();  // in adverts_out_, failed below
  failAdverts(c.qpn, why);
  // Its posted invalidations complete only when polled, maybe after the core
  // deregistered the memory their windows hold (destruction): they go now.
  if (tune_.windows != 0) dropPostedWindows(c.qpn);
  c.adverts_in.clear();
  c.adverts_cut.clear();
}

void VerbsBackend::destroyConn(Conn& c) {
  forgetHot();
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

Conn* VerbsBackend::connByQpn(uint32_t qpn) {
  if (hot_qpn_ != nullptr && hot_qpn_->qpn == qpn) return hot_qpn_;
  auto it = conns_.find(qpn);
  if (it == conns_.end()) return nullptr;
  hot_qpn_ = it->second.get();
  return hot_qpn_;
}

Conn* VerbsBackend::connOf(PeerId peer, size_t cls) {
  if (hot_conn_ != nullptr && hot_peer_ == peer && hot_cls_ == cls) {
    return hot_conn_->dead ? nullptr : hot_conn_;
  }
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.empty()) return nullptr;
  Conn* c = connByQpn(it->second[cls < it->second.size() ? cls : 0]);
  if (c == nullptr) return nullptr;
  hot_conn_ = c;
  hot_peer_ = peer;
  hot_cls_ = cls;
  return c->dead ? nullptr : c;
}

std::vector<int> VerbsBackend::localCpus() {
#if TICTAC_VERBS_HWLOC
  return topo::placeDevice(dev_->name).cpus;  // empty when hwloc cannot place it
#else
  return {};
#endif
}

}  // namespace tictac::transport::verbs
