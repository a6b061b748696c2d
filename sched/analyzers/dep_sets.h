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
