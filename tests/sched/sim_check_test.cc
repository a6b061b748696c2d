// tests/sched/sim_check_test.cc: simulator properties that need no hand-worked
// times: bounds and the fast path on random graphs, a well-formed Chrome
// trace, and the rejection of bad order files and options.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/graphgen.h"
#include "tests/sched/sim_test_util.h"
#include "tictac/sched/sim.h"

namespace tictac::sched {
namespace {

using testing::prio;
using testing::simBytesAreMicros;
using testing::twoBranches;

TEST(Sim, BoundsHoldAndFastPathMatchesEngineOnRandomGraphs) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Graph g = bench::randomSmallGraph(seed, 2 + seed % 6, 3 + seed % 9);
    bench::SplitMix64 rng(seed);
    PriorityVector pv(g.ops.size(), 0);
    for (auto& p : pv) p = static_cast<Priority>(rng.range(0, 5));
    for (SimMode mode : {SimMode::kInference, SimMode::kTraining}) {
      SimOptions o;
      o.mode = mode;
      o.latency_us = static_cast<double>(seed % 3);
      SimResult r = simulate(g, pv, o);
      EXPECT_LE(r.lower_bound_us, r.makespan_us + 1e-9) << "seed " << seed;
      EXPECT_LE(r.makespan_us, r.upper_bound_us + 1e-9) << "seed " << seed;
      EXPECT_GE(r.efficiency_cp, -1e-12);
      EXPECT_LE(r.efficiency, 1 + 1e-12);
      if (mode == SimMode::kInference) {
        EXPECT_EQ(singleWorkerMakespanUs(g, pv, o), r.makespan_us) << "seed " << seed;
      }
    }
  }
}

TEST(Sim, ChromeTraceIsWellFormed) {
  Graph g = twoBranches();
  SimOptions o = simBytesAreMicros();
  o.mode = SimMode::kTraining;
  o.workers = 2;
  o.runs = 2;
  o.record_trace = true;
  SimResult r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), o);
  nlohmann::json doc = nlohmann::json::parse(chromeTraceJson(g, r, o));
  ASSERT_TRUE(doc["traceEvents"].is_array());
  size_t x = 0, compute = 0, threads = 0, procs = 0;
  std::map<int, double> lane_end;  // per (pid, tid): spans on one lane never overlap
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M") {
      threads += e["name"] == "thread_name";
      procs += e["name"] == "process_name";
      EXPECT_TRUE(e["args"]["name"].is_string());
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ++x;
    EXPECT_GE(e["dur"].get<double>(), 0);
    compute += e["cat"] == "compute";
    int lane = e["pid"].get<int>() * 10 + e["tid"].get<int>();
    EXPECT_GE(e["ts"].get<double>() + 1e-9, lane_end[lane]) << e.dump();
    lane_end[lane] = e["ts"].get<double>() + e["dur"].get<double>();
  }
  EXPECT_EQ(procs, 2u);
  EXPECT_EQ(threads, 6u);
  EXPECT_EQ(compute, 2u * 2 * 3 * 2);  // workers x runs x ops x (fwd + bwd)
  EXPECT_EQ(x, compute + r.chunks);
}

TEST(Sim, OrderFileParsing) {
  Graph g = twoBranches();
  PriorityVector pv = parseOrderTsv(g, "b\t0\na\t7\n");
  EXPECT_EQ(pv[static_cast<size_t>(g.find("a"))], 7u);
  EXPECT_EQ(pv[static_cast<size_t>(g.find("b"))], 0u);
  auto fails = [&](const char* text, const char* needle) {
    try {
      parseOrderTsv(g, text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  fails("a\t0\nb 1\n", "line 2");
  fails("a\t0\nb\t-1\n", "line 2");
  fails("a\t0\nb\tx\n", "line 2");
  fails("a\t0\nb\t\n", "line 2");
  fails("a\t0\n\nb\t1\n", "line 2");
  fails("a\t0\nq\t1\n", "unknown op q");
  fails("a\t0\nA\t1\n", "not a recv");
  fails("a\t0\na\t1\n", "repeated");
  fails("a\t0\n", "no line for recv b");
}

TEST(Sim, RejectsBadOptions) {
  Graph g = twoBranches();
  PriorityVector pv(g.ops.size(), 0);
  SimOptions o;
  o.bandwidth_gbps = 0;
  EXPECT_THROW(simulate(g, pv, o), InputError);
  o = SimOptions{};
  o.workers = 0;
  EXPECT_THROW(simulate(g, pv, o), InputError);
  o = SimOptions{};
  o.latency_us = std::nan("");
  EXPECT_THROW(simulate(g, pv, o), InputError);
  EXPECT_THROW(simulate(g, PriorityVector(1, 0), SimOptions{}), InputError);
  o = SimOptions{};
  o.workers = 100000;
  o.ps = 1000;  // 10^8 link pairs: refused, not allocated
  EXPECT_THROW(simulate(g, pv, o), InputError);
}

// Options that are each finite but make an op's simulated time overflow (an
// inf or 1e300 makespan was reported with exit 0): refused, naming the op.
TEST(Sim, RejectsTimesPastTheLimit) {
  Graph g = twoBranches();
  PriorityVector pv(g.ops.size(), 0);
  auto refused = [&](const SimOptions& o, const std::string& needle) {
    try {
      simulate(g, pv, o);
      ADD_FAILURE() << "accepted; wanted " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("at most 1e12 us"), std::string::npos) << e.what();
    }
  };
  SimOptions o;
  o.compute_scale = 1e308;
  o.mode = SimMode::kTraining;
  refused(o, "op '");
  o = SimOptions{};
  o.latency_us = 1e300;
  refused(o, "recv '");
  o = SimOptions{};
  o.bandwidth_gbps = 1e-300;
  refused(o, "recv '");
  o = SimOptions{};
  o.compute_scale = 1e6;  // large but within the limit: simulated
  EXPECT_GT(simulate(g, pv, o).makespan_us, 0);
}

}  // namespace
}  // namespace tictac::sched
