// TIC: timing-independent priorities from the DAG structure alone.
//
// Every recv takes 1 unit to transfer and every compute op 0, and M+ is
// computed once with every recv outstanding:
//   M+(r) = min |deps(c)| over compute ops c with |deps(c)| > 1 and r in deps(c)
// (infinity when there is none). Recvs are grouped by ascending M+; every recv
// of a group gets the number of recvs with a strictly smaller M+ (so the
// numbers run 0, 0, 2, 3, 3, 5, ...), and the M+ = infinity group comes last.
#include <algorithm>
#include <limits>
#include <numeric>

#include "sched/analyzers/builtins.h"
#include "sched/analyzers/dep_sets.h"

namespace tictac::sched::analyzers {

namespace {

class Tic final : public Analyzer {
 public:
  std::string name() const override { return "tic"; }

  Schedule analyze(const Graph& g, const AnalyzerOptions&) const override {
    const LiveDag d = buildLiveDag(g);
    const DepSets sets(g, d, /*with_times=*/false);
    constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max();
    std::vector<uint32_t> mplus(d.recvs.size(), kInf);
    for (uint32_t id : sets.computeGroups()) {
      const auto& grp = sets.group(id);
      if (grp.size < 2) continue;
      DepSets::forEach(sets.bits(id), nullptr, grp.first_word, sets.numWords(),
                       [&](uint32_t r) { mplus[r] = std::min(mplus[r], grp.size); });
    }
    // Sorting by M+ alone is enough: the priority of r is the count of recvs
    // with a strictly smaller M+, i.e. the position of its group's first member.
    std::vector<uint32_t> by_mplus(d.recvs.size());
    std::iota(by_mplus.begin(), by_mplus.end(), 0u);
    std::sort(by_mplus.begin(), by_mplus.end(),
              [&](uint32_t a, uint32_t b) { return mplus[a] < mplus[b]; });
    std::vector<Priority> prio(d.recvs.size());
    for (size_t k = 0; k < by_mplus.size(); ++k) {
      const uint32_t r = by_mplus[k];
      prio[r] = (k > 0 && mplus[by_mplus[k - 1]] == mplus[r]) ? prio[by_mplus[k - 1]]
                                                              : static_cast<Priority>(k);
    }
    return makeSchedule(g, d, name(), prio);
  }
};

}  // namespace

std::unique_ptr<Analyzer> makeTic() {
  return std::make_unique<Tic>();
}

}  // namespace tictac::sched::analyzers
