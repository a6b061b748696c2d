// tools/ps/job.h: what every tictac-ps process derives from the same flags.
//
// The PS and every worker load the same graph and compute the same sharding,
// the same orders and the same data patterns, so each side can verify the
// other's bytes and order without extra messages. Pure functions, callable
// from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/graph.h"
#include "tictac/sched/sim.h"

namespace tictac::ps {

struct Config {
  std::string graph;
  std::string mode = "inference";  // inference | training
  uint32_t workers = 2, ps = 1, iterations = 5;
  std::string order = "tic";  // random | fifo | tic | tac | reverse | FILE.tsv
  uint64_t seed = 0;
  std::string backend = "ucx";
  double rate_gbps = 0;  // link rate (pacing unless shaped); 0 = unpaced
  bool shaped = false;   // links shaped outside (netns + tbf): no pacing
  double compute_scale = 1.0, bwd_factor = 2.0;
  size_t chunk_bytes = 0, window_bytes = 0;  // 0 = transport defaults
  uint16_t port = 18600;                     // PS i listens on port + i
  bool port_set = false;  // --port given: else a loopback launch picks free ports (launch.cc)
  std::vector<std::string> peers;  // host:port of each PS (roles)
  uint32_t trace_iteration = 1;    // the iteration a worker records spans of
  bool training() const { return mode == "training"; }
};

// Tensor ids on the wire: a parameter is its recv op index; a gradient sets
// bit 61; control messages set bit 62.
constexpr uint64_t kGradBit = 1ull << 61;
constexpr uint64_t kCtrlHello = (1ull << 62) + 1;  // worker -> PS: 4-byte rank
constexpr uint64_t kCtrlReady = (1ull << 62) + 2;  // worker -> PS: ready for iteration k

class Job {
 public:
  // Loads the graph and derives shards and static orders. Throws
  // sched::InputError for bad input (graph, order name or file).
  explicit Job(const Config& c);
  const Config& config() const { return c_; }
  const sched::Graph& graph() const { return g_; }
  const std::vector<sched::OpIndex>& recvs() const { return recvs_; }
  // PS rank of a recv op (sched::simulate's sharding).
  uint32_t shardOf(sched::OpIndex op) const { return shard_[op]; }
  // Priority vector (indexed by op) for worker w in iteration k.
  sched::PriorityVector order(uint32_t w, uint32_t k) const;
  bool randomOrder() const { return c_.order == "random"; }
  // Analyzer options the orders are computed with (rate or 10 Gbit/s).
  sched::AnalyzerOptions analyzerOptions() const;
  // Simulator options for the same settings (runs = iterations).
  sched::SimOptions simOptions() const;

 private:
  Config c_;
  sched::Graph g_;
  std::vector<sched::OpIndex> recvs_;
  std::vector<uint32_t> shard_;
  sched::PriorityVector static_order_;
  std::unique_ptr<sched::Analyzer> random_;
};

// tictac-sim's prediction for the job (iteration and straggler figures).
sched::SimResult simulateJob(const Job& job, bool record_trace = false);

// Data patterns: a parameter's bytes are a function of (param, iteration); a
// gradient's of (param, iteration, worker), chosen so the sum over workers
// has a closed form the PS checks.
void fillParam(uint8_t* buf, size_t len, uint64_t param, uint32_t iteration);
bool checkParam(const uint8_t* buf, size_t len, uint64_t param, uint32_t iteration);
void fillGrad(uint8_t* buf, size_t len, uint64_t param, uint32_t iteration, uint32_t worker);
// True when sum over w < workers of the gradients in bufs[w] is what
// fillGrad's pattern gives (wrapping 64-bit words, tail bytes mod 256).
bool checkGradSum(const std::vector<const uint8_t*>& bufs, size_t len, uint64_t param,
                  uint32_t iteration);

// Monotonic clock shared by every process of the machine (CLOCK_MONOTONIC).
int64_t nowNs();

}  // namespace tictac::ps
