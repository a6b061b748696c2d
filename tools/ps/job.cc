// tools/ps/job.cc: graph, sharding, orders and data patterns of a tictac-ps job.
#include "tools/ps/job.h"

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "transport/core/send_scheduler.h"

namespace tictac::ps {

using namespace tictac::sched;

Job::Job(const Config& c) : c_(c) {
  std::vector<std::string> warnings;
  g_ = loadGraph(c.graph, &warnings);
  recvs_ = g_.recvs();
  // Sharding: the simulator's own (largest first onto the least-loaded PS),
  // read from a one-iteration simulation so both always agree.
  SimOptions so = simOptions();
  so.runs = 1;
  so.workers = 1;
  shard_ = simulate(g_, PriorityVector(g_.ops.size(), 0), so).shard;
  auto reg = AnalyzerRegistry::withBuiltins();
  if (auto a = reg.create(c.order)) {
    if (c.order == "random") {
      random_ = std::move(a);
    } else {
      static_order_ = priorityVector(g_, a->analyze(g_, analyzerOptions()));
    }
  } else if (std::filesystem::is_regular_file(c.order)) {
    static_order_ = loadOrderFile(g_, c.order);
  } else {
    throw InputError("--order " + c.order +
                     ": neither random, fifo, tic, tac, reverse nor a readable file");
  }
}

AnalyzerOptions Job::analyzerOptions() const {
  AnalyzerOptions o;
  o.bandwidth_gbps = c_.rate_gbps > 0 ? c_.rate_gbps : 10.0;
  o.seed = c_.seed;
  return o;
}

SimOptions Job::simOptions() const {
  SimOptions o;
  o.bandwidth_gbps = c_.rate_gbps > 0 ? c_.rate_gbps : 10.0;
  o.compute_scale = c_.compute_scale;
  o.mode = c_.training() ? SimMode::kTraining : SimMode::kInference;
  o.bwd_factor = c_.bwd_factor;
  o.workers = c_.workers;
  o.ps = c_.ps;
  o.runs = c_.iterations;
  o.chunk_bytes = c_.chunk_bytes > 0 ? c_.chunk_bytes : transport::kDefaultChunkBytes;
  return o;
}

// tictac-sim's scheme: worker w, iteration k draws with seed + w * runs + k.
PriorityVector Job::order(uint32_t w, uint32_t k) const {
  if (!random_) return static_order_;
  AnalyzerOptions o = analyzerOptions();
  o.seed = c_.seed + uint64_t{w} * c_.iterations + k;
  return priorityVector(g_, random_->analyze(g_, o));
}

SimResult simulateJob(const Job& job, bool record_trace) {
  SimOptions o = job.simOptions();
  o.record_trace = record_trace;
  if (!job.randomOrder()) return simulate(job.graph(), job.order(0, 0), o);
  OrderSource src = [&job](uint32_t w, uint32_t k) { return job.order(w, k); };
  return simulate(job.graph(), src, o);
}

namespace {
uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t paramBase(uint64_t p, uint32_t k) {
  return mix(p * 0x100000001b3ull ^ (uint64_t{k} << 40));
}
uint64_t gradBase(uint64_t p, uint32_t k) {
  return mix(paramBase(p, k) ^ 0x6772616400000000ull);
}
}  // namespace

void fillParam(uint8_t* buf, size_t len, uint64_t param, uint32_t iteration) {
  const uint64_t b = paramBase(param, iteration);
  size_t words = len / 8;
  for (size_t j = 0; j < words; ++j) {
    uint64_t v = b + j;
    std::memcpy(buf + 8 * j, &v, 8);
  }
  for (size_t i = 8 * words; i < len; ++i) buf[i] = static_cast<uint8_t>(b + i);
}

bool checkParam(const uint8_t* buf, size_t len, uint64_t param, uint32_t iteration) {
  const uint64_t b = paramBase(param, iteration);
  size_t words = len / 8;
  for (size_t j = 0; j < words; ++j) {
    uint64_t v;
    std::memcpy(&v, buf + 8 * j, 8);
    if (v != b + j) return false;
  }
  for (size_t i = 8 * words; i < len; ++i) {
    if (buf[i] != static_cast<uint8_t>(b + i)) return false;
  }
  return true;
}

void fillGrad(uint8_t* buf, size_t len, uint64_t param, uint32_t iteration, uint32_t worker) {
  const uint64_t b = gradBase(param, iteration) + worker;
  size_t words = len / 8;
  for (size_t j = 0; j < words; ++j) {
    uint64_t v = b + j;
    std::memcpy(buf + 8 * j, &v, 8);
  }
  for (size_t i = 8 * words; i < len; ++i) buf[i] = static_cast<uint8_t>(b + i);
}

bool checkGradSum(const std::vector<const uint8_t*>& bufs, size_t len, uint64_t param,
                  uint32_t iteration) {
  const uint64_t n = bufs.size();
  const uint64_t b = gradBase(param, iteration);
  const uint64_t wsum = n * (n - 1) / 2;  // sum of the worker offsets
  size_t words = len / 8;
  for (size_t j = 0; j < words; ++j) {
    uint64_t s = 0;
    for (const uint8_t* g : bufs) {
      uint64_t v;
      std::memcpy(&v, g + 8 * j, 8);
      s += v;
    }
    if (s != n * (b + j) + wsum) return false;
  }
  for (size_t i = 8 * words; i < len; ++i) {
    uint8_t s = 0;
    for (const uint8_t* g : bufs) s = static_cast<uint8_t>(s + g[i]);
    if (s != static_cast<uint8_t>(n * (b + i) + wsum)) return false;
  }
  return true;
}

int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace tictac::ps
