// sched/graph/json_parse.cc: reads the JSON interchange format.
//
// Every op is checked (types, names, kind, bytes, time_us, inputs) before
// any graph-level check (duplicates, unknown names, cycles, outputs, recvs),
// and all of that before pruning. Then ops that no output depends on are
// removed and summarised in one warning line.
//
// Difference from the reference implementation (xldrx/tictac): a compute op
// without "time_us" counts 0 us here; the reference assumed 1 ms.
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "sched/graph/graph_internal.h"
#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace {

using nlohmann::json;

// Largest byte count accepted: every integer up to 2^53 survives a round
// trip through a JSON reader that uses doubles.
constexpr uint64_t kMaxBytes = uint64_t{1} << 53;

std::string got(const json& j) {
  return std::string(", got ") + j.type_name();
}

// Error messages are built only on failure (graphs can have 100k ops).
[[noreturn]] void fail(const std::string& op, const std::string& problem) {
  throw InputError("op " + detail::quoted(op) + ": " + problem);
}

bool badName(std::string_view name) {
  return name.empty() || name.find_first_of(detail::kBadNameBytes) != std::string_view::npos;
}

// A key twice in one object is refused: readers disagree on which value wins
// (nlohmann keeps the last, others the first), so the graph would mean
// different things to different tools. A SAX pass over text already parsed:
// linear (nlohmann's callback parser rescans the parent at every object end).
struct DuplicateKeys : nlohmann::json_sax<json> {
  std::vector<std::unordered_set<std::string>> open;  // one per open object
  bool start_object(size_t) override {
    open.emplace_back();
    return true;
  }
  bool end_object() override {
    open.pop_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!open.back().insert(k).second) {
      throw InputError("duplicate key " + detail::quoted(k) + " in one object (nesting depth " +
                       std::to_string(open.size()) +
                       "); JSON readers disagree on which value wins");
    }
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_array(size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

json parseText(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw InputError("not JSON: the input is empty");
  }
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t tag = what.find("] ");
    if (tag != std::string::npos) what.erase(0, tag + 2);
    if (e.byte >= text.size()) {
      throw InputError("truncated JSON: unexpected end of input after " +
                       std::to_string(text.size()) + " bytes (" + what + ")");
    }
    throw InputError("not JSON: " + what);
  } catch (const json::exception& e) {  // e.g. a number beyond double range
    std::string what = e.what();
    const size_t tag = what.find("] ");
    if (tag != std::string::npos) what.erase(0, tag + 2);
    throw InputError("not JSON: " + what);
  }
  DuplicateKeys check;
  json::sax_parse(text.begin(), text.end(), &check);  // valid JSON by now
  return doc;
}

uint64_t parseBytes(const json& j, const std::string& op) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > kMaxBytes) {
      fail(op, "bytes " + std::to_string(v) + " exceeds 2^53");
    }
    return v;
  }
  if (j.is_number_integer()) {
    fail(op, "bytes must be >= 0, got " + std::to_string(j.get<int64_t>()));
  }
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (!std::isfinite(v) || v != std::floor(v)) {
      fail(op, "bytes must be an integer, got " + j.dump());
    }
    if (v < 0) fail(op, "bytes must be >= 0, got " + j.dump());
    if (v > static_cast<double>(kMaxBytes)) {
      fail(op, "bytes " + j.dump() + " exceeds 2^53");
    }
    return static_cast<uint64_t>(v);
  }
  fail(op, "bytes must be an integer" + got(j));
}

double parseTime(const json& j, const std::string& op) {
  if (!j.is_number()) fail(op, "time_us must be a number" + got(j));
  const double v = j.get<double>();
  if (std::isnan(v)) fail(op, "time_us is NaN");
  if (!std::isfinite(v)) fail(op, "time_us is not finite: " + j.dump());
  if (v < 0) fail(op, "time_us must be >= 0, got " + j.dump());
  return v;
}

