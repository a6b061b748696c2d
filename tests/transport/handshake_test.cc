// The bootstrap handshake's last step: connect() and accept() return only
// once the other side has added the peer to its data path (kReady both ways).
// Before, a side returned right after the Hellos; the other side's first
// data-path message (a tictac-ps worker's hello) could then reach the
// acceptor's progress thread before its bootstrap thread had added the peer,
// and was dropped as coming from an unknown peer: the send never completed.
// A relay between two real contexts forwards whole bootstrap frames and cuts
// both links at a chosen frame, so each ordering is checked without timing.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "tests/transport/backend_helper.h"
#include "transport/core/bootstrap.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace bs = bootstrap;

// Accepts one connection, connects it to `target`, forwards frames both ways
// until either side closes, or (cut_at set) until the listener's side sends a
// frame of that type: then it closes both links without forwarding it.
class Relay {
 public:
  Relay(uint16_t target, std::optional<bs::FrameType> cut_at) : target_(target), cut_at_(cut_at) {
    auto l = bs::listenTcp("127.0.0.1", 0, &port_);
    EXPECT_TRUE(l) << l.status().toString();
    listen_fd_ = l ? l.value() : -1;
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }

 private:
  void run() {
    auto deadline = Clock::now() + 20s;
    auto down = bs::acceptTcp(listen_fd_, deadline, nullptr);  // the connecting context
    if (!down) return;
    auto up = bs::connectTcp("127.0.0.1", target_, deadline);  // the listening context
    if (!up) {
      ::close(down.value());
      return;
    }
    int fds[2] = {down.value(), up.value()};
    while (!stop_) {
      pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      bool open = true;
      for (int i = 0; i < 2 && open; ++i) {
        if (p[i].revents == 0) continue;
        auto f = bs::recvFrame(fds[i], Clock::now() + 5s);
        open = f && !(i == 1 && cut_at_ && f.value().type == *cut_at_) &&
               bs::sendFrame(fds[1 - i], f.value().type, f.value().payload);
      }
      if (!open) break;
    }
    for (int fd : fds) ::close(fd);
  }

  uint16_t target_;
  std::optional<bs::FrameType> cut_at_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class HandshakeTest : public BackendTest {
 protected:
  std::shared_ptr<Context> make() {
    ContextOptions o = backendHelper(GetParam()).options();
    o.connect_timeout = 10s;
    auto c = Context::create(o);
    EXPECT_TRUE(c) << c.status().toString();
    return c ? c.value() : nullptr;
  }
  // Context a listens, b connects to it through a relay cutting at `cut_at`.
  void connectThroughRelay(std::optional<bs::FrameType> cut_at) {
    p_.a = make();
    p_.b = make();
    ASSERT_TRUE(p_.a && p_.b);
    auto l = p_.a->listen(0, "127.0.0.1");
    ASSERT_TRUE(l) << l.status().toString();
    relay_ = std::make_unique<Relay>(l.value()->port(), cut_at);  // lives as long as the test
    auto fut =
        std::async(std::launch::async, [&] { return p_.b->connect("127.0.0.1", relay_->port()); });
    accepted_ = l.value()->accept(15s);
    connected_ = fut.get();
  }
  Pair p_;
  std::unique_ptr<Relay> relay_;  // destroyed before the contexts
  Result<std::shared_ptr<Channel>> accepted_ = Status(StatusCode::kTimeout, "not run");
  Result<std::shared_ptr<Channel>> connected_ = Status(StatusCode::kTimeout, "not run");
};

// The listener's Hello never reaches the connecting side, which therefore
// never adds the listener: accept() must not report a channel whose peer
// would drop its messages.
TEST_P(HandshakeTest, AcceptWaitsUntilTheConnectingSideAddedIt) {
  connectThroughRelay(bs::FrameType::kHello);
  EXPECT_FALSE(accepted_)
      << "accept() returned before the connecting side had the listener's hello";
  EXPECT_FALSE(connected_);
}

// The connecting side gets the Hello (and adds the listener), but never the
// listener's Ready: connect() must not report a channel either.
TEST_P(HandshakeTest, ConnectWaitsUntilTheListenerAddedIt) {
  connectThroughRelay(bs::FrameType::kReady);
  EXPECT_FALSE(connected_)
      << "connect() returned before the listener confirmed it had added the peer";
  if (!connected_) {
    EXPECT_EQ(connected_.status().code(), StatusCode::kPeerLost) << connected_.status().toString();
  }
}

// The relay itself is faithful: with nothing cut, both sides get a channel
// and a tensor sent at once after setup crosses each way (heartbeats go on
// through the relay meanwhile).
TEST_P(HandshakeTest, RelayedHandshakeGivesWorkingChannels) {
  connectThroughRelay(std::nullopt);
  ASSERT_TRUE(accepted_) << accepted_.status().toString();
  ASSERT_TRUE(connected_) << connected_.status().toString();
  p_.ab = accepted_.value();
  p_.ba = connected_.value();
  uint32_t to_a = 0xA5A5A5A5, to_b = 0x5A5A5A5A, got_a = 0, got_b = 0;
  auto s1 = p_.ba->send({7, 0, ""}, &to_a, sizeof to_a, 0);  // before a posted its expect
  auto s2 = p_.ab->send({8, 0, ""}, &to_b, sizeof to_b, 0);
  auto e1 = p_.ab->expect({7, 0, ""}, &got_a, sizeof got_a);
  auto e2 = p_.ba->expect({8, 0, ""}, &got_b, sizeof got_b);
  ASSERT_TRUE(s1 && s2 && e1 && e2);
  ASSERT_TRUE(driveUntilDone(p_, {s1.value(), s2.value(), e1.value(), e2.value()}, 20s));
  for (const auto& op : {s1.value(), s2.value(), e1.value(), e2.value()}) {
    EXPECT_TRUE(op->status().isOk()) << op->status().toString();
  }
  EXPECT_EQ(got_a, to_a);
  EXPECT_EQ(got_b, to_b);
}

TICTAC_INSTANTIATE_BACKENDS(HandshakeTest);

// handshake() on its own (a socket pair, no backend): each side returns only
// after the other's admit ran, and an admit error reaches the peer as a refusal.
struct Side {
  bool initiator;
  Status admit_result;
  Result<bs::Hello> out = Status(StatusCode::kTimeout, "not run");
  bool close_on_return = false;  // close the fd as soon as handshake() returns (as setupPeer does)
};

void handshakePair(Side& x, Side& y, std::vector<std::string>& log) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::mutex mu;
  auto run = [&](Side& s, int fd, const std::string& me) {
    bs::Hello h;
    h.job_token = 42;
    h.assigned_id = s.initiator ? 1 : 2;
    h.backend = "test";
    auto admit = [&](const bs::Hello&) {
      std::lock_guard<std::mutex> l(mu);
      log.push_back(me + " admitted");
      return s.admit_result;
    };
    s.out = bs::handshake(fd, s.initiator, h, Clock::now() + 10s, admit);
    if (s.close_on_return) ::close(fd);
    std::lock_guard<std::mutex> l(mu);
    log.push_back(me + (s.out ? " returned" : " failed"));
  };
  std::thread tx([&] { run(x, sv[0], "x"); });
  run(y, sv[1], "y");
  tx.join();
  if (!x.close_on_return) ::close(sv[0]);
  if (!y.close_on_return) ::close(sv[1]);
}

