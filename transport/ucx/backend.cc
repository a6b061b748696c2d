#include "transport/ucx/backend.h"

#include <net/if.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/ucx/factory.h"

namespace tictac::transport::ucx {

namespace {

Status ucxError(const std::string& what, ucs_status_t st) {
  return {StatusCode::kIoError, what + ": " + ucs_status_string(st)};
}

// True when `name` is a directory entry under /sys/class/infiniband (an RDMA
// device) or, with `port`, one of its ports.
bool rdmaDevice(const std::string& name, const std::string& port) {
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) return false;
  if (port.find('/') != std::string::npos || (!port.empty() && port[0] == '.')) return false;
  std::string path = "/sys/class/infiniband/" + name;
  if (!port.empty()) path += "/ports/" + port;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// UCX only warns about a NET_DEVICES entry it does not know and goes on with
// what is left (shared memory, or nothing). A device the user named must be
// there: each comma-separated entry names a network interface ("eth0"), an
// RDMA device port ("mlx5_0:1") or is "all". Empty entries are skipped, as
// UCX does. (UCX 1.13 takes no "^" negation here: "^eth0" finds no device.)
Status checkNetDevices(const std::string& list) {
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string entry = list.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    const std::string name = entry.substr(0, colon);
    const bool known =
        colon != std::string::npos
            ? colon + 1 < entry.size() && rdmaDevice(name, entry.substr(colon + 1))
            : name == "all" || ::if_nametoindex(name.c_str()) != 0 || rdmaDevice(name, "");
    if (!known) {
      return {StatusCode::kNoDevice, "UCX device '" + entry +
                                         "' is neither a network interface nor an RDMA device" +
                                         " port here (see 'ip link' and 'ibv_devinfo')"};
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Backend>> create(const BackendOptions& options, BackendEvents* events) {
  auto b = std::make_unique<UcxBackend>(events);
  if (Status s = b->init(options); !s) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

Status UcxBackend::init(const BackendOptions& options) {
  // Shared memory needs these (see factory.h). Only when shm transports may be
  // selected: UCX warns (on stdout) about variables no loaded transport reads.
  std::string tls;
  if (auto it = options.config.find("TLS"); it != options.config.end()) {
    tls = it->second;
  } else if (const char* env = std::getenv("UCX_TLS")) {
    tls = env;
  }
  bool maybe_shm = tls.empty() || tls.find("all") != std::string::npos ||
                   tls.find("sm") != std::string::npos || tls.find("shm") != std::string::npos ||
                   tls.find("posix") != std::string::npos || tls.find("sysv") != std::string::npos;
  if (maybe_shm) {
    ::setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
    ::setenv("UCX_SYSV_ERROR_HANDLING", "y", 0);
  }
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucxError("ucp_config_read", st);
  for (const auto& [key, value] : options.config) {
    if (key == kErrHandlingKey) {
      if (value != "peer" && value != "none") {
        ucp_config_release(config);
        return {StatusCode::kInvalidArgument, "ERR_HANDLING must be 'peer' or 'none'"};
      }
      peer_errors_ = value == "peer";
      continue;
    }
    if (key == "NET_DEVICES") {
      if (Status s = checkNetDevices(value); !s) {
        ucp_config_release(config);
        return s;
      }
    }
    st = ucp_config_modify(config, key.c_str(), value.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return {StatusCode::kInvalidArgument,
              "UCX config " + key + "=" + value + ": " + ucs_status_string(st)};
    }
  }
  if (!options.device.empty()) {
    if (Status s = checkNetDevices(options.device); !s) {
      ucp_config_release(config);
      return s;
    }
    (void)ucp_config_modify(config, "NET_DEVICES", options.device.c_str());
  }
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.request_size = sizeof(RequestData);
  params.mt_workers_shared = 0;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK)
    return {StatusCode::kNoDevice, std::string("ucp_init: ") + ucs_status_string(st)};
  confirms_ = rendezvousConfirms(context_, options);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) return ucxError("ucp_worker_create", st);
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  st = ucp_worker_get_address(worker_, &addr, &addr_len);
  if (st != UCS_OK) return ucxError("ucp_worker_get_address", st);
  auto* p = reinterpret_cast<const uint8_t*>(addr);
  address_.assign(p, p + addr_len);
  ucp_worker_release_address(worker_, addr);
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = kAmId;
  hp.cb = &UcxBackend::onAm;
  hp.arg = this;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  st = ucp_worker_set_am_recv_handler(worker_, &hp);
  if (st != UCS_OK) return ucxError("ucp_worker_set_am_recv_handler", st);
  return Status::ok();
}

UcxBackend::~UcxBackend() {
  for (Retained* r : free_retained_) delete r;
  removeUnmapHook(hook_, hook_arg_);
  if (worker_ != nullptr) {
    for (auto& [id, ep] : eps_) closeEndpoint(ep);
    eps_.clear();
    for (int i = 0; i < 100000 && !closing_.empty(); ++i) progress();
    // A flushed close towards a dead peer may never finish: released here,
    // the worker's destruction completes it.
    for (void* req : closing_) ucp_request_free(req);
    ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) ucp_cleanup(context_);
}

Status UcxBackend::addPeer(PeerId peer, std::span<const uint8_t> remote) {
  ucp_ep_h handle = nullptr;
  ucp_ep_params_t ep{};
  // The error callback is installed in both modes. In mode "none" UCX 1.13
  // still reports a failure it detects itself (a shm peer killed while we pull
  // its rendezvous payload with CMA: process_vm_readv -> ESRCH), and without a
  // callback it treats that failure as fatal and aborts the process.
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(remote.data());
  ep.err_mode = peer_errors_ ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  ep.err_handler.cb = &UcxBackend::onEpError;
  ep.err_handler.arg = this;
  ucs_status_t st = ucp_ep_create(worker_, &ep, &handle);
  if (st != UCS_OK) return ucxError("ucp_ep_create", st);
  // An endpoint without an RMA lane (UCX 1.13 leaves cma out of endpoints that
  // ask for peer error handling; an asymmetric UCX_TLS does the same) would
  // complete rendezvous sends before delivery: stop confirming from here on.
  // Chunks already flagged keep their flag (the core reads it from the header).
  if (confirms_ && !endpointHasRmaLane(handle)) confirms_ = false;
  eps_[peer] = handle;
  return Status::ok();
}

void UcxBackend::removePeer(PeerId peer) {
  auto it = eps_.find(peer);
  if (it == eps_.end()) return;
  ucp_ep_h ep = it->second;
  eps_.erase(it);  // first: a failure reported during the close is ignored
  closeEndpoint(ep);
}

void UcxBackend::closeEndpoint(ucp_ep_h ep) {
  // Mode none: UCX 1.13 refuses a forced close (UCS_ERR_INVALID_PARAM), a
  // flush over failed lanes logs an error, and a flushed close of an endpoint
  // still wiring up trips a UCX assertion ("got REP message") in
  // ucp_worker_destroy (CI, 2026-12-01): left to ucp_worker_destroy.
  if (!peer_errors_) return;
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* req = ucp_ep_close_nbx(ep, &rp);
  if (UCS_PTR_IS_PTR(req)) closing_.push_back(req);
}

void UcxBackend::onEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<UcxBackend*>(arg);
  for (const auto& [peer, handle] : self->eps_) {
    if (handle == ep) {
      self->events_->onPeerError(peer, ucxError("UCX endpoint failed", status));
      return;
    }
  }
}

Status UcxBackend::post(PeerId peer, std::span<const std::byte> header, const void* data,
                        size_t len, const MemoryRegion* region, uint64_t token,
                        uint32_t /*priority: one endpoint per peer, no wire classes*/) {
  auto it = eps_.find(peer);
  if (it == eps_.end()) return {StatusCode::kPeerLost, "no endpoint for peer"};
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  rp.cb.send = &UcxBackend::onSend;
  rp.user_data = this;
  rp.flags = 0;
  if (region == nullptr && len <= kInlineMax) rp.flags = UCP_AM_SEND_FLAG_EAGER;
  // confirmsDelivery() promised these: only a rendezvous completion proves delivery.
  if (confirmsDelivery(len, region)) rp.flags = UCP_AM_SEND_FLAG_RNDV;
  if (region != nullptr) {
    rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    rp.memh = memhOf(region);
  }
  void* req = ucp_am_send_nbx(it->second, kAmId, header.data(), header.size(), data, len, &rp);
  if (req == nullptr) {
    sends_done_.emplace_back(token, Status::ok());
    return Status::ok();
  }
  if (UCS_PTR_IS_ERR(req)) return ucxError("ucp_am_send_nbx", UCS_PTR_STATUS(req));
  static_cast<RequestData*>(req)->token = token;
  return Status::ok();
}

void UcxBackend::onSend(void* request, ucs_status_t status, void* user_data) {
  auto* self = static_cast<UcxBackend*>(user_data);
  uint64_t token = static_cast<RequestData*>(request)->token;
  ucp_request_free(request);
  if (status == UCS_ERR_REJECTED) {  // our onAm at the peer dropped it (see there)
    self->events_->onSendDone(
        token, Status(StatusCode::kPeerLost, "the peer dropped the message (channel closed)"));
    return;
  }
  if (peerGone(status)) {
    self->events_->onSendDone(
        token, Status(StatusCode::kPeerLost, std::string("UCX send ended: peer gone (") +
                                                 ucs_status_string(status) + ")"));
    return;
  }
  self->events_->onSendDone(token,
                            status == UCS_OK ? Status::ok() : ucxError("UCX send failed", status));
}

ucs_status_t UcxBackend::onAm(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxBackend*>(arg);
  bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  Incoming in;
  in.length = length;
  in.data = rndv ? nullptr : data;
  self->events_->onMessage(kUnknownPeer, {static_cast<const std::byte*>(header), header_length},
                           in);
  // Consumed, or a dropped rendezvous: its ATS then carries an error, so a
  // sender never takes a payload nobody landed for a delivery.
  // (The core keeps every payload of a live peer: a drop means the peer is gone.)
  if (in.retain_into == nullptr) return rndv ? UCS_ERR_REJECTED : UCS_OK;
  Retained* r = self->newRetained();
  *in.retain_into = r;
  // A small payload is copied out, so UCX's receive descriptor (a whole
  // segment, 8 KiB on shm) is not held for it: what a kept chunk holds stays
  // close to what the core counts (ContextOptions::max_unexpected_bytes).
  bool keep_desc = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0 && length > kCopyBelow;
  if (rndv || keep_desc) {
    r->kind = rndv ? Retained::kRndv : Retained::kData;
    r->ucx = data;
    return UCS_INPROGRESS;
  }
  r->kind = Retained::kCopy;
  r->copy.assign(static_cast<const char*>(data), static_cast<const char*>(data) + length);
  return UCS_OK;
}

}  // namespace tictac::transport::ucx
