// bench/sched_bench.cc: analyzer (tac, tic) and simulator cost versus graph
// size, on generated graphs (docs/perf.md "Analyzer (TAC) and simulator").
//
//   build/bench/sched_bench --benchmark_filter=Chain   # 1k..100k compute ops
//   build/bench/sched_bench --benchmark_filter=Dense   # densenet121-sized (795 ops)
//   build/bench/sched_bench --write-graphs=DIR         # writes the graphs as JSON, exits
//
// Chain/N: chainWithSkips(N compute ops, a parameter every 10 ops) = 1.1 N ops.
#include <benchmark/benchmark.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "bench/graphgen.h"
#include "tictac/sched/analyzer.h"
#include "tictac/sched/sim.h"

namespace {

using namespace tictac::sched;

// Generated once per size; generation is not timed.
const Graph& chain(int64_t n) {
  static std::map<int64_t, std::unique_ptr<Graph>> cache;
  auto& g = cache[n];
  if (!g)
    g = std::make_unique<Graph>(tictac::bench::chainWithSkips(static_cast<uint32_t>(n), 10, 42));
  return *g;
}

const Graph& densenet() {
  static const Graph g = tictac::bench::densenetLike(42);
  return g;
}

void counters(benchmark::State& st, const Graph& g) {
  st.counters["ops"] = static_cast<double>(g.ops.size());
  st.counters["recvs"] = static_cast<double>(g.recvs().size());
}

void analyze(benchmark::State& st, const Graph& g, const char* algo) {
  auto an = AnalyzerRegistry::withBuiltins().create(algo);
  AnalyzerOptions o;
  for (auto _ : st) benchmark::DoNotOptimize(an->analyze(g, o));
  counters(st, g);
}

void sim(benchmark::State& st, const Graph& g, SimOptions o) {
  PriorityVector pv =
      priorityVector(g, AnalyzerRegistry::withBuiltins().create("tac")->analyze(g, {}));
  double makespan = 0;
  for (auto _ : st) {
    SimResult r = simulate(g, pv, o);
    makespan = r.makespan_us;
    st.counters["transfers"] = static_cast<double>(r.transfers);
  }
  st.counters["makespan_us"] = makespan;
  counters(st, g);
}

SimOptions training(uint32_t workers, uint32_t ps, uint32_t runs) {
  SimOptions o;
  o.mode = SimMode::kTraining;
  o.workers = workers;
  o.ps = ps;
  o.runs = runs;
  return o;
}

void BM_TacChain(benchmark::State& st) {
  analyze(st, chain(st.range(0)), "tac");
}
void BM_TicChain(benchmark::State& st) {
  analyze(st, chain(st.range(0)), "tic");
}
void BM_SimChain(benchmark::State& st) {
  sim(st, chain(st.range(0)), SimOptions{});
}
void BM_SimChainTraining(benchmark::State& st) {
  sim(st, chain(st.range(0)), training(1, 1, 1));
}
void BM_TacDense(benchmark::State& st) {
  analyze(st, densenet(), "tac");
}
void BM_TicDense(benchmark::State& st) {
  analyze(st, densenet(), "tic");
}
void BM_SimDense(benchmark::State& st) {
  sim(st, densenet(), SimOptions{});
}
// 8 workers, 2 PS, 10 pipelined training iterations.
void BM_SimDenseTraining8x2x10(benchmark::State& st) {
  sim(st, densenet(), training(8, 2, 10));
}

#define SIZES ->Arg(1000)->Arg(3000)->Arg(10000)->Arg(20000)->Arg(30000)->Arg(100000)
BENCHMARK(BM_TacChain) SIZES->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TicChain) SIZES->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimChain) SIZES->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimChainTraining) SIZES->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TacDense)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TicDense)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimDense)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimDenseTraining8x2x10)->Unit(benchmark::kMillisecond);

// Writes densenet121-like.json and chain20000.json (for bench/reference_tac.py).
int writeGraphs(const std::string& dir) {
  for (const auto& [name, g] :
       {std::pair<std::string, const Graph*>{"densenet121-like", &densenet()},
        {"chain20000", &chain(20000)}}) {
    std::ofstream f(dir + "/" + name + ".json");
    f << toJson(*g);
    f.close();
    if (!f) {
      std::cerr << "sched_bench: cannot write " << dir << "/" << name << ".json\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--write-graphs=", 15) == 0) return writeGraphs(argv[i] + 15);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
