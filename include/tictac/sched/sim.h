// tictac/sched/sim.h: the iteration simulator (what a schedule buys).
//
// Model (docs/sched.md has the long form):
// - Every worker runs the same Graph. Parameters (recv ops) live on parameter
//   servers (PS), sharded by size: largest first onto the least-loaded PS
//   (ties: name, then lowest PS index).
// - Every PS and every worker has one outgoing and one incoming link at
//   `bandwidth_gbps` (full duplex). A transfer holds the sender's out-link and
//   the receiver's in-link; it takes bytes*8/(gbps*1e3) us, plus `latency_us`
//   once per transfer. With `chunk_bytes` > 0 a transfer is sent chunk by chunk
//   and the links are re-arbitrated between chunks (so a more urgent transfer
//   can overtake a long one). Arbitration: among transfers whose two links are
//   free, the smallest key goes first: parameters by (iteration, priority in
//   the receiving worker's order, name, worker); gradients by (iteration, the
//   order they became ready).
// - Compute: one op at a time per worker; an op runs when all its inputs are
//   there; among ready ops the one listed first in Graph::ops runs first.
//   Time = time_us * compute_scale.
// - Training adds a backward pass after the forward: every compute op's
//   backward takes bwd_factor x its time, run one at a time in reverse
//   topological order. Parameter p's gradient is ready when the backward ops
//   of all of p's direct consumers are done; it is then pushed to p's PS. The
//   PS sends p of iteration k+1 as soon as it has all W gradients of p of
//   iteration k (no global barrier); a worker starts forward k+1 after its own
//   backward k. Inference iterations are independent (each starts at 0).
//
// Metrics (per worker and iteration): M = comm_us = sum of the transfer times
// of the parameters it receives (+ the gradients it pushes, in training);
// P = compute_us = sum of its compute (forward + backward) times; CP = the
// critical path (see SimResult). For one worker, one PS and one iteration,
// lower_bound <= makespan <= upper_bound holds; with several workers the PS
// links are shared, and pipelined training overlaps iterations, so the
// makespan may leave those bounds (the efficiencies then leave [0, 1]).
//
// Thread-safety: every function here is a pure function of its arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/graph.h"

