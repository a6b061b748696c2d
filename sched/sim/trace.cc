// sched/sim/trace.cc: Chrome trace-event JSON of a simulation (Perfetto,
// chrome://tracing). One process per worker (pid = worker + 1), three lanes
// (threads): parameters coming in, compute, gradients going out.
#include <nlohmann/json.hpp>

#include "tictac/sched/sim.h"

namespace tictac::sched {

namespace {

constexpr const char* kLaneNames[] = {"network in (parameters)", "compute",
                                      "network out (gradients)"};

nlohmann::json metadata(const char* what, uint32_t pid, uint32_t tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

std::string chromeTraceJson(const Graph& g, const SimResult& r, const SimOptions& o) {
  nlohmann::json events = nlohmann::json::array();
  const bool training = o.mode == SimMode::kTraining;
  for (uint32_t w = 0; w < o.workers; ++w) {
    events.push_back(metadata("process_name", w + 1, 0, "worker " + std::to_string(w)));
    events.push_back(metadata("process_sort_index", w + 1, 0, std::to_string(w)));
    for (uint32_t lane = 0; lane < (training ? 3u : 2u); ++lane) {
      events.push_back(metadata("thread_name", w + 1, lane + 1, kLaneNames[lane]));
    }
  }
  for (const TraceSpan& s : r.trace) {
    nlohmann::json args = {{"iteration", s.iteration}};
    if (s.lane != 1) {
      args["bytes"] = s.bytes;
    }
    events.push_back({{"ph", "X"},
                      {"name", s.name},
                      {"cat", s.lane == 1 ? "compute" : "network"},
                      {"pid", s.worker + 1},
                      {"tid", s.lane + 1},
                      {"ts", s.start_us},
                      {"dur", s.dur_us},
                      {"args", std::move(args)}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)},
                        {"displayTimeUnit", "ms"},
                        {"otherData",
                         {{"graph", g.name},
                          {"makespan_us", r.makespan_us},
                          {"workers", o.workers},
                          {"ps", o.ps},
                          {"runs", o.runs}}}};
  return doc.dump();
}

}  // namespace tictac::sched
