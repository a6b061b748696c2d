// transport/ucx/backend.h: the UCX backend (internal; use factory.h).
//
// Messages are ucp active messages with id kAmId: the core's wire header is the
// AM header, the payload the AM data. Small payloads arrive in place; large
// ones arrive as rendezvous descriptors that receive() lands straight into the
// expected buffer (ucp_am_recv_data_nbx), so data is never staged. Completions
// of posts and receives are reported from progress(): callbacks of
// ucp_worker_progress, or queued when ucp completed the call immediately.
#pragma once

#include <ucm/api/ucm.h>
#include <ucp/api/ucp.h>

#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "transport/backend.h"

namespace tictac::transport::ucx {

inline constexpr unsigned kAmId = 7;
// BackendOptions::config key read by this backend (not passed to ucp):
// "none" (default) or "peer" = UCP_ERR_HANDLING_MODE_PEER on every endpoint.
// Peer failures are detected by the core's TCP bootstrap either way; "peer"
// adds UCX's own detection but, in UCX 1.13, keeps the single-copy CMA
// rendezvous out of shared-memory endpoints (several times slower for large
// messages), hence the default.
inline constexpr const char* kErrHandlingKey = "ERR_HANDLING";

// Payloads of at least this many bytes with a region are sent by forced
// rendezvous and confirmDelivery() (when rendezvousConfirms() held at init):
// below it an eager send (no handshake) plus the core's ack is cheaper.
inline constexpr size_t kConfirmMin = 32 * 1024;
// A kept (unexpected) eager payload up to this size is copied rather than
// holding UCX's receive descriptor (onAm).
inline constexpr size_t kCopyBelow = 4096;

// Whether, with this context's transports and configuration, a rendezvous AM
// send completes only once the receiver holds the data (delivery.cc explains
// the UCX code paths). Called once at init.
bool rendezvousConfirms(ucp_context_h context, const BackendOptions& options);
// Whether the endpoint's configuration has an RMA bandwidth lane (the
// rendezvous moves data by get/put rather than by AM fragments).
bool endpointHasRmaLane(ucp_ep_h ep);

// The statuses a request ends with when its endpoint failed or was closed
// under it: the peer is gone, whichever of this and the bootstrap's EOF is
// noticed first (completions report kPeerLost for them).
inline bool peerGone(ucs_status_t st) {
  return st == UCS_ERR_CANCELED || st == UCS_ERR_CONNECTION_RESET ||
         st == UCS_ERR_ENDPOINT_TIMEOUT || st == UCS_ERR_UNREACHABLE;
}

// Lives inside every ucp request (ucp_params_t::request_size).
struct RequestData {
  uint64_t token;
};

// The ucp memory handle of a region made by UcxBackend::registerMemory.
ucp_mem_h memhOf(const MemoryRegion* region);

class UcxBackend final : public Backend {
 public:
  UcxBackend(BackendEvents* events) : events_(events) {}
  ~UcxBackend() override;
  Status init(const BackendOptions& options);

  std::string name() const override { return "ucx"; }
  std::vector<uint8_t> localAddress() override { return address_; }
  Status addPeer(PeerId peer, std::span<const uint8_t> remote_address) override;
  void removePeer(PeerId peer) override;
  Result<std::unique_ptr<MemoryRegion>> registerMemory(const void* addr, size_t len) override;
  Status post(PeerId peer, std::span<const std::byte> header, const void* data, size_t len,
              const MemoryRegion* region, uint64_t token, uint32_t priority) override;
  Status receive(void* desc, void* dst, size_t len, const MemoryRegion* region,
                 uint64_t token) override;
  void release(void* desc) override;
  bool confirmsDelivery(size_t len, const MemoryRegion* region) const override {
    return confirms_ && region != nullptr && len >= kConfirmMin;
  }
  unsigned progress() override;
  int eventFd() override;
  bool arm() override;
  bool installUnmapHook(UnmapHook hook, void* arg) override;
  void removeUnmapHook(UnmapHook hook, void* arg) override;
  // ucm callback (any thread, inside munmap): forwards to the installed hook.
  static void onUnmap(ucm_event_type_t type, ucm_event_t* event, void* arg);

 private:
  // A retained incoming payload (the Backend's opaque desc).
  struct Retained {
    enum Kind { kRndv, kData, kCopy } kind;
    void* ucx = nullptr;     // rndv descriptor or persistent data
    std::vector<char> copy;  // kCopy
  };
  static ucs_status_t onAm(void* arg, const void* header, size_t header_length, void* data,
                           size_t length, const ucp_am_recv_param_t* param);
  static void onSend(void* request, ucs_status_t status, void* user_data);
  static void onRecv(void* request, ucs_status_t status, size_t length, void* user_data);
  // Endpoint failure (arg = this): reported for the peer that still owns `ep`;
  // an endpoint already removed is ignored.
  static void onEpError(void* arg, ucp_ep_h ep, ucs_status_t status);
  // Closes an endpoint by force in mode "peer"; in mode "none" it is left to
  // ucp_worker_destroy (see closeEndpoint in backend.cc).
  void closeEndpoint(ucp_ep_h ep);

  Retained* newRetained();         // from free_retained_ when possible
  void freeRetained(Retained* r);  // back to free_retained_ (bounded)

  BackendEvents* events_;
  std::vector<Retained*> free_retained_;  // recycled descs: no malloc per rendezvous
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
  bool peer_errors_ = false;  // UCP_ERR_HANDLING_MODE_PEER
  bool confirms_ = false;  // rendezvousConfirms() at init; off once an endpoint lacks an RMA lane
  std::map<PeerId, ucp_ep_h> eps_;
  std::vector<void*> closing_;            // ep close requests
  DeferredDone sends_done_, recvs_done_;  // completed inside a post; reported by progress()
  UnmapHook hook_ = nullptr;              // one hook (the context's cache); set before ucm sees it
  void* hook_arg_ = nullptr;
};

}  // namespace tictac::transport::ucx
