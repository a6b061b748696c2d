// sched/graph/graph.cc: Graph queries and the topological order (Kahn).
#include "tictac/sched/graph.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "sched/graph/graph_internal.h"

namespace tictac::sched {

int64_t Graph::find(std::string_view name) const {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

std::vector<OpIndex> Graph::recvs() const {
  std::vector<OpIndex> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == OpKind::kRecv) out.push_back(static_cast<OpIndex>(i));
  }
  return out;
}

std::vector<OpIndex> Graph::topoOrder() const {
  for (const Op& op : ops) {
    for (OpIndex in : op.inputs) {
      if (in >= ops.size()) {
        throw InputError("op " + detail::quoted(op.name) + ": input index " + std::to_string(in) +
                         " out of range");
      }
    }
  }
  std::vector<OpIndex> order = detail::kahnOrder(*this);
  if (order.size() != ops.size()) {
    throw InputError("graph has a cycle: " + detail::describeCycle(*this, order));
  }
  return order;
}

namespace detail {

std::vector<OpIndex> kahnOrder(const Graph& g) {
  const size_t n = g.ops.size();
  // Consumers of each op in CSR form; an op listing one input twice counts
  // it twice in both the in-degree and the consumer list.
  std::vector<uint32_t> start(n + 1, 0);
  std::vector<size_t> indegree(n, 0);
  for (size_t i = 0; i < n; ++i) {
    indegree[i] = g.ops[i].inputs.size();
    for (OpIndex in : g.ops[i].inputs) ++start[in + 1];
  }
  for (size_t i = 0; i < n; ++i) start[i + 1] += start[i];
  std::vector<OpIndex> consumers(start[n]);
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (OpIndex in : g.ops[i].inputs) consumers[fill[in]++] = static_cast<OpIndex>(i);
  }

  std::priority_queue<OpIndex, std::vector<OpIndex>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push(static_cast<OpIndex>(i));
  }
  std::vector<OpIndex> order;
  order.reserve(n);
  while (!ready.empty()) {
    OpIndex i = ready.top();
    ready.pop();
    order.push_back(i);
    for (uint32_t k = start[i]; k < start[i + 1]; ++k) {
      if (--indegree[consumers[k]] == 0) ready.push(consumers[k]);
    }
  }
  return order;
}

std::string describeCycle(const Graph& g, const std::vector<OpIndex>& partial) {
  const size_t n = g.ops.size();
  std::vector<bool> done(n, false);
  for (OpIndex i : partial) done[i] = true;
  // Every op Kahn left behind has an input that was left behind too, so
  // walking such inputs from any leftover op must revisit an op: a cycle.
  size_t first = 0;
  while (first < n && done[first]) ++first;
  if (first == n) return "(none)";
  std::vector<int64_t> pos(n, -1);
  std::vector<OpIndex> path;
  OpIndex cur = static_cast<OpIndex>(first);
  while (pos[cur] < 0) {
    pos[cur] = static_cast<int64_t>(path.size());
    path.push_back(cur);
    OpIndex next = cur;
    for (OpIndex in : g.ops[cur].inputs) {
      if (!done[in]) {
        next = in;
        break;
      }
    }
    cur = next;
  }
  // path[pos[cur]..] reads backwards along data flow; print producer first.
  std::vector<OpIndex> cycle(path.begin() + pos[cur], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  std::string out;
  const size_t shown = std::min<size_t>(cycle.size(), 20);
  for (size_t k = 0; k < shown; ++k) out += quoted(g.ops[cycle[k]].name) + " -> ";
  if (shown < cycle.size()) {
    out += "... (" + std::to_string(cycle.size() - shown) + " more) -> ";
  }
  out += quoted(g.ops[cycle[0]].name);
  return out;
}

}  // namespace detail
}  // namespace tictac::sched
