// tests/sched/sim_test.cc: the iteration simulator on hand-worked graphs.
//
// Bandwidth 0.008 Gbit/s throughout, so a recv of B bytes takes exactly B us
// (B*8/(0.008*1e3)) and every expected time below is a small integer.
#include "tictac/sched/sim.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "bench/graphgen.h"

namespace tictac::sched {
namespace {

struct Builder {
  Graph g;
  OpIndex recv(const std::string& n, uint64_t bytes) {
    Op op;
    op.name = n;
    op.kind = OpKind::kRecv;
    op.bytes = bytes;
    g.ops.push_back(op);
    return static_cast<OpIndex>(g.ops.size() - 1);
  }
  OpIndex compute(const std::string& n, double t, std::vector<OpIndex> in) {
    Op op;
    op.name = n;
    op.time_us = t;
    op.has_time = true;
    op.inputs = std::move(in);
    g.ops.push_back(op);
    return static_cast<OpIndex>(g.ops.size() - 1);
  }
};

SimOptions bytesAreMicros() {
  SimOptions o;
  o.bandwidth_gbps = 0.008;
  return o;
}

PriorityVector prio(const Graph& g, std::initializer_list<std::pair<const char*, Priority>> l) {
  PriorityVector pv(g.ops.size(), 0);
  for (auto& [n, p] : l) pv[static_cast<size_t>(g.find(n))] = p;
  return pv;
}

// a(10) -> A(15) -> C(1) <- B(5) <- b(20)
Graph twoBranches() {
  Builder b;
  OpIndex a = b.recv("a", 10), rb = b.recv("b", 20);
  OpIndex A = b.compute("A", 15, {a}), B = b.compute("B", 5, {rb});
  b.g.outputs = {b.compute("C", 1, {A, B})};
  return b.g;
}

TEST(Sim, InferenceOrderMatters) {
  Graph g = twoBranches();
  // a first: a@10, A 10-25, b@30, B 30-35, C 35-36.
  SimResult r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), bytesAreMicros());
  EXPECT_DOUBLE_EQ(r.makespan_us, 36);
  // b first: b@20, B 20-25, a@30, A 30-45, C 45-46.
  EXPECT_DOUBLE_EQ(simulate(g, prio(g, {{"a", 1}, {"b", 0}}), bytesAreMicros()).makespan_us, 46);
  // Equal priorities: ties by name, so a first again.
  EXPECT_DOUBLE_EQ(simulate(g, prio(g, {{"a", 3}, {"b", 3}}), bytesAreMicros()).makespan_us, 36);
  // M = 30, P = 21, CP = max(10+15+1, 20+5+1) = 26.
  EXPECT_DOUBLE_EQ(r.comm_us, 30);
  EXPECT_DOUBLE_EQ(r.compute_us, 21);
  EXPECT_DOUBLE_EQ(r.critical_path_us, 26);
  EXPECT_DOUBLE_EQ(r.upper_bound_us, 51);
  EXPECT_DOUBLE_EQ(r.lower_bound_us, 30);
  EXPECT_DOUBLE_EQ(r.efficiency, (51.0 - 36) / (51 - 30));
  EXPECT_DOUBLE_EQ(r.efficiency_cp, (51.0 - 36) / (51 - 30));
  EXPECT_DOUBLE_EQ(r.headroom, 21.0 / 30);
  EXPECT_EQ(r.transfers, 2u);
}

TEST(Sim, LatencyPaidOncePerTransferAlsoWithChunks) {
  Graph g = twoBranches();
  SimOptions o = bytesAreMicros();
  o.latency_us = 5;
  // a@15, A 15-30, b@15+25=40, B 40-45, C 45-46.
  SimResult r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 46);
  EXPECT_DOUBLE_EQ(r.comm_us, 40);
  o.chunk_bytes = 3;  // a: 3+3+3+1, b: 7 chunks; nothing competes, same times
  r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 46);
  EXPECT_EQ(r.chunks, 11u);
}

