// sched/graph/validate.cc: structural checks of a Graph (names, indices,
// times, outputs, recvs, cycles) shared by every loader.
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "sched/graph/graph_internal.h"
#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace detail {

std::string quoted(std::string_view name) {
  return nlohmann::json(std::string(name))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const char* badByteName(char c) {
  return c == '\t' ? "a tab" : c == '\n' || c == '\r' ? "a newline" : "a control character";
}

void checkName(std::string_view name, std::string_view what) {
  if (name.empty()) throw InputError(std::string(what) + " has an empty name");
  const size_t bad = name.find_first_of(kBadNameBytes);
  if (bad != std::string_view::npos) {
    throw InputError(std::string(what) + " " + quoted(name) + ": name contains " +
                     badByteName(name[bad]));
  }
}

}  // namespace detail

namespace {

void checkOp(const Graph& g, size_t i) {
  const Op& op = g.ops[i];
  // Messages are built only on failure: graphs can have 100k ops.
  if (op.name.empty() || op.name.find_first_of(detail::kBadNameBytes) != std::string::npos) {
    detail::checkName(op.name, "op #" + std::to_string(i));
  }
  auto fail = [&op](const std::string& problem) {
    throw InputError("op " + detail::quoted(op.name) + ": " + problem);
  };
  if (!std::isfinite(op.time_us) || op.time_us < 0) {
    fail("time_us must be a finite number >= 0, got " + std::to_string(op.time_us));
  }
  if (op.kind == OpKind::kRecv && !op.inputs.empty()) fail("a recv op must not have inputs");
  for (OpIndex in : op.inputs) {
    if (in >= g.ops.size()) fail("input index " + std::to_string(in) + " out of range");
  }
}

}  // namespace

void validate(const Graph& g) {
  const size_t bad = g.name.find_first_of(detail::kBadNameBytes);
  if (bad != std::string::npos) {
    throw InputError("graph name " + detail::quoted(g.name) + " contains " +
                     detail::badByteName(g.name[bad]));
  }
  if (g.ops.empty()) throw InputError("graph has no ops");
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) {
    checkOp(g, i);
    auto [it, fresh] = seen.emplace(g.ops[i].name, i);
    if (!fresh) {
      throw InputError("duplicate op name " + detail::quoted(g.ops[i].name) + " (ops #" +
                       std::to_string(it->second) + " and #" + std::to_string(i) + ")");
    }
  }
  std::vector<OpIndex> order = detail::kahnOrder(g);
  if (order.size() != g.ops.size()) {
    throw InputError("graph has a cycle: " + detail::describeCycle(g, order));
  }
  if (g.outputs.empty()) throw InputError("graph has no outputs");
  for (OpIndex o : g.outputs) {
    if (o >= g.ops.size()) {
      throw InputError("output index " + std::to_string(o) + " out of range");
    }
  }
  if (g.recvs().empty()) throw InputError("graph has no recv ops");
}

}  // namespace tictac::sched
