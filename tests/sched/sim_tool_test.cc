// tests/sched/sim_tool_test.cc: tictac-sim end to end (built only when the
// tool is: TICTAC_SIM_BIN names it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#ifdef TICTAC_SIM_BIN
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tictac::sched {
namespace {

struct ToolRun {
  int rc = -1;
  std::string out;
};

ToolRun runSim(const std::string& args) {
  ToolRun r;
  std::string cmd = std::string(TICTAC_SIM_BIN) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class SimTool : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("tictac-sim-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    // The worked example of docs/sched.md: TAC 80 us, fifo 90 us.
    write("g.json", R"({"name": "example", "ops": [
      {"name": "x", "kind": "compute", "time_us": 0, "inputs": []},
      {"name": "embed", "kind": "compute", "time_us": 5, "inputs": ["x", "embed.w"]},
      {"name": "head", "kind": "compute", "time_us": 30, "inputs": ["x", "head.w"]},
      {"name": "mix", "kind": "compute", "time_us": 10, "inputs": ["embed", "head", "mix.w"]},
      {"name": "embed.w", "kind": "recv", "bytes": 50000},
      {"name": "head.w", "kind": "recv", "bytes": 12500},
      {"name": "mix.w", "kind": "recv", "bytes": 25000}], "outputs": ["mix"]})");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return path(name);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(SimTool, TsvJsonAndTrace) {
  ToolRun r = runSim(path("g.json") + " --order tac --bandwidth-gbps 10");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("makespan_us\t80\n"), std::string::npos) << r.out;
  r = runSim(path("g.json") + " --order fifo --bandwidth-gbps 10 --json --trace " + path("t.json"));
  ASSERT_EQ(r.rc, 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["makespan_us"].get<double>(), 90);
  EXPECT_TRUE(j["iteration_us"].contains("p99"));
  std::ifstream t(path("t.json"));
  EXPECT_TRUE(nlohmann::json::parse(t)["traceEvents"].is_array());
  // An order file: head.w last gives 40 (embed.w) + 20 (mix.w) + 10 + 30 + 10.
  r = runSim(path("g.json") + " --order " + write("o.tsv", "embed.w\t0\nmix.w\t1\nhead.w\t2\n") +
             " --bandwidth-gbps 10");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("makespan_us\t110\n"), std::string::npos) << r.out;
  EXPECT_EQ(runSim("--help").rc, 0);
}

TEST_F(SimTool, ExitCodes) {
  const std::string g = path("g.json");
  EXPECT_EQ(runSim(g + " --order tac").rc, 2);  // --bandwidth-gbps missing
  EXPECT_EQ(runSim(g + " --order nosuch --bandwidth-gbps 10").rc, 2);
  EXPECT_EQ(runSim(g + " --order tac --bandwidth-gbps 0").rc, 2);
  EXPECT_EQ(runSim(g + " --order tac --bandwidth-gbps 10 --mode sideways").rc, 2);
  EXPECT_EQ(runSim(g + " --order tac --bandwidth-gbps 10 --workers 0").rc, 2);
  EXPECT_EQ(
      runSim(g + " --order " + write("bad.tsv", "embed.w\t0\nmix.w 1\n") + " --bandwidth-gbps 10")
          .rc,
      2);
  EXPECT_EQ(
      runSim(g + " --order " + write("short.tsv", "embed.w\t0\n") + " --bandwidth-gbps 10").rc, 2);
  EXPECT_EQ(runSim(write("x.json", "{\"ops\": [") + " --order tac --bandwidth-gbps 10").rc, 2);
  EXPECT_EQ(runSim(path("missing.json") + " --order tac --bandwidth-gbps 10").rc, 1);
  EXPECT_EQ(runSim(g + " --order tac --bandwidth-gbps 10 --trace " + path("no/such/dir/t.json")).rc,
            1);
}

}  // namespace
}  // namespace tictac::sched
#endif  // TICTAC_SIM_BIN
