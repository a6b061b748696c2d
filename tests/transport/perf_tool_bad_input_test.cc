// tictac-perf against bad input: flag values it must refuse before it
// connects (exit 2, one line naming the flag), a server fed a connection that
// is not a tictac peer, and a server sent a run config asking for buffers no
// client of this tictac-perf asks for (each: exit 1 with one line, no abort).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "tests/sched/tool_test_util.h"
#include "tools/perf/perf.h"
#include "transport/backend.h"

namespace {

using tictac::sched::testing::ScratchDir;
using tictac::sched::testing::ToolRun;

const std::string kPerf = std::string(TICTAC_BUILD_ROOT) + "/tools/tictac-perf";

class PerfBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kPerf)) GTEST_SKIP() << kPerf << " not built";
    ::setenv("UCX_TLS", "tcp", 1);
    ::setenv("UCX_NET_DEVICES", "lo", 1);
    scratch_ = std::make_unique<ScratchDir>("tictac-perf-bad");
    log_ = scratch_->path("server.log");
  }
  void TearDown() override {
    if (srv_ > 0) {
      ::kill(srv_, SIGKILL);
      ::waitpid(srv_, nullptr, 0);
    }
  }

  // Starts a server on an ephemeral port; returns the port it printed.
  uint16_t startServer() {
    srv_ = ::fork();
    if (srv_ == 0) {
      std::string cmd = "exec " + kPerf + " --port 0 >" + log_ + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::regex port_re("waiting for a client on port ([0-9]+)");
    for (int i = 0; i < 100; ++i) {
      std::smatch m;
      std::string log = ScratchDir::slurp(log_);
      if (std::regex_search(log, m, port_re)) return static_cast<uint16_t>(std::stoi(m[1]));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }

  // The server's exit status, -2 when it still runs 20 s later (then killed).
  int serverExit() {
    int status = 0;
    for (int i = 0; i < 200 && ::waitpid(srv_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (::waitpid(srv_, &status, WNOHANG) == 0) {
      ::kill(srv_, SIGKILL);
      ::waitpid(srv_, &status, 0);
      code = -2;
    }
    srv_ = -1;
    return code;
  }

  std::unique_ptr<ScratchDir> scratch_;
  std::string log_;
  pid_t srv_ = -1;
};

// Each was accepted before: nan and 1e20 sizes reached a static_cast from
// double (undefined; nan crashed the server), "-s 0" silently became 65536,
// "-n -1" became 2^64-1 iterations, nan as a rate was taken; "abc" said "stod".
TEST_F(PerfBadInput, BadNumbersExit2WithOneLineNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"-s nan", "--size"},
      {"-s abc", "--size"},
      {"-s 99999999999999999999", "--size"},
      {"-s 0", "--size"},
      {"-s 1.5", "--size"},
      {"--bulk-size 4G", "--bulk-size"},
      {"--window x", "--window"},
      {"-n -1", "--iters"},
      {"-n 99999999999999999999", "--iters"},
      {"--warmup -1", "--warmup"},
      {"--rate-gbps nan", "--rate-gbps"},
      {"--rate-gbps inf", "--rate-gbps"},
      {"--rate-gbps 1e-300", "--rate-gbps"},  // a run that would never end
      {"--port 70000", "--port"},
      {"--backend-opt TLS", "--backend-opt"},
      {"--backend-opt =tcp", "--backend-opt"},
  };
  for (const auto& [args, flag] : cases) {
    // Nothing listens on port 1: a flag accepted here would make the client
    // retry connecting for 10 s and exit 1.
    ToolRun r =
        scratch_->run("timeout 60 " + kPerf, std::string("--port 1 ") + args + " 127.0.0.1");
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << ": " << r.err;
    EXPECT_LT(r.err.size(), 200u) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  // Port 0 means "any free port" to a server; a client retried it for 10 s.
  ToolRun r = scratch_->run("timeout 60 " + kPerf, "--port 0 127.0.0.1");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--port 0"), std::string::npos) << r.err;
  // A backend option verbs does not know: refused before it looks for a
  // device (so here too), naming the key; the positional SERVER is not
  // taken for a second option.
  const auto built = tictac::transport::compiledBackends();
  if (std::find(built.begin(), built.end(), "verbs") != built.end()) {
    r = scratch_->run("timeout 60 " + kPerf,
                      "--backend verbs --backend-opt windows=1 --backend-opt windws=1 127.0.0.1");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("unknown option 'windws'"), std::string::npos) << r.err;
  }
  // An empty SERVER started a server instead of refusing.
  r = scratch_->run("timeout 60 " + kPerf, "--port 1 ''");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("SERVER is empty"), std::string::npos) << r.err;
}

// A connection that is not a tictac peer: the server exited 1 without a word.
TEST_F(PerfBadInput, GarbageConnectionEndsTheServerWithOneLine) {
  const uint16_t port = startServer();
  ASSERT_NE(port, 0) << ScratchDir::slurp(log_);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string junk = "GET / HTTP/1.0\r\n\r\n" + std::string(4096, '\xff');
  (void)!::write(fd, junk.data(), junk.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::close(fd);
  EXPECT_EQ(serverExit(), 1);
  std::string err = ScratchDir::slurp(log_);
  EXPECT_NE(err.find("tictac-perf: accepting a client:"), std::string::npos) << err;
  EXPECT_LT(err.size(), 1000u) << err;
}

// A run config asking for a 2^62-byte message: the server aborted on an
// uncaught std::bad_alloc (exit 134); now it refuses the config.
TEST_F(PerfBadInput, OversizedRunConfigEndsTheServerWithOneLine) {
  using namespace tictac::perf;
  const uint16_t port = startServer();
  ASSERT_NE(port, 0) << ScratchDir::slurp(log_);
  ContextOptions o;
  o.backend = "ucx";
  auto ctx = Context::create(o);
  ASSERT_TRUE(ctx) << ctx.status().toString();
  auto ch = ctx.value()->connect("127.0.0.1", port);
  ASSERT_TRUE(ch) << ch.status().toString();
  Session s;
  s.ctx.push_back(ctx.value());
  s.ch = ch.value();
  RunConfig cfg{kBw, 0, uint64_t{1} << 62, 1, 0};
  auto sent = s.ch->send({kConfigId, 0, ""}, &cfg, sizeof(cfg), 0);
  ASSERT_TRUE(sent) << sent.status().toString();
  (void)s.wait(sent.value(), std::chrono::seconds(10));  // the server may close first
  const int code = serverExit();
  std::string err = ScratchDir::slurp(log_);
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("run config asks for"), std::string::npos) << err;
}

}  // namespace
