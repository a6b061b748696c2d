// sched/analyzers/dag.h: the part of a Graph that the analyzers look at.
//
// Internal to sched/analyzers. Every analyzer starts from a LiveDag: the ops
// that some output depends on (graphs from the loaders are already pruned, but
// a Graph built in code may not be), in a topological order, with the live
// recvs numbered 0..R-1 in list order. Times are converted once to integer
// nanoseconds so that sums are exact and independent of summation order (TAC
// updates its sums incrementally and must still break ties exactly).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/graph.h"

namespace tictac::sched::analyzers {

inline constexpr uint32_t kNoRecv = std::numeric_limits<uint32_t>::max();

struct LiveDag {
  std::vector<OpIndex> order;       // live ops, inputs before consumers
  std::vector<bool> live;           // per op of the graph
  std::vector<OpIndex> recvs;       // live recv ops in list order (recv id -> op)
  std::vector<uint32_t> recv_id;    // per op: its recv id, or kNoRecv
  std::vector<uint32_t> name_rank;  // per recv id: rank of its name in byte order
};

// Builds the LiveDag. Throws InputError on an input index out of range, an
// output index out of range, a cycle among live ops, or no live recv.
LiveDag buildLiveDag(const Graph& g);

// Checks bandwidth > 0, latency >= 0, both finite; throws InputError.
void checkOptions(const AnalyzerOptions& o);

// Microseconds to integer nanoseconds (rounded). Throws InputError naming
// `what` for NaN, negative or absurdly large (> 10^15 ns) values.
int64_t toNs(double us, const std::string& what);

// Transfer times of the live recvs (index = recv id) in ns. The total is
// checked to fit comfortably in int64.
std::vector<int64_t> transferNs(const Graph& g, const LiveDag& d, const AnalyzerOptions& o);

// The Schedule of algorithm `algo` with prio[recv id] for every live recv,
// sorted by (priority, name).
Schedule makeSchedule(const Graph& g, const LiveDag& d, const std::string& algo,
                      const std::vector<Priority>& prio);

}  // namespace tictac::sched::analyzers
