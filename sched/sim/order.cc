// sched/sim/order.cc: simulator options, transfer times, and the orders a
// simulation reads (from a Schedule or from a name<TAB>priority file).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "sched/graph/graph_internal.h"
#include "tictac/sched/sim.h"

namespace tictac::sched {

namespace {

void requireFinite(double v, double min, bool strict, const char* field) {
  if (!std::isfinite(v) || v < min || (strict && v == min)) {
    throw InputError(std::string("simulator option ") + field + " = " + std::to_string(v) +
                     (strict ? ": must be a finite number > " : ": must be a finite number >= ") +
                     std::to_string(min));
  }
}

std::unordered_map<std::string_view, OpIndex> indexByName(const Graph& g) {
  std::unordered_map<std::string_view, OpIndex> m;
  m.reserve(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) m.emplace(g.ops[i].name, static_cast<OpIndex>(i));
  return m;
}

std::string lineMsg(size_t line, const std::string& what) {
  return "order file line " + std::to_string(line) + ": " + what;
}

}  // namespace

void validateSimOptions(const SimOptions& o) {
  requireFinite(o.bandwidth_gbps, 0.0, true, "bandwidth_gbps");
  requireFinite(o.latency_us, 0.0, false, "latency_us");
  requireFinite(o.compute_scale, 0.0, false, "compute_scale");
  requireFinite(o.bwd_factor, 0.0, false, "bwd_factor");
  if (o.workers == 0 || o.workers > 100000) {
    throw InputError("simulator option workers must be in 1..100000");
  }
  if (o.ps == 0 || o.ps > 100000) throw InputError("simulator option ps must be in 1..100000");
  if (o.runs == 0 || o.runs > 10000000) {
    throw InputError("simulator option runs must be in 1..10000000");
  }
  if (uint64_t{o.workers} * o.runs > 10000000) {
    throw InputError("simulator options workers x runs must be <= 10000000");
  }
  if (uint64_t{o.workers} * o.ps > 10000000) {
    throw InputError("simulator options workers x ps must be <= 10000000");
  }
}

void validateSimTimes(const Graph& g, const SimOptions& o) {
  constexpr double kMaxOpUs = 1e12;
  const double bwd = o.mode == SimMode::kTraining ? std::max(1.0, o.bwd_factor) : 1.0;
  for (const Op& op : g.ops) {
    const bool recv = op.kind == OpKind::kRecv;
    const double us = recv ? simTransferUs(op.bytes, o) : op.time_us * o.compute_scale * bwd;
    if (!(us <= kMaxOpUs)) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", us);
      throw InputError(std::string(recv ? "recv '" : "op '") + op.name + "': simulated time " +
                       text + " us is too large (at most 1e12 us; " +
                       (recv ? "check its bytes, bandwidth and latency)"
                             : "check its time_us, compute_scale and bwd_factor)"));
    }
  }
}

double simTransferUs(uint64_t bytes, const SimOptions& o) {
  return static_cast<double>(bytes) * 8.0 / (o.bandwidth_gbps * 1e3) + o.latency_us;
}

PriorityVector priorityVector(const Graph& g, const Schedule& s) {
  const auto byName = indexByName(g);
  PriorityVector pv(g.ops.size(), 0);
  std::vector<bool> seen(g.ops.size(), false);
  for (const ScheduleEntry& e : s.entries) {
    auto it = byName.find(e.name);
    if (it == byName.end() || !g.isRecv(it->second)) {
      throw InputError("schedule entry " + e.name + " names no recv op of the graph");
    }
    pv[it->second] = e.priority;
    seen[it->second] = true;
  }
  for (OpIndex r : g.recvs()) {
    if (!seen[r]) throw InputError("schedule has no priority for recv " + g.ops[r].name);
  }
  return pv;
}

PriorityVector parseOrderTsv(const Graph& g, std::string_view text) {
  const auto byName = indexByName(g);
  PriorityVector pv(g.ops.size(), 0);
  std::vector<bool> seen(g.ops.size(), false);
  size_t line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    size_t tab = l.find('\t');
    if (tab == std::string_view::npos || tab == 0) {
      throw InputError(lineMsg(line, "expected name<TAB>priority"));
    }
    std::string_view name = l.substr(0, tab);
    std::string_view num = l.substr(tab + 1);
    Priority p = 0;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), p);
    if (num.empty() || ec != std::errc() || ptr != num.data() + num.size()) {
      throw InputError(
          lineMsg(line, "priority '" + std::string(num) + "' is not an integer in 0..4294967295"));
    }
    auto it = byName.find(name);
    if (it == byName.end()) throw InputError(lineMsg(line, "unknown op " + std::string(name)));
    if (!g.isRecv(it->second)) {
      throw InputError(lineMsg(line, "op " + std::string(name) + " is not a recv"));
    }
    if (seen[it->second])
      throw InputError(lineMsg(line, "recv " + std::string(name) + " repeated"));
    seen[it->second] = true;
    pv[it->second] = p;
  }
  for (OpIndex r : g.recvs()) {
    if (!seen[r]) throw InputError("order file has no line for recv " + g.ops[r].name);
  }
  return pv;
}

PriorityVector loadOrderFile(const Graph& g, const std::string& path) {
  const std::string text = detail::readFile(path);
  try {
    return parseOrderTsv(g, text);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

}  // namespace tictac::sched
