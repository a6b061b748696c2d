// tictac/sched/timing.h: per-op run times from a Chrome trace-event file.
//
// Accepted input: the Chrome trace-event JSON format, both the array form
// (`[{...}, ...]`, what PyTorch 1.13's profiler writes; as the format allows,
// a missing final `]` is tolerated) and the object form
// (`{"traceEvents": [{...}, ...], ...}`).
//
// Only complete events (`"ph": "X"`) are used; every other phase is skipped.
// A complete event needs a string "name" and numbers "ts" and "dur" (us, dur
// finite and >= 0); "pid"/"tid" are optional. Each event contributes its own
// "dur" to the op whose name equals the event's name:
// - repeats of one name (several iterations, several calls) are summed;
// - nested events (an X event lying inside another X event on the same
//   pid/tid) are not added to their parents: a parent keeps its own dur, and
//   a child counts only for its own name. A child with the same name as one
//   of its enclosing events is skipped, so a recursively labelled region is
//   counted once.
// A matched op gets time_us = the sum and has_time = true; ops the trace does
// not name are left as they were. Events whose name matches no op are
// counted (a plain PyTorch trace names aten ops, not graph nodes).
//
// Thread-safety: pure functions of their arguments; a Graph must not be
// shared with another thread while it is being updated.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tictac/sched/graph.h"

namespace tictac::sched {

struct TimingStats {
  size_t matched_ops = 0;              // ops whose time_us the trace set
  size_t unmatched_names = 0;          // distinct X-event names naming no op
  std::vector<std::string> unmatched;  // those names, sorted
  size_t events_used = 0;              // X events that contributed a dur
  // "timing: N ops matched, M event names unmatched" (tools print it to stderr).
  std::string summary() const;
};

// Applies a trace given as text. Throws InputError naming the problem (not
// JSON, wrong top-level shape, an X event without a numeric ts/dur or string
// name, ...); `g` is unchanged when it throws.
TimingStats applyTimingTrace(Graph& g, std::string_view trace_json);

// Reads `path` and applies it. Throws InputError (message starts with the
// path) for bad content and std::runtime_error for I/O failures.
TimingStats loadTimingTrace(Graph& g, const std::string& path);

}  // namespace tictac::sched
