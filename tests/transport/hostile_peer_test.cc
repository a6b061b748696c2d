// Hostile or broken peers on the TCP bootstrap: a client that sends garbage,
// an oversized or malformed frame, or nothing at all, and a "server" that
// answers with garbage. Each must end in a clear error within the handshake
// deadline (never a crash or a hang), and the listener must go on serving
// well-behaved clients afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <vector>

#include "tests/transport/backend_helper.h"
#include "transport/core/bootstrap.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class HostilePeerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!backendHelper(GetParam()).viable()) GTEST_SKIP() << "backend not available";
    ContextOptions o = backendHelper(GetParam()).options();
    o.connect_timeout = 3s;  // also the handshake deadline of accept() (a real client's too)
    auto c = Context::create(o);
    ASSERT_TRUE(c) << c.status().message();
    ctx_ = c.value();
    auto l = ctx_->listen(0);
    ASSERT_TRUE(l) << l.status().message();
    listener_ = std::move(l.value());
  }

  // A raw TCP connection to the listener.
  int rawConnect() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(listener_->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }

  // accept() must fail (not hang, not crash) with one of `codes`.
  void expectRefused(std::initializer_list<StatusCode> codes) {
    auto t0 = Clock::now();
    auto ch = listener_->accept(10s);
    ASSERT_FALSE(ch) << "a hostile client was accepted";
    EXPECT_LT(Clock::now() - t0, 8s) << "refusal took longer than the handshake deadline";
    EXPECT_FALSE(ch.status().message().empty());
    bool known = false;
    for (auto c : codes) known |= ch.status().code() == c;
    EXPECT_TRUE(known) << ch.status().toString();
  }

  // A well-behaved client still gets through, and a tensor crosses intact.
  void expectStillServes() {
    auto client = Context::create(backendHelper(GetParam()).options());
    ASSERT_TRUE(client);
    auto fut = std::async(std::launch::async,
                          [&] { return client.value()->connect("127.0.0.1", listener_->port()); });
    auto server_ch = listener_->accept(10s);
    auto client_ch = fut.get();
    ASSERT_TRUE(server_ch) << server_ch.status().message();
    ASSERT_TRUE(client_ch) << client_ch.status().message();
    std::vector<char> src(100000), dst(src.size());
    fillPattern(src.data(), src.size(), 7);
    auto e = server_ch.value()->expect({1, 0, ""}, dst.data(), dst.size());
    auto s = client_ch.value()->send({1, 0, ""}, src.data(), src.size());
    ASSERT_TRUE(e && s);
    auto deadline = Clock::now() + 20s;
    while (!(e.value()->done() && s.value()->done()) && Clock::now() < deadline) {
      ctx_->progress();
      client.value()->progress();
    }
    ASSERT_TRUE(e.value()->status().isOk()) << e.value()->status().message();
    ASSERT_TRUE(s.value()->status().isOk()) << s.value()->status().message();
    EXPECT_EQ(checksum(src.data(), src.size()), checksum(dst.data(), dst.size()));
  }

  std::shared_ptr<Context> ctx_;
  std::unique_ptr<Listener> listener_;
};

TEST_P(HostilePeerTest, GarbageBytesAreRefused) {
  int fd = rawConnect();
  std::vector<uint8_t> junk(256, 0xAB);
  ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  expectRefused({StatusCode::kProtocolError, StatusCode::kPeerLost, StatusCode::kIoError});
  ::close(fd);
  expectStillServes();
}

TEST_P(HostilePeerTest, OversizedFrameIsRefusedBeforeItsPayload) {
  int fd = rawConnect();
  bootstrap::FrameHeader h;
  h.type = static_cast<uint16_t>(bootstrap::FrameType::kHello);
  h.length = 0xFFFFFFF0u;  // 4 GiB announced, nothing sent
  ASSERT_EQ(::write(fd, &h, sizeof h), static_cast<ssize_t>(sizeof h));
  expectRefused({StatusCode::kProtocolError});
  ::close(fd);
  expectStillServes();
}

TEST_P(HostilePeerTest, MalformedHelloIsRefused) {
  int fd = rawConnect();
  std::vector<uint8_t> payload(40, 0x5A);  // a hello frame whose payload is noise
  bootstrap::FrameHeader h;
  h.type = static_cast<uint16_t>(bootstrap::FrameType::kHello);
  h.length = static_cast<uint32_t>(payload.size());
  ASSERT_EQ(::write(fd, &h, sizeof h), static_cast<ssize_t>(sizeof h));
  ASSERT_EQ(::write(fd, payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
  expectRefused({StatusCode::kProtocolError});
  ::close(fd);
  expectStillServes();
}

TEST_P(HostilePeerTest, SilentClientTimesOutAtTheHandshakeDeadline) {
  int fd = rawConnect();  // connects, then says nothing
  expectRefused({StatusCode::kTimeout});
  ::close(fd);
  expectStillServes();
}

TEST_P(HostilePeerTest, ClientHangingUpMidFrameIsRefused) {
  int fd = rawConnect();
  bootstrap::FrameHeader h;
  h.type = static_cast<uint16_t>(bootstrap::FrameType::kHello);
  h.length = 100;
  ASSERT_EQ(::write(fd, &h, 10), 10);  // part of a header, then EOF
  ::close(fd);
  expectRefused({StatusCode::kPeerLost, StatusCode::kProtocolError, StatusCode::kIoError});
  expectStillServes();
}

// The connecting side facing a "server" that answers garbage: a clear error.
TEST_P(HostilePeerTest, ConnectToAGarbageServerFails) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto server = std::async(std::launch::async, [lfd] {
    int fd = ::accept(lfd, nullptr, nullptr);
    std::vector<uint8_t> junk(64, 0xC3);
    (void)!::write(fd, junk.data(), junk.size());
    std::this_thread::sleep_for(2s);  // keep the socket open: the client must not wait for EOF
    ::close(fd);
  });
  auto t0 = Clock::now();
  auto ch = ctx_->connect("127.0.0.1", ntohs(a.sin_port));
  EXPECT_FALSE(ch);
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(ch.status().code(), StatusCode::kProtocolError) << ch.status().toString();
  server.get();
  ::close(lfd);
}

INSTANTIATE_TEST_SUITE_P(Backends, HostilePeerTest, ::testing::ValuesIn(selectedBackends()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace tictac::transport::test
