// tests/sched/sim_test_util.h: the graphs and options the simulator tests
// share (tests/sched/sim_test.cc, sim_check_test.cc).
//
// With simBytesAreMicros() the bandwidth is 0.008 Gbit/s, so a recv of B
// bytes takes exactly B us (B*8/(0.008*1e3)) and the expected times in the
// tests are small integers. Graphs are built with GraphBuilder
// (analyzer_test_util.h). Everything here is pure and thread-agnostic.
#pragma once

#include <initializer_list>
#include <utility>

#include "tests/sched/analyzer_test_util.h"
#include "tictac/sched/sim.h"

namespace tictac::sched::testing {

// Default options but for the bandwidth above.
inline SimOptions simBytesAreMicros() {
  return bytesAreMicros<SimOptions>();
}

// A priority per op of g: 0 for every op not named in l.
inline PriorityVector prio(const Graph& g,
                           std::initializer_list<std::pair<const char*, Priority>> l) {
  PriorityVector pv(g.ops.size(), 0);
  for (auto& [n, p] : l) pv[static_cast<size_t>(g.find(n))] = p;
  return pv;
}

// a(10) -> A(15) -> C(1) <- B(5) <- b(20)
inline Graph twoBranches() {
  GraphBuilder b;
  OpIndex a = b.recv("a", 10), rb = b.recv("b", 20);
  OpIndex A = b.compute("A", 15, {a}), B = b.compute("B", 5, {rb});
  b.output(b.compute("C", 1, {A, B}));
  return b.graph();
}

}  // namespace tictac::sched::testing
