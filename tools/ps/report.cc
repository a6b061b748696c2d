// tools/ps/report.cc: turns the roles' JSON lines into the report: iteration
// and straggler figures from the processes' own clocks, the receivers'
// checks (data, gradient sums, priority order, overlap), and tictac-sim's
// prediction for the same settings beside them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "tools/ps/launch.h"
#include "transport/core/send_scheduler.h"

namespace tictac::ps {

using nlohmann::json;
using sched::OpIndex;

namespace {
json stats(std::vector<double> v) {
  if (v.empty()) return {{"mean", 0}, {"p50", 0}, {"p99", 0}};
  double sum = 0;
  for (double x : v) sum += x;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1)];
  };
  return {{"mean", sum / v.size()}, {"p50", rank(0.5)}, {"p99", rank(0.99)}};
}
}  // namespace

json buildReport(const Job& job, const RunOutput& run, json* trace) {
  const Config& c = job.config();
  const auto& g = job.graph();
  std::map<uint32_t, std::map<uint32_t, const json*>> it;  // iteration -> worker -> line
  uint64_t grads_ok = 0, grads_bad = 0, params_bad = 0;
  for (const auto& l : run.lines) {
    if (l.value("type", "") == "iter") it[l["iteration"]][l["worker"]] = &l;
    if (l.value("type", "") == "ps") {
      grads_ok += l["grads_ok"].get<uint64_t>();
      grads_bad += l["grads_bad"].get<uint64_t>();
    }
  }
  const size_t chunk = c.chunk_bytes ? c.chunk_bytes : transport::kDefaultChunkBytes;
  const size_t window = c.window_bytes ? c.window_bytes : transport::kDefaultWindowBytes;
  std::vector<double> iter_us, strag_us;
  json per_worker = json::array();
  for (uint32_t w = 0; w < c.workers; ++w) per_worker.push_back(json::array());
  uint64_t complete = 0, max_inv = 0, overlap = 0, order_checked = 0;
  double prev_end = 0;
  for (auto& [k, ws] : it) {
    if (ws.size() != c.workers) continue;
    double start = 0, end_max = 0, end_min = 1e300;
    for (auto& [w, l] : ws) start = std::max(start, (*l)["start_ns"].get<double>());
    if (c.training() && k > 0) start = prev_end;
    for (auto& [w, l] : ws) {
      double e = (*l)["end_ns"].get<double>();
      end_max = std::max(end_max, e);
      end_min = std::min(end_min, e);
      per_worker[w].push_back((e - std::max(start, (*l)["start_ns"].get<double>())) / 1e3);
      params_bad = std::max<uint64_t>(params_bad, (*l)["params_bad"].get<uint64_t>());
      const auto& order = (*l)["arrival_order"];
      if (order.size() == job.recvs().size()) ++complete;
      if ((*l)["first_compute_ns"].get<int64_t>() < (*l)["last_param_ns"].get<int64_t>()) ++overlap;
      // Priority order: every parameter queued at once (inference, and
      // iteration 0 of training): the less urgent bytes of the same PS that
      // completed before a parameter must fit in the window (+ one chunk).
      if (!c.training() || k == 0) {
        ++order_checked;
        auto pv = job.order(w, k);
        for (size_t i = 0; i < order.size(); ++i) {
          OpIndex q = order[i];
          uint64_t inv = 0;
          for (size_t j = 0; j < i; ++j) {
            OpIndex p = order[j];
            if (job.shardOf(p) == job.shardOf(q) && pv[p] > pv[q]) inv += g.ops[p].bytes;
          }
          max_inv = std::max(max_inv, inv);
        }
      }
    }
    iter_us.push_back((end_max - start) / 1e3);
    strag_us.push_back((end_max - end_min) / 1e3);
    prev_end = end_max;
  }
  auto sim = simulateJob(job);
  json r = {{"model", g.name},
            {"order", c.order},
            {"mode", c.mode},
            {"workers", c.workers},
            {"ps", c.ps},
            {"iterations", c.iterations},
            {"rate_gbps", c.rate_gbps},
            {"compute_scale", c.compute_scale},
            {"chunk_bytes", chunk},
            {"window_bytes", window},
            {"link", c.shaped ? "netns+tbf" : (c.rate_gbps > 0 ? "loopback paced" : "loopback")},
            {"iteration_us", stats(iter_us)},
            {"straggler_us", stats(strag_us)},
            {"per_worker_iteration_us", per_worker},
            {"headroom", sim.headroom},
            {"comm_us", sim.comm_us},
            {"compute_us", sim.compute_us},
            {"simulated_iteration_us", sim.iteration_us.mean},
            {"simulated_straggler_us", sim.straggler_us.mean}};
  double mean = r["iteration_us"]["mean"];
  r["throughput_ips"] = mean > 0 ? 1e6 / mean : 0;
  r["checks"] = {{"iterations_complete", it.size() == c.iterations ? complete : 0},
                 {"worker_iterations_expected", uint64_t{c.workers} * c.iterations},
                 {"params_bad", params_bad},
                 {"grads_ok", grads_ok},
                 {"grads_bad", grads_bad},
                 {"grads_expected", c.training() ? job.recvs().size() * c.iterations : 0},
                 {"order_checked", order_checked},
                 {"max_inversion_bytes", max_inv},
                 {"inversion_bound_bytes", window + chunk},
                 {"order_ok", max_inv <= window + chunk},
                 {"compute_before_last_param", overlap},
                 {"ucx_transports", run.ucx_transports}};
  if (trace != nullptr) {
    json ev = json::array();
    const char* lanes[] = {"network in", "compute", "network out"};
    for (auto& [w, l] : it[c.trace_iteration]) {
      ev.push_back({{"ph", "M"},
                    {"name", "process_name"},
                    {"pid", w},
                    {"args", {{"name", "worker " + std::to_string(w)}}}});
      for (int t = 0; t < 3; ++t)
        ev.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", w},
                      {"tid", t},
                      {"args", {{"name", lanes[t]}}}});
      double t0 = (*l)["start_ns"], prev = t0;
      if (!l->contains("spans")) continue;
      for (const auto& s : (*l)["spans"]) {
        int lane = s["lane"];
        double end = s["end_ns"],
               begin = lane == 0 ? std::max(prev, t0) : s["start_ns"].get<double>();
        if (lane == 0) prev = end;
        ev.push_back({{"ph", "X"},
                      {"name", s["name"]},
                      {"pid", w},
                      {"tid", lane},
                      {"ts", (begin - t0) / 1e3},
                      {"dur", std::max(0.0, end - begin) / 1e3}});
      }
    }
    *trace = {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
  }
  return r;
}

