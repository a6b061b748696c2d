// tests/sched/bruteforce_test.cc: every recv order of small random graphs.
//
// On 240 seeded graphs (2..8 recvs, 4..12 compute ops) the single-worker
// inference makespan of every permutation of the recvs gives the optimum.
// Each built-in analyzer's makespan is compared with it and with fifo/random;
// the table goes to stderr. Asserted: the optimum is <= every analyzer, and
// TAC's mean is <= random's mean (the acceptance bar).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/graphgen.h"
#include "tictac/sched/analyzer.h"
#include "tictac/sched/sim.h"

namespace tictac::sched {
namespace {

struct Stats {
  double sum_gap = 0, worst_gap = 0, sum_vs_fifo = 0, sum_vs_random = 0, sum_makespan = 0;
  int optimal = 0;
};

TEST(BruteForce, AnalyzersAgainstTheOptimumOverAllOrders) {
  const std::vector<std::string> algos = {"tac", "tic", "fifo", "reverse", "random"};
  AnalyzerRegistry reg = AnalyzerRegistry::withBuiltins();
  SimOptions so;       // 10 Gbit/s, no latency, one worker, inference
  AnalyzerOptions ao;  // the same bandwidth and latency
  ao.bandwidth_gbps = so.bandwidth_gbps;
  ao.latency_us = so.latency_us;

  const int kGraphs = 240;
  std::map<std::string, Stats> st;
  double sum_opt = 0;
  long evaluated = 0;
  for (int i = 0; i < kGraphs; ++i) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(i);
    Graph g = bench::randomSmallGraph(seed, 2 + i % 7, 4 + i % 9);
    SingleWorkerMakespan sim(g, so);
    std::vector<OpIndex> order = g.recvs();
    ASSERT_LE(order.size(), 8u);
    double opt = 1e300;
    do {
      opt = std::min(opt, sim.ofOrder(order));
      ++evaluated;
    } while (std::next_permutation(order.begin(), order.end()));
    sum_opt += opt;

    std::map<std::string, double> ms;
    for (const std::string& a : algos) {
      auto an = reg.create(a);
      ASSERT_NE(an, nullptr) << a;
      ms[a] = sim.ofPriorities(priorityVector(g, an->analyze(g, ao)));
      ASSERT_LE(opt, ms[a] + 1e-9) << a << " beats the exhaustive optimum on seed " << seed;
    }
    for (const std::string& a : algos) {
      Stats& s = st[a];
      const double gap = opt > 0 ? ms[a] / opt - 1 : 0;
      s.sum_gap += gap;
      s.worst_gap = std::max(s.worst_gap, gap);
      s.sum_vs_fifo += ms["fifo"] > 0 ? ms[a] / ms["fifo"] - 1 : 0;
      s.sum_vs_random += ms["random"] > 0 ? ms[a] / ms["random"] - 1 : 0;
      s.sum_makespan += ms[a];
      s.optimal += ms[a] <= opt + 1e-9 ? 1 : 0;
    }
  }

  std::fprintf(stderr,
               "brute force: %d graphs (2-8 recvs), %ld orders simulated; mean optimum %.1f us\n"
               "%-8s %12s %12s %10s %14s %14s %12s\n",
               kGraphs, evaluated, sum_opt / kGraphs, "algo", "mean_gap_%", "worst_gap_%",
               "optimal", "vs_fifo_%", "vs_random_%", "mean_us");
  for (const std::string& a : algos) {
    const Stats& s = st[a];
    std::fprintf(stderr, "%-8s %12.2f %12.2f %6d/%-3d %14.2f %14.2f %12.1f\n", a.c_str(),
                 100 * s.sum_gap / kGraphs, 100 * s.worst_gap, s.optimal, kGraphs,
                 100 * s.sum_vs_fifo / kGraphs, 100 * s.sum_vs_random / kGraphs,
                 s.sum_makespan / kGraphs);
  }
  EXPECT_LE(st["tac"].sum_makespan, st["random"].sum_makespan);
  EXPECT_LE(st["tac"].sum_gap, st["random"].sum_gap);
}

}  // namespace
}  // namespace tictac::sched
