// Cost of the send scheduler's decisions (issue 4 target: < 100 ns per chunk
// decision with 1 to 1024 distinct priorities drawn from the whole 32-bit range).
//
// BM_ChunkDecision/<levels>: steady state of one owner thread. A backlog of
// queued ops spread over <levels> priorities is kept; every iteration
// enqueues one op (one chunk long), takes the next chunk and acks it: one
// enqueue + next + ack, which is what the channel pays per chunk.
// BM_ChunkDecisionMultiChunk: ops of 8 chunks, so most iterations are
// next + ack on an op already being cut (the common case for bulk tensors).
// BM_ChunkDecisionPaced: as BM_ChunkDecision with the token bucket on (at a
// rate that never holds, so it measures the bucket's bookkeeping; the
// injected time advances 1 ns per iteration).
// BM_LanesPushPop: PriorityLanes alone, one push + front + pop.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "transport/core/priority_lanes.h"
#include "transport/core/send_scheduler.h"

namespace tictac::transport {
namespace {

constexpr size_t kChunk = size_t{256} * 1024;
constexpr size_t kBacklog = 4096;  // queued ops kept while measuring

// A cycle of priorities: `levels` distinct values drawn uniformly from the
// whole uint32_t range (0 and UINT32_MAX included when levels > 1).
std::vector<uint32_t> prioritySequence(size_t levels, size_t length) {
  std::mt19937_64 rng(42);
  std::vector<uint32_t> distinct;
  if (levels > 1) distinct = {0, UINT32_MAX};
  while (distinct.size() < levels) distinct.push_back(static_cast<uint32_t>(rng()));
  std::vector<uint32_t> seq(length);
  for (auto& p : seq) p = distinct[rng() % distinct.size()];
  return seq;
}

void runDecisions(benchmark::State& state, size_t levels, size_t op_chunks, double rate_gbps) {
  SchedulerOptions o;
  o.chunk_bytes = kChunk;
  o.window_bytes = 4 * kChunk;
  o.rate_gbps = rate_gbps;
  o.burst_bytes = 1ull << 40;
  SendScheduler s(o);
  const auto prios = prioritySequence(levels, 1 << 16);
  auto now = SendScheduler::Clock::now();
  uint64_t id = 1;
  size_t p = 0;
  auto enqueueOne = [&] {
    Status st = s.enqueue(SendRequest{id++, prios[p++ & 0xFFFF], op_chunks * kChunk, id & 7}, now);
    if (!st.isOk()) state.SkipWithError(st.toString().c_str());
  };
  for (size_t i = 0; i < kBacklog; ++i) enqueueOne();
  uint64_t n = 0;
  for (auto _ : state) {
    if (n++ % op_chunks == 0) enqueueOne();
    if (rate_gbps > 0) now += std::chrono::nanoseconds(1);  // the bucket refills
    auto c = s.next(now);
    if (!c) {
      state.SkipWithError("next() returned no chunk");
      break;
    }
    benchmark::DoNotOptimize(c);
    s.ack(c->op_id, c->length);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["levels"] = static_cast<double>(levels);
  state.counters["queued_ops"] = static_cast<double>(s.queuedOps());
}

void BM_ChunkDecision(benchmark::State& state) {
  runDecisions(state, static_cast<size_t>(state.range(0)), 1, 0);
}
void BM_ChunkDecisionMultiChunk(benchmark::State& state) {
  runDecisions(state, static_cast<size_t>(state.range(0)), 8, 0);
}
void BM_ChunkDecisionPaced(benchmark::State& state) {
  runDecisions(state, static_cast<size_t>(state.range(0)), 1, 1e9);
}

void BM_LanesPushPop(benchmark::State& state) {
  PriorityLanes<uint32_t> lanes;
  const auto prios = prioritySequence(static_cast<size_t>(state.range(0)), 1 << 16);
  size_t p = 0;
  for (uint32_t i = 0; i < kBacklog; ++i) lanes.push(prios[p++ & 0xFFFF], i);
  for (auto _ : state) {
    lanes.push(prios[p & 0xFFFF], static_cast<uint32_t>(p));
    ++p;
    benchmark::DoNotOptimize(lanes.front());
    lanes.pop();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

BENCHMARK(BM_ChunkDecision)->Arg(1)->Arg(16)->Arg(1024);
BENCHMARK(BM_ChunkDecisionMultiChunk)->Arg(1)->Arg(16)->Arg(1024);
BENCHMARK(BM_ChunkDecisionPaced)->Arg(1)->Arg(16)->Arg(1024);
BENCHMARK(BM_LanesPushPop)->Arg(1)->Arg(16)->Arg(1024);

}  // namespace
}  // namespace tictac::transport

BENCHMARK_MAIN();
