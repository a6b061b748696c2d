// tests/sched/analyzer_test_util.h: building graphs in code for the analyzer
// tests, and reading schedules back as name -> priority.
#pragma once

#include <initializer_list>
#include <map>
#include <string>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/graph.h"

namespace tictac::sched::testing {

// With this bandwidth, a recv of B bytes takes exactly B us (B*8/(0.008*1e3)).
// Options: AnalyzerOptions, or SimOptions for the simulator tests.
template <typename Options = AnalyzerOptions>
Options bytesAreMicros() {
  Options o;
  o.bandwidth_gbps = 0.008;
  return o;
}

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name = "t") { g_.name = std::move(name); }
  OpIndex recv(const std::string& name, uint64_t bytes) {
    Op op;
    op.name = name;
    op.kind = OpKind::kRecv;
    op.bytes = bytes;
    return add(std::move(op));
  }
  OpIndex compute(const std::string& name, double time_us, std::initializer_list<OpIndex> in) {
    Op op;
    op.name = name;
    op.time_us = time_us;
    op.has_time = true;
    op.inputs = in;
    return add(std::move(op));
  }
  GraphBuilder& output(OpIndex i) {
    g_.outputs.push_back(i);
    return *this;
  }
  const Graph& graph() const { return g_; }
  Graph& graph() { return g_; }

 private:
  OpIndex add(Op op) {
    g_.ops.push_back(std::move(op));
    return static_cast<OpIndex>(g_.ops.size() - 1);
  }
  Graph g_;
};

inline std::map<std::string, Priority> byName(const Schedule& s) {
  std::map<std::string, Priority> m;
  for (const auto& e : s.entries) m[e.name] = e.priority;
  return m;
}

inline std::map<std::string, Priority> run(const std::string& algo, const Graph& g,
                                           const AnalyzerOptions& o = bytesAreMicros()) {
  auto a = AnalyzerRegistry::withBuiltins().create(algo);
  if (!a) return {};
  return byName(a->analyze(g, o));
}

using Prios = std::map<std::string, Priority>;

}  // namespace tictac::sched::testing
