// tictac-analyze end to end: runs the built binary on small graph files and
// checks its output format and exit codes (0 ok, 1 I/O failure, 2 bad input).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/sched/tool_test_util.h"

namespace {

using tictac::sched::testing::ScratchDir;
using Result = tictac::sched::testing::ToolRun;

class AnalyzeTool : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef TICTAC_ANALYZE_BIN
    GTEST_SKIP() << "tictac-analyze is not built in this configuration";
#endif
    // a (M=2us at 0.008 Gbit/s) feeds 10us of compute; b (M=5) 1us; c (M=3) 3us.
    write("g.json", R"({"name": "g", "ops": [
      {"name": "a", "kind": "recv", "bytes": 2}, {"name": "b", "kind": "recv", "bytes": 5},
      {"name": "c", "kind": "recv", "bytes": 3},
      {"name": "ca", "kind": "compute", "time_us": 10, "inputs": ["a"]},
      {"name": "cb", "kind": "compute", "time_us": 1, "inputs": ["b"]},
      {"name": "cc", "kind": "compute", "time_us": 3, "inputs": ["c"]},
      {"name": "out", "kind": "compute", "time_us": 0, "inputs": ["ca", "cb", "cc"]}],
      "outputs": ["out"]})");
  }
  std::string path(const std::string& name) const {
    return dir_.path(name);
  }
  void write(const std::string& name, const std::string& text) const {
    dir_.write(name, text);
  }
  static std::string slurp(const std::string& p) {
    return ScratchDir::slurp(p);
  }
  Result run(const std::string& args) const {
#ifdef TICTAC_ANALYZE_BIN
    return dir_.run(TICTAC_ANALYZE_BIN, args);
#else
    (void)args;
    return {};
#endif
  }
  ScratchDir dir_{"tictac-analyze-test"};
};

TEST_F(AnalyzeTool, TacTsvAndJson) {
  // Worked in analyzer_test.cc (Tac.JohnsonClasses): a 0, c 1, b 2.
  Result r = run(path("g.json") + " --algo tac --bandwidth-gbps 0.008");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "a\t0\nc\t1\nb\t2\n");
  r = run(path("g.json") + " --algo tac --bandwidth-gbps 0.008 --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"name\":\"a\",\"priority\":0}\n{\"name\":\"c\",\"priority\":1}\n"
            "{\"name\":\"b\",\"priority\":2}\n");
  // -o writes the file and nothing to stdout.
  r = run(path("g.json") + " --algo fifo -o " + path("out.tsv"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(slurp(path("out.tsv")), "a\t0\nb\t1\nc\t2\n");
}

TEST_F(AnalyzeTool, TimingAndRecvTimes) {
  // The trace gives a 50us and c 1us: with --use-recv-times c is M<P -> first.
  write("t.json", R"([{"name": "a", "ph": "X", "ts": 0, "dur": 50},
                      {"name": "c", "ph": "X", "ts": 60, "dur": 1}])");
  Result r = run(path("g.json") + " --algo tac --bandwidth-gbps 0.008 --use-recv-times --timing " +
                 path("t.json"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "c\t0\na\t1\nb\t2\n");
  EXPECT_NE(r.err.find("timing"), std::string::npos) << r.err;
}

TEST_F(AnalyzeTool, PluginAlgo) {
  Result r = run(path("g.json") + " --plugin " + TICTAC_EXAMPLE_PLUGIN + " --algo smallest-first");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "a\t0\nc\t1\nb\t2\n");
  r = run(path("g.json") + " --plugin " + path("missing.so") + " --algo smallest-first");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.so"), std::string::npos) << r.err;
}

TEST_F(AnalyzeTool, ExitCodes) {
  Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--algo", "--bandwidth-gbps", "--latency-us", "--timing",
                           "--use-recv-times", "--seed", "--plugin", "--output", "--json"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  r = run(path("g.json") + " --algo nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tac"), std::string::npos) << "lists the known algorithms: " << r.err;
  EXPECT_EQ(run(path("g.json") + " --algo tac --bandwidth-gbps -1").code, 2);
  EXPECT_EQ(run(path("g.json") + " --algo tac --no-such-flag").code, 2);
  EXPECT_EQ(run(path("g.json")).code, 2);  // --algo is required
  write("bad.json", R"({"ops": [{"name": "a", "kind": "recv", "bytes": -1}]})");
  r = run(path("bad.json") + " --algo tic");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  r = run(path("absent.json") + " --algo tic");
  EXPECT_EQ(r.code, 1) << r.err;
  r = run(path("g.json") + " --algo tic -o " + path("no/such/dir/out.tsv"));
  EXPECT_EQ(r.code, 1) << r.err;
}

// A bad number names its flag in a short line (CLI11's checks printed the
// range up to DBL_MAX, 300 digits, and "--seed -5" ran as seed 2^64-5); a
// missing --timing file printed "tictac-analyze: " twice.
TEST_F(AnalyzeTool, BadNumbersAndMissingTimingGiveOneShortLine) {
  for (const char* args : {" --algo tac --bandwidth-gbps 0", " --algo tac --latency-us nan",
                           " --algo random --seed -5"}) {
    Result r = run(path("g.json") + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_LT(r.err.size(), 160u) << args << ": " << r.err;
  }
  Result r = run(path("g.json") + " --algo tac --timing " + path("absent.trace.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.find("tictac-analyze: tictac-analyze:"), std::string::npos) << r.err;
}

// A time beyond the analyzers' range: one short line (std::to_string printed
// every digit of 1e300, over 300 characters).
TEST_F(AnalyzeTool, HugeTimeGivesAShortLine) {
  write("huge.json", R"({"name": "g", "ops": [{"name": "w", "kind": "recv", "bytes": 8},
    {"name": "c", "kind": "compute", "time_us": 1e300, "inputs": ["w"]}]})");
  Result r = run(path("huge.json") + " --algo tac");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("1e+300 us is too large"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 120u) << r.err;
}

// A directory where a graph file should be: exit 1 with the path and the
// reason (.onnx said only "basic_filebuf::underflow error reading the file").
TEST_F(AnalyzeTool, DirectoryAsGraphNamesThePath) {
  for (const char* name : {"dir.json", "dir.onnx"}) {
    std::filesystem::create_directory(path(name));
    Result r = run(path(name) + " --algo tac");
    EXPECT_EQ(r.code, 1) << name;
    EXPECT_NE(r.err.find(path(name) + ": read failed: Is a directory"), std::string::npos) << r.err;
  }
}

}  // namespace