std::string tableHeader() {
  return "model        mode       order   iter_ms(mean/p99)  strag_ms(mean/p99)  it/s    S     "
         "sim_iter_ms  checks";
}

std::string tableRow(const json& r) {
  char buf[512];
  const auto& k = r["checks"];
  bool ok = k["params_bad"] == 0 && k["grads_bad"] == 0 && k["order_ok"].get<bool>() &&
            k["iterations_complete"] == k["worker_iterations_expected"] &&
            k["grads_ok"] == k["grads_expected"];
  std::snprintf(
      buf, sizeof buf, "%-12s %-10s %-7s %8.1f/%-8.1f  %8.1f/%-8.1f  %6.2f  %.2f  %10.1f  %s",
      r["model"].get<std::string>().c_str(), r["mode"].get<std::string>().c_str(),
      r["order"].get<std::string>().c_str(), r["iteration_us"]["mean"].get<double>() / 1e3,
      r["iteration_us"]["p99"].get<double>() / 1e3, r["straggler_us"]["mean"].get<double>() / 1e3,
      r["straggler_us"]["p99"].get<double>() / 1e3, r["throughput_ips"].get<double>(),
      r["headroom"].get<double>(), r["simulated_iteration_us"].get<double>() / 1e3,
      ok ? "ok" : "FAILED");
  return buf;
}

}  // namespace tictac::ps