namespace tictac::sched {

enum class SimMode : uint8_t { kInference, kTraining };

struct SimOptions {
  double bandwidth_gbps = 10.0;
  double latency_us = 0.0;     // paid once per transfer
  double compute_scale = 1.0;  // multiplies every compute time_us
  SimMode mode = SimMode::kInference;
  double bwd_factor = 2.0;  // training: backward time = bwd_factor x forward time
  uint32_t workers = 1;
  uint32_t ps = 1;
  uint32_t runs = 1;          // iterations
  uint64_t chunk_bytes = 0;   // 0 = whole transfers
  bool record_trace = false;  // fill SimResult::trace
};

// Throws InputError naming the bad field (non-positive bandwidth, negative or
// NaN latency/scale/factor, zero workers/ps/runs, or sizes whose state would
// not fit in memory: workers x ps > 10^7, workers x runs > 10^7).
void validateSimOptions(const SimOptions& o);

// Throws InputError naming the first op of `g` whose simulated time is above
// 1e12 us (as the analyzers' limit): a recv's transfer, a compute op's time x
// compute_scale (x bwd_factor in training). Past it sums lose the microsecond
// and overflow to inf (a makespan of inf or 1e300 was printed with exit 0).
void validateSimTimes(const Graph& g, const SimOptions& o);

// Transfer time of `bytes` under the options (us), latency included.
double simTransferUs(uint64_t bytes, const SimOptions& o);

// A priority per op index (only recv entries are read). Lower = more urgent;
// ties are broken by op name.
using PriorityVector = std::vector<Priority>;

// Priority vector of a schedule for graph `g`. Throws InputError if a recv of
// `g` has no entry or an entry names no recv of `g`.
PriorityVector priorityVector(const Graph& g, const Schedule& s);

// Parses `name<TAB>priority` lines (what tictac-analyze prints) against `g`.
// Throws InputError with the line number for a malformed line, an unknown or
// non-recv name, a repeated name or a bad priority, and naming the first recv
// that has no line.
PriorityVector parseOrderTsv(const Graph& g, std::string_view text);

// parseOrderTsv() of a file, read as the graph loaders read one (a device or
// more than 2 GiB refused); errors name the path.
PriorityVector loadOrderFile(const Graph& g, const std::string& path);

// The order of worker `w` in iteration `k`. Called once per (w, k), from the
// thread that called simulate(), while it runs (lazily, when the first
// transfer of that iteration to that worker is queued).
using OrderSource = std::function<PriorityVector(uint32_t worker, uint32_t iteration)>;

struct Percentiles {
  double mean = 0, p50 = 0, p99 = 0;  // nearest-rank percentiles
};

// One Chrome trace-event ("X") span.
struct TraceSpan {
  std::string name;
  uint32_t worker = 0;
  uint8_t lane = 0;  // 0 network in (parameters), 1 compute, 2 network out (gradients)
  double start_us = 0, dur_us = 0;
  uint32_t iteration = 0;
  uint64_t bytes = 0;  // transfers
};

struct SimResult {
  double makespan_us = 0;       // mean iteration time
  double comm_us = 0;           // M
  double compute_us = 0;        // P
  double critical_path_us = 0;  // longest recv->compute chain (+ backward chain in training)
  double upper_bound_us = 0;    // M + P
  double lower_bound_us = 0;    // max(M, P, CP)
  double efficiency = 1;        // (M+P-makespan)/(M+P-max(M,P)), 1 if denominator 0
  double efficiency_cp = 1;     // (M+P-makespan)/(M+P-lower_bound), 1 if denominator 0
  double headroom = 0;          // min(M/P, P/M); 0 if M or P is 0
  // Iteration k ends when every worker has finished it (forward, backward and
  // its gradient pushes); its time is that end minus the end of k-1 (training)
  // or minus 0 (inference). Straggler: latest minus earliest worker end.
  Percentiles iteration_us;
  Percentiles straggler_us;  // p50 is filled too
  std::vector<double> iteration_samples, straggler_samples;
  uint64_t transfers = 0, chunks = 0, events = 0;
  std::vector<uint32_t> shard;   // PS of each op (recvs only; others 0)
  std::vector<TraceSpan> trace;  // when SimOptions::record_trace
};

// Runs the simulation. Throws InputError for bad options, an order vector of
// the wrong size, or workers x ops > 5 x 10^7 (per-worker state). O((ops + transfers) log n) per
// worker and iteration.
SimResult simulate(const Graph& g, const OrderSource& order, const SimOptions& o);
// Same order for every worker and iteration.
SimResult simulate(const Graph& g, const PriorityVector& order, const SimOptions& o);

// Fills the metric fields (bounds, efficiencies, headroom, percentiles) of
// `r` from its makespan and samples. Exposed for tests.
void computeMetrics(const Graph& g, const SimOptions& o, SimResult& r);

// Single worker, single PS, single iteration, inference: the makespan of the
// order, without the event machinery. Equal to simulate(...).makespan_us.
// Precomputes the graph once; each call is cheap (for brute-force search).
// Not thread-safe (scratch buffers); use one instance per thread.
class SingleWorkerMakespan {
 public:
  SingleWorkerMakespan(const Graph& g, const SimOptions& o);
  // `recv_order`: the recv op indices, most urgent first.
  double ofOrder(const std::vector<OpIndex>& recv_order);
  // Order = recvs sorted by (priority, name); `priority` is indexed by op.
  double ofPriorities(const PriorityVector& priority);

 private:
  const Graph& g_;
  std::vector<double> time_;     // per op: compute time or transfer time
  std::vector<uint32_t> indeg_;  // number of inputs per op
  std::vector<std::vector<OpIndex>> consumers_;
  std::vector<uint32_t> pending_;  // scratch
  std::vector<OpIndex> heap_;      // scratch
};

// Makespan of one worker, one iteration, inference (the function form).
double singleWorkerMakespanUs(const Graph& g, const PriorityVector& priority, const SimOptions& o);

// Writes the spans as Chrome trace-event JSON (object form), with process and
// thread names as "M" metadata events: one process per worker, lanes
// "network in", "compute", "network out".
std::string chromeTraceJson(const Graph& g, const SimResult& r, const SimOptions& o);

}  // namespace tictac::sched
