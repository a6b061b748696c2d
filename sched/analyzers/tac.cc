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
// recv, P. Removing r is one pass over the live groups, which tests r's bit in
// each (the sets are stored as columns, dep_sets.h ColumnSets, so that pass
// streams through memory at any size); a group whose count falls to 1 adds
// its time to the P of its last recv, kept as the xor of the outstanding ids
// (no row scan). M+ is never
// stored: it is evaluated only for the recvs that tie on the first key, by one
// pass over the groups with count > 1 that skips groups whose sum cannot win.
// Times are integer ns (dag.h), so incremental sums equal fresh ones exactly.
#include <algorithm>
#include <limits>

#include "sched/analyzers/builtins.h"
#include "sched/analyzers/dep_sets.h"

namespace tictac::sched::analyzers {

namespace {

constexpr size_t kSmallCandidates = 8;  // below this, test candidates one by one
constexpr size_t kMaxTacRecvs = 100000;

struct Key {
  int cls;      // 0: M < P (transfer shorter than the compute it unlocks)
  int64_t val;  // cls 0: M; cls 1: -P
  bool operator==(const Key&) const = default;
  bool operator<(const Key& o) const { return cls != o.cls ? cls < o.cls : val < o.val; }
};

class TacState {
 public:
  // Reads the sets once as rows, then takes them as columns (sets.bits() is
  // gone afterwards).
  TacState(DepSets& sets, std::vector<int64_t> m)
      : sets_(sets),
        m_(std::move(m)),
        p_(m_.size(), 0),
        out_(sets.numWords(), 0),
        cand_bits_(sets.numWords(), 0) {
    for (size_t r = 0; r < m_.size(); ++r) out_[r / 64] |= Word{1} << (r % 64);
    for (uint32_t id : sets.computeGroups()) {
      const auto& grp = sets.group(id);
      int64_t sum = 0;
      uint32_t xr = 0;
      DepSets::forEach(sets.bits(id), nullptr, grp.first_word, sets.numWords(), [&](uint32_t r) {
        sum += m_[r];
        xr ^= r;
      });
      active_.push_back({id, grp.size, xr, 0, sum, 0});
      if (grp.size == 1) p_[xr] += grp.time_ns;
    }
    cols_ = sets.takeColumns();
    for (Live& l : active_) {
      l.stride = static_cast<uint32_t>(cols_.stride(l.id));
      l.base = cols_.base(l.id);
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
    uint32_t count;   // |deps & O|
    uint32_t xr;      // xor of the ids in deps & O: the last one when count is 1
    uint32_t stride;  // cols_.stride(id), cols_.base(id): where its words lie
    int64_t sum;      // sum of M over deps & O
    size_t base;
  };

  // Calls f(w) for each word w of cand_words_ that group l can have bits in
  // (from its first non-zero word on), until f returns true; returns whether
  // one did.
  template <class F>
  bool anyCandidateWord(const Live& l, F&& f) const {
    const uint32_t first = sets_.group(l.id).first_word;
    auto it = std::lower_bound(cand_words_.begin(), cand_words_.end(), first);
    for (; it != cand_words_.end(); ++it)
      if (f(*it)) return true;
    return false;
  }

  bool meetsCandidates(const Live& l) const {
    if (cand_.size() <= kSmallCandidates) {
      for (uint32_t c : cand_)
        if (cols_.contains(l.id, c)) return true;
      return false;
    }
    return anyCandidateWord(l,
                            [&](uint32_t w) { return (cols_.word(l.id, w) & cand_bits_[w]) != 0; });
  }

  uint32_t byMplusThenName(const std::vector<uint32_t>& rank) {
    const bool wide = cand_.size() > kSmallCandidates;
    if (wide) {
      for (uint32_t c : cand_) {  // cand_ is ascending
        if (cand_bits_[c / 64] == 0) cand_words_.push_back(c / 64);
        cand_bits_[c / 64] |= Word{1} << (c % 64);
      }
    }
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
      auto visit = [&](uint32_t r) {
        if (pick == kNoRecv || rank[r] < rank[pick]) pick = r;
      };
      for (const Live& l : active_) {
        if (l.count < 2 || l.sum != best) continue;
        if (wide) {
          anyCandidateWord(l, [&](uint32_t w) {
            const Word x = cols_.word(l.id, w) & cand_bits_[w];
            DepSets::forEach(&x, nullptr, 0, 1, [&](uint32_t b) { visit(w * 64 + b); });
            return false;
          });
        } else {
          for (uint32_t c : cand_)
            if (cols_.contains(l.id, c)) visit(c);
        }
      }
    }
    for (uint32_t w : cand_words_) cand_bits_[w] = 0;
    cand_words_.clear();
    return pick;
  }

  // Updates the groups that contain r; drops emptied ones, keeping the rest in
  // creation order (in chains that is ascending sum, which lets pass 1 of
  // byMplusThenName skip almost every group). The column layout makes this
  // loop read consecutive words for consecutive groups.
  void remove(uint32_t r) {
    out_[r / 64] &= ~(Word{1} << (r % 64));
    const Word* data = cols_.data();
    const size_t w = r / 64;
    const Word bit = Word{1} << (r % 64);
    size_t kept = 0;
    for (size_t i = 0; i < active_.size(); ++i) {
      Live l = active_[i];
      if (data[l.base + w * l.stride] & bit) {
        if (--l.count == 0) continue;
        l.sum -= m_[r];
        l.xr ^= r;
        if (l.count == 1) p_[l.xr] += sets_.group(l.id).time_ns;
      }
      active_[kept++] = l;
    }
    active_.resize(kept);
  }

  const DepSets& sets_;
  ColumnSets cols_;
  std::vector<int64_t> m_;
  std::vector<int64_t> p_;
  std::vector<Word> out_;             // O as a bitset over recv ids
  std::vector<Word> cand_bits_;       // the tied candidates, when many (else all zero)
  std::vector<uint32_t> cand_words_;  // the non-zero words of cand_bits_, ascending
  std::vector<uint32_t> cand_;
  std::vector<Live> active_;  // compute groups with count > 0
};

class Tac final : public Analyzer {
 public:
  std::string name() const override { return "tac"; }

  Schedule analyze(const Graph& g, const AnalyzerOptions& o) const override {
    const LiveDag d = buildLiveDag(g);
    // Each pick scans the outstanding recvs: the time grows as their number
    // squared (100,000 recvs: ~23 s on the development machine; docs/sched.md).
    if (d.recvs.size() > kMaxTacRecvs) {
      throw InputError("tac: " + std::to_string(d.recvs.size()) + " recvs, more than " +
                       std::to_string(kMaxTacRecvs) +
                       " (its time grows as their number squared); use tic for such a graph");
    }
    std::vector<int64_t> m = transferNs(g, d, o);
    DepSets sets(g, d, /*with_times=*/true);
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
