// sched/sim/fast.cc: single worker, single PS, one inference iteration, without
// the event machinery (the brute-force search calls it millions of times).
// Transfers leave back to back in the given order, so arrival i is the sum of
// the first i transfer times; the CPU, when free at time t, takes the ready op
// listed first after every arrival at or before t. Float operations are the
// same as the engine's, so the results are equal, not merely close.
#include <algorithm>
#include <functional>
#include <numeric>

#include "tictac/sched/sim.h"

namespace tictac::sched {

SingleWorkerMakespan::SingleWorkerMakespan(const Graph& g, const SimOptions& o) : g_(g) {
  validateSimOptions(o);
  validateSimTimes(g, o);
  const size_t n = g.ops.size();
  time_.resize(n);
  indeg_.resize(n);
  consumers_.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    time_[i] = op.kind == OpKind::kRecv ? simTransferUs(op.bytes, o) : op.time_us * o.compute_scale;
    indeg_[i] = static_cast<uint32_t>(op.inputs.size());
    for (OpIndex in : op.inputs) consumers_[in].push_back(static_cast<OpIndex>(i));
  }
}

double SingleWorkerMakespan::ofOrder(const std::vector<OpIndex>& recv_order) {
  pending_.assign(indeg_.begin(), indeg_.end());
  heap_.clear();
  auto greater = std::greater<OpIndex>();
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    if (g_.ops[i].kind == OpKind::kCompute && indeg_[i] == 0)
      heap_.push_back(static_cast<OpIndex>(i));
  }
  std::make_heap(heap_.begin(), heap_.end(), greater);
  auto finish = [&](OpIndex op) {
    for (OpIndex c : consumers_[op]) {
      if (--pending_[c] == 0) {
        heap_.push_back(c);
        std::push_heap(heap_.begin(), heap_.end(), greater);
      }
    }
  };
  double t = 0, net = 0;
  size_t next = 0;
  for (;;) {
    while (next < recv_order.size() && net + time_[recv_order[next]] <= t) {
      net += time_[recv_order[next]];
      finish(recv_order[next++]);
    }
    if (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), greater);
      OpIndex op = heap_.back();
      heap_.pop_back();
      t += time_[op];
      finish(op);
    } else if (next < recv_order.size()) {
      t = net + time_[recv_order[next]];
    } else {
      break;
    }
  }
  return std::max(t, net);
}

double SingleWorkerMakespan::ofPriorities(const PriorityVector& priority) {
  std::vector<OpIndex> order = g_.recvs();
  std::sort(order.begin(), order.end(), [&](OpIndex a, OpIndex b) {
    return priority[a] != priority[b] ? priority[a] < priority[b] : g_.ops[a].name < g_.ops[b].name;
  });
  return ofOrder(order);
}

double singleWorkerMakespanUs(const Graph& g, const PriorityVector& priority, const SimOptions& o) {
  if (priority.size() != g.ops.size()) {
    throw InputError("priority vector has " + std::to_string(priority.size()) +
                     " entries, graph has " + std::to_string(g.ops.size()) + " ops");
  }
  SingleWorkerMakespan f(g, o);
  return f.ofPriorities(priority);
}

}  // namespace tictac::sched
