// transport/verbs/cm.h: rdma_cm (librdmacm) connection setup for the verbs
// backend (internal; selected by the "cm" option, see factory.h).
//
// With cm=rdmacm the backend listens on `address` through rdma_cm, and the
// address blob it hands the core's bootstrap carries that listener (IPv4 and
// port) and a random token instead of a ready QP. In addPeer() the side whose
// listener (address, port) sorts lower is the active one: it resolves the
// peer's address and route, creates each QP with rdma_create_qp and connects
// (rdma_connect, private data = CmRequest); the other side accepts. The QPs
// rdma_cm brings to RTS are the same Conns the TCP path makes: the data path
// does not know how a QP was connected. The TCP bootstrap still carries the
// version, job token and heartbeat.
//
// Pairing: an incoming request names its sender's listener and carries the
// token of the blob the active side received. The passive addPeer() claims
// the request that answers the blob this thread's last localAddress() made,
// while that blob is unclaimed; otherwise (addPeer() on another thread) the
// request from the listener in the peer's blob, which is exact as long as two
// backends share at most one channel (two channels between the same pair, set
// up from threads other than their localAddress() calls, may cross).
//
// Built without librdmacm, CmLink::open() returns kUnsupported.
//
// Threading: used only from the backend's calls (serialized by the core).
// rdma_cm events are handled only inside addPeer() (waitUntil): connect
// requests that arrive meanwhile are accepted at once, their QP without
// receive buffers (the sender's SENDs wait on RNR) until addPeer() claims it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transport/backend.h"
#include "transport/core/bounded_set.h"

struct rdma_cm_id;
struct rdma_cm_event;
struct rdma_event_channel;
struct ibv_context;
struct ibv_pd;
struct ibv_qp;
struct ibv_qp_init_attr;

namespace tictac::transport::verbs {

inline constexpr uint32_t kCmMagic = 0x4d435854;  // "TXCM"

// Options: cm ("tcp" | "rdmacm", else TICTAC_VERBS_CM), address (IPv4 of an
// RDMA interface, else TICTAC_VERBS_ADDRESS), cm_timeout_ms (10000).
struct CmConfig {
  bool rdmacm = false;
  std::string address;
  uint32_t timeout_ms = 10000;
};
Result<CmConfig> cmConfig(const BackendOptions& options);

// What a cm=rdmacm address blob carries after the AddressBlob (qpn/psn 0).
struct CmBlob {
  uint32_t magic = kCmMagic;
  uint32_t ipv4 = 0;    // listener address, network order
  uint16_t port = 0;    // listener port, network order
  uint8_t classes = 1;  // QPs per peer (one per priority class)
  uint8_t reserved = 0;
  uint64_t token = 0;  // random, one per localAddress()
};
static_assert(sizeof(CmBlob) == 24, "cm blob layout");

// Private data of a connect request (fits the 56 bytes rdma_cm allows).
struct CmRequest {
  uint32_t magic = kCmMagic;
  uint32_t ipv4 = 0;   // the active side's listener (its identity)
  uint64_t token = 0;  // the token of the blob the active side received
  uint16_t port = 0;
  uint8_t cls = 0;  // which class QP this is
  uint8_t reserved = 0;
  uint32_t reserved2 = 0;
};
static_assert(sizeof(CmRequest) == 24, "cm request layout");

class CmLink {
 public:
  using Clock = std::chrono::steady_clock;
  // Called from inside waitUntil() for each connect request; returns ok
  // after accepting it (accept()), an error to reject it.
  using OnRequest = std::function<Status(rdma_cm_id*, const CmRequest&)>;

  // Event channel + listener on address:0 (any free port). Fails fast, with
  // the reason, when rdma_cm cannot route to the address (rxe on lo).
  static Result<std::unique_ptr<CmLink>> open(const CmConfig& config);
  ~CmLink();
  CmLink(const CmLink&) = delete;
  CmLink& operator=(const CmLink&) = delete;

  ibv_context* verbs() const;  // the device the listener is bound to
  uint8_t portNum() const;
  uint32_t ipv4() const { return ip_; }
  uint16_t listenPort() const { return port_; }
  void setOnRequest(OnRequest f) { on_request_ = std::move(f); }

  // Active side: a new id, address and route resolved to ipv4:port (network
  // order) with IP ToS `tos`; the caller then creates its QP (rdma_create_qp).
  Result<rdma_cm_id*> resolve(uint32_t ipv4, uint16_t port, uint8_t tos, Clock::time_point until);
  // Connects `id` (QP created) and waits until it is established.
  Status connect(rdma_cm_id* id, const CmRequest& req, Clock::time_point until);
  // Passive side: accepts `id` (QP created); established() turns true later.
  Status accept(rdma_cm_id* id);
  bool established(rdma_cm_id* id) const;
  bool failed(rdma_cm_id* id) const;
  // Handles rdma_cm events until pred() holds; kTimeout naming `what` after.
  Status waitUntil(const std::function<bool()>& pred, Clock::time_point until,
                   const std::string& what);
  // rdma_create_qp on id with the backend's PD and attributes (the CM moves
  // it to INIT); null with errno set on failure.
  static ibv_qp* createQp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr);
  // After connect()/accept(): the QP's RNR delay (0.01 ms, as the TCP path
  // sets) instead of the CM's default (0 = 655 ms).
  static void tuneQp(rdma_cm_id* id);
  // Destroys an id (its QP must already be gone or owned elsewhere).
  void forget(rdma_cm_id* id);

 private:
  struct IdState {
    int phase = -1;  // rdma_cm_event_type last seen (-1: none; ADDR_RESOLVED is 0)
    bool failed = false;
    std::string why;
  };
  CmLink() = default;
  void handle(rdma_cm_event* ev);
  Status waitPhase(rdma_cm_id* id, int phase, Clock::time_point until, const std::string& what);

  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  uint32_t ip_ = 0;
  uint16_t port_ = 0;
  std::string address_;
  OnRequest on_request_;
  std::map<rdma_cm_id*, IdState> ids_;
};

// The backend's rdma_cm state (owned by VerbsBackend::cm_).
struct CmState {
  struct Pending {  // an accepted request not yet claimed by addPeer()
    uint32_t ipv4;
    uint16_t port;
    uint8_t cls;
    uint64_t token;
    rdma_cm_id* id;
    uint32_t qpn;
  };
  CmConfig config;
  std::unique_ptr<CmLink> link;
  std::vector<Pending> pending;
  // Tokens of blobs whose passive side is unclaimed. Every bootstrap
  // connection, a stranger's too, makes a blob before it is checked (a
  // failed one is discarded, VerbsBackend::discardAddress): the oldest of
  // more than kMaxIssued are forgotten (that many handshakes at once).
  static constexpr size_t kMaxIssued = 4096;
  BoundedSet issued{kMaxIssued};
};

}  // namespace tictac::transport::verbs