TEST(Sim, ReadyOpsRunOneAtATimeByListPosition) {
  Builder b;
  OpIndex a = b.recv("a", 10);
  OpIndex y = b.compute("Y", 3, {a});
  OpIndex x = b.compute("X", 4, {a});
  b.g.outputs = {b.compute("Z", 1, {x, y})};
  SimOptions o = bytesAreMicros();
  o.record_trace = true;
  SimResult r = simulate(b.g, PriorityVector(b.g.ops.size(), 0), o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 18);  // a@10, Y 10-13, X 13-17, Z 17-18
  std::map<std::string, double> start;
  for (const TraceSpan& s : r.trace) start[s.name] = s.start_us;
  EXPECT_DOUBLE_EQ(start["Y"], 10);
  EXPECT_DOUBLE_EQ(start["X"], 13);
  EXPECT_DOUBLE_EQ(start["Z"], 17);
}

TEST(Sim, TrainingSingleIteration) {
  Graph g = twoBranches();
  SimOptions o = bytesAreMicros();
  o.mode = SimMode::kTraining;  // bwd_factor 2
  // Forward ends at 36. Backward in reverse topological order C, B, A:
  // C 36-38, B 38-48 (grad b ready, pushed 48-68), A 48-78 (grad a, pushed 78-88).
  SimResult r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 88);
  EXPECT_DOUBLE_EQ(r.comm_us, 60);                    // 30 in + 30 out
  EXPECT_DOUBLE_EQ(r.compute_us, 63);                 // 21 x (1 + 2)
  EXPECT_DOUBLE_EQ(r.critical_path_us, 26 + 2 * 16);  // + backward of A, C
  EXPECT_DOUBLE_EQ(r.lower_bound_us, 63);
  EXPECT_DOUBLE_EQ(r.efficiency, (123.0 - 88) / (123 - 63));
}

// a(2) -> A(50) -> B(1) <- b(100). In iteration 1 the big b is summed first
// (its backward comes first) and leaves before a, which is more urgent.
Graph preemptGraph() {
  Builder b;
  OpIndex a = b.recv("a", 2), rb = b.recv("b", 100);
  OpIndex A = b.compute("A", 50, {a});
  b.g.outputs = {b.compute("B", 1, {A, rb})};
  return b.g;
}

TEST(Sim, TrainingPipelinesIterationsAndChunksLetUrgentTransfersOvertake) {
  Graph g = preemptGraph();
  SimOptions o = bytesAreMicros();
  o.mode = SimMode::kTraining;
  o.runs = 2;
  // Iteration 0: a 0-2, b 2-102; A 2-52, B 102-103; bwd B 103-105 (push b
  // 105-205), bwd A 105-205 (push a 205-207): ends 207. The PS sends b of
  // iteration 1 at 205-305, a at 305-307; forward 1 (from 205): A 307-357,
  // B 357-358; bwd B 358-360 (push b 360-460), bwd A 360-460 (push a 460-462).
  SimResult r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), o);
  ASSERT_EQ(r.iteration_samples.size(), 2u);
  EXPECT_DOUBLE_EQ(r.iteration_samples[0], 207);
  EXPECT_DOUBLE_EQ(r.iteration_samples[1], 462 - 207);
  EXPECT_DOUBLE_EQ(r.makespan_us, (207.0 + 255) / 2);
  // 10-byte chunks: b of iteration 1 starts at 205, a overtakes it at 215
  // (215-217), b resumes 217-307. A 217-267, B 307-308; bwd B 308-310 (push
  // b 310-410), bwd A 310-410 (push a 410-412): iteration 1 ends at 412.
  o.chunk_bytes = 10;
  r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), o);
  EXPECT_DOUBLE_EQ(r.iteration_samples[0], 207);
  EXPECT_DOUBLE_EQ(r.iteration_samples[1], 412 - 207);
}

