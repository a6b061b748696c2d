// tictac-perf end to end over UCX shm on loopback: a real server process and
// a real client, small runs, the command-line and JSON contracts
// (fields, one object per line, exit codes of both sides).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/sched/tool_test_util.h"

namespace {

using nlohmann::json;
using tictac::sched::testing::freePort;
using tictac::sched::testing::ScratchDir;
using tictac::sched::testing::ToolRun;

const std::string kPerf = std::string(TICTAC_BUILD_ROOT) + "/tools/tictac-perf";

class PerfTool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kPerf)) GTEST_SKIP() << kPerf << " not built";
    ::setenv("UCX_TLS", "shm", 1);
    scratch_ = std::make_unique<ScratchDir>("tictac-perf-tool");
  }

  // Runs a server and a client with `args` on a fresh port; returns the
  // client's run and stores the server's exit status.
  ToolRun pair(const std::string& args) {
    const std::string port = std::to_string(freePort());
    pid_t srv = ::fork();
    if (srv == 0) {
      std::string log = scratch_->path("server.log");
      std::string cmd = "exec " + kPerf + " --port " + port + " >" + log + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ToolRun r = scratch_->run("timeout 120 " + kPerf, "--port " + port + " " + args + " 127.0.0.1");
    int status = 0;
    for (int i = 0; i < 200 && ::waitpid(srv, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (::waitpid(srv, &status, WNOHANG) == 0) {  // still running after 20 s: a hang
      ::kill(srv, SIGKILL);
      ::waitpid(srv, &status, 0);
      server_code_ = -2;
    } else {
      server_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return r;
  }

  // Runs a pair that must succeed: both sides exit 0; returns the client's
  // JSON lines (none when it failed) and keeps its stderr in err_.
  std::vector<json> runOk(const std::string& args) {
    ToolRun r = pair(args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(server_code_, 0) << ScratchDir::slurp(scratch_->path("server.log"));
    err_ = r.err;
    return r.code == 0 ? lines(r.out) : std::vector<json>{};
  }

  static std::vector<json> lines(const std::string& out) {
    std::vector<json> v;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) v.push_back(json::parse(l));  // throws on non-JSON
    return v;
  }

  static void expectLat(const json& l) {
    for (const char* k : {"p50", "p99", "p999", "max"}) {
      ASSERT_TRUE(l.contains(k)) << k;
      EXPECT_GE(l[k].get<double>(), 0) << k;
    }
    EXPECT_LE(l["p50"].get<double>(), l["max"].get<double>());
  }

  std::unique_ptr<ScratchDir> scratch_;
  int server_code_ = -1;
  std::string err_;
};

TEST_F(PerfTool, BwReportsTheContractFieldsAndBothSidesExitZero) {
  auto v = runOk("--test bw -s 1M -n 50 --json");
  ASSERT_EQ(v.size(), 1u);
  const json& j = v[0];
  EXPECT_EQ(j["test"], "bw");
  EXPECT_EQ(j["backend"], "ucx");
  EXPECT_EQ(j["size"], 1u << 20);
  EXPECT_EQ(j["iters"], 50);
  EXPECT_EQ(j["warmup"], 5);  // a tenth of -n by default
  EXPECT_EQ(j["huge_pages"], true);
  EXPECT_GT(j["bw_gbps"].get<double>(), 0);
  EXPECT_GT(j["msg_rate_mpps"].get<double>(), 0);
  expectLat(j["lat_us"]);
  EXPECT_NE(err_.find("Gb/s"), std::string::npos) << "no table on stderr: " << err_;
}

TEST_F(PerfTool, BwWithoutHugePagesAndWarmupSaysSo) {
  auto v = runOk("--test bw -s 64K -n 40 --warmup 0 --no-huge-pages --json");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["huge_pages"], false);
  EXPECT_EQ(v[0]["warmup"], 0);
}

TEST_F(PerfTool, LatEchoesAndTheServerWaitsForItsLastEcho) {
  auto v = runOk("--test lat -s 4K -n 200 --json");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["test"], "lat");
  EXPECT_EQ(v[0]["size"], 4096);
  expectLat(v[0]["lat_us"]);
}

TEST_F(PerfTool, PrioGivesThreeModesAndTheServerExitsCleanly) {
  auto v = runOk("--test prio -n 100 --bulk-size 1M --json");
  ASSERT_EQ(v.size(), 3u);
  std::vector<std::string> modes;
  for (const json& j : v) {
    EXPECT_EQ(j["test"], "prio");
    modes.push_back(j["mode"]);
    EXPECT_EQ(j["hi_size"], 65536);
    EXPECT_EQ(j["lo_size"], 1u << 20);
    EXPECT_GT(j["window"].get<uint64_t>(), 0u);
    EXPECT_GT(j["chunk"].get<uint64_t>(), 0u);
    EXPECT_GE(j["lo_bw_gbps"].get<double>(), 0);
    expectLat(j["hi_lat_us"]);
  }
  EXPECT_EQ(modes, (std::vector<std::string>{"priority", "fifo", "isolated"}));
}

TEST_F(PerfTool, BadUsageExits2AndVerbsWithoutDeviceExits1) {
  ToolRun bad = scratch_->run(kPerf, "--test nope");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(bad.out.empty());
  ToolRun size = scratch_->run(kPerf, "-s 12Q 127.0.0.1");
  EXPECT_EQ(size.code, 2) << size.err;
  std::error_code ec;
  bool has_rdma = std::filesystem::exists("/sys/class/infiniband", ec) &&
                  !std::filesystem::is_empty("/sys/class/infiniband", ec);
  if (!has_rdma) {
    ToolRun verbs = scratch_->run(kPerf, "--backend verbs --test bw 127.0.0.1");
    EXPECT_EQ(verbs.code, 1);
    EXPECT_NE(verbs.err.find("verbs"), std::string::npos) << verbs.err;
  }
}

// True when /proc/net/tcp lists an established connection to local `port`.
bool established(int port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the header
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state;
    f >> slot >> local >> remote >> state;
    if (state == "01" && local.size() >= 5 && local.substr(local.size() - 5) == want) return true;
  }
  return false;
}

