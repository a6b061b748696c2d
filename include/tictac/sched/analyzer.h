// tictac/sched/analyzer.h: the pluggable DAG analyzer interface.
//
// An analyzer maps a validated, pruned Graph to a Schedule: one priority per
// recv op. Lower number = more urgent, everywhere in the project. Built-in
// analyzers: tic, tac, fifo, reverse, random. Third-party ones load from a
// shared library through the C entry point in tictac/sched/plugin.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tictac/sched/graph.h"

namespace tictac::sched {

using Priority = uint32_t;

struct AnalyzerOptions {
  double bandwidth_gbps = 10.0;  // transfer time M = bytes*8/(gbps*1e3) us + latency_us
  double latency_us = 0.0;
  bool use_recv_times = false;  // a recv's own time_us replaces the formula
  uint64_t seed = 0;            // random
};

struct ScheduleEntry {
  std::string name;  // recv op name
  OpIndex op = 0;    // index in the analyzed graph
  Priority priority = 0;
};

// Entries sorted by (priority, name); exactly the recvs of the graph.
struct Schedule {
  std::string algo;
  std::vector<ScheduleEntry> entries;
  // Writes `name<TAB>priority` lines.
  std::string toTsv() const;
};

// Sorts entries by (priority, name).
void sortSchedule(Schedule& s);

// Transfer time of recv op `r` under the options (us).
double transferTimeUs(const Op& r, const AnalyzerOptions& o);

class Analyzer {
 public:
  virtual ~Analyzer() = default;
  virtual std::string name() const = 0;
  // Pure function of (graph, options). Throws InputError on input it cannot use.
  virtual Schedule analyze(const Graph& g, const AnalyzerOptions& o) const = 0;
};

using AnalyzerFactory = std::function<std::unique_ptr<Analyzer>()>;

// Name -> factory. Not thread-safe for add(); create() is const.
class AnalyzerRegistry {
 public:
  // A registry holding tic, tac, fifo, reverse and random.
  static AnalyzerRegistry withBuiltins();
  void add(const std::string& name, AnalyzerFactory f);
  // Loads a plugin library and registers the analyzers it exports. Throws
  // std::runtime_error naming the library and the problem (dlopen error,
  // missing entry point, ABI version mismatch).
  void loadPlugin(const std::string& path);
  // nullptr when the name is unknown.
  std::unique_ptr<Analyzer> create(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, AnalyzerFactory> factories_;
};

}  // namespace tictac::sched
