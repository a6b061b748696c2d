// verbs_floor's TCP side: the one connection over which the two sides
// exchange QP numbers, GIDs and the end of the run (see verbs_floor.h).
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/verbs_floor.h"

// One TCP connection for the exchange (the contract: verbs_floor.h).
int tcpConnect(const std::string& host, int port_num) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
  std::string port = std::to_string(port_num);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res)) {
    fail("resolving '" + host + "': " + gai_strerror(rc));
  }
  int fd = socket(res->ai_family, SOCK_STREAM, 0);
  if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  if (!host.empty()) {  // a server still opening its device: retry for 5 s
    int rc = -1;
    for (int tries = 0; tries < 50; ++tries) {
      if ((rc = connect(fd, res->ai_addr, res->ai_addrlen)) == 0 || errno != ECONNREFUSED) break;
      close(fd);
      usleep(100000);
      if ((fd = socket(res->ai_family, SOCK_STREAM, 0)) < 0) break;
    }
    int err = errno;
    freeaddrinfo(res);
    if (rc != 0) fail("connecting to " + host + ":" + port + ": " + std::strerror(err));
    return fd;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1) != 0) {
    fail("listening on port " + port + ": " + std::strerror(errno));
  }
  freeaddrinfo(res);
  std::fprintf(stderr, "verbs_floor: waiting for a client on port %s\n", port.c_str());
  int c = accept(fd, nullptr, nullptr);
  close(fd);
  if (c < 0) fail(std::string("accept: ") + std::strerror(errno));
  return c;
}

void exchange(int fd, const void* out, void* in, size_t len, double wait_s) {
  if (send(fd, out, len, MSG_NOSIGNAL) != static_cast<ssize_t>(len)) {
    fail("sending to the peer failed");
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  size_t got = 0;
  while (got < len) {
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, 1000);  // in slices: wait_s may exceed an int of milliseconds
    if (rc < 0 && errno != EINTR) fail(std::string("poll: ") + std::strerror(errno));
    if (rc <= 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        fail("the peer sent nothing for " + std::to_string(static_cast<long long>(wait_s)) + " s");
      }
      continue;
    }
    ssize_t n = read(fd, static_cast<char*>(in) + got, len - got);
    if (n <= 0) fail("the peer closed the exchange");
    got += static_cast<size_t>(n);
  }
}
