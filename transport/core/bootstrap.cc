#include "transport/core/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace tictac::transport::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

Status sysError(const std::string& what) {
  return {StatusCode::kIoError, what + ": " + std::strerror(errno)};
}

int msLeft(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until fd is readable/writable or the deadline passes.
Status waitFd(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, msLeft(deadline));
    if (rc > 0) return Status::ok();
    if (rc == 0) return {StatusCode::kTimeout, "bootstrap link: deadline passed"};
    if (errno != EINTR) return sysError("poll");
  }
}

Status readAll(int fd, void* buf, size_t len, Deadline deadline) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    if (Status s = waitFd(fd, POLLIN, deadline); !s) return s;
    ssize_t n = ::recv(fd, p, len, 0);
    if (n == 0) return {StatusCode::kPeerLost, "bootstrap link closed by peer"};
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return {StatusCode::kPeerLost, std::string("bootstrap link: ") + std::strerror(errno)};
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::ok();
}

}  // namespace

Result<int> listenTcp(const std::string& bind_address, uint16_t port, uint16_t* bound_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sysError("socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (!bind_address.empty() && ::inet_pton(AF_INET, bind_address.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return Status(StatusCode::kInvalidArgument, "bad bind address '" + bind_address + "'");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    Status s = sysError("bind/listen on port " + std::to_string(port));
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (bound_port) *bound_port = ntohs(addr.sin_port);
  return fd;
}

Result<int> acceptTcp(int listen_fd, Deadline deadline, std::string* peer_name) {
  if (Status s = waitFd(listen_fd, POLLIN, deadline); !s) return s;
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
  if (fd < 0) return sysError("accept");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (peer_name) {
    char host[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
    *peer_name = std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
  }
  return fd;
}

Result<int> connectTcp(const std::string& host, uint16_t port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    return Status(StatusCode::kInvalidArgument,
                  "cannot resolve '" + host + "': " + ::gai_strerror(rc));
  }
  std::string last = "no attempt";
  do {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      ::freeaddrinfo(res);
      return sysError("socket");
    }
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last = std::strerror(errno);
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (Clock::now() < deadline);
  ::freeaddrinfo(res);
  return Status(StatusCode::kTimeout,
                "connect to " + host + ":" + std::to_string(port) + " failed: " + last);
}

Status sendFrame(int fd, FrameType type, std::span<const uint8_t> payload) {
  FrameHeader h;
  h.type = static_cast<uint16_t>(type);
  h.length = static_cast<uint32_t>(payload.size());
  if (payload.size() > kMaxFrame)
    return {StatusCode::kInvalidArgument, "bootstrap frame too large"};
  std::vector<uint8_t> buf(sizeof(h) + payload.size());
  std::memcpy(buf.data(), &h, sizeof(h));
  std::copy(payload.begin(), payload.end(), buf.begin() + sizeof(h));
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t n = ::send(fd, buf.data() + off, buf.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        if (Status s = waitFd(fd, POLLOUT, Clock::now() + std::chrono::seconds(5)); !s) return s;
        continue;
      }
      return {StatusCode::kPeerLost, std::string("bootstrap send: ") + std::strerror(errno)};
    }
    off += static_cast<size_t>(n);
  }
  return Status::ok();
}

Result<Frame> recvFrame(int fd, Deadline deadline) {
  FrameHeader h;
  if (Status s = readAll(fd, &h, sizeof(h), deadline); !s) return s;
  if (h.magic != kMagic) return Status(StatusCode::kProtocolError, "bootstrap: bad magic");
  if (h.version != kVersion) {
    return Status(StatusCode::kProtocolError, "bootstrap: peer speaks version " +
                                                  std::to_string(h.version) + ", this side " +
                                                  std::to_string(kVersion));
  }
  if (h.type < 1 || h.type > static_cast<uint16_t>(FrameType::kReady)) {
    return Status(StatusCode::kProtocolError, "bootstrap: unknown frame " + std::to_string(h.type));
  }
  if (h.length > kMaxFrame) {
    return Status(StatusCode::kProtocolError,
                  "bootstrap: frame of " + std::to_string(h.length) + " bytes exceeds the limit");
  }
  Frame f;
  f.type = static_cast<FrameType>(h.type);
  f.payload.resize(h.length);
  if (h.length > 0) {
    if (Status s = readAll(fd, f.payload.data(), h.length, deadline); !s) return s;
  }
  return f;
}

}  // namespace tictac::transport::bootstrap
