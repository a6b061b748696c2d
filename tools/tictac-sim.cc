// tictac-sim: simulates iterations of a model graph under a transfer order.
//
//   tictac-sim GRAPH --order ALGO|FILE.tsv --bandwidth-gbps F [--latency-us F]
//       [--timing TRACE.json] [--compute-scale X] [--mode inference|training]
//       [--bwd-factor F] [--workers W] [--ps N] [--runs N] [--seed N]
//       [--chunk-bytes B] [--trace OUT.json] [--plugin LIB.so]... [--json]
//
// stdout: `key<TAB>value` lines, or one JSON object with --json.
// stderr: a summary table, loader warnings, timing-trace statistics, errors.
// Exit: 0 ok; 1 I/O failure (unreadable graph, trace or order file,
// unwritable --trace); 2 bad flags, unknown algorithm, bad graph/trace/order.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/graph.h"
#include "tictac/sched/sim.h"
#include "tictac/sched/timing.h"
#include "tools/cli_checks.h"
#include "tools/sched_tool.h"

namespace {

using namespace tictac::sched;

struct Args {
  std::string graph, order, timing, trace, mode = "inference";
  std::vector<std::string> plugins;
  SimOptions sim;
  uint64_t seed = 0;
  bool json = false;
};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// (key, value) pairs in output order; nested keys are written a.b in TSV.
std::vector<std::pair<std::string, double>> metrics(const SimResult& r) {
  return {{"makespan_us", r.makespan_us},
          {"comm_us", r.comm_us},
          {"compute_us", r.compute_us},
          {"critical_path_us", r.critical_path_us},
          {"upper_bound_us", r.upper_bound_us},
          {"lower_bound_us", r.lower_bound_us},
          {"efficiency", r.efficiency},
          {"efficiency_cp", r.efficiency_cp},
          {"headroom", r.headroom},
          {"iteration_us.mean", r.iteration_us.mean},
          {"iteration_us.p50", r.iteration_us.p50},
          {"iteration_us.p99", r.iteration_us.p99},
          {"straggler_us.mean", r.straggler_us.mean},
          {"straggler_us.p50", r.straggler_us.p50},
          {"straggler_us.p99", r.straggler_us.p99},
          {"transfers", static_cast<double>(r.transfers)},
          {"chunks", static_cast<double>(r.chunks)}};
}

std::string render(const Args& a, const std::string& order_name, const SimResult& r) {
  if (!a.json) {
    std::string out;
    for (const auto& [k, v] : metrics(r)) out += k + "\t" + num(v) + "\n";
    return out;
  }
  nlohmann::json j = {{"order", order_name},
                      {"mode", a.mode},
                      {"workers", a.sim.workers},
                      {"ps", a.sim.ps},
                      {"runs", a.sim.runs}};
  for (const auto& [k, v] : metrics(r)) {
    size_t dot = k.find('.');
    if (dot == std::string::npos) {
      j[k] = v;
    } else {
      j[k.substr(0, dot)][k.substr(dot + 1)] = v;
    }
  }
  j["transfers"] = r.transfers;
  j["chunks"] = r.chunks;
  return j.dump() + "\n";
}

void summary(const Args& a, const Graph& g, const std::string& order_name, const SimResult& r) {
  std::ostringstream s;
  s << "tictac-sim: " << g.name << ": " << g.ops.size() << " ops, " << g.recvs().size()
    << " recvs; order " << order_name << ", " << a.mode << ", " << a.sim.workers << " worker(s), "
    << a.sim.ps << " PS, " << a.sim.runs << " run(s), " << num(a.sim.bandwidth_gbps) << " Gbit/s\n";
  auto row = [&](const char* k, const std::string& v) {
    s << "  " << k << std::string(26 - std::string(k).size(), ' ') << v << "\n";
  };
  row("makespan", num(r.makespan_us) + " us");
  row("comm M", num(r.comm_us) + " us");
  row("compute P", num(r.compute_us) + " us");
  row("critical path", num(r.critical_path_us) + " us");
  row("bounds [lower, M+P]", "[" + num(r.lower_bound_us) + ", " + num(r.upper_bound_us) + "] us");
  row("efficiency", num(r.efficiency) + " (with critical path: " + num(r.efficiency_cp) + ")");
  row("headroom S", num(r.headroom));
  row("iteration mean/p50/p99", num(r.iteration_us.mean) + " / " + num(r.iteration_us.p50) + " / " +
                                    num(r.iteration_us.p99) + " us");
  row("straggler mean/p99", num(r.straggler_us.mean) + " / " + num(r.straggler_us.p99) + " us");
  std::cerr << s.str();
}

// --trace keeps every span in memory (about 1.6 KB each while the JSON is
// built) before writing ~160 bytes per span: refuse runs whose trace would
// exceed this many spans instead of exhausting memory ("--chunk-bytes 1" on
// resnet50 asked for ~10^8 spans, over 100 GB).
constexpr double kMaxTraceSpans = 2e6;

// An upper bound of the spans a run records: per worker and iteration one per
// compute op and one per chunk of every recv, twice in training (backward
// ops, gradient pushes).
double traceSpans(const Graph& g, const SimOptions& o) {
  double per_iteration = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kRecv || o.chunk_bytes == 0) {
      per_iteration += 1;
    } else {
      per_iteration += std::max(1.0, std::ceil(double(op.bytes) / double(o.chunk_bytes)));
    }
  }
  if (o.mode == SimMode::kTraining) per_iteration *= 2;
  return per_iteration * o.workers * o.runs;
}

