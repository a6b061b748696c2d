#include "sched/analyzers/dep_sets.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace tictac::sched::analyzers {

namespace {
constexpr uint32_t kNone = 0xffffffffu;
constexpr size_t kMaxBitsetBytes = size_t{2} << 30;  // 2 GiB of dependency sets

uint64_t hashWords(const std::vector<Word>& w) {
  uint64_t h = 0x84222325cbf29ce4ull;
  for (Word x : w) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0x100000001b3ull;
  }
  return h;
}
}  // namespace

DepSets::DepSets(const Graph& g, const LiveDag& d, bool with_times)
    : recvs_(d.recvs.size()), words_((d.recvs.size() + 63) / 64) {
  // Group 0 is the empty set (ops that depend on no recv).
  std::vector<Word> scratch(words_, 0);
  const uint32_t empty = intern(scratch);
  std::vector<uint32_t> of_op(g.ops.size(), kNone);  // group id of each live op
  for (OpIndex op : d.order) {
    const Op& o = g.ops[op];
    if (o.kind == OpKind::kRecv) {
      // A recv's own set {r} is not stored: consumers set the bit directly.
      continue;
    }
    // Fast path: every non-recv input in one group and every recv input in it.
    uint32_t common = kNone;
    bool same = true;
    for (OpIndex in : o.inputs) {
      if (g.isRecv(in)) continue;
      if (common == kNone)
        common = of_op[in];
      else if (of_op[in] != common)
        same = false;
    }
    if (common == kNone) common = empty;
    if (same) {
      for (OpIndex in : o.inputs)
        if (g.isRecv(in) && !contains(common, d.recv_id[in])) same = false;
    }
    uint32_t id = common;
    if (!same) {
      std::fill(scratch.begin(), scratch.end(), 0);
      for (OpIndex in : o.inputs) {
        if (g.isRecv(in)) {
          uint32_t r = d.recv_id[in];
          scratch[r / 64] |= Word{1} << (r % 64);
        } else {
          const Word* b = bits(of_op[in]);
          for (size_t w = groups_[of_op[in]].first_word; w < words_; ++w) scratch[w] |= b[w];
        }
      }
      id = intern(scratch);
    }
    of_op[op] = id;
    Group& grp = groups_[id];
    if (grp.compute_ops++ == 0 && id != empty) compute_groups_.push_back(id);
    if (with_times) grp.time_ns += toNs(o.time_us, "compute op '" + o.name + "'");
  }
}

ColumnSets DepSets::takeColumns() {
  constexpr size_t kB = ColumnSets::kBlock;
  constexpr size_t kTile = 64;  // words of one row copied per step (8 cache lines)
  ColumnSets c;
  c.words_ = words_;
  c.full_ = groups_.size() / kB * kB;
  c.last_ = groups_.size() - c.full_;
  std::vector<Word> rows(std::min(groups_.size(), kB) * words_);
  for (size_t first = 0; first < groups_.size(); first += kB) {
    const size_t n = std::min(kB, groups_.size() - first);  // groups in this block
    Word* block = &bits_[first * words_];
    std::copy(block, block + n * words_, rows.begin());
    for (size_t w0 = 0; w0 < words_; w0 += kTile)
      for (size_t k = 0; k < n; ++k)
        for (size_t w = w0; w < std::min(w0 + kTile, words_); ++w)
          block[w * n + k] = rows[k * words_ + w];
  }
  c.data_ = std::move(bits_);
  bits_.clear();
  return c;
}

uint32_t DepSets::intern(const std::vector<Word>& set) {
  const uint64_t h = hashWords(set);
  auto [lo, hi] = index_.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (std::memcmp(bits(it->second), set.data(), words_ * sizeof(Word)) == 0) return it->second;
  if ((groups_.size() + 1) * words_ * sizeof(Word) > kMaxBitsetBytes)
    throw InputError("graph too large to analyze: " + std::to_string(groups_.size() + 1) +
                     " distinct dependency sets over " + std::to_string(recvs_) +
                     " recvs need more than " + std::to_string(kMaxBitsetBytes >> 20) + " MiB");
  const uint32_t id = static_cast<uint32_t>(groups_.size());
  Group grp;
  grp.first_word = static_cast<uint32_t>(words_);
  for (size_t w = 0; w < words_; ++w) {
    grp.size += static_cast<uint32_t>(std::popcount(set[w]));
    if (set[w] && grp.first_word == words_) grp.first_word = static_cast<uint32_t>(w);
  }
  groups_.push_back(grp);
  bits_.insert(bits_.end(), set.begin(), set.end());
  index_.emplace(h, id);
  return id;
}

}  // namespace tictac::sched::analyzers
