// bench/graphgen.cc: synthetic graphs (see graphgen.h).
#include "bench/graphgen.h"

#include <algorithm>
#include <string>
#include <vector>

namespace tictac::bench {

using sched::Graph;
using sched::Op;
using sched::OpIndex;
using sched::OpKind;

uint64_t SplitMix64::next() {
  uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

OpIndex addRecv(Graph& g, std::string name, uint64_t bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kRecv;
  op.bytes = bytes;
  g.ops.push_back(std::move(op));
  return static_cast<OpIndex>(g.ops.size() - 1);
}

OpIndex addCompute(Graph& g, std::string name, double time_us, std::vector<OpIndex> inputs) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kCompute;
  op.time_us = time_us;
  op.has_time = true;
  op.inputs = std::move(inputs);
  g.ops.push_back(std::move(op));
  return static_cast<OpIndex>(g.ops.size() - 1);
}

// Outputs = every op no other op reads; then the library's own checks.
void finish(Graph& g) {
  std::vector<bool> read(g.ops.size(), false);
  for (const Op& op : g.ops) {
    for (OpIndex in : op.inputs) read[in] = true;
  }
  g.outputs.clear();
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!read[i]) g.outputs.push_back(static_cast<OpIndex>(i));
  }
  sched::validate(g);
}

}  // namespace

Graph chainWithSkips(uint32_t n_compute, uint32_t param_every, uint64_t seed) {
  SplitMix64 rng(seed);
  Graph g;
  g.name = "chain" + std::to_string(n_compute);
  std::vector<OpIndex> computes;
  for (uint32_t i = 0; i < n_compute; ++i) {
    std::vector<OpIndex> in;
    if (i > 0) in.push_back(computes[i - 1]);
    if (i >= 2 && rng.unit() < 0.3) {
      uint32_t back = static_cast<uint32_t>(rng.range(2, std::min<uint32_t>(8, i)));
      in.push_back(computes[i - back]);
    }
    if (param_every > 0 && i % param_every == 0) {
      in.push_back(addRecv(g, "p" + std::to_string(i / param_every), rng.range(4096, 1 << 20)));
    }
    computes.push_back(addCompute(g, "c" + std::to_string(i),
                                  static_cast<double>(rng.range(5, 150)), std::move(in)));
  }
  finish(g);
  return g;
}

Graph densenetLike(uint64_t seed) {
  SplitMix64 rng(seed);
  Graph g;
  g.name = "densenet121-like";
  auto t = [&](uint64_t lo, uint64_t hi) { return static_cast<double>(rng.range(lo, hi)); };
  auto bn = [&](const std::string& n, uint64_t ch, OpIndex x) {
    OpIndex w = addRecv(g, n + ".weight", ch * 4);
    OpIndex b = addRecv(g, n + ".bias", ch * 4);
    return addCompute(g, n, t(10, 60), {x, w, b});
  };
  auto conv = [&](const std::string& n, uint64_t elems, OpIndex x) {
    OpIndex w = addRecv(g, n + ".weight", elems * 4);
    return addCompute(g, n, t(60, 400), {x, w});
  };
  auto relu = [&](const std::string& n, OpIndex x) { return addCompute(g, n, t(5, 30), {x}); };

  OpIndex x = addCompute(g, "input", 0, {});
  x = conv("features.conv0", 64 * 3 * 49, x);
  x = bn("features.norm0", 64, x);
  x = relu("features.relu0", x);
  x = addCompute(g, "features.pool0", t(20, 60), {x});
  uint64_t ch = 64;
  const int layers[] = {6, 12, 24, 16};
  for (int b = 0; b < 4; ++b) {
    const std::string block = "features.denseblock" + std::to_string(b + 1);
    std::vector<OpIndex> feats = {x};
    for (int l = 0; l < layers[b]; ++l) {
      const std::string p = block + ".denselayer" + std::to_string(l + 1);
      const uint64_t in_ch = ch + 32 * static_cast<uint64_t>(l);
      OpIndex y = addCompute(g, p + ".cat", t(5, 40), feats);
      y = bn(p + ".norm1", in_ch, y);
      y = relu(p + ".relu1", y);
      y = conv(p + ".conv1", in_ch * 128, y);
      y = bn(p + ".norm2", 128, y);
      y = relu(p + ".relu2", y);
      feats.push_back(conv(p + ".conv2", 128 * 32 * 9, y));
    }
    ch += 32 * static_cast<uint64_t>(layers[b]);
    x = addCompute(g, block + ".cat", t(5, 40), feats);
    if (b < 3) {
      const std::string tr = "features.transition" + std::to_string(b + 1);
      x = bn(tr + ".norm", ch, x);
      x = relu(tr + ".relu", x);
      x = conv(tr + ".conv", ch * (ch / 2), x);
      x = addCompute(g, tr + ".pool", t(20, 60), {x});
      ch /= 2;
    }
  }
  x = bn("features.norm5", ch, x);
  x = relu("features.relu5", x);
  x = addCompute(g, "avgpool", t(10, 30), {x});
  OpIndex w = addRecv(g, "classifier.weight", ch * 1000 * 4);
  OpIndex bias = addRecv(g, "classifier.bias", 1000 * 4);
  addCompute(g, "classifier", t(100, 300), {x, w, bias});
  finish(g);
  return g;
}

Graph randomSmallGraph(uint64_t seed, uint32_t n_recvs, uint32_t n_compute) {
  SplitMix64 rng(seed);
  Graph g;
  g.name = "random" + std::to_string(seed);
  std::vector<OpIndex> pool;
  std::vector<OpIndex> recvs;
  for (uint32_t r = 0; r < n_recvs; ++r) {
    // 1250 bytes = 1 us at 10 Gbit/s: transfers of 1..100 us.
    recvs.push_back(addRecv(g, "r" + std::to_string(r), 1250 * rng.range(1, 100)));
    pool.push_back(recvs.back());
  }
  std::vector<uint32_t> uses(g.ops.size(), 0);
  for (uint32_t c = 0; c < n_compute; ++c) {
    std::vector<OpIndex> in;
    const uint64_t k = std::min<uint64_t>(rng.range(1, 3), pool.size());
    while (in.size() < k) {
      OpIndex pick = pool[rng.range(0, pool.size() - 1)];
      if (std::find(in.begin(), in.end(), pick) == in.end()) in.push_back(pick);
    }
    double time = rng.unit() < 0.15 ? 0.0 : static_cast<double>(rng.range(1, 100));
    pool.push_back(addCompute(g, "c" + std::to_string(c), time, std::move(in)));
  }
  // Every recv must be read: give unread ones to a random compute op.
  std::vector<bool> read(g.ops.size(), false);
  for (const Op& op : g.ops) {
    for (OpIndex in : op.inputs) read[in] = true;
  }
  for (OpIndex r : recvs) {
    if (!read[r] && n_compute > 0) {
      g.ops[n_recvs + rng.range(0, n_compute - 1)].inputs.push_back(r);
    }
  }
  finish(g);
  return g;
}

}  // namespace tictac::bench
