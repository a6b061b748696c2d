// Live sub-DAG, option checks, time conversion and schedule assembly shared by
// every analyzer.
#include "sched/analyzers/dag.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

namespace tictac::sched::analyzers {

namespace {
constexpr double kMaxNs = 1e15;  // one op may take at most ~11.6 days
constexpr int64_t kMaxTotalNs = int64_t{1} << 61;
}  // namespace

LiveDag buildLiveDag(const Graph& g) {
  const size_t n = g.ops.size();
  LiveDag d;
  d.live.assign(n, false);
  d.recv_id.assign(n, kNoRecv);
  for (OpIndex out : g.outputs)
    if (out >= n) throw InputError("output index " + std::to_string(out) + " is out of range");
  if (g.outputs.empty()) throw InputError("graph '" + g.name + "' has no outputs");
  // Iterative DFS from the outputs; post-order is a topological order.
  enum : uint8_t { kWhite, kGrey, kBlack };
  std::vector<uint8_t> color(n, kWhite);
  std::vector<std::pair<OpIndex, size_t>> stack;  // (op, next input to visit)
  for (OpIndex out : g.outputs) {
    if (color[out] != kWhite) continue;
    stack.emplace_back(out, 0);
    color[out] = kGrey;
    while (!stack.empty()) {
      auto& [op, next] = stack.back();
      const auto& inputs = g.ops[op].inputs;
      if (next < inputs.size()) {
        OpIndex in = inputs[next++];
        if (in >= n)
          throw InputError("op '" + g.ops[op].name + "': input index " + std::to_string(in) +
                           " is out of range");
        if (color[in] == kGrey) throw InputError("cycle through op '" + g.ops[in].name + "'");
        if (color[in] == kWhite) {
          color[in] = kGrey;
          stack.emplace_back(in, 0);  // invalidates op/next; loop re-reads back()
        }
        continue;
      }
      color[op] = kBlack;
      d.live[op] = true;
      d.order.push_back(op);
      stack.pop_back();
    }
  }
  for (OpIndex i = 0; i < n; ++i) {
    if (d.live[i] && g.isRecv(i)) {
      d.recv_id[i] = static_cast<uint32_t>(d.recvs.size());
      d.recvs.push_back(i);
    }
  }
  if (d.recvs.empty()) throw InputError("graph '" + g.name + "': no output depends on a recv op");
  std::vector<uint32_t> by_name(d.recvs.size());
  std::iota(by_name.begin(), by_name.end(), 0u);
  std::sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) {
    return g.ops[d.recvs[a]].name < g.ops[d.recvs[b]].name;
  });
  d.name_rank.resize(d.recvs.size());
  for (uint32_t k = 0; k < by_name.size(); ++k) d.name_rank[by_name[k]] = k;
  return d;
}

void checkOptions(const AnalyzerOptions& o) {
  if (!std::isfinite(o.bandwidth_gbps) || o.bandwidth_gbps <= 0)
    throw InputError("bandwidth must be a positive number of Gbit/s, got " +
                     std::to_string(o.bandwidth_gbps));
  if (!std::isfinite(o.latency_us) || o.latency_us < 0)
    throw InputError("latency must be a non-negative number of us, got " +
                     std::to_string(o.latency_us));
}

int64_t toNs(double us, const std::string& what) {
  if (std::isnan(us) || us < 0)
    throw InputError(what + ": time must be >= 0, got " + std::to_string(us));
  double ns = std::round(us * 1e3);
  if (ns > kMaxNs) {  // %g: std::to_string wrote all 300 digits of 1e300
    char text[32];
    std::snprintf(text, sizeof text, "%g", us);
    throw InputError(what + ": time " + text + " us is too large (at most 1e12 us)");
  }
  return static_cast<int64_t>(ns);
}

std::vector<int64_t> transferNs(const Graph& g, const LiveDag& d, const AnalyzerOptions& o) {
  checkOptions(o);
  std::vector<int64_t> m(d.recvs.size());
  int64_t total = 0;
  for (size_t r = 0; r < m.size(); ++r) {
    const Op& op = g.ops[d.recvs[r]];
    m[r] = toNs(transferTimeUs(op, o), "recv '" + op.name + "'");
    total += m[r];
    if (total > kMaxTotalNs) throw InputError("sum of transfer times is too large");
  }
  return m;
}

Schedule makeSchedule(const Graph& g, const LiveDag& d, const std::string& algo,
                      const std::vector<Priority>& prio) {
  Schedule s;
  s.algo = algo;
  s.entries.reserve(d.recvs.size());
  for (size_t r = 0; r < d.recvs.size(); ++r)
    s.entries.push_back({g.ops[d.recvs[r]].name, d.recvs[r], prio[r]});
  sortSchedule(s);
  return s;
}

}  // namespace tictac::sched::analyzers
