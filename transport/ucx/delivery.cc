// UCX backend: when a rendezvous send completion proves delivery
// (Backend::confirmsDelivery). See docs/transport.md "UCX: delivery
// confirmation" for the UCX 1.13 code paths this relies on.
//
// In UCX 1.13 (protocols v1, the default: UCX_PROTO_ENABLE=n) an active
// message sent with UCP_AM_SEND_FLAG_RNDV completes at the sender when:
// - get_zcopy (cma, knem, xpmem, rc, dc): the receiver fetched the data and
//   answered ATS (ucp_rndv_get_completion -> ucp_rndv_req_send_ack ->
//   ucp_rndv_ats_handler at the sender);
// - put_zcopy (tcp): the receiver's RTR carried its buffer address, the
//   sender's uct_tcp_ep_put_zcopy completes on the peer's PUT_ACK, posted once
//   the whole payload is in the receiver's buffer (uct_tcp_ep_put_rx_advance);
// - the AM fallback (no RMA lane: ud, posix/sysv without cma, tcp with
//   TCP_PUT_ENABLE=n): ucp_rndv_progress_am_bcopy/zcopy complete locally, too
//   early. confirmsDelivery() is false then.
// The decision is made at init, from the transports of the ucp context and
// the configuration; addPeer() turns it off for good when an endpoint has no
// RMA lane after all (peer error handling leaves cma out in UCX 1.13).
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

#include "transport/ucx/backend.h"

namespace tictac::transport::ucx {

namespace {

// Output of a ucp print function (which writes to a FILE*).
template <typename Fn>
std::string printed(Fn fn) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) return {};
  fn(f);
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

// The value of `key` (without UCX_) in the options, else the environment.
std::string setting(const BackendOptions& options, const std::string& key) {
  if (auto it = options.config.find(key); it != options.config.end()) return it->second;
  const char* env = std::getenv(("UCX_" + key).c_str());
  return env != nullptr ? env : "";
}

bool isNo(std::string v) {
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "n" || v == "no" || v == "0" || v == "off" || v == "false";
}

bool isYes(std::string v) {
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "y" || v == "yes" || v == "1" || v == "on" || v == "true";
}

// Transport names of the context's resources ("resource N : ... -- tl/dev").
std::set<std::string> transports(ucp_context_h context) {
  std::set<std::string> tls;
  std::istringstream in(printed([&](FILE* f) { ucp_context_print_info(context, f); }));
  for (std::string line; std::getline(in, line);) {
    if (line.find("resource") == std::string::npos) continue;
    auto dash = line.find("-- ");
    if (dash == std::string::npos) continue;
    std::string tl = line.substr(dash + 3);
    tls.insert(tl.substr(0, tl.find('/')));
  }
  return tls;
}

}  // namespace

bool rendezvousConfirms(ucp_context_h context, const BackendOptions& options) {
  if (isYes(setting(options, "PROTO_ENABLE"))) return false;  // protocols v2: not verified
  std::string scheme = setting(options, "RNDV_SCHEME");
  if (!scheme.empty() && scheme != "auto" && scheme != "get_zcopy" && scheme != "put_zcopy") {
    return false;
  }
  static const std::set<std::string> kRma = {"cma",      "knem",    "xpmem",
                                             "rc_verbs", "rc_mlx5", "dc_mlx5"};
  static const std::set<std::string> kShmAm = {"posix", "sysv"};
  auto tls = transports(context);
  bool rma = false, shm_am = false;
  for (const auto& tl : tls) {
    if (kRma.count(tl)) {
      rma = true;
    } else if (kShmAm.count(tl)) {
      shm_am = true;
    } else if (tl == "tcp") {
      if (isNo(setting(options, "TCP_PUT_ENABLE"))) return false;
      rma = true;
    } else if (tl != "self") {
      return false;  // ud, cuda, ...: the AM fallback may carry the data
    }
  }
  // posix/sysv carry AMs only: their rendezvous needs an RMA transport beside
  // (without one, shm_am alone falls back to AM data).
  (void)shm_am;
  return rma;
}

bool endpointHasRmaLane(ucp_ep_h ep) {
  return printed([&](FILE* f) { ucp_ep_print_info(ep, f); }).find("rma_bw#") != std::string::npos;
}

}  // namespace tictac::transport::ucx
