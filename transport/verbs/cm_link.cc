// rdma_cm plumbing of the verbs backend: event channel, listener, resolve,
// connect/accept and the event loop (see cm.h).
#include "transport/verbs/config.h"

#if TICTAC_VERBS_RDMACM

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

#include "transport/verbs/cm.h"

namespace tictac::transport::verbs {

namespace {

Status cmError(const std::string& what, int err) {
  return {StatusCode::kIoError, "rdma_cm: " + what + ": " + std::strerror(err)};
}

sockaddr_in inet(uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = ip;
  a.sin_port = port;
  return a;
}

std::string ipText(uint32_t ip) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &ip, buf, sizeof(buf));
  return buf;
}

bool isFailure(int ev) {
  return ev == RDMA_CM_EVENT_ADDR_ERROR || ev == RDMA_CM_EVENT_ROUTE_ERROR ||
         ev == RDMA_CM_EVENT_CONNECT_ERROR || ev == RDMA_CM_EVENT_UNREACHABLE ||
         ev == RDMA_CM_EVENT_REJECTED || ev == RDMA_CM_EVENT_DEVICE_REMOVAL ||
         ev == RDMA_CM_EVENT_DISCONNECTED || ev == RDMA_CM_EVENT_ADDR_CHANGE;
}

}  // namespace

Result<std::unique_ptr<CmLink>> CmLink::open(const CmConfig& c) {
  std::unique_ptr<CmLink> l(new CmLink());
  l->address_ = c.address;
  in_addr a{};
  if (inet_pton(AF_INET, c.address.c_str(), &a) != 1) {
    return Status(StatusCode::kInvalidArgument,
                  "verbs cm=rdmacm needs `address`, an IPv4 address of an RDMA interface (got '" +
                      c.address + "')");
  }
  l->ip_ = a.s_addr;
  l->channel_ = rdma_create_event_channel();
  if (l->channel_ == nullptr) {
    return Status(StatusCode::kNoDevice, std::string("rdma_cm: rdma_create_event_channel: ") +
                                             std::strerror(errno) +
                                             " (is rdma_ucm loaded? /dev/infiniband/rdma_cm)");
  }
  int fl = fcntl(l->channel_->fd, F_GETFL);
  if (fl < 0 || fcntl(l->channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    return cmError("fcntl", errno);
  }
  if (rdma_create_id(l->channel_, &l->listener_, nullptr, RDMA_PS_TCP) != 0) {
    return cmError("rdma_create_id", errno);
  }
  sockaddr_in sa = inet(l->ip_, 0);
  if (rdma_bind_addr(l->listener_, reinterpret_cast<sockaddr*>(&sa)) != 0) {
    return Status(StatusCode::kNoDevice, "rdma_cm: cannot bind " + c.address + ": " +
                                             std::strerror(errno) +
                                             " (no RDMA device has an interface with it)");
  }
  if (rdma_listen(l->listener_, 64) != 0) return cmError("rdma_listen", errno);
  l->port_ = rdma_get_src_port(l->listener_);
  // Can rdma_cm route to this address at all? (Not on rxe over lo: the
  // route resolution fails with ENODEV.) Find out now, not in addPeer().
  auto until = Clock::now() + std::chrono::milliseconds(c.timeout_ms);
  auto probe = l->resolve(l->ip_, l->port_, 0, until);
  if (!probe) {
    return Status(StatusCode::kNoDevice,
                  "rdma_cm cannot route to " + c.address + " (" + probe.status().message() +
                      "); rxe on lo cannot do rdma_cm: put rxe on a non-loopback interface "
                      "(e.g. a dummy one, docs/softroce.md) or use cm=tcp");
  }
  l->forget(probe.value());
  if (l->listener_->verbs == nullptr) {
    return Status(StatusCode::kNoDevice, "rdma_cm: " + c.address + " is on no RDMA device");
  }
  return l;
}

CmLink::~CmLink() {
  for (auto& [id, st] : ids_) rdma_destroy_id(id);
  if (listener_ != nullptr) rdma_destroy_id(listener_);
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
}

ibv_context* CmLink::verbs() const {
  return listener_->verbs;
}

uint8_t CmLink::portNum() const {
  return listener_->port_num;
}

Result<rdma_cm_id*> CmLink::resolve(uint32_t ip, uint16_t port, uint8_t tos,
                                    Clock::time_point until) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_, &id, nullptr, RDMA_PS_TCP) != 0) {
    return cmError("rdma_create_id", errno);
  }
  ids_[id] = {};
  std::string to = ipText(ip) + ":" + std::to_string(ntohs(port));
  if (tos != 0 && rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)) != 0) {
    int err = errno;
    forget(id);
    return cmError("set ToS " + std::to_string(tos), err);
  }
  uint8_t ack_timeout = 14;  // 67 ms, as the TCP path; older kernels ignore it
  (void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout, 1);
  sockaddr_in src = inet(ip_, 0), dst = inet(ip, port);
  int ms = 2000;
  Status s = Status::ok();
  if (rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                        ms) != 0) {
    s = cmError("rdma_resolve_addr to " + to, errno);
  }
  if (s) s = waitPhase(id, RDMA_CM_EVENT_ADDR_RESOLVED, until, "resolving " + to);
  if (s && id->verbs == nullptr) {  // loopback: librdmacm would crash in resolve_route
    s = Status(StatusCode::kNoDevice, "rdma_cm: " + to + " resolves to no RDMA device");
  }
  if (s && rdma_resolve_route(id, ms) != 0) s = cmError("rdma_resolve_route to " + to, errno);
  if (s) s = waitPhase(id, RDMA_CM_EVENT_ROUTE_RESOLVED, until, "resolving the route to " + to);
  if (!s) {
    forget(id);
    return s;
  }
  return id;
}

