// tools/ps/roles.cc: what both roles share.
#include "tools/ps/roles.h"

#include <charconv>

namespace tictac::ps {

transport::ContextOptions contextOptions(const Config& c) {
  transport::ContextOptions o;
  o.backend = c.backend;
  o.progress_thread = true;
  o.job_token = 0x7073;  // "ps"
  o.chunk_bytes = c.chunk_bytes;
  o.window_bytes = c.window_bytes;
  // Loopback emulation of the link: the scheduler's token bucket. On shaped
  // links (netns + tbf) the kernel does it and pacing stays off.
  if (!c.shaped) o.rate_gbps = c.rate_gbps;
  // Large jobs queue every parameter to every worker at once.
  o.max_queued = 1u << 20;
  // Roles start in any order, in namespaces, possibly under load.
  o.connect_timeout = std::chrono::seconds(30);
  return o;
}

bool splitPeer(const std::string& peer, std::string& host, uint16_t& port) {
  auto colon = peer.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = peer.substr(0, colon);
  const char* b = peer.data() + colon + 1;
  const char* e = peer.data() + peer.size();
  auto [p, ec] = std::from_chars(b, e, port);
  return ec == std::errc() && p == e && port != 0;
}

}  // namespace tictac::ps