// Parses op #idx; its input names go to `inputs` (resolved later, since an
// input may name an op listed further down).
Op parseOp(const json& j, size_t idx, std::vector<std::string>& inputs) {
  auto at = [idx] { return "op #" + std::to_string(idx); };
  if (!j.is_object()) throw InputError(at() + " is not an object" + got(j));
  auto name = j.find("name");
  if (name == j.end()) throw InputError(at() + " has no \"name\"");
  if (!name->is_string()) throw InputError(at() + ": name must be a string" + got(*name));
  Op op;
  op.name = name->get<std::string>();
  if (badName(op.name)) detail::checkName(op.name, at());

  auto kind = j.find("kind");
  if (kind == j.end()) fail(op.name, "missing \"kind\"");
  if (!kind->is_string()) fail(op.name, "kind must be a string" + got(*kind));
  const std::string& k = kind->get_ref<const std::string&>();
  if (k == "recv") {
    op.kind = OpKind::kRecv;
  } else if (k == "compute") {
    op.kind = OpKind::kCompute;
  } else {
    fail(op.name, "unknown kind " + detail::quoted(k) + " (expected \"recv\" or \"compute\")");
  }

  if (auto in = j.find("inputs"); in != j.end()) {
    if (!in->is_array()) fail(op.name, "inputs must be an array" + got(*in));
    for (size_t i = 0; i < in->size(); ++i) {
      const json& e = (*in)[i];
      if (!e.is_string()) {
        fail(op.name, "inputs[" + std::to_string(i) + "] must be a string" + got(e));
      }
      inputs.push_back(e.get<std::string>());
      if (badName(inputs.back())) {
        detail::checkName(inputs.back(), "op " + detail::quoted(op.name) + ": input");
      }
    }
    if (op.kind == OpKind::kRecv && !inputs.empty()) {
      fail(op.name, "a recv op must not have inputs");
    }
  }

  if (op.kind == OpKind::kRecv) {
    auto bytes = j.find("bytes");
    if (bytes == j.end()) fail(op.name, "a recv op needs \"bytes\"");
    op.bytes = parseBytes(*bytes, op.name);
  }
  if (auto t = j.find("time_us"); t != j.end()) {
    op.time_us = parseTime(*t, op.name);
    op.has_time = true;
  }
  return op;
}

std::vector<OpIndex> parseOutputs(const json& doc, const Graph& g,
                                  const std::unordered_map<std::string_view, OpIndex>& index) {
  std::vector<OpIndex> outputs;
  auto out = doc.find("outputs");
  if (out == doc.end()) {
    // Absent: every sink (an op that no other op reads).
    std::vector<bool> read(g.ops.size(), false);
    for (const Op& op : g.ops) {
      for (OpIndex in : op.inputs) read[in] = true;
    }
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (!read[i]) outputs.push_back(static_cast<OpIndex>(i));
    }
    return outputs;
  }
  if (!out->is_array()) throw InputError("\"outputs\" must be an array" + got(*out));
  if (out->empty()) throw InputError("\"outputs\" is empty: the iteration would finish nothing");
  for (size_t i = 0; i < out->size(); ++i) {
    const json& e = (*out)[i];
    if (!e.is_string()) {
      throw InputError("outputs[" + std::to_string(i) + "] must be a string" + got(e));
    }
    const std::string& name = e.get_ref<const std::string&>();
    detail::checkName(name, "output");
    auto it = index.find(name);
    if (it == index.end()) {
      throw InputError("output " + detail::quoted(name) + " is not an op of the graph");
    }
    outputs.push_back(it->second);
  }
  return outputs;
}

}  // namespace

Graph parseGraphJson(std::string_view text, std::vector<std::string>* warnings) {
  const json doc = parseText(text);
  if (!doc.is_object()) throw InputError("top level must be a JSON object" + got(doc));
  Graph g;
  if (auto name = doc.find("name"); name != doc.end()) {
    if (!name->is_string()) throw InputError("graph name must be a string" + got(*name));
    g.name = name->get<std::string>();
  }
  auto ops = doc.find("ops");
  if (ops == doc.end()) throw InputError("missing \"ops\"");
  if (!ops->is_array()) throw InputError("\"ops\" must be an array" + got(*ops));
  if (ops->empty()) throw InputError("graph has no ops");

  std::vector<std::vector<std::string>> input_names(ops->size());
  g.ops.reserve(ops->size());
  for (size_t i = 0; i < ops->size(); ++i) {
    g.ops.push_back(parseOp((*ops)[i], i, input_names[i]));
  }

  std::unordered_map<std::string_view, OpIndex> index;
  index.reserve(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) {
    auto [it, fresh] = index.emplace(g.ops[i].name, static_cast<OpIndex>(i));
    if (!fresh) {
      throw InputError("duplicate op name " + detail::quoted(g.ops[i].name) + " (ops #" +
                       std::to_string(it->second) + " and #" + std::to_string(i) + ")");
    }
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (const std::string& in : input_names[i]) {
      auto it = index.find(in);
      if (it == index.end()) {
        throw InputError("op " + detail::quoted(g.ops[i].name) + ": unknown input " +
                         detail::quoted(in) + " (no op has that name)");
      }
      g.ops[i].inputs.push_back(it->second);
    }
  }
  g.outputs = parseOutputs(doc, g, index);
  validate(g);  // cycles, outputs, recvs, graph name

  std::vector<std::string> removed = prune(g);
  if (g.recvs().empty()) {
    throw InputError("no recv op that an output depends on (the " + std::to_string(removed.size()) +
                     " ignored ops include every recv)");
  }
  if (warnings != nullptr && !removed.empty()) {
    warnings->push_back(detail::prunedWarning(removed));
  }
  return g;
}

}  // namespace tictac::sched
