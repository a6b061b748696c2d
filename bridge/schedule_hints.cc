// The in-process hint provider built from a sched::Schedule (see
// include/tictac/schedule_hints.h for the contract).
#include "tictac/schedule_hints.h"

namespace tictac {

ScheduleHintProvider::ScheduleHintProvider(const sched::Schedule& schedule) : algo_(schedule.algo) {
  by_name_.reserve(schedule.entries.size());
  by_id_.reserve(schedule.entries.size());
  for (const auto& e : schedule.entries) {
    by_name_[e.name] = e.priority;
    by_id_[e.op] = e.priority;
  }
}

std::optional<transport::Priority> ScheduleHintProvider::priorityOf(
    const transport::TensorKey& tensor) const {
  if (!tensor.name.empty()) {
    auto it = by_name_.find(tensor.name);
    if (it == by_name_.end()) return std::nullopt;
    return it->second;
  }
  auto it = by_id_.find(tensor.id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<ScheduleHintProvider> makeScheduleHints(const sched::Graph& g,
                                                        const std::string& algo,
                                                        const sched::AnalyzerOptions& options,
                                                        const sched::AnalyzerRegistry* registry) {
  std::unique_ptr<sched::Analyzer> analyzer;
  if (registry != nullptr) {
    analyzer = registry->create(algo);
  } else {
    analyzer = sched::AnalyzerRegistry::withBuiltins().create(algo);
  }
  if (!analyzer) throw sched::InputError("unknown analyzer '" + algo + "'");
  return std::make_shared<ScheduleHintProvider>(analyzer->analyze(g, options));
}

}  // namespace tictac
