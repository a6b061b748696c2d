// sched/graph/timing.cc: applies a Chrome trace-event file to a Graph
// (contract in tictac/sched/timing.h).
#include "tictac/sched/timing.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "sched/graph/graph_internal.h"

namespace tictac::sched {
namespace {

using nlohmann::json;

struct Event {
  double ts = 0;
  double dur = 0;
  size_t pos = 0;  // position in the file
  std::string name;
};

std::string parseMessage(const json::exception& e) {
  std::string what = e.what();
  const size_t tag = what.find("] ");
  if (tag != std::string::npos) what.erase(0, tag + 2);
  return what;
}

json parseTrace(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) throw InputError("timing trace: the input is empty");
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // The array form may omit its closing bracket (Chrome's trace format
    // allows it, for traces of processes that died while writing).
    if (text[first] == '[' && e.byte >= text.size()) {
      std::string fixed(text);
      while (!fixed.empty() &&
             std::string_view(" \t\r\n,").find(fixed.back()) != std::string_view::npos) {
        fixed.pop_back();
      }
      fixed += ']';
      try {
        return json::parse(fixed);
      } catch (const json::exception&) {
        // fall through: report the original error
      }
    }
    const char* kind = e.byte >= text.size() ? "truncated JSON: " : "not JSON: ";
    throw InputError(std::string("timing trace: ") + kind + parseMessage(e));
  } catch (const json::exception& e) {  // e.g. a number beyond double range
    throw InputError("timing trace: not JSON: " + parseMessage(e));
  }
}

const json& eventList(const json& doc) {
  if (doc.is_array()) return doc;
  if (doc.is_object()) {
    auto it = doc.find("traceEvents");
    if (it == doc.end()) throw InputError("timing trace: object without \"traceEvents\"");
    if (!it->is_array()) {
      throw InputError(std::string("timing trace: \"traceEvents\" must be an array, got ") +
                       it->type_name());
    }
    return *it;
  }
  throw InputError(std::string("timing trace: top level must be an array of events or an "
                               "object with \"traceEvents\", got ") +
                   doc.type_name());
}

double number(const json& ev, const char* key, const std::string& at) {
  auto it = ev.find(key);
  if (it == ev.end()) throw InputError(at + "complete event without \"" + key + "\"");
  if (!it->is_number()) {
    throw InputError(at + "\"" + key + "\" must be a number, got " + it->type_name());
  }
  const double v = it->get<double>();
  if (!std::isfinite(v)) throw InputError(at + "\"" + key + "\" is not finite");
  return v;
}

// Complete events grouped by thread ("pid/tid" as JSON text).
std::map<std::string, std::vector<Event>> readEvents(const json& list) {
  std::map<std::string, std::vector<Event>> lanes;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& ev = list[i];
    const std::string at = "timing trace: event #" + std::to_string(i) + ": ";
    if (!ev.is_object()) throw InputError(at + "not an object, got " + ev.type_name());
    auto ph = ev.find("ph");
    if (ph == ev.end() || !ph->is_string() || ph->get_ref<const std::string&>() != "X") continue;
    auto name = ev.find("name");
    if (name == ev.end() || !name->is_string()) {
      throw InputError(at + "complete event without a string \"name\"");
    }
    Event e;
    e.name = name->get<std::string>();
    e.ts = number(ev, "ts", at);
    e.dur = number(ev, "dur", at);
    if (e.dur < 0) throw InputError(at + "negative \"dur\" for " + detail::quoted(e.name));
    e.pos = i;
    std::string lane;
    for (const char* key : {"pid", "tid"}) {
      auto it = ev.find(key);
      lane += (it == ev.end() ? std::string("-") : it->dump()) + "/";
    }
    lanes[lane].push_back(std::move(e));
  }
  return lanes;
}

// Sums each event's own dur per name, skipping events nested inside an
// enclosing event of the same name on their thread.
void sumLane(std::vector<Event>& lane, std::unordered_map<std::string, double>& sums,
             size_t& used) {
  std::sort(lane.begin(), lane.end(), [](const Event& a, const Event& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.dur != b.dur) return a.dur > b.dur;  // the enclosing event first
    return a.pos < b.pos;
  });
  std::vector<const Event*> open;
  std::unordered_map<std::string_view, size_t> open_names;
  for (const Event& e : lane) {
    while (!open.empty() && open.back()->ts + open.back()->dur <= e.ts) {
      --open_names[open.back()->name];
      open.pop_back();
    }
    if (open_names[e.name] == 0) {
      sums[e.name] += e.dur;
      ++used;
    }
    ++open_names[e.name];
    open.push_back(&e);
  }
}

}  // namespace

std::string TimingStats::summary() const {
  return "timing: " + std::to_string(matched_ops) + " ops matched, " +
         std::to_string(unmatched_names) + " event names unmatched";
}

TimingStats applyTimingTrace(Graph& g, std::string_view trace_json) {
  const json doc = parseTrace(trace_json);
  auto lanes = readEvents(eventList(doc));
  TimingStats stats;
  std::unordered_map<std::string, double> sums;
  for (auto& [key, lane] : lanes) sumLane(lane, sums, stats.events_used);

  std::unordered_map<std::string_view, OpIndex> index;
  index.reserve(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) index.emplace(g.ops[i].name, static_cast<OpIndex>(i));
  std::vector<std::pair<OpIndex, double>> updates;
  for (const auto& [name, sum] : sums) {
    auto it = index.find(name);
    if (it == index.end()) {
      stats.unmatched.push_back(name);
      continue;
    }
    if (!std::isfinite(sum)) {
      throw InputError("timing trace: total dur of " + detail::quoted(name) + " is not finite");
    }
    updates.emplace_back(it->second, sum);
  }
  for (const auto& [op, sum] : updates) {
    g.ops[op].time_us = sum;
    g.ops[op].has_time = true;
  }
  std::sort(stats.unmatched.begin(), stats.unmatched.end());
  stats.matched_ops = updates.size();
  stats.unmatched_names = stats.unmatched.size();
  return stats;
}

TimingStats loadTimingTrace(Graph& g, const std::string& path) {
  const std::string text = detail::readFile(path);
  try {
    return applyTimingTrace(g, text);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

}  // namespace tictac::sched
