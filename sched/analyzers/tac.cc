// TAC: timing-aware priorities, assigned one recv at a time.
//
// With O the outstanding recvs (initially all), M(r) the transfer time,
//   P(r)  = sum of time(c) over compute ops c with deps(c) & O == {r}
//   M+(r) = min over compute ops c with |deps(c) & O| > 1 and r in deps(c)
//           of the sum of M over deps(c) & O (infinity if none),
// repeat until O is empty: pick the recv with the smallest key
//   (0, M) if M < P else (1, -P),  then smallest M+,  then name,
// give it the next priority 0, 1, 2, ... and remove it from O.
//
// The first key is Johnson's rule for two machines (network, then compute)
// written as one total order. The reference code sorts with the pairwise test
// min(M(r), P(s)) < min(M(s), P(r)) and keeps its list order when neither
// side wins; the two differ only where that test ties (e.g. two recvs with
// M >= P and equal P, or M(r) == P(s) across the two classes): there the
// reference keeps list order while TAC here goes by M+, then name.
//
// Incremental state (see dep_sets.h): per group of compute ops with one dep
// set, the outstanding count and the sum of M over its outstanding recvs; per
// recv, P. Removing r touches only the live groups that contain r; a group
// whose count falls to 1 adds its time to the P of its last recv. M+ is never
// stored: it is evaluated only for the recvs that tie on the first key, by one
// pass over the groups with count > 1 that skips groups whose sum cannot win.
// Times are integer ns (dag.h), so incremental sums equal fresh ones exactly.
#include <algorithm>
#include <limits>

#include "sched/analyzers/builtins.h"
#include "sched/analyzers/dep_sets.h"

namespace tictac::sched::analyzers {

namespace {

constexpr size_t kSmallCandidates = 8;  // below this, test candidate bits one by one
constexpr size_t kMaxColumnBytes = size_t{256} << 20;

struct Key {
  int cls;      // 0: M < P (transfer shorter than the compute it unlocks)
  int64_t val;  // cls 0: M; cls 1: -P
  bool operator==(const Key&) const = default;
  bool operator<(const Key& o) const { return cls != o.cls ? cls < o.cls : val < o.val; }
};

class TacState {
 public:
  TacState(const DepSets& sets, std::vector<int64_t> m)
      : sets_(sets),
        m_(std::move(m)),
        p_(m_.size(), 0),
        out_(sets.numWords(), 0),
        cand_bits_(sets.numWords(), 0) {
    for (size_t r = 0; r < m_.size(); ++r) out_[r / 64] |= Word{1} << (r % 64);
    const auto& groups = sets.computeGroups();
    const size_t words = sets.numWords();
    if (groups.size() * words * sizeof(Word) <= kMaxColumnBytes) {
      columns_.resize(groups.size() * words);
      for (size_t k = 0; k < groups.size(); ++k)
        for (size_t w = 0; w < words; ++w)
          columns_[w * groups.size() + k] = sets.bits(groups[k])[w];
    }
    for (uint32_t k = 0; k < groups.size(); ++k) {
      const uint32_t id = groups[k];
      const auto& grp = sets.group(id);
      int64_t sum = 0;
      DepSets::forEach(sets.bits(id), nullptr, grp.first_word, sets.numWords(),
                       [&](uint32_t r) { sum += m_[r]; });
      active_.push_back({id, k, grp.size, sum});
      if (grp.size == 1) p_[lastOutstanding(id)] += grp.time_ns;
    }
  }

  // Picks the next recv (smallest key, then M+, then name) and removes it.
  uint32_t next(const std::vector<uint32_t>& rank) {
    cand_.clear();
    Key best{2, 0};
    DepSets::forEach(out_.data(), nullptr, 0, out_.size(), [&](uint32_t r) {
      Key k = m_[r] < p_[r] ? Key{0, m_[r]} : Key{1, -p_[r]};
      if (k < best) {
        best = k;
        cand_.clear();
      }
      if (k == best) cand_.push_back(r);
    });
    const uint32_t pick = cand_.size() == 1 ? cand_[0] : byMplusThenName(rank);
    remove(pick);
    return pick;
  }

 private:
  struct Live {
    uint32_t id;
    uint32_t column;  // position in computeGroups(), the index into columns_
    uint32_t count;   // |deps & O|
    int64_t sum;      // sum of M over deps & O
  };

