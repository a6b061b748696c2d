// tests/sched/sim_test.cc: the iteration simulator on hand-worked graphs
// (sim_check_test.cc: properties on random graphs, the trace, bad input).
//
// Bandwidth 0.008 Gbit/s throughout, so a recv of B bytes takes exactly B us
// (B*8/(0.008*1e3)) and every expected time below is a small integer.
#include "tictac/sched/sim.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "tests/sched/sim_test_util.h"

namespace tictac::sched {
namespace {

using testing::GraphBuilder;
using testing::prio;
using testing::simBytesAreMicros;
using testing::twoBranches;

TEST(Sim, InferenceOrderMatters) {
  Graph g = twoBranches();
  // a first: a@10, A 10-25, b@30, B 30-35, C 35-36.
  SimResult r = simulate(g, prio(g, {{"a", 0}, {"b", 1}}), simBytesAreMicros());
  EXPECT_DOUBLE_EQ(r.makespan_us, 36);
  // b first: b@20, B 20-25, a@30, A 30-45, C 45-46.
  EXPECT_DOUBLE_EQ(simulate(g, prio(g, {{"a", 1}, {"b", 0}}), simBytesAreMicros()).makespan_us, 46);
  // Equal priorities: ties by name, so a first again.
  EXPECT_DOUBLE_EQ(simulate(g, prio(g, {{"a", 3}, {"b", 3}}), simBytesAreMicros()).makespan_us, 36);
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
  SimOptions o = simBytesAreMicros();
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
  GraphBuilder b;
  OpIndex a = b.recv("a", 10);
  OpIndex y = b.compute("Y", 3, {a});
  OpIndex x = b.compute("X", 4, {a});
  b.output(b.compute("Z", 1, {x, y}));
  SimOptions o = simBytesAreMicros();
  o.record_trace = true;
  SimResult r = simulate(b.graph(), PriorityVector(b.graph().ops.size(), 0), o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 18);  // a@10, Y 10-13, X 13-17, Z 17-18
  std::map<std::string, double> start;
  for (const TraceSpan& s : r.trace) start[s.name] = s.start_us;
  EXPECT_DOUBLE_EQ(start["Y"], 10);
  EXPECT_DOUBLE_EQ(start["X"], 13);
  EXPECT_DOUBLE_EQ(start["Z"], 17);
}

TEST(Sim, TrainingSingleIteration) {
  Graph g = twoBranches();
  SimOptions o = simBytesAreMicros();
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
  GraphBuilder b;
  OpIndex a = b.recv("a", 2), rb = b.recv("b", 100);
  OpIndex A = b.compute("A", 50, {a});
  b.output(b.compute("B", 1, {A, rb}));
  return b.graph();
}

TEST(Sim, TrainingPipelinesIterationsAndChunksLetUrgentTransfersOvertake) {
  Graph g = preemptGraph();
  SimOptions o = simBytesAreMicros();
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
  GraphBuilder b;
  OpIndex big = b.recv("big", 40), mid = b.recv("mid", 30);
  OpIndex small = b.recv("small", 20), tiny = b.recv("tiny", 10);
  b.output(b.compute("Z", 1, {big, mid, small, tiny}));
  SimOptions o = simBytesAreMicros();
  o.workers = 2;
  o.ps = 2;
  PriorityVector pv = prio(b.graph(), {{"big", 0}, {"mid", 1}, {"small", 2}, {"tiny", 3}});
  SimResult r = simulate(b.graph(), pv, o);
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
  r = simulate(b.graph(), pv, o);
  EXPECT_DOUBLE_EQ(r.makespan_us, 201);
  EXPECT_DOUBLE_EQ(r.straggler_us.mean, 10);
}

TEST(Sim, OneIncomingLinkPerWorkerOneOutgoingPerPs) {
  GraphBuilder b;
  OpIndex x = b.recv("x", 10), y = b.recv("y", 10);
  b.output(b.compute("Z", 1, {x, y}));
  SimOptions o = simBytesAreMicros();
  o.ps = 2;  // x on PS0, y on PS1, but the worker's in-link serializes them
  EXPECT_DOUBLE_EQ(simulate(b.graph(), PriorityVector(b.graph().ops.size(), 0), o).makespan_us, 21);
  o.ps = 1;
  o.workers = 2;  // x->w0, x->w1, y->w0, y->w1 on the PS out-link
  SimResult r = simulate(b.graph(), PriorityVector(b.graph().ops.size(), 0), o);
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
    SimOptions o = simBytesAreMicros();
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
  GraphBuilder b;
  OpIndex a = b.recv("a", 10);
  b.output(b.compute("A", 0, {a}));
  SimResult r = simulate(b.graph(), PriorityVector(b.graph().ops.size(), 0), simBytesAreMicros());
  EXPECT_DOUBLE_EQ(r.makespan_us, 10);
  EXPECT_DOUBLE_EQ(r.efficiency, 1);  // P = 0: M + P - max(M, P) = 0
  EXPECT_DOUBLE_EQ(r.headroom, 0);
  r.iteration_samples.clear();
  for (int i = 100; i >= 1; --i) r.iteration_samples.push_back(i);
  computeMetrics(b.graph(), simBytesAreMicros(), r);
  EXPECT_DOUBLE_EQ(r.iteration_us.mean, 50.5);
  EXPECT_DOUBLE_EQ(r.iteration_us.p50, 50);
  EXPECT_DOUBLE_EQ(r.iteration_us.p99, 99);
  EXPECT_DOUBLE_EQ(r.makespan_us, 50.5);
}

}  // namespace
}  // namespace tictac::sched
