// bench/graphgen.h: synthetic model graphs for benchmarks and tests.
//
// Every generator is a pure function of its arguments (a seeded splitmix64
// stream, the same on every platform) and returns a validated graph in which
// every op leads to an output (outputs = all sinks), so nothing is pruned.
// Transfer sizes and compute times are drawn so that at 10 Gbit/s the
// network and compute totals are of the same order (the interesting case).
#pragma once

#include <cstdint>

#include "tictac/sched/graph.h"

namespace tictac::bench {

// splitmix64: a tiny portable generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t next();
  // Uniform in [lo, hi] (inclusive).
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

// A chain with skip connections: `n_compute` compute ops; op i reads op i-1
// and, with probability 0.3, one op 2..8 back; a new parameter (recv) every
// `param_every` ops, read by that op. Later ops depend on almost every
// parameter, the hard case for TAC. Ops = n_compute + n_compute/param_every.
sched::Graph chainWithSkips(uint32_t n_compute, uint32_t param_every, uint64_t seed);

// A DenseNet-121-shaped graph: stem, 4 dense blocks (6, 12, 24, 16 layers of
// concat, BN, ReLU, 1x1 conv, BN, ReLU, 3x3 conv; each layer reads the block
// input and every earlier layer of its block), 3 transitions and the
// classifier: 795 ops (433 compute, 362 recv), bytes from the real shapes.
sched::Graph densenetLike(uint64_t seed);

// A small random DAG for exhaustive search: `n_recvs` recvs and `n_compute`
// compute ops, each compute reading 1-3 earlier ops; every recv is read.
sched::Graph randomSmallGraph(uint64_t seed, uint32_t n_recvs, uint32_t n_compute);

}  // namespace tictac::bench