size_t at(const std::vector<std::string>& log, const std::string& what) {
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i] == what) return i;
  }
  return log.size();
}

TEST(Handshake, EachSideReturnsOnlyAfterThePeerAdmittedIt) {
  Side x{true, Status::ok()}, y{false, Status::ok()};
  std::vector<std::string> log;
  handshakePair(x, y, log);
  ASSERT_TRUE(x.out) << x.out.status().toString();
  ASSERT_TRUE(y.out) << y.out.status().toString();
  EXPECT_EQ(x.out.value().assigned_id, 2u);
  EXPECT_EQ(y.out.value().assigned_id, 1u);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_LT(at(log, "x admitted"), at(log, "y returned"));
  EXPECT_LT(at(log, "y admitted"), at(log, "x returned"));
}

TEST(Handshake, AnAdmitErrorIsTheRefusalThePeerSees) {
  Side x{true, Status(StatusCode::kIoError, "no endpoint today")}, y{false, Status::ok()};
  std::vector<std::string> log;
  handshakePair(x, y, log);
  ASSERT_FALSE(x.out);
  EXPECT_EQ(x.out.status().code(), StatusCode::kIoError);
  ASSERT_FALSE(y.out);
  EXPECT_EQ(y.out.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(y.out.status().message().find("no endpoint today"), std::string::npos)
      << y.out.status().toString();
}

// The refusing side closes its socket at once, with the peer's Ready still
// unread: the refusal must still reach the peer (not a reset in its place).
TEST(Handshake, AnAdmitErrorSurvivesAnImmediateClose) {
  for (bool refuser_initiates : {true, false}) {
    Side x{refuser_initiates, Status(StatusCode::kIoError, "no endpoint today")};
    Side y{!refuser_initiates, Status::ok()};
    x.close_on_return = true;
    std::vector<std::string> log;
    handshakePair(x, y, log);
    ASSERT_FALSE(x.out);
    ASSERT_FALSE(y.out);
    EXPECT_EQ(y.out.status().code(), StatusCode::kProtocolError) << y.out.status().toString();
    EXPECT_NE(y.out.status().message().find("no endpoint today"), std::string::npos)
        << y.out.status().toString();
  }
}

}  // namespace
// A hostile peer's refusal: its bytes reach the message escaped (no control
// sequence reaches the user's terminal) and cut at 200 (not a megabyte of log).
TEST(Handshake, APeersRefusalIsPrintedSafely) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string why = "\xff\xfe";
  why += '\0';
  why += "\x1b[31mred\\x1b" + std::string(5000, 'A');  // an ESC, then a literal "\x1b"
  std::thread peer([&] {
    (void)bs::sendFrame(sv[0], bs::FrameType::kRefuse,
                        std::vector<uint8_t>(why.begin(), why.end()));
  });
  bs::Hello h;
  h.job_token = 42;
  h.backend = "test";
  auto out = bs::handshake(sv[1], false, h, Clock::now() + 10s, nullptr);
  peer.join();
  ::close(sv[0]);
  ::close(sv[1]);
  ASSERT_FALSE(out);
  const std::string msg = out.status().message();
  EXPECT_NE(msg.find("peer refused the connection: \\xff\\xfe\\x00\\x1b[31mred\\x5cx1b"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("... (" + std::to_string(why.size()) + " bytes)"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 300u);
  for (char c : msg) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
}

}  // namespace tictac::transport::test
