// tools/sched_tool.h: what tictac-analyze and tictac-sim share: parsing the
// command line, loading a graph (with its warnings and an optional timing
// trace reported on stderr), writing results, and mapping errors to the exit
// statuses of docs/conventions.md. Everything runs on the tool's main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tictac/sched/graph.h"
#include "tictac/sched/timing.h"

namespace tictac::tools {

// Parses argv into app's options. nullopt when the tool should run; else
// the status to exit with: 0 after --help (printed by CLI11), 2 after a parse
// error (its message on stderr).
inline std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// "a, b, c": names for a message (e.g. the known analyzers).
inline std::string joinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Loads GRAPH (.json/.onnx); warnings and timing statistics go to stderr
// prefixed with the tool's name. Throws like loadGraph/loadTimingTrace.
inline sched::Graph loadGraphReporting(const char* tool, const std::string& path,
                                       const std::string& timing) {
  std::vector<std::string> warnings;
  sched::Graph g = sched::loadGraph(path, &warnings);
  for (const auto& w : warnings) std::cerr << tool << ": warning: " << w << "\n";
  if (!timing.empty()) {  // load first: a failure must not leave "tool: " on stderr
    const std::string summary = sched::loadTimingTrace(g, timing).summary();
    std::cerr << tool << ": " << summary << "\n";
  }
  return g;
}

// Writes text to stdout (flushed) or, when path is not empty, replaces the
// file at path with it. Throws std::runtime_error naming what failed.
inline void writeResult(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text << std::flush;
    if (!std::cout) throw std::runtime_error("cannot write to stdout");
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw std::runtime_error("cannot write " + path);
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