int run(Args& a) {
  a.sim.mode = a.mode == "training" ? SimMode::kTraining : SimMode::kInference;
  a.sim.record_trace = !a.trace.empty();
  auto reg = AnalyzerRegistry::withBuiltins();
  try {
    for (const auto& p : a.plugins) reg.loadPlugin(p);
  } catch (const std::exception& e) {
    std::cerr << "tictac-sim: " << e.what() << "\n";
    return 2;
  }
  return tictac::tools::runReporting("tictac-sim", [&] {
    validateSimOptions(a.sim);
    Graph g = tictac::tools::loadGraphReporting("tictac-sim", a.graph, a.timing);
    if (const double spans = traceSpans(g, a.sim); a.sim.record_trace && spans > kMaxTraceSpans) {
      std::cerr << "tictac-sim: --trace: this run would record about " << spans
                << " spans (at most " << kMaxTraceSpans
                << "): use fewer --workers or --runs, or larger --chunk-bytes\n";
      return 2;
    }
    AnalyzerOptions ao;
    ao.bandwidth_gbps = a.sim.bandwidth_gbps;
    ao.latency_us = a.sim.latency_us;
    ao.seed = a.seed;
    SimResult r;
    std::string order_name = a.order;
    if (auto analyzer = reg.create(a.order)) {
      if (a.order == "random") {
        // Every worker draws its own order every iteration: worker w,
        // iteration k uses seed + w * runs + k (worker 0, iteration 0 = --seed).
        OrderSource src = [&](uint32_t w, uint32_t k) {
          AnalyzerOptions o = ao;
          o.seed = a.seed + uint64_t{w} * a.sim.runs + k;
          return priorityVector(g, analyzer->analyze(g, o));
        };
        r = simulate(g, src, a.sim);
      } else {
        r = simulate(g, priorityVector(g, analyzer->analyze(g, ao)), a.sim);
      }
    } else if (std::filesystem::is_regular_file(a.order)) {
      order_name = std::filesystem::path(a.order).filename().string();
      r = simulate(g, loadOrderFile(g, a.order), a.sim);
    } else {
      std::cerr << "tictac-sim: --order " << a.order << ": neither a known algorithm ("
                << tictac::tools::joinNames(reg.names()) << ") nor a readable file\n";
      return 2;
    }
    if (!a.trace.empty()) tictac::tools::writeResult(a.trace, chromeTraceJson(g, r, a.sim));
    summary(a, g, order_name, r);
    tictac::tools::writeResult("", render(a, order_name, r));
    return 0;
  });
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{
      "Simulates training or inference iterations of a model graph when parameter transfers\n"
      "leave in a given order, and reports the makespan against the bounds of the TicTac\n"
      "paper (docs/sched.md). stdout: key<TAB>value lines (or one JSON object with --json);\n"
      "a summary table goes to stderr. Exit status: 0 ok, 1 I/O failure, 2 bad flags or input.",
      "tictac-sim"};
  app.add_option("GRAPH", a.graph, "model graph: interchange-format .json or .onnx")->required();
  app.add_option("--order", a.order,
                 "transfer order: an analyzer (tic, tac, fifo, reverse, random, or a --plugin "
                 "name) or a file of name<TAB>priority lines as tictac-analyze prints")
      ->required();
  app.add_option("--bandwidth-gbps", a.sim.bandwidth_gbps,
                 "rate of every link, 10^9 bit/s of payload (transfer = bytes*8/(F*1e3) us)")
      ->required()
      ->check(tictac::tools::finiteNumber(true));
  app.add_option("--latency-us", a.sim.latency_us, "latency paid once per transfer, us")
      ->check(tictac::tools::finiteNumber(false))
      ->capture_default_str();
  app.add_option("--timing", a.timing,
                 "Chrome trace-event JSON whose complete events set the ops' time_us "
                 "(recv times are not used: transfers follow the bandwidth)");
  app.add_option("--compute-scale", a.sim.compute_scale, "multiply every compute time by X")
      ->check(tictac::tools::finiteNumber(false))
      ->capture_default_str();
  app.add_option("--mode", a.mode,
                 "inference (forward only, iterations independent) or training (backward "
                 "pass, gradient pushes, pipelined iterations)")
      ->check(CLI::IsMember({"inference", "training"}))
      ->capture_default_str();
  app.add_option("--bwd-factor", a.sim.bwd_factor,
                 "training: backward time of an op = F x its forward time")
      ->check(tictac::tools::finiteNumber(false))
      ->capture_default_str();
  app.add_option("--workers", a.sim.workers, "number of workers W")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  app.add_option("--ps", a.sim.ps, "number of parameter servers N (parameters sharded by size)")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  app.add_option("--runs", a.sim.runs, "iterations to simulate (iteration_us, straggler_us)")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(1u, 10000000u))
      ->capture_default_str();
  app.add_option("--seed", a.seed,
                 "seed of --order random; worker w in iteration k draws with seed+w*runs+k")
      ->check(tictac::tools::unsignedInteger())
      ->capture_default_str();
  app.add_option("--chunk-bytes", a.sim.chunk_bytes,
                 "send transfers in chunks of B bytes, re-arbitrating links between chunks "
                 "(0 = whole transfers)")
      ->check(tictac::tools::unsignedInteger())
      ->capture_default_str();
  app.add_option("--trace", a.trace,
                 "write a Chrome trace-event JSON of the network and compute lanes (Perfetto); "
                 "at most 2e6 spans (compute ops and transfer chunks, all workers and runs)")
      ->check(tictac::tools::nonEmptyPath());
  app.add_option("--plugin", a.plugins, "shared library exporting analyzers; repeatable");
  app.add_flag("--json", a.json, "print one JSON object instead of key<TAB>value lines");
  if (auto rc = tictac::tools::parseCommandLine(app, argc, argv)) return *rc;
  return run(a);
}
