// Verbs backend: the rdma_cm connection path (cm=rdmacm; see cm.h).
#include "transport/verbs/cm.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "transport/verbs/backend.h"
#include "transport/verbs/config.h"

namespace tictac::transport::verbs {

namespace {

// config[key], else the environment variable, else empty.
std::string option(const BackendOptions& o, const char* key, const char* env) {
  if (auto it = o.config.find(key); it != o.config.end()) return it->second;
  const char* e = std::getenv(env);
  return e != nullptr ? e : "";
}

// The token of the blob this thread's last localAddress() made (a tie-break
// only: see cm.h).
thread_local uint64_t t_last_token = 0;

}  // namespace

Result<CmConfig> cmConfig(const BackendOptions& o) {
  CmConfig c;
  std::string mode = option(o, "cm", "TICTAC_VERBS_CM");
  if (mode == "rdmacm") {
    c.rdmacm = true;
  } else if (!mode.empty() && mode != "tcp") {
    return Status(
        StatusCode::kInvalidArgument,
        "verbs cm '" + mode + "' must be 'tcp' (QP numbers over the bootstrap) or 'rdmacm'");
  }
  c.address = option(o, "address", "TICTAC_VERBS_ADDRESS");
  std::string t = option(o, "cm_timeout_ms", "TICTAC_VERBS_CM_TIMEOUT_MS");
  if (!t.empty()) {
    char* end = nullptr;
    unsigned long v = std::strtoul(t.c_str(), &end, 10);
    if (*end != '\0' || v < 100 || v > 600000) {
      return Status(StatusCode::kInvalidArgument,
                    "verbs cm_timeout_ms '" + t + "' must be in 100..600000");
    }
    c.timeout_ms = static_cast<uint32_t>(v);
  }
  return c;
}

Status VerbsBackend::initCm(const BackendOptions& options, DeviceConfig* dc) {
  auto cfg = cmConfig(options);
  if (!cfg) return cfg.status();
  if (!cfg.value().rdmacm) return Status::ok();
#if TICTAC_VERBS_RDMACM
  auto link = CmLink::open(cfg.value());
  if (!link) return link.status();
  cm_ = std::make_unique<CmState>();
  cm_->config = cfg.value();
  cm_->link = std::move(link.value());
  cm_->link->setOnRequest([this](rdma_cm_id* id, const CmRequest& r) { return acceptCm(id, r); });
  // The PD, CQ and QPs must live on the context rdma_cm bound the listener to.
  dc->context = cm_->link->verbs();
  dc->port = cm_->link->portNum();
  if (dc->address.empty()) dc->address = cfg.value().address;
  return Status::ok();
#else
  (void)dc;
  return {StatusCode::kUnsupported,
          "verbs cm=rdmacm: this build has no librdmacm (meson -Drdmacm=enabled)"};
#endif
}

#if TICTAC_VERBS_RDMACM

std::vector<uint8_t> VerbsBackend::cmLocalAddress() {
  AddressBlob b;
  b.roce = dev_->roce ? 1 : 0;
  b.mtu = static_cast<uint8_t>(dev_->port_attr.active_mtu);
  b.lid = dev_->port_attr.lid;
  b.recv_bytes = tune_.recv_bytes;
  std::memcpy(b.gid, dev_->gid.raw, 16);
  CmBlob cb;
  cb.ipv4 = cm_->link->ipv4();
  cb.port = cm_->link->listenPort();
  cb.classes = 1;
  do {
    cb.token = (uint64_t{std::random_device()()} << 32) | std::random_device()();
  } while (cb.token == 0);
  t_last_token = cb.token;
  cm_->issued.insert(cb.token);
  std::vector<uint8_t> out(sizeof(b) + sizeof(cb));
  std::memcpy(out.data(), &b, sizeof(b));
  std::memcpy(out.data() + sizeof(b), &cb, sizeof(cb));
  return out;
}

Status VerbsBackend::acceptCm(rdma_cm_id* id, const CmRequest& r) {
  if (r.magic != kCmMagic || r.cls != 0) {
    return {StatusCode::kProtocolError, "rdma_cm: not a tictac request"};
  }
  // A request answers one blob this backend gave out over a bootstrap link
  // (its token), once: anything else is refused before a QP and its receive
  // buffers are made for it (a flood of requests cannot pin memory).
  if (!cm_->issued.contains(r.token)) {
    return {StatusCode::kProtocolError, "rdma_cm: request with a token this side never issued"};
  }
  for (const auto& p : cm_->pending) {
    if (p.token == r.token) return {StatusCode::kProtocolError, "rdma_cm: a second request"};
  }
  auto made =
      newConn([&](ibv_qp_init_attr* ia) { return CmLink::createQp(id, dev_->pd, ia); }, false);
  if (!made) return made.status();
  uint32_t qpn = made.value()->qpn;
  if (Status s = cm_->link->accept(id); !s) {
    dropConn(qpn);
    return s;
  }
  cm_->pending.push_back({r.ipv4, r.port, r.cls, r.token, id, qpn});
  return Status::ok();
}

Status VerbsBackend::addPeerCm(PeerId peer, std::span<const uint8_t> remote) {
  AddressBlob rb;
  CmBlob cb;
  if (remote.size() == sizeof(rb)) {
    return {StatusCode::kProtocolError,
            "the peer connects by QP numbers over the bootstrap (cm=tcp), this side by rdma_cm "
            "(cm=rdmacm): set the same cm on both"};
  }
  if (remote.size() != sizeof(rb) + sizeof(cb)) {
    return {StatusCode::kProtocolError, "verbs (rdma_cm) address of " +
                                            std::to_string(remote.size()) + " bytes (expected " +
                                            std::to_string(sizeof(rb) + sizeof(cb)) + ")"};
  }
  std::memcpy(&rb, remote.data(), sizeof(rb));
  std::memcpy(&cb, remote.data() + sizeof(rb), sizeof(cb));
  if (rb.magic != kBlobMagic || rb.version != kBlobVersion || cb.magic != kCmMagic) {
    return {StatusCode::kProtocolError, "verbs address blob has a bad magic or version"};
  }
  if (Status s = checkRecvBytes(rb.recv_bytes); !s) return s;
  if (cb.classes != 1) {
    return {StatusCode::kProtocolError,
            "peer uses " + std::to_string(cb.classes) + " QPs per peer, this side 1"};
  }
  CmLink& link = *cm_->link;
  auto until = CmLink::Clock::now() + std::chrono::milliseconds(cm_->config.timeout_ms);
  uint64_t mine = (uint64_t{ntohl(link.ipv4())} << 16) | ntohs(link.listenPort());
  uint64_t theirs = (uint64_t{ntohl(cb.ipv4)} << 16) | ntohs(cb.port);
  if (mine == theirs)
    return {StatusCode::kInvalidArgument, "rdma_cm: a backend cannot pair with itself"};
  uint32_t qpn = 0;
  if (mine < theirs) {                // active: resolve, create the QP on the id, connect
    cm_->issued.erase(t_last_token);  // no request will answer this blob
    auto id = link.resolve(cb.ipv4, cb.port, tune_.traffic_class, until);
    if (!id) return id.status();
    auto made =
        newConn([&](ibv_qp_init_attr* ia) { return CmLink::createQp(id.value(), dev_->pd, ia); });
    if (!made) {
      link.forget(id.value());
      return made.status();
    }
    qpn = made.value()->qpn;
    CmRequest req;
    req.ipv4 = link.ipv4();
    req.port = link.listenPort();
    req.token = cb.token;
    if (Status s = link.connect(id.value(), req, until); !s) {
      dropConn(qpn);
      link.forget(id.value());
      return s;
    }
  } else {  // passive: claim the request from the peer's listener (accepted meanwhile)
    // The request answering this thread's last blob if this thread made one
    // that is still unclaimed (it may not have arrived yet); else any from
    // the peer's listener (one channel per pair of backends needs no more).
    bool mine_open = cm_->issued.contains(t_last_token);
    auto find = [&]() -> CmState::Pending* {
      CmState::Pending* pick = nullptr;
      for (auto& p : cm_->pending) {
        if (p.ipv4 != cb.ipv4 || p.port != cb.port || link.failed(p.id)) continue;
        if (mine_open ? p.token == t_last_token : pick == nullptr) pick = &p;
      }
      return pick != nullptr && link.established(pick->id) ? pick : nullptr;
    };
    if (Status s = link.waitUntil([&] { return find() != nullptr; }, until,
                                  "waiting for the peer's connect request");
        !s) {
      return s;
    }
    CmState::Pending* p = find();
    qpn = p->qpn;
    cm_->issued.erase(p->token);
    cm_->pending.erase(cm_->pending.begin() + (p - cm_->pending.data()));
    Conn& c = *conns_.at(qpn);
    for (uint32_t i = 0; i < tune_.rq_depth; ++i) repost(c, i);
  }
  Conn& c = *conns_.at(qpn);
  c.peer = peer;
  c.send_bytes = std::min(rb.recv_bytes, tune_.recv_bytes);
  c.connected = true;
  peers_[peer] = {qpn};
  forgetHot();
  return Status::ok();
}

#else

std::vector<uint8_t> VerbsBackend::cmLocalAddress() {
  return {};
}
Status VerbsBackend::acceptCm(rdma_cm_id*, const CmRequest&) {
  return {StatusCode::kUnsupported, "built without librdmacm"};
}
Status VerbsBackend::addPeerCm(PeerId, std::span<const uint8_t>) {
  return {StatusCode::kUnsupported, "built without librdmacm"};
}

#endif

}  // namespace tictac::transport::verbs
