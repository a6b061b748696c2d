// tictac-analyze: prints the transfer priorities an analyzer gives a graph.
//
//   tictac-analyze GRAPH --algo tic|tac|fifo|random|reverse|PLUGIN_NAME
//       [--bandwidth-gbps F] [--latency-us F] [--timing TRACE.json]
//       [--use-recv-times] [--seed N] [--plugin LIB.so]... [-o FILE] [--json]
//
// stdout (or -o FILE): `name<TAB>priority` per recv, sorted by priority then
// name; with --json one {"name": ..., "priority": ...} object per line.
// stderr: loader warnings, timing-trace statistics, errors.
// Exit: 0 ok; 1 I/O failure (unreadable graph or trace, unwritable output);
// 2 bad flags, unknown algorithm, bad graph/trace/plugin or options.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/graph.h"
#include "tictac/sched/timing.h"
#include "tools/cli_checks.h"
#include "tools/sched_tool.h"

namespace {

using namespace tictac::sched;

struct Args {
  std::string graph, algo, timing, out;
  std::vector<std::string> plugins;
  AnalyzerOptions opts;
  bool json = false;
};

std::string render(const Schedule& s, bool json) {
  if (!json) return s.toTsv();
  std::string out;
  for (const auto& e : s.entries)
    out += nlohmann::json{{"name", e.name}, {"priority", e.priority}}.dump() + "\n";
  return out;
}

int run(const Args& a) {
  auto reg = AnalyzerRegistry::withBuiltins();
  for (const auto& p : a.plugins) {
    try {
      reg.loadPlugin(p);
    } catch (const std::exception& e) {
      std::cerr << "tictac-analyze: " << e.what() << "\n";
      return 2;
    }
  }
  auto analyzer = reg.create(a.algo);
  if (!analyzer) {
    std::cerr << "tictac-analyze: unknown algorithm '" << a.algo
              << "'; known: " << tictac::tools::joinNames(reg.names())
              << " (load others with --plugin LIB.so)\n";
    return 2;
  }
  return tictac::tools::runReporting("tictac-analyze", [&] {
    Graph g = tictac::tools::loadGraphReporting("tictac-analyze", a.graph, a.timing);
    tictac::tools::writeResult(a.out, render(analyzer->analyze(g, a.opts), a.json));
    return 0;
  });
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{
      "Prints the priority of every parameter transfer (recv op) of a model graph, as\n"
      "`name<TAB>priority` lines sorted by priority, then name. Lower = more urgent.\n"
      "Exit status: 0 ok, 1 I/O failure, 2 bad flags or bad input.",
      "tictac-analyze"};
  app.add_option("GRAPH", a.graph, "model graph: interchange-format .json or .onnx")->required();
  app.add_option("--algo", a.algo,
                 "analyzer: tic (structure only), tac (uses sizes and times), fifo (first "
                 "consumer in list order), reverse (fifo backwards), random (seeded shuffle), "
                 "or a name exported by a --plugin library")
      ->required();
  app.add_option("--bandwidth-gbps", a.opts.bandwidth_gbps,
                 "link rate in 10^9 bit/s of payload; transfer time = bytes*8/(F*1e3) us "
                 "+ latency")
      ->check(tictac::tools::finiteNumber(true))
      ->capture_default_str();
  app.add_option("--latency-us", a.opts.latency_us, "per-transfer latency added to every recv, us")
      ->check(tictac::tools::finiteNumber(false))
      ->capture_default_str();
  app.add_option("--timing", a.timing,
                 "Chrome trace-event JSON whose complete events named like ops set their "
                 "time_us (matched/unmatched counts go to stderr)");
  app.add_flag("--use-recv-times", a.opts.use_recv_times,
               "use a recv's own time_us (from the graph or --timing) as its transfer time "
               "instead of the bandwidth formula (default: off)");
  app.add_option("--seed", a.opts.seed, "seed of the random analyzer")
      ->check(tictac::tools::unsignedInteger())
      ->capture_default_str();
  app.add_option("--plugin", a.plugins,
                 "shared library exporting analyzers through tictac/sched/plugin.h; "
                 "may be given several times");
  app.add_option("-o,--output", a.out, "write the result to FILE instead of stdout");
  app.add_flag("--json", a.json,
               "print JSON lines {\"name\": ..., \"priority\": ...} instead of TSV");
  if (auto rc = tictac::tools::parseCommandLine(app, argc, argv)) return *rc;
  return run(a);
}
