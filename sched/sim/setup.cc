// sched/sim/setup.cc: the engine's per-run setup: the static graph tables
// (recv slots, consumers, backward order and gradient release points), the
// sharding of parameters over the PS, and the recv ranks an order gives.
#include <algorithm>
#include <functional>
#include <numeric>

#include "sched/sim/engine.h"

namespace tictac::sched::simdetail {

Engine::Engine(const Graph& g, const OrderSource* order, const PriorityVector* fixed,
               const SimOptions& o, SimResult& out)
    : g_(g),
      order_(order),
      fixed_(fixed),
      o_(o),
      out_(out),
      W_(o.workers),
      N_(o.ps),
      R_(0),
      training_(o.mode == SimMode::kTraining) {}

void Engine::buildStatic() {
  const size_t n = g_.ops.size();
  slot_of_.assign(n, UINT32_MAX);
  fwd_time_.assign(n, 0.0);
  cons_start_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g_.ops[i];
    if (op.kind == OpKind::kRecv) {
      slot_of_[i] = static_cast<uint32_t>(recvs_.size());
      recvs_.push_back(static_cast<OpIndex>(i));
    } else {
      ++n_compute_;
      fwd_time_[i] = op.time_us * o_.compute_scale;
    }
    for (OpIndex in : op.inputs) ++cons_start_[in + 1];
  }
  R_ = static_cast<uint32_t>(recvs_.size());
  std::partial_sum(cons_start_.begin(), cons_start_.end(), cons_start_.begin());
  cons_.resize(cons_start_[n]);
  std::vector<uint32_t> fill(cons_start_.begin(), cons_start_.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (OpIndex in : g_.ops[i].inputs) cons_[fill[in]++] = static_cast<uint32_t>(i);
  }

  std::vector<uint32_t> by_name(R_);
  std::iota(by_name.begin(), by_name.end(), 0);
  std::sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) {
    return g_.ops[recvs_[a]].name < g_.ops[recvs_[b]].name;
  });
  name_rank_.assign(R_, 0);
  for (uint32_t i = 0; i < R_; ++i) name_rank_[by_name[i]] = i;

  if (training_) {
    std::vector<OpIndex> topo = g_.topoOrder();
    std::vector<uint32_t> pos(n, UINT32_MAX);
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      if (g_.ops[*it].kind == OpKind::kCompute) {
        pos[*it] = static_cast<uint32_t>(bwd_seq_.size());
        bwd_seq_.push_back(*it);
      }
    }
    // A gradient is ready after the last (in backward order) of its consumers.
    std::vector<uint32_t> at(R_, 0);  // 0 = at backward start, i + 1 = after position i
    for (uint32_t s = 0; s < R_; ++s) {
      OpIndex r = recvs_[s];
      for (uint32_t k = cons_start_[r]; k < cons_start_[r + 1]; ++k) {
        at[s] = std::max(at[s], pos[cons_[k]] + 1);
      }
    }
    grads_start_.assign(bwd_seq_.size() + 2, 0);
    for (uint32_t s = 0; s < R_; ++s) ++grads_start_[at[s] + 1];
    std::partial_sum(grads_start_.begin(), grads_start_.end(), grads_start_.begin());
    grads_.resize(R_);
    std::vector<uint32_t> gfill(grads_start_.begin(), grads_start_.end() - 1);
    for (uint32_t s = 0; s < R_; ++s) grads_[gfill[at[s]]++] = s;
  }
}

void Engine::shardParams() {
  std::vector<uint32_t> order(R_);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Op& x = g_.ops[recvs_[a]];
    const Op& y = g_.ops[recvs_[b]];
    return x.bytes != y.bytes ? x.bytes > y.bytes : x.name < y.name;
  });
  using Load = std::pair<uint64_t, uint32_t>;  // (bytes, ps): least loaded, lowest index
  std::priority_queue<Load, std::vector<Load>, std::greater<>> loads;
  for (uint32_t j = 0; j < N_; ++j) loads.push({0, j});
  shard_.assign(R_, 0);
  for (uint32_t s : order) {
    Load l = loads.top();
    loads.pop();
    shard_[s] = l.second;
    loads.push({l.first + g_.ops[recvs_[s]].bytes, l.second});
  }
  out_.shard.assign(g_.ops.size(), 0);
  for (uint32_t s = 0; s < R_; ++s) out_.shard[recvs_[s]] = shard_[s];
}

void Engine::computeRank(const PriorityVector& pv, std::vector<uint32_t>& rank) const {
  if (pv.size() != g_.ops.size()) {
    throw InputError("order has " + std::to_string(pv.size()) + " entries, graph has " +
                     std::to_string(g_.ops.size()) + " ops");
  }
  std::vector<uint32_t> order(R_);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    Priority pa = pv[recvs_[a]], pb = pv[recvs_[b]];
    return pa != pb ? pa < pb : name_rank_[a] < name_rank_[b];
  });
  rank.assign(R_, 0);
  for (uint32_t i = 0; i < R_; ++i) rank[order[i]] = i;
}

const std::vector<uint32_t>& Engine::rankFor(uint32_t w, uint32_t k) {
  if (fixed_ != nullptr) return fixed_rank_;
  // At most iterations k and k+1 of one worker are live (see header), so a
  // two-entry ring indexed by k % 2 suffices.
  Worker& wk = workers_[w];
  const uint32_t i = k % 2;
  if (wk.rank_iter[i] != k) {
    computeRank((*order_)(w, k), wk.rank[i]);
    wk.rank_iter[i] = k;
  }
  return wk.rank[i];
}

}  // namespace tictac::sched::simdetail
