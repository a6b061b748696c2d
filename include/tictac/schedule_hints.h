// tictac/schedule_hints.h: the thin layer joining sched/ and transport/.
//
// A framework hands over its graph and an analyzer name and gets a
// transport::HintProvider back: every send() without an explicit priority then
// carries the analyzer's priority, with no TSV file in between.
//
// Matching: a TensorKey is looked up by name first (the recv op's name, as in
// tictac-analyze output); a key with an empty name is looked up by id, where
// the id of a recv is its op index in the analyzed graph (ScheduleEntry::op).
// Unknown tensors get nullopt (the context's default priority).
//
// Threading: a provider is immutable after construction; priorityOf() may be
// called from any number of threads at once (what hints.h requires).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/graph.h"
#include "tictac/transport/hints.h"

namespace tictac {

class ScheduleHintProvider : public transport::HintProvider {
 public:
  explicit ScheduleHintProvider(const sched::Schedule& schedule);
  std::optional<transport::Priority> priorityOf(const transport::TensorKey& tensor) const override;
  size_t size() const { return by_name_.size(); }
  const std::string& algo() const { return algo_; }

 private:
  std::string algo_;
  std::unordered_map<std::string, transport::Priority> by_name_;
  std::unordered_map<uint64_t, transport::Priority> by_id_;
};

// Runs analyzer `algo` (from `registry`, or the built-ins when null) on `g`
// and wraps the schedule. Throws sched::InputError when the algorithm is
// unknown or the analyzer rejects the graph. Called from any thread; the
// registry is only read.
std::shared_ptr<ScheduleHintProvider> makeScheduleHints(
    const sched::Graph& g, const std::string& algo, const sched::AnalyzerOptions& options = {},
    const sched::AnalyzerRegistry* registry = nullptr);

}  // namespace tictac