TEST(Sim, ShardingBySizeAndLinkContention) {
  Builder b;
  OpIndex big = b.recv("big", 40), mid = b.recv("mid", 30);
  OpIndex small = b.recv("small", 20), tiny = b.recv("tiny", 10);
  b.g.outputs = {b.compute("Z", 1, {big, mid, small, tiny})};
  SimOptions o = bytesAreMicros();
  o.workers = 2;
  o.ps = 2;
  PriorityVector pv = prio(b.g, {{"big", 0}, {"mid", 1}, {"small", 2}, {"tiny", 3}});
  SimResult r = simulate(b.g, pv, o);
  // Largest first onto the least-loaded PS: big->0, mid->1, small->1, tiny->0.
  EXPECT_EQ(r.shard[big], 0u);
  EXPECT_EQ(r.shard[mid], 1u);
  EXPECT_EQ(r.shard[small], 1u);
  EXPECT_EQ(r.shard[tiny], 0u);
  // t=0: PS0->w0 big 0-40, PS1->w1 mid 0-30 (PS0 busy for w1, w0 busy for mid).
  // t=30: PS1->w1 small 30-50. t=40: PS0->w0 tiny 40-50.
  // t=50: PS0->w1 big 50-90, PS1->w0 mid 50-80. t=80: PS1->w0 small 80-100.
  // t=90: PS0->w1 tiny 90-100. Both workers run Z 100-101.
  EXPECT_DOUBLE_EQ(r.makespan_us, 101);
  EXPECT_DOUBLE_EQ(r.straggler_us.mean, 0);
  EXPECT_DOUBLE_EQ(r.iteration_us.p99, 101);
  // With one PS everything queues on its out-link: big, big, mid, mid, ...
  // w0 gets its last (tiny) at 40+40+30+30+20+20+10 = 190, w1 at 200.
  o.ps = 1;
  r = simulate(b.g, pv, o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 201);
  EXPECT_DOUBLE_EQ(r.straggler_us.mean, 10);
}

TEST(Sim, OneIncomingLinkPerWorkerOneOutgoingPerPs) {
  Builder b;
  OpIndex x = b.recv("x", 10), y = b.recv("y", 10);
  b.g.outputs = {b.compute("Z", 1, {x, y})};
  SimOptions o = bytesAreMicros();
  o.ps = 2;  // x on PS0, y on PS1, but the worker's in-link serializes them
  EXPECT_DOUBLE_EQ(simulate(b.g, PriorityVector(b.g.ops.size(), 0), o).makespan_us, 21);
  o.ps = 1;
  o.workers = 2;  // x->w0, x->w1, y->w0, y->w1 on the PS out-link
  SimResult r = simulate(b.g, PriorityVector(b.g.ops.size(), 0), o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 41);
  EXPECT_DOUBLE_EQ(r.straggler_us.p99, 10);
}

TEST(Sim, OrderSourceIsAskedOncePerWorkerAndIteration) {
  Graph g = twoBranches();
  for (SimMode mode : {SimMode::kInference, SimMode::kTraining}) {
    std::set<std::pair<uint32_t, uint32_t>> asked;
    size_t calls = 0;
    OrderSource src = [&](uint32_t w, uint32_t k) {
      ++calls;
      asked.insert({w, k});
      return (w + k) % 2 ? prio(g, {{"a", 1}, {"b", 0}}) : prio(g, {{"a", 0}, {"b", 1}});
    };
    SimOptions o = bytesAreMicros();
    o.mode = mode;
    o.workers = 3;
    o.runs = 4;
    SimResult r = simulate(g, src, o);
    EXPECT_EQ(calls, 12u);
    EXPECT_EQ(asked.size(), 12u);
    EXPECT_EQ(r.iteration_samples.size(), 4u);
    EXPECT_GT(r.straggler_us.mean, 0);  // workers with different orders finish apart
  }
}

TEST(Sim, MetricsDenominatorsAndPercentiles) {
  Builder b;
  OpIndex a = b.recv("a", 10);
  b.g.outputs = {b.compute("A", 0, {a})};
  SimResult r = simulate(b.g, PriorityVector(b.g.ops.size(), 0), bytesAreMicros());
  EXPECT_DOUBLE_EQ(r.makespan_us, 10);
  EXPECT_DOUBLE_EQ(r.efficiency, 1);  // P = 0: M + P - max(M, P) = 0
  EXPECT_DOUBLE_EQ(r.headroom, 0);
  r.iteration_samples.clear();
  for (int i = 100; i >= 1; --i) r.iteration_samples.push_back(i);
  computeMetrics(b.g, bytesAreMicros(), r);
  EXPECT_DOUBLE_EQ(r.iteration_us.mean, 50.5);
  EXPECT_DOUBLE_EQ(r.iteration_us.p50, 50);
  EXPECT_DOUBLE_EQ(r.iteration_us.p99, 99);
  EXPECT_DOUBLE_EQ(r.makespan_us, 50.5);
}

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
  SimOptions o = bytesAreMicros();
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

}  // namespace
}  // namespace tictac::sched
