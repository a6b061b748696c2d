// sched/graph/prune.cc: drops ops that no output depends on.
#include "sched/graph/graph_internal.h"
#include "tictac/sched/graph.h"

namespace tictac::sched {

std::vector<std::string> prune(Graph& g) {
  const size_t n = g.ops.size();
  for (OpIndex o : g.outputs) {
    if (o >= n) throw InputError("output index " + std::to_string(o) + " out of range");
  }
  // Mark everything reachable from the outputs along input edges, with an
  // explicit stack (graphs can be 100k ops deep).
  std::vector<bool> live(n, false);
  std::vector<OpIndex> stack;
  for (OpIndex o : g.outputs) {
    if (!live[o]) {
      live[o] = true;
      stack.push_back(o);
    }
  }
  while (!stack.empty()) {
    OpIndex i = stack.back();
    stack.pop_back();
    for (OpIndex in : g.ops[i].inputs) {
      if (in >= n) {
        throw InputError("op " + detail::quoted(g.ops[i].name) + ": input index " +
                         std::to_string(in) + " out of range");
      }
      if (!live[in]) {
        live[in] = true;
        stack.push_back(in);
      }
    }
  }

  std::vector<std::string> removed;
  std::vector<OpIndex> renumber(n, 0);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!live[i]) {
      removed.push_back(std::move(g.ops[i].name));
      continue;
    }
    renumber[i] = static_cast<OpIndex>(kept);
    if (kept != i) g.ops[kept] = std::move(g.ops[i]);
    ++kept;
  }
  if (removed.empty()) return removed;
  g.ops.resize(kept);
  for (Op& op : g.ops) {
    for (OpIndex& in : op.inputs) in = renumber[in];
  }
  for (OpIndex& o : g.outputs) o = renumber[o];
  return removed;
}

namespace detail {

std::string prunedWarning(const std::vector<std::string>& removed) {
  if (removed.empty()) return {};
  constexpr size_t kShown = 10;
  std::string out = "ignored " + std::to_string(removed.size()) +
                    (removed.size() == 1 ? " op" : " ops") + " that no output depends on: ";
  for (size_t i = 0; i < removed.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += removed[i];
  }
  if (removed.size() > kShown) {
    out += " ... (" + std::to_string(removed.size() - kShown) + " more)";
  }
  return out;
}

}  // namespace detail
}  // namespace tictac::sched
