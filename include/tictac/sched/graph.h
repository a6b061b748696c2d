// tictac/sched/graph.h: the model DAG the analyzers work on.
//
// A Graph is a list of ops. A `recv` op is a parameter transfer to the worker
// (no inputs, a size in bytes); a `compute` op takes `time_us` and reads the
// ops named in `inputs`. Loaders (JSON interchange format, ONNX) validate every
// op first, then prune ops that no output depends on, so a Graph handed to an
// analyzer is always: non-empty, acyclic, at least one recv, every input index
// valid, `outputs` non-empty. Ops keep their list order (fifo uses it).
//
// Errors in input are reported by throwing tictac::sched::InputError whose
// message names the op and the problem; tools map it to exit status 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tictac::sched {

// Bad input (malformed graph, trace, schedule file): the message names the
// offending op or field. Tools exit 2 on it.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class OpKind : uint8_t { kRecv, kCompute };

using OpIndex = uint32_t;

struct Op {
  std::string name;
  OpKind kind = OpKind::kCompute;
  uint64_t bytes = 0;           // recv only
  double time_us = 0.0;         // compute: run time; recv: optional measured transfer time
  bool has_time = false;        // time_us was given (by the graph or a timing trace)
  std::vector<OpIndex> inputs;  // indices into Graph::ops
};

struct Graph {
  std::string name;
  std::vector<Op> ops;
  std::vector<OpIndex> outputs;

  bool isRecv(OpIndex i) const { return ops[i].kind == OpKind::kRecv; }
  // Index of the op with this name, or -1.
  int64_t find(std::string_view name) const;
  // Indices of the recv ops, in list order.
  std::vector<OpIndex> recvs() const;
  // Indices of all ops in a topological order (inputs first; ties by list position).
  std::vector<OpIndex> topoOrder() const;
};

// Checks structure (indices, names, cycles, outputs, at least one recv) of a
// graph built in code; throws InputError. Loaders call it for you.
void validate(const Graph& g);

// Removes ops that no output depends on and renumbers. Returns the names of
// the removed ops (callers warn about them on stderr).
std::vector<std::string> prune(Graph& g);

// The JSON interchange format (see docs/sched.md). Throws InputError.
Graph parseGraphJson(std::string_view text, std::vector<std::string>* warnings = nullptr);
// Loads a .json or .onnx file by extension. Throws InputError (exit 2) for bad
// content and std::runtime_error for I/O problems (exit 1).
Graph loadGraph(const std::string& path, std::vector<std::string>* warnings = nullptr);
// Serializes to the interchange format.
std::string toJson(const Graph& g);

}  // namespace tictac::sched