// A client killed mid-run: the server leaves its prio loop and exits 1 within
// seconds with one line naming the loss (it once looped forever, printing a
// "receive failed" line per re-posted expect). Over tcp: over shm, UCX's cma
// transport may abort the server (process_vm_readv of the dead client).
TEST_F(PerfTool, KilledClientFailsTheServerWithOneLineNotAFlood) {
  const std::string port = std::to_string(freePort());
  const std::string env = "UCX_TLS=tcp UCX_NET_DEVICES=lo exec ";
  const std::string log = scratch_->path("server.log");
  auto spawn = [](const std::string& cmd) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  pid_t srv = spawn(env + kPerf + " --port " + port + " >" + log + " 2>&1");
  pid_t cli =
      spawn(env + kPerf + " --port " + port + " --test prio -n 100000 127.0.0.1 >/dev/null 2>&1");
  // Connected (under load, two start-ups may take more than a fixed sleep),
  // then into the urgent phase.
  bool connected = false;
  for (int i = 0; i < 300 && !(connected = established(std::stoi(port))); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!connected) {
    ::kill(cli, SIGKILL);
    ::kill(srv, SIGKILL);
    ::waitpid(cli, nullptr, 0);
    ::waitpid(srv, nullptr, 0);
  }
  ASSERT_TRUE(connected) << "the client never connected in 30 s";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ::kill(cli, SIGKILL);
  ::waitpid(cli, nullptr, 0);
  int status = 0;
  for (int i = 0; i < 100 && ::waitpid(srv, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  bool hung = ::waitpid(srv, &status, WNOHANG) == 0;
  if (hung) {
    ::kill(srv, SIGKILL);
    ::waitpid(srv, &status, 0);
  }
  std::string err = ScratchDir::slurp(log);
  ASSERT_FALSE(hung) << "server still running 10 s after its client died; log: " << err.size();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << err.substr(0, 2000);
  EXPECT_LT(err.size(), 65536u) << err.substr(0, 2000);  // UCX may warn at teardown
  size_t own = 0;
  for (size_t at = 0; (at = err.find("tictac-perf:", at)) != std::string::npos; ++at) own++;
  EXPECT_LE(own, 3u) << err.substr(0, 2000);  // waiting..., the loss, "session failed"
  EXPECT_NE(err.find("peer_lost"), std::string::npos) << err.substr(0, 2000);
}

}  // namespace
