// sched/onnx/onnx_loader.h: builds a Graph from an ONNX model file.
//
// Mapping (this comment is the reference for it):
// - every initializer becomes a recv op named after it, bytes = element count
//   x element size of its data type (4-bit types rounded up to whole bytes,
//   strings by their length; undefined or unknown types are rejected); a
//   sparse initializer counts its values plus its indices;
// - an Identity node whose only input is an initializer (how PyTorch's
//   exporter re-creates initializers it merged as duplicates) becomes a recv
//   op of the same bytes under the Identity's output name: the worker still
//   receives those bytes, once per parameter it has;
// - Constant nodes are folded away: they hold no parameter and take no time,
//   so their consumers simply do not depend on them;
// - every other node becomes a compute op named by node.name, or
//   `<op_type>_<index>` (index = node position) when the name is empty or
//   already taken; time_us is unset (0), a timing trace may fill it in;
// - graph inputs that are not initializers (the data) become compute ops of
//   time 0 with no inputs; graph inputs that are also initializers are recvs;
// - outputs are the producers of the graph outputs.
// The result is validated and pruned like a JSON graph (graph.h).
//
// Thread-safety: a pure function of the file; callable from any thread.
#pragma once

#include <string>
#include <vector>

#include "tictac/sched/graph.h"

namespace tictac::sched {

// Loads `path` (an ONNX ModelProto). Throws InputError naming the file and
// the problem for a corrupt, truncated or unsupported model (and, in builds
// without ONNX support, for any call); std::runtime_error when the file cannot
// be read. Names of pruned ops and other remarks are appended to *warnings
// when it is not null.
Graph loadOnnxGraph(const std::string& path, std::vector<std::string>* warnings);

}  // namespace tictac::sched
