// Listener::close(): a server's shutdown. From another thread it must wake
// an accept() blocked waiting for a peer (kCanceled "listener is closed", not
// the accept's timeout), the port must refuse new connections at once, later
// accept() calls must fail the same way, and a new listener on the same port
// must serve a real peer while the closed object still exists.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "tests/transport/backend_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// connect() to 127.0.0.1:port; 0 when it connected, else errno.
int tcpConnect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

class ListenerCloseTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    auto c = Context::create(backendHelper(GetParam()).options());
    ASSERT_TRUE(c) << c.status().toString();
    ctx_ = c.value();
  }
  std::shared_ptr<Context> ctx_;
};

TEST_P(ListenerCloseTest, CloseWakesABlockedAcceptAndRefusesConnections) {
  auto l = ctx_->listen(0, "127.0.0.1");
  ASSERT_TRUE(l) << l.status().toString();
  Listener& lst = *l.value();
  const uint16_t port = lst.port();
  auto t0 = Clock::now();
  auto blocked = std::async(std::launch::async, [&] { return lst.accept(30s); });
  // Let it reach its poll(); were close() first, accept() fails the same way.
  EXPECT_EQ(blocked.wait_for(200ms), std::future_status::timeout) << "accept() returned early";
  lst.close();
  ASSERT_EQ(blocked.wait_for(10s), std::future_status::ready) << "close() did not wake accept()";
  auto r = blocked.get();
  EXPECT_LT(Clock::now() - t0, 10s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::kCanceled) << r.status().toString();
  EXPECT_EQ(r.status().message(), "listener is closed");
  EXPECT_EQ(tcpConnect(port), ECONNREFUSED) << "the port still accepts connections";
  lst.close();  // again: nothing
  auto later = lst.accept(5s);
  ASSERT_FALSE(later);
  EXPECT_EQ(later.status().code(), StatusCode::kCanceled);
}

TEST_P(ListenerCloseTest, ThePortServesANewListenerWhileTheClosedOneExists) {
  uint16_t port = 0;
  {
    auto probe = ctx_->listen(0, "127.0.0.1");  // a free port, then bound by number below
    ASSERT_TRUE(probe) << probe.status().toString();
    port = probe.value()->port();
  }
  // Bound by number, the closed socket keeps its port until destroyed (the
  // kernel releases only ports it picked): the new bind relies on address reuse.
  auto l = ctx_->listen(port, "127.0.0.1");
  ASSERT_TRUE(l) << l.status().toString();
  l.value()->close();
  auto again = ctx_->listen(port, "127.0.0.1");
  ASSERT_TRUE(again) << again.status().toString();
  auto peer = Context::create(backendHelper(GetParam()).options());
  ASSERT_TRUE(peer);
  auto accepted = std::async(std::launch::async, [&] { return again.value()->accept(20s); });
  auto ba = peer.value()->connect("127.0.0.1", port);
  auto ab = accepted.get();
  ASSERT_TRUE(ab) << ab.status().toString();
  ASSERT_TRUE(ba) << ba.status().toString();
  std::vector<char> src(1000, 's'), dst(1000, 0);
  auto e = ab.value()->expect({1, 0, ""}, dst.data(), dst.size());
  auto s = ba.value()->send({1, 0, ""}, src.data(), src.size());
  ASSERT_TRUE(e && s);
  auto deadline = Clock::now() + 20s;  // both contexts driven here (no progress thread)
  while (!(s.value()->done() && e.value()->done()) && Clock::now() < deadline) {
    ctx_->progress();
    peer.value()->progress();
  }
  EXPECT_TRUE(s.value()->status().isOk()) << s.value()->status().toString();
  EXPECT_TRUE(e.value()->status().isOk()) << e.value()->status().toString();
  EXPECT_EQ(dst, src);
}

TICTAC_INSTANTIATE_BACKENDS(ListenerCloseTest);

}  // namespace
}  // namespace tictac::transport::test
