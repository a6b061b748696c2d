// Baseline `random`: a seeded shuffle that is the same on every platform.
//
// The live recvs are sorted by name, then shuffled with Fisher-Yates driven by
// splitmix64 (state starts at the seed; each draw adds 0x9e3779b97f4a7c15 and
// mixes). A draw in [0, n) rejects raw values below 2^64 mod n, so there is no
// modulo bias. Position in the shuffled list = priority (0..R-1, distinct).
#include <algorithm>
#include <numeric>

#include "sched/analyzers/builtins.h"
#include "sched/analyzers/dag.h"

namespace tictac::sched::analyzers {

namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const uint64_t x = next();
      if (x >= threshold) return x % n;
    }
  }

 private:
  uint64_t state_;
};

class Random final : public Analyzer {
 public:
  std::string name() const override { return "random"; }

  Schedule analyze(const Graph& g, const AnalyzerOptions& o) const override {
    const LiveDag d = buildLiveDag(g);
    std::vector<uint32_t> order(d.recvs.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return d.name_rank[a] < d.name_rank[b]; });
    SplitMix64 rng(o.seed);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::vector<Priority> prio(d.recvs.size());
    for (size_t k = 0; k < order.size(); ++k) prio[order[k]] = static_cast<Priority>(k);
    return makeSchedule(g, d, name(), prio);
  }
};

}  // namespace

std::unique_ptr<Analyzer> makeRandom() {
  return std::make_unique<Random>();
}

}  // namespace tictac::sched::analyzers
