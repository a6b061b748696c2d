// tests/transport/verbs_helper.h: what the verbs suites (verbs_test,
// verbs_cm_test, verbs_data_path_test; suite 'verbs', run inside
// tools/softroce-vm) share: whether to run, the rxe-on-lo options, and a peer
// process that accepts one channel and then only makes progress.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "tests/transport/backend_helper.h"
#include "transport/backend.h"
#include "transport/verbs/factory.h"

namespace tictac::transport::test {

// True inside the guest (TICTAC_GUEST set: a missing device then fails the
// cases instead of skipping them) or when an RDMA device exists.
inline bool verbsViable() {
  if (std::getenv("TICTAC_GUEST") != nullptr) return true;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return n > 0;
}

// The verbs backend on rxe bound to lo (QPs paired over the TCP bootstrap).
inline ContextOptions verbsLoOptions() {
  ContextOptions o;
  o.backend = "verbs";
  o.backend_config = {{"address", "127.0.0.1"}};
  return o;
}

#define TICTAC_REQUIRE_RDMA_DEVICE()                                   \
  do {                                                                 \
    if (!::tictac::transport::test::verbsViable())                     \
      GTEST_SKIP() << "no RDMA device (run inside tools/softroce-vm)"; \
  } while (0)

// Two verbs backends made with `o`, each the other's peer 1; false (with
// the failure recorded) when either cannot be made.
inline bool makeBackendPair(const BackendOptions& o, BackendEvents* ea, BackendEvents* eb,
                            std::unique_ptr<Backend>* a, std::unique_ptr<Backend>* b) {
  auto ra = verbs::create(o, ea);
  auto rb = verbs::create(o, eb);
  EXPECT_TRUE(ra && rb) << (ra ? rb.status() : ra.status()).toString();
  if (!ra || !rb) return false;
  *a = std::move(ra.value());
  *b = std::move(rb.value());
  auto la = (*a)->localAddress(), lb = (*b)->localAddress();
  EXPECT_TRUE((*a)->addPeer(1, lb));
  EXPECT_TRUE((*b)->addPeer(1, la));
  return true;
}

// Progresses two backends in turn until done() or 10 s pass; done()'s last value.
template <typename F>
bool driveBoth(Backend& a, Backend& b, F done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    a.progress();
    b.progress();
  }
  return done();
}

// Forks a process that listens with `options` on 127.0.0.1, accepts one
// channel and then only makes progress until killed. Returns its pid (-1 on
// failure) and its port in *port.
inline pid_t forkHoldingPeer(const ContextOptions& options, uint16_t* port) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto c = Context::create(options);
    if (!c) ::_exit(3);
    auto l = c.value()->listen(0, "127.0.0.1");
    if (!l) ::_exit(4);
    uint16_t p = l.value()->port();
    if (::write(fds[1], &p, sizeof(p)) != sizeof(p)) ::_exit(5);
    auto ch = l.value()->accept(std::chrono::seconds(30));
    if (!ch) ::_exit(6);
    for (;;) {
      c.value()->progress();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  ::close(fds[1]);
  if (pid > 0 && ::read(fds[0], port, sizeof(*port)) != static_cast<ssize_t>(sizeof(*port))) {
    pid = -1;
  }
  ::close(fds[0]);
  return pid;
}

}  // namespace tictac::transport::test
