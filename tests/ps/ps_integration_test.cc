// tests/ps/ps_integration_test.cc: tictac-ps end to end, on the emulated
// cluster (tools/netns-cluster) when root, else on paced loopback. The checks
// are the receivers' own (see tools/ps/report.cc): every worker got every
// parameter intact each iteration, the PS found every gradient sum right,
// arrivals followed the priorities within the window, with tic some compute
// op started before the last parameter arrived, and inside the namespaces
// UCX used tcp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/sched/tool_test_util.h"

namespace {

using nlohmann::json;

// Six parameters of 128..768 KiB, each consumed by one op of a chain (2 ms
// each): the first op can start as soon as its parameter is there.
std::string writeChainGraph() {
  json ops = json::array();
  ops.push_back({{"name", "x"}, {"kind", "compute"}, {"time_us", 0}, {"inputs", json::array()}});
  std::string prev = "x";
  for (int i = 0; i < 6; ++i) {
    std::string p = "w" + std::to_string(i), c = "op" + std::to_string(i);
    ops.push_back({{"name", p}, {"kind", "recv"}, {"bytes", (i + 1) * 131072}});
    ops.push_back({{"name", c}, {"kind", "compute"}, {"time_us", 2000}, {"inputs", {prev, p}}});
    prev = c;
  }
  std::string path = "/tmp/tictac-ps-chain-" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << json{{"name", "chain"}, {"ops", ops}, {"outputs", {prev}}}.dump();
  return path;
}

json run(const std::string& args, int& status) {
  std::string cmd = std::string(TICTAC_SOURCE_ROOT) +
                    "/tools/netns-cluster --nodes 3 --rate-gbps 1 -- " + TICTAC_BUILD_ROOT +
                    "/tools/tictac-ps --json --timeout 90 --workers 2 --ps 1 --rate-gbps 1 " + args;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (p && fgets(buf.data(), buf.size(), p)) out += buf.data();
  status = p ? pclose(p) : -1;
  return json::parse(out, nullptr, false);
}

void expectIntact(const json& r, bool training) {
  ASSERT_TRUE(r.is_object()) << "no JSON report";
  const auto& c = r["checks"];
  EXPECT_EQ(c["iterations_complete"], c["worker_iterations_expected"]);
  EXPECT_EQ(c["params_bad"], 0);
  EXPECT_EQ(c["grads_bad"], 0);
  EXPECT_EQ(c["grads_ok"], c["grads_expected"]);
  if (training) {
    EXPECT_GT(c["grads_expected"].get<int>(), 0);
  }
  EXPECT_GT(c["order_checked"].get<int>(), 0);
  EXPECT_TRUE(c["order_ok"].get<bool>())
      << c["max_inversion_bytes"] << " > " << c["inversion_bound_bytes"];
  if (geteuid() == 0) {
    // Inside the namespaces UCX must run tcp over the veth, never shared memory.
    ASSERT_EQ(c["ucx_transports"].size(), 3u);
    for (const auto& t : c["ucx_transports"]) {
      std::string s = t;
      EXPECT_NE(s.find(" tcp/"), std::string::npos) << s;
      EXPECT_EQ(s.find("memory"), std::string::npos) << s;
    }
    EXPECT_EQ(r["link"], "netns+tbf");
  }
}

// Runs tictac-ps on the chain graph with args, expects exit status 0 and an
// intact report (with training, of the gradients too); returns the report.
json runChain(const std::string& args, bool training) {
  std::string g = writeChainGraph();
  int status = 0;
  json r = run(g + " " + args, status);
  unlink(g.c_str());
  EXPECT_EQ(status, 0);
  expectIntact(r, training);
  return r;
}

TEST(PsIntegration, InferenceTicOverlapsAndKeepsOrder) {
  json r = runChain("--order tic --iterations 4 --mode inference", false);
  // With tic the first op's parameter comes first: compute starts before the
  // last parameter has arrived, in some worker-iteration.
  EXPECT_GT(r["checks"]["compute_before_last_param"].get<int>(), 0);
  EXPECT_GT(r["simulated_iteration_us"].get<double>(), 0);
}

TEST(PsIntegration, TrainingSumsGradients) {
  json r = runChain("--order tac --iterations 3 --mode training", true);
  EXPECT_EQ(r["checks"]["grads_expected"], 6 * 3);
}

TEST(PsIntegration, RandomOrderEveryWorkerItsOwn) {
  runChain("--order random --iterations 3", false);  // the checks are all in the report
}

TEST(PsIntegration, AutotuneReportsItsChoiceAndUsesIt) {
  json r = runChain("--order tac --iterations 2 --autotune", false);
  ASSERT_TRUE(r.contains("autotune"));
  const json& t = r["autotune"];
  size_t chunk = t["chunk_bytes"], window = t["window_bytes"];
  EXPECT_TRUE(chunk == (128u << 10) || chunk == (512u << 10) || chunk == (1u << 20)) << chunk;
  EXPECT_TRUE(window == (1u << 20) || window == 2 * chunk || window == (4u << 20)) << window;
  // The search keeps the defaults unless a setting measured faster.
  EXPECT_GT(t["default_iteration_us"].get<double>(), 0);
  EXPECT_LE(t["chosen_iteration_us"].get<double>(), t["default_iteration_us"].get<double>());
  EXPECT_GE(t["gain"].get<double>(), 0);
  EXPECT_LT(t["gain"].get<double>(), 1);
  EXPECT_EQ(t["iterations_per_setting"], 2);
  // The reported run used the chosen knobs.
  EXPECT_EQ(r["chunk_bytes"], chunk);
  EXPECT_EQ(r["window_bytes"], window);
}

TEST(PsIntegration, BadInputExits2) {
  int status = 0;
  run("/nonexistent.json", status);  // unreadable file: an I/O failure (1)
  EXPECT_EQ(WEXITSTATUS(status), 1);
  run(std::string(TICTAC_SOURCE_ROOT) + "/data/graphs/tiny.json --order no-such-order", status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

// Bad numbers are refused before anything is launched, with a short line
// naming the flag: nan rate and timeout were taken (a nan timeout never
// fires), "--chunk -1" ran as chunk 2^64-1, and CLI11's own range checks
// printed 300 digits of DBL_MAX.
TEST(PsIntegration, BadNumbersExit2WithAShortLine) {
  const std::string tool = std::string(TICTAC_BUILD_ROOT) + "/tools/tictac-ps " +
                           TICTAC_SOURCE_ROOT + "/data/graphs/tiny.json --iterations 1 ";
  for (const char* args : {"--rate-gbps nan", "--timeout nan", "--timeout 0", "--chunk -1",
                           "--window 99999999999999999999", "--compute-scale -1", "--port 0",
                           "--port 70000", "--port 65535 --ps 2", "--workers abc", "--rank 5",
                           "--peers x:1", "--trace ''", "--trace-iteration 9"}) {
    FILE* p = popen(("timeout 60 " + tool + args + " 2>&1 >/dev/null").c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string err;
    std::array<char, 4096> buf{};
    while (fgets(buf.data(), buf.size(), p)) err += buf.data();
    int status = pclose(p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args << ": " << err;
    EXPECT_NE(err.find(std::string(args).substr(0, std::string(args).find(' '))), std::string::npos)
        << args << ": " << err;
    EXPECT_LT(err.size(), 160u) << args << ": " << err;
  }
}

// A role whose peers never come gives up after --timeout (it waited forever,
// and took --timeout without a word): exit 1 with a line naming it.
TEST(PsIntegration, RoleGivesUpAfterTimeout) {
  const std::string cmd = "timeout 60 " + std::string(TICTAC_BUILD_ROOT) + "/tools/tictac-ps " +
                          TICTAC_SOURCE_ROOT + "/data/graphs/tiny.json --role ps --port " +
                          std::to_string(tictac::sched::testing::freePort()) + " --timeout 1 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string err;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) err += buf.data();
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << ": " << err;
  EXPECT_NE(err.find("ps 0: --timeout of 1 s passed"), std::string::npos) << err;
}

// Two launches at once on loopback, neither with --port: each takes free
// ports for its PS (both took 18600 before, and one failed to listen).
TEST(PsIntegration, ConcurrentLoopbackLaunchesTakeFreePorts) {
  const std::string cmd = "env -u TICTAC_NETNS timeout 120 " + std::string(TICTAC_BUILD_ROOT) +
                          "/tools/tictac-ps " + TICTAC_SOURCE_ROOT +
                          "/data/graphs/tiny.json --iterations 2 --ps 2 --timeout 60 --json";
  std::array<FILE*, 2> p{popen(cmd.c_str(), "r"), popen(cmd.c_str(), "r")};
  for (FILE* f : p) {
    ASSERT_NE(f, nullptr);
    std::string out;
    std::array<char, 4096> buf{};
    while (fgets(buf.data(), buf.size(), f)) out += buf.data();
    const int status = pclose(f);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << ": " << out;
    const json r = json::parse(out, nullptr, false);
    ASSERT_TRUE(r.is_object()) << out;
    EXPECT_EQ(r["checks"]["params_bad"], 0);
    EXPECT_EQ(r["checks"]["iterations_complete"], r["checks"]["worker_iterations_expected"]);
  }
}

// The --json report goes to a full disk: exit 1 with a line, not 0 (the
// report was lost silently).
TEST(PsIntegration, UnwritableStdoutExits1) {
  const std::string cmd = "timeout 120 " + std::string(TICTAC_BUILD_ROOT) + "/tools/tictac-ps " +
                          TICTAC_SOURCE_ROOT +
                          "/data/graphs/tiny.json --iterations 1 --timeout 60 --json >/dev/full";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
}

}  // namespace
