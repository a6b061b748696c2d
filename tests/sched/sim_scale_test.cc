// tests/sched/sim_scale_test.cc: the simulator's link arbitration at many
// workers: results checked by hand at W = 5000, and the work it spends
// counted (Engine::arbitrationWork) rather than timed. Before the per-PS ready
// heaps, every finished chunk re-examined all W pairs of its PS, so the work
// per chunk grew linearly with W (10000 workers on alexnet: 205 s); now it
// is O(N + log W).
#include <gtest/gtest.h>

#include <cmath>

#include "sched/sim/engine.h"
#include "tests/sched/sim_test_util.h"

namespace tictac::sched::testing {
namespace {

struct Counted {  // a run and the arbitration work it took
  SimResult result;
  uint64_t work = 0;
};

Counted runEngine(const Graph& g, const PriorityVector& pv, const SimOptions& o) {
  Counted run;
  simdetail::Engine e(g, nullptr, &pv, o, run.result);
  e.run();
  computeMetrics(g, o, run.result);
  run.work = e.arbitrationWork();
  return run;
}

// a(2) b(3) c(5) -> Z(1): priorities a, b, c.
Graph threeRecvs() {
  GraphBuilder b;
  OpIndex a = b.recv("a", 2), rb = b.recv("b", 3), c = b.recv("c", 5);
  b.output(b.compute("Z", 1, {a, rb, c}));
  return b.graph();
}

// Work allowed per chunk: a generous constant times (N + log2 W + 1). The
// old arbitration needed at least W per chunk.
double workBound(const SimOptions& o, uint64_t chunks) {
  return 16.0 * static_cast<double>(chunks) * (o.ps + std::log2(o.workers) + 1);
}

TEST(SimScale, OnePsServesManyWorkersInKeyOrder) {
  const Graph g = threeRecvs();
  const PriorityVector pv = prio(g, {{"a", 0}, {"b", 1}, {"c", 2}});
  SimOptions o = simBytesAreMicros();
  o.workers = 5000;
  // The PS out-link is the bottleneck and sends by (priority, worker): a to
  // every worker (2 us each), then b (3 us), then c (5 us). Worker w gets c at
  // W*(2+3) + 5*(w+1) and runs Z for 1 us: the last ends at W*10 + 1, the
  // first 5*(W-1) earlier.
  Counted r = runEngine(g, pv, o);
  const double w = o.workers;
  EXPECT_DOUBLE_EQ(r.result.makespan_us, w * 10 + 1);
  EXPECT_DOUBLE_EQ(r.result.straggler_us.mean, 5 * (w - 1));
  EXPECT_EQ(r.result.chunks, 3 * o.workers);
  EXPECT_LE(static_cast<double>(r.work), workBound(o, r.result.chunks));
}

TEST(SimScale, ArbitrationWorkPerChunkGrowsLogarithmicallyInWorkers) {
  const Graph g = threeRecvs();
  const PriorityVector pv = prio(g, {{"a", 0}, {"b", 1}, {"c", 2}});
  SimOptions o = simBytesAreMicros();
  o.mode = SimMode::kTraining;
  o.runs = 2;
  o.workers = 500;
  Counted small = runEngine(g, pv, o);
  o.workers = 8000;
  Counted big = runEngine(g, pv, o);
  ASSERT_GT(small.result.chunks, 0u);
  ASSERT_GT(big.result.chunks, 0u);
  const double per_small = static_cast<double>(small.work) / small.result.chunks;
  const double per_big = static_cast<double>(big.work) / big.result.chunks;
  // 16x the workers: log2 W goes from ~9 to ~13; linear work would be 16x.
  EXPECT_LT(per_big, 2.0 * per_small) << per_small << " -> " << per_big;
  EXPECT_LE(static_cast<double>(big.work), workBound(o, big.result.chunks));
}

TEST(SimScale, ManyPsAndChunksStayWithinTheBound) {
  const Graph g = threeRecvs();
  const PriorityVector pv = prio(g, {{"a", 2}, {"b", 0}, {"c", 1}});
  SimOptions o = simBytesAreMicros();
  o.mode = SimMode::kTraining;
  o.runs = 3;
  o.workers = 2000;
  o.ps = 3;
  o.chunk_bytes = 1;  // every byte re-arbitrates the links
  Counted r = runEngine(g, pv, o);
  // 3 params and 3 gradients of 10 bytes in all per worker and iteration.
  EXPECT_EQ(r.result.chunks, uint64_t{2} * 10 * o.workers * o.runs);
  EXPECT_LE(static_cast<double>(r.work), workBound(o, r.result.chunks));
  // Each parameter sits alone on its PS (sharded by size), and a PS link
  // moves 1 byte per us: c's PS carries 5 bytes x W each way per iteration.
  EXPECT_GE(r.result.makespan_us, 5.0 * o.workers);
}

}  // namespace
}  // namespace tictac::sched::testing
