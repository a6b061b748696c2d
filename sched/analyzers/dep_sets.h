// sched/analyzers/dep_sets.h: the recv dependency sets deps(c) of compute ops,
// grouped by identical set (internal to TIC and TAC).
//
// deps(c) is the set of live recvs that compute op c transitively depends on.
// Compute ops with the same set form one group; a group keeps the set as a
// bitset over recv ids, the number of its compute ops and the sum of their
// times. Only distinct sets are stored: memory is groups x R/8 bytes (a chain
// where every ~10 ops add a parameter has about R groups, nested). Sets are
// interned through a hash of their words; ops whose inputs all share one set
// reuse it without hashing. More than 2 GiB of sets is refused (InputError)
// rather than risking the machine.
#pragma once

#include <bit>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sched/analyzers/dag.h"

namespace tictac::sched::analyzers {

using Word = uint64_t;

// The sets of DepSets rearranged for TAC, which asks "which groups contain
// recv r" once per recv: groups in blocks of kBlock, and within a block word w
// of every group side by side, so that testing one recv's bit in consecutive
// groups reads consecutive memory (a row layout reads one cache line, and
// past a few MiB one TLB entry, per group). Read-only after construction.
class ColumnSets {
 public:
  static constexpr size_t kBlock = 512;

  ColumnSets() = default;
  // Word w of group id's set is at data()[base(id) + w * stride(id)].
  const Word* data() const { return data_.data(); }
  size_t base(uint32_t id) const { return (id / kBlock) * kBlock * words_ + id % kBlock; }
  size_t stride(uint32_t id) const { return id < full_ ? kBlock : last_; }  // last block: short
  Word word(uint32_t id, size_t w) const { return data_[base(id) + w * stride(id)]; }
  bool contains(uint32_t id, uint32_t recv) const {
    return (word(id, recv / 64) >> (recv % 64)) & 1u;
  }

 private:
  friend class DepSets;
  std::vector<Word> data_;  // per block: words x (kBlock or last_) groups
  size_t words_ = 0;
  size_t full_ = 0;  // groups in full blocks
  size_t last_ = 0;  // groups in the last, short block
};

class DepSets {
 public:
  struct Group {
    uint32_t first_word = 0;  // words before this one are all zero
    uint32_t compute_ops = 0;
    uint32_t size = 0;    // |deps|
    int64_t time_ns = 0;  // sum of the compute times (0 unless built with times)
  };

  // Builds the groups of the live compute ops of `g`. With `with_times`, the
  // compute times (time_us, missing = 0) are summed per group in ns.
  DepSets(const Graph& g, const LiveDag& d, bool with_times);

  size_t numRecvs() const { return recvs_; }
  size_t numWords() const { return words_; }
  // Groups that hold at least one compute op and a non-empty set.
  const std::vector<uint32_t>& computeGroups() const { return compute_groups_; }
  const Group& group(uint32_t id) const { return groups_[id]; }
  const Word* bits(uint32_t id) const { return &bits_[size_t{id} * words_]; }
  bool contains(uint32_t id, uint32_t recv) const {
    return (bits(id)[recv / 64] >> (recv % 64)) & 1u;
  }

  // Moves the sets into column blocks, in place (peak memory: the sets plus
  // one block). Afterwards bits() and contains() must not be called; the
  // counts, group() and computeGroups() stay valid.
  ColumnSets takeColumns();

  // Calls f(recv id) for every recv in a & b (b may be nullptr = all ones),
  // in ascending recv id order.
  template <class F>
  static void forEach(const Word* a, const Word* b, size_t from, size_t words, F&& f) {
    for (size_t w = from; w < words; ++w) {
      Word x = b ? (a[w] & b[w]) : a[w];
      while (x) {
        f(static_cast<uint32_t>(w * 64 + std::countr_zero(x)));
        x &= x - 1;
      }
    }
  }

 private:
  uint32_t intern(const std::vector<Word>& set);

  size_t recvs_ = 0;
  size_t words_ = 0;
  std::vector<Word> bits_;  // groups x words_
  std::vector<Group> groups_;
  std::vector<uint32_t> compute_groups_;
  std::unordered_multimap<uint64_t, uint32_t> index_;  // hash -> group id
};

}  // namespace tictac::sched::analyzers
