// sched/sim/simulate.cc: simulate() and the metrics derived from a run.
#include <algorithm>
#include <cmath>

#include "sched/sim/engine.h"
#include "tictac/sched/sim.h"

namespace tictac::sched {

namespace {

// Nearest-rank percentile of sorted samples.
double nearestRank(const std::vector<double>& sorted, double pct) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(pct / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

Percentiles summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  p.p50 = nearestRank(v, 50);
  p.p99 = nearestRank(v, 99);
  return p;
}

double ratioOr1(double num, double den) {
  return den == 0 ? 1.0 : num / den;
}

}  // namespace

void computeMetrics(const Graph& g, const SimOptions& o, SimResult& r) {
  const bool training = o.mode == SimMode::kTraining;
  double m = 0, p = 0;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::kRecv) {
      m += simTransferUs(op.bytes, o);
    } else {
      p += op.time_us * o.compute_scale;
    }
  }
  if (training) {
    m *= 2;  // every parameter comes in and its gradient goes out
    p *= 1 + o.bwd_factor;
  }
  // Critical path: recv transfer + forward chain; in training plus the
  // longest chain of backward ops (they run after the whole forward).
  std::vector<double> fin(g.ops.size(), 0), chain(g.ops.size(), 0);
  double cp_fwd = 0, cp_chain = 0;
  for (OpIndex i : g.topoOrder()) {
    const Op& op = g.ops[i];
    double start = 0, cstart = 0;
    for (OpIndex in : op.inputs) {
      start = std::max(start, fin[in]);
      cstart = std::max(cstart, chain[in]);
    }
    const double t =
        op.kind == OpKind::kRecv ? simTransferUs(op.bytes, o) : op.time_us * o.compute_scale;
    fin[i] = start + t;
    chain[i] = cstart + (op.kind == OpKind::kRecv ? 0.0 : t);
    cp_fwd = std::max(cp_fwd, fin[i]);
    cp_chain = std::max(cp_chain, chain[i]);
  }
  r.comm_us = m;
  r.compute_us = p;
  r.critical_path_us = cp_fwd + (training ? cp_chain * o.bwd_factor : 0.0);
  r.iteration_us = summarize(r.iteration_samples);
  r.straggler_us = summarize(r.straggler_samples);
  r.makespan_us = r.iteration_us.mean;
  r.upper_bound_us = m + p;
  r.lower_bound_us = std::max({m, p, r.critical_path_us});
  r.efficiency = ratioOr1(m + p - r.makespan_us, m + p - std::max(m, p));
  r.efficiency_cp = ratioOr1(m + p - r.makespan_us, m + p - r.lower_bound_us);
  r.headroom = (m > 0 && p > 0) ? std::min(m / p, p / m) : 0.0;
}

SimResult simulate(const Graph& g, const OrderSource& order, const SimOptions& o) {
  SimResult r;
  simdetail::Engine(g, &order, nullptr, o, r).run();
  computeMetrics(g, o, r);
  return r;
}

SimResult simulate(const Graph& g, const PriorityVector& order, const SimOptions& o) {
  SimResult r;
  simdetail::Engine(g, nullptr, &order, o, r).run();
  computeMetrics(g, o, r);
  return r;
}

}  // namespace tictac::sched
