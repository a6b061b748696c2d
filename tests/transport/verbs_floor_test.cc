// bench/verbs_floor inside the soft-RoCE guest (suite 'verbs'): a real server
// and client process on rxe, the JSON it reports, and its failures (bad
// usage, a missing device, no server, a peer that dies mid-run) as a named
// error and a non-zero exit, never a hang.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "tests/sched/tool_test_util.h"

namespace {

using nlohmann::json;
using tictac::sched::testing::freePort;
using tictac::sched::testing::ScratchDir;
using tictac::sched::testing::ToolRun;
using Clock = std::chrono::steady_clock;

const std::string kFloor = std::string(TICTAC_BUILD_ROOT) + "/bench/verbs_floor";

// Inside tools/softroce-vm (TICTAC_GUEST=1) the device must be there; on a
// host without one the cases that need it skip with the reason.
bool haveDevice() {
  int n = 0;
  ibv_device** l = ibv_get_device_list(&n);
  if (l != nullptr) ibv_free_device_list(l);
  return n > 0;
}

#define REQUIRE_DEVICE()                                                                 \
  do {                                                                                   \
    if (!haveDevice() && std::getenv("TICTAC_GUEST") == nullptr) {                       \
      GTEST_SKIP() << "no RDMA device (run inside tools/softroce-vm, or rdma link add)"; \
    }                                                                                    \
  } while (0)

class VerbsFloor : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kFloor)) {
      if (std::getenv("TICTAC_GUEST") != nullptr) FAIL() << kFloor << " not built";
      GTEST_SKIP() << kFloor << " not built";
    }
    scratch_ = std::make_unique<ScratchDir>("verbs-floor");
    port_ = std::to_string(freePort());
  }

  // Starts the server with `args`; stop() reaps it (SIGKILL after `limit`).
  void startServer(const std::string& args) {
    srv_ = ::fork();
    if (srv_ == 0) {
      std::string cmd = "exec " + kFloor + " -p " + port_ + " " + args + " >" +
                        scratch_->path("server.out") + " 2>" + scratch_->path("server.err");
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  // Waits (at most 30 s) until the server's stderr holds `text`.
  bool serverSaid(const std::string& text) {
    for (auto end = Clock::now() + std::chrono::seconds(30); Clock::now() < end;) {
      if (serverErr().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  int stop(std::chrono::seconds limit) {
    int status = 0;
    if (srv_ <= 0) return -1;  // fork failed
    auto end = Clock::now() + limit;
    while (::waitpid(srv_, &status, WNOHANG) == 0) {
      if (Clock::now() > end) {
        ::kill(srv_, SIGKILL);
        ::waitpid(srv_, &status, 0);
        return -2;  // a hang
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ToolRun client(const std::string& args) {
    return scratch_->run("timeout 60 " + kFloor, "-p " + port_ + " " + args + " 127.0.0.1");
  }
  // A client in the background (output discarded), for the dead-peer cases.
  pid_t startClient(const std::string& args) {
    pid_t pid = ::fork();
    if (pid == 0) {
      std::string cmd =
          "exec " + kFloor + " -p " + port_ + " " + args + " 127.0.0.1 >/dev/null 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }
  std::string serverErr() const { return ScratchDir::slurp(scratch_->path("server.err")); }

  std::unique_ptr<ScratchDir> scratch_;
  std::string port_;
  pid_t srv_ = -1;
};

TEST_F(VerbsFloor, PingPongReportsTheHalfRoundTrip) {
  REQUIRE_DEVICE();
  startServer("-n 300");
  ToolRun r = client("-n 300 --json");
  EXPECT_EQ(stop(std::chrono::seconds(20)), 0) << serverErr();
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["test"], "floor");
  EXPECT_EQ(j["size"], 72);  // tictac's 8-byte message with its two headers
  EXPECT_EQ(j["iters"], 300);
  EXPECT_EQ(j["shared_cq"], true);
  EXPECT_EQ(j["channel"], true);
  EXPECT_GT(j["lat_us"]["p50"].get<double>(), 0);
  EXPECT_LE(j["lat_us"]["p50"].get<double>(), j["lat_us"]["p99"].get<double>());
}

TEST_F(VerbsFloor, LoadAndLayoutOptionsAreApplied) {
  REQUIRE_DEVICE();
  const std::string opts = "-s 8 -n 200 --separate-cq --no-channel --calls 16 --pages 8 --work 100";
  startServer(opts);
  ToolRun r = client(opts + " --json");
  EXPECT_EQ(stop(std::chrono::seconds(20)), 0) << serverErr();
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["size"], 8);
  EXPECT_EQ(j["shared_cq"], false);
  EXPECT_EQ(j["channel"], false);
  EXPECT_EQ(j["calls"], 16);
  EXPECT_EQ(j["pages"], 8);
  EXPECT_EQ(j["work"], 100);
}

TEST_F(VerbsFloor, BandwidthModeWritesEveryMessage) {
  REQUIRE_DEVICE();
  for (const std::string opts : {"--bw -s 65536 -n 300", "--bw --imm -s 65536 -n 300",
                                 "--bw --imm --spin --depth 4 -s 1048576 -n 40"}) {
    startServer(opts);
    ToolRun r = client(opts + " --json");
    // With --imm the server exits 0 only once it took every WRITE's immediate.
    EXPECT_EQ(stop(std::chrono::seconds(30)), 0) << opts << ": " << serverErr();
    ASSERT_EQ(r.code, 0) << opts << ": " << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["test"], "floor_bw") << opts;
    EXPECT_EQ(j["imm"], opts.find("--imm") != std::string::npos) << opts;
    EXPECT_EQ(j["sink"], opts.find("--spin") != std::string::npos  ? "spin"
                         : opts.find("--imm") != std::string::npos ? "block"
                                                                   : "none")
        << opts;
    EXPECT_GT(j["bw_gbps"].get<double>(), 0) << opts;
  }
}

TEST_F(VerbsFloor, BadUsageExitsTwoAndNamesTheArgument) {
  const std::pair<const char*, const char*> cases[] = {
      {"-s x", "'x' for -s"},
      {"-s 9000", "'9000' for -s"},
      {"-s -3", "'-3' for -s"},
      {"-n 0", "'0' for -n"},
      {"-p 70000", "'70000' for -p"},
      {"--pages 5000", "--pages"},
      {"--bogus", "'--bogus'"},
      {"-n", "-n needs a value"},
      {"-d", "-d needs a value"},
      {"--imm", "need --bw"},
      {"--bw -s 0", "'0' for -s"},
      {"--bw --depth 0", "--depth"},
      {"--bw -s 70000000", "'70000000' for -s"},
      {"--bw --spin", "--spin needs --imm"},
      {"--depth 4", "need --bw"},
      {"--bw --calls 3", "not --bw"},
      {"--bw --imm --no-channel", "no --no-channel"},
      {"-s 70000000", "'70000000' for -s (0..8192)"}};
  for (const auto& [args, named] : cases) {
    ToolRun r = scratch_->run(kFloor, args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(named), std::string::npos) << args << ": " << r.err;
  }
}

TEST_F(VerbsFloor, MismatchedRunsFailFastOnBothSides) {
  REQUIRE_DEVICE();
  const char* cases[][3] = {{"-n 300", "-n 200", "the peer runs -n 300"},
                            {"--bw -s 4096 -n 100", "--bw --imm -s 4096 -n 100",
                             "the peer runs -n 100 -s 4096 --bw, this side"},
                            {"--bw --imm --spin -s 4096 -n 100", "--bw --imm -s 4096 -n 100",
                             "the peer runs -n 100 -s 4096 --bw --imm --spin, this side"}};
  for (const auto& [server, cli, named] : cases) {
    startServer(server);
    ToolRun r = client(cli);
    EXPECT_EQ(stop(std::chrono::seconds(20)), 1) << serverErr();
    EXPECT_EQ(r.code, 1) << cli;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  }
}

TEST_F(VerbsFloor, MissingDeviceAndMissingServerAreNamed) {
  REQUIRE_DEVICE();
  ToolRun dev = client("-d no-such-dev");
  EXPECT_EQ(dev.code, 1);
  EXPECT_NE(dev.err.find("no-such-dev"), std::string::npos) << dev.err;
  ToolRun nobody = client("-n 10");  // nothing listens on port_
  EXPECT_EQ(nobody.code, 1);
  EXPECT_NE(nobody.err.find("connecting to 127.0.0.1"), std::string::npos) << nobody.err;
}

TEST_F(VerbsFloor, APeerThatDiesMidRunEndsTheOtherSideWithAnError) {
  REQUIRE_DEVICE();
  startServer("-n 10000000");
  pid_t cli = startClient("-n 10000000");
  ASSERT_TRUE(serverSaid("connected, running")) << serverErr();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // ping-ponging
  ::kill(cli, SIGKILL);
  ::waitpid(cli, nullptr, 0);
  int code = stop(std::chrono::seconds(30));
  EXPECT_EQ(code, 1) << "server exit (-2: still running after 30 s)";
  std::string err = serverErr();
  EXPECT_TRUE(err.find("no message from the peer for 5 s") != std::string::npos ||
              err.find("completion error") != std::string::npos)
      << err;
}

TEST_F(VerbsFloor, AWriterThatDiesEndsTheSinkWithAnError) {
  REQUIRE_DEVICE();
  startServer("--bw --imm -s 65536 -n 10000000");
  pid_t cli = startClient("--bw --imm -s 65536 -n 10000000");
  ASSERT_TRUE(serverSaid("connected, running")) << serverErr();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // writing
  ::kill(cli, SIGKILL);
  ::waitpid(cli, nullptr, 0);
  EXPECT_EQ(stop(std::chrono::seconds(30)), 1) << "server exit (-2: still running after 30 s)";
  EXPECT_NE(serverErr().find("no WRITE WITH IMMEDIATE arrived for 5 s"), std::string::npos)
      << serverErr();
}

}  // namespace
