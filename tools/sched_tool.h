// tools/sched_tool.h: what tictac-analyze and tictac-sim share: loading a
// graph (with its warnings and an optional timing trace reported on stderr)
// and mapping errors to the exit statuses of docs/conventions.md.
#pragma once

#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "tictac/sched/graph.h"
#include "tictac/sched/timing.h"

namespace tictac::tools {

// Loads GRAPH (.json/.onnx); warnings and timing statistics go to stderr
// prefixed with the tool's name. Throws like loadGraph/loadTimingTrace.
inline sched::Graph loadGraphReporting(const char* tool, const std::string& path,
                                       const std::string& timing) {
  std::vector<std::string> warnings;
  sched::Graph g = sched::loadGraph(path, &warnings);
  for (const auto& w : warnings) std::cerr << tool << ": warning: " << w << "\n";
  if (!timing.empty())
    std::cerr << tool << ": " << sched::loadTimingTrace(g, timing).summary() << "\n";
  return g;
}

// Runs body(); returns its status, 2 on sched::InputError (bad input) and 1
// on any other exception (I/O), with the message on stderr.
template <typename Body>
int runReporting(const char* tool, Body&& body) {
  try {
    return body();
  } catch (const sched::InputError& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tictac::tools
