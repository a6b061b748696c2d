// Schedule helpers declared in tictac/sched/analyzer.h.
#include <algorithm>
#include <string>

#include "tictac/sched/analyzer.h"

namespace tictac::sched {

std::string Schedule::toTsv() const {
  std::string out;
  for (const auto& e : entries) {
    out += e.name;
    out += '\t';
    out += std::to_string(e.priority);
    out += '\n';
  }
  return out;
}

void sortSchedule(Schedule& s) {
  std::sort(s.entries.begin(), s.entries.end(), [](const ScheduleEntry& a, const ScheduleEntry& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.name < b.name;
  });
}

double transferTimeUs(const Op& r, const AnalyzerOptions& o) {
  if (o.use_recv_times && r.has_time) return r.time_us;
  return static_cast<double>(r.bytes) * 8.0 / (o.bandwidth_gbps * 1e3) + o.latency_us;
}

}  // namespace tictac::sched
