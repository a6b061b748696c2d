// transport/core/peer_monitor.h: heartbeats and liveness of the bootstrap links.
//
// After the handshake each peer's TCP bootstrap fd is handed to the monitor.
// Its thread sends a heartbeat frame every `interval` on every link and reads
// whatever the peer sends; EOF, a socket error, a malformed frame, a kBye or no
// frame for `timeout` declares the peer lost: `on_lost(peer, status)` is called
// once per peer, from the monitor thread (it must only record the fact; the
// context fails the peer's operations in its progress context).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tictac/transport/status.h"

namespace tictac::transport {

class PeerMonitor {
 public:
  using LostFn = std::function<void(uint32_t peer, const Status& why)>;

  PeerMonitor(std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
              LostFn on_lost);
  ~PeerMonitor();  // stops the thread, closes every link (sending kBye)

  // Takes ownership of fd. Thread safe.
  void add(uint32_t peer, int fd);
  // Sends kBye and closes the link (the peer sees it as lost); no on_lost call.
  void remove(uint32_t peer);

 private:
  struct Link {
    int fd = -1;
    std::chrono::steady_clock::time_point last_seen;
  };
  void run();
  void wake();
  void closeRemoved();

  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds timeout_;
  LostFn on_lost_;
  std::mutex mu_;
  std::map<uint32_t, Link> links_;
  std::vector<int> closing_;    // removed links, closed by the monitor thread
  int wake_fds_[2] = {-1, -1};  // pipe: add/remove/stop wake the poll
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tictac::transport