Status CmLink::connect(rdma_cm_id* id, const CmRequest& req, Clock::time_point until) {
  rdma_conn_param p{};
  p.private_data = &req;
  p.private_data_len = sizeof(req);
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;  // RNR: retry forever, as the TCP path
  if (rdma_connect(id, &p) != 0) return cmError("rdma_connect", errno);
  Status s = waitPhase(id, RDMA_CM_EVENT_ESTABLISHED, until, "connecting");
  if (s) tuneQp(id);
  return s;
}

Status CmLink::accept(rdma_cm_id* id) {
  ids_.try_emplace(id);
  uint8_t ack_timeout = 14;
  (void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout, 1);
  rdma_conn_param p{};
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  if (rdma_accept(id, &p) != 0) return cmError("rdma_accept", errno);
  tuneQp(id);
  return Status::ok();
}

ibv_qp* CmLink::createQp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  return rdma_create_qp(id, pd, attr) == 0 ? id->qp : nullptr;
}

void CmLink::tuneQp(rdma_cm_id* id) {
  ibv_qp_attr at{};
  at.min_rnr_timer = 1;
  (void)ibv_modify_qp(id->qp, &at, IBV_QP_MIN_RNR_TIMER);  // best effort
}

bool CmLink::established(rdma_cm_id* id) const {
  auto it = ids_.find(id);
  return it != ids_.end() && it->second.phase == RDMA_CM_EVENT_ESTABLISHED && !it->second.failed;
}

bool CmLink::failed(rdma_cm_id* id) const {
  auto it = ids_.find(id);
  return it == ids_.end() || it->second.failed;
}

void CmLink::forget(rdma_cm_id* id) {
  if (ids_.erase(id) > 0) rdma_destroy_id(id);
}

Status CmLink::waitPhase(rdma_cm_id* id, int phase, Clock::time_point until,
                         const std::string& what) {
  Status s = waitUntil([&] { return failed(id) || ids_[id].phase == phase; }, until, what);
  if (!s) return s;
  if (failed(id)) return {StatusCode::kIoError, "rdma_cm: " + what + ": " + ids_[id].why};
  return Status::ok();
}

Status CmLink::waitUntil(const std::function<bool()>& pred, Clock::time_point until,
                         const std::string& what) {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(channel_, &ev) == 0) handle(ev);
    if (pred()) return Status::ok();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) {
      return {StatusCode::kTimeout, "rdma_cm: timed out " + what + " (cm_timeout_ms)"};
    }
    pollfd p{channel_->fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
}

void CmLink::handle(rdma_cm_event* ev) {
  rdma_cm_id* id = ev->id;
  int type = ev->event;
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    CmRequest req;
    bool ok =
        ev->param.conn.private_data != nullptr && ev->param.conn.private_data_len >= sizeof(req);
    if (ok) std::memcpy(&req, ev->param.conn.private_data, sizeof(req));
    rdma_ack_cm_event(ev);
    Status s = ok && on_request_ ? on_request_(id, req)
                                 : Status(StatusCode::kProtocolError, "not a tictac request");
    if (!s) {
      rdma_reject(id, nullptr, 0);
      ids_.erase(id);
      rdma_destroy_id(id);
    }
    return;
  }
  int status = ev->status;
  rdma_ack_cm_event(ev);
  auto it = ids_.find(id);
  if (it == ids_.end()) return;  // the listener, or an id forgotten meanwhile
  if (isFailure(type)) {
    it->second.failed = true;
    it->second.why = std::string(rdma_event_str(static_cast<rdma_cm_event_type>(type))) +
                     (status != 0 ? " (status " + std::to_string(status) + ")" : "");
  } else {
    it->second.phase = type;
  }
}

}  // namespace tictac::transport::verbs

#else  // built without librdmacm

#include "transport/verbs/cm.h"

namespace tictac::transport::verbs {

Result<std::unique_ptr<CmLink>> CmLink::open(const CmConfig&) {
  return Status(StatusCode::kUnsupported,
                "verbs cm=rdmacm: built without librdmacm (meson -Drdmacm=enabled)");
}
CmLink::~CmLink() = default;

}  // namespace tictac::transport::verbs

#endif
