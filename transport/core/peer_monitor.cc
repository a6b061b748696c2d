#include "transport/core/peer_monitor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "transport/core/bootstrap.h"

namespace tictac::transport {

using Clock = std::chrono::steady_clock;
namespace bs = bootstrap;

PeerMonitor::PeerMonitor(std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                         LostFn on_lost)
    : interval_(interval), timeout_(timeout), on_lost_(std::move(on_lost)) {
  if (::pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) wake_fds_[0] = wake_fds_[1] = -1;
  thread_ = std::thread([this] { run(); });
}

PeerMonitor::~PeerMonitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake();
  thread_.join();
  closeRemoved();
  for (auto& [peer, link] : links_) {
    (void)bs::sendFrame(link.fd, bs::FrameType::kBye, {});
    ::close(link.fd);
  }
  for (int fd : wake_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

void PeerMonitor::wake() {
  if (wake_fds_[1] >= 0) {
    char c = 1;
    (void)!::write(wake_fds_[1], &c, 1);
  }
}

void PeerMonitor::add(uint32_t peer, int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  {
    std::lock_guard<std::mutex> lock(mu_);
    links_[peer] = Link{fd, Clock::now()};
  }
  wake();
}

void PeerMonitor::remove(uint32_t peer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = links_.find(peer);
    if (it == links_.end()) return;
    closing_.push_back(it->second.fd);  // closed by the monitor thread only (no fd reuse race)
    links_.erase(it);
  }
  wake();
}

void PeerMonitor::closeRemoved() {
  std::vector<int> fds;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fds.swap(closing_);
  }
  for (int fd : fds) {
    (void)bs::sendFrame(fd, bs::FrameType::kBye, {});
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }
}

void PeerMonitor::run() {
  auto next_beat = Clock::now();
  std::vector<pollfd> fds;
  std::vector<uint32_t> peers;
  for (;;) {
    // Wakes at the next heartbeat or at the first link's deadline, whichever
    // is sooner: a silent peer is declared lost `timeout` after its last
    // frame, not up to an interval later.
    auto wake_at = Clock::time_point::max();
    closeRemoved();
    std::vector<std::pair<uint32_t, Status>> lost;
    bool beat = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      auto now = Clock::now();
      beat = now >= next_beat;
      if (beat) next_beat = now + interval_;
      fds.assign(1, pollfd{wake_fds_[0], POLLIN, 0});
      peers.clear();
      for (auto& [peer, link] : links_) {
        if (now - link.last_seen > timeout_) {
          lost.emplace_back(
              peer, Status(StatusCode::kPeerLost, "no heartbeat from peer for " +
                                                      std::to_string(timeout_.count()) + " ms"));
        }
        wake_at = std::min(wake_at, link.last_seen + timeout_ + std::chrono::milliseconds(1));
        fds.push_back(pollfd{link.fd, POLLIN, 0});
        peers.push_back(peer);
      }
    }
    // Heartbeats outside mu_: a send to a peer that does not read may block
    // (up to 5 s), and remove(), which the engine calls under its own lock,
    // must not wait for that. The fds stay open: only this thread closes links.
    for (size_t i = 1; beat && i < fds.size(); ++i) {
      Status s = bs::sendFrame(fds[i].fd, bs::FrameType::kHeartbeat, {});
      if (!s) lost.emplace_back(peers[i - 1], s);
    }
    wake_at = std::min(wake_at, next_beat);
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - Clock::now());
    if (lost.empty()) {
      ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(1, wait_ms.count())));
    }
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (::read(wake_fds_[0], buf, sizeof(buf)) > 0) {
      }
    }
    for (size_t i = 1; i < fds.size() && lost.empty(); ++i) {
      if (fds[i].revents == 0) continue;
      // Read every complete frame available; any failure means the peer is gone.
      for (;;) {
        pollfd p{fds[i].fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) break;
        auto f = bs::recvFrame(fds[i].fd, Clock::now() + timeout_);
        if (!f) {
          lost.emplace_back(peers[i - 1], Status(StatusCode::kPeerLost, f.status().message()));
          break;
        }
        if (f.value().type == bs::FrameType::kBye) {
          lost.emplace_back(peers[i - 1], Status(StatusCode::kPeerLost, "peer closed the channel"));
          break;
        }
        std::lock_guard<std::mutex> lock(mu_);
        auto it = links_.find(peers[i - 1]);
        if (it != links_.end()) it->second.last_seen = Clock::now();
      }
    }
    for (auto& [peer, why] : lost) {
      int fd = -1;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = links_.find(peer);
        if (it == links_.end()) continue;  // removed meanwhile, or reported already
        fd = it->second.fd;
        links_.erase(it);
      }
      ::close(fd);
      on_lost_(peer, why);
    }
  }
}

}  // namespace tictac::transport