  uint32_t lastOutstanding(uint32_t id) const {
    uint32_t last = 0;
    DepSets::forEach(sets_.bits(id), out_.data(), sets_.group(id).first_word, out_.size(),
                     [&](uint32_t r) { last = r; });
    return last;
  }

  bool meetsCandidates(const Live& l) const {
    if (cand_.size() <= kSmallCandidates) {
      for (uint32_t c : cand_)
        if (sets_.contains(l.id, c)) return true;
      return false;
    }
    const Word* b = sets_.bits(l.id);
    for (size_t w = sets_.group(l.id).first_word; w < out_.size(); ++w)
      if (b[w] & cand_bits_[w]) return true;
    return false;
  }

  uint32_t byMplusThenName(const std::vector<uint32_t>& rank) {
    const bool wide = cand_.size() > kSmallCandidates;
    if (wide)
      for (uint32_t c : cand_) cand_bits_[c / 64] |= Word{1} << (c % 64);
    // Pass 1: the smallest M+ of any candidate.
    int64_t best = std::numeric_limits<int64_t>::max();
    for (const Live& l : active_)
      if (l.count > 1 && l.sum < best && meetsCandidates(l)) best = l.sum;
    uint32_t pick = cand_[0];
    auto better = [&](uint32_t r) {
      if (rank[r] < rank[pick]) pick = r;
    };
    if (best == std::numeric_limits<int64_t>::max()) {
      for (uint32_t c : cand_) better(c);  // every candidate has M+ = infinity
    } else {
      // Pass 2: among candidates inside a group with that sum, the first name.
      pick = kNoRecv;
      for (const Live& l : active_) {
        if (l.count < 2 || l.sum != best) continue;
        auto visit = [&](uint32_t r) {
          if (pick == kNoRecv || rank[r] < rank[pick]) pick = r;
        };
        if (wide) {
          DepSets::forEach(sets_.bits(l.id), cand_bits_.data(), sets_.group(l.id).first_word,
                           out_.size(), visit);
        } else {
          for (uint32_t c : cand_)
            if (sets_.contains(l.id, c)) visit(c);
        }
      }
    }
    if (wide)
      for (uint32_t c : cand_) cand_bits_[c / 64] = 0;
    return pick;
  }

  // Updates the groups that contain r; drops emptied ones, keeping the rest in
  // creation order (in chains that is ascending sum, which lets pass 1 of
  // byMplusThenName skip almost every group).
  void remove(uint32_t r) {
    out_[r / 64] &= ~(Word{1} << (r % 64));
    const size_t n = sets_.computeGroups().size();
    const Word* column = columns_.empty() ? nullptr : &columns_[(r / 64) * n];
    size_t kept = 0;
    for (size_t i = 0; i < active_.size(); ++i) {
      Live l = active_[i];
      if (column ? (column[l.column] >> (r % 64)) & 1u : sets_.contains(l.id, r)) {
        if (--l.count == 0) continue;
        l.sum -= m_[r];
        if (l.count == 1) p_[lastOutstanding(l.id)] += sets_.group(l.id).time_ns;
      }
      active_[kept++] = l;
    }
    active_.resize(kept);
  }

  const DepSets& sets_;
  std::vector<int64_t> m_;
  std::vector<int64_t> p_;
  std::vector<Word> out_;        // O as a bitset over recv ids
  std::vector<Word> cand_bits_;  // the tied candidates, when many
  std::vector<uint32_t> cand_;
  std::vector<Live> active_;  // compute groups with count > 0
  // The same sets word-major (word w of every group side by side), so that
  // remove() streams through memory instead of touching one line per group;
  // left empty (slower path) beyond kMaxColumnBytes.
  std::vector<Word> columns_;
};

class Tac final : public Analyzer {
 public:
  std::string name() const override { return "tac"; }

  Schedule analyze(const Graph& g, const AnalyzerOptions& o) const override {
    const LiveDag d = buildLiveDag(g);
    std::vector<int64_t> m = transferNs(g, d, o);
    const DepSets sets(g, d, /*with_times=*/true);
    TacState state(sets, std::move(m));
    std::vector<Priority> prio(d.recvs.size());
    for (Priority k = 0; k < d.recvs.size(); ++k) prio[state.next(d.name_rank)] = k;
    return makeSchedule(g, d, name(), prio);
  }
};

}  // namespace

std::unique_ptr<Analyzer> makeTac() {
  return std::make_unique<Tac>();
}

}  // namespace tictac::sched::analyzers
