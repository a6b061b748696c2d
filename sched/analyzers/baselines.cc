// Baselines `fifo` and `reverse`: what a framework does without scheduling.
//
// fifo: recvs in the order their first consumer appears in the ops list (the
// order an unscheduled framework issues them). Ties, i.e. several recvs first
// read by the same op, go by their position in that op's `inputs`. Only live
// consumers count (ops that no output depends on are ignored); a recv that no
// live op reads is itself an output and comes after all others, in `outputs`
// order. Priorities are 0..R-1, all distinct.
// reverse: the same list backwards (priority R-1-fifo).
#include "sched/analyzers/builtins.h"
#include "sched/analyzers/dag.h"

namespace tictac::sched::analyzers {

namespace {

std::vector<Priority> fifoOrder(const Graph& g, const LiveDag& d) {
  std::vector<Priority> prio(d.recvs.size(), kNoRecv);
  Priority next = 0;
  auto place = [&](OpIndex op) {
    const uint32_t r = d.recv_id[op];
    if (r != kNoRecv && prio[r] == kNoRecv) prio[r] = next++;
  };
  for (OpIndex i = 0; i < g.ops.size(); ++i) {
    if (!d.live[i]) continue;
    for (OpIndex in : g.ops[i].inputs) place(in);
  }
  for (OpIndex out : g.outputs) place(out);
  return prio;  // every live recv is read by a live op or is an output
}

class Fifo final : public Analyzer {
 public:
  explicit Fifo(bool reversed) : reversed_(reversed) {}
  std::string name() const override { return reversed_ ? "reverse" : "fifo"; }

  Schedule analyze(const Graph& g, const AnalyzerOptions&) const override {
    const LiveDag d = buildLiveDag(g);
    std::vector<Priority> prio = fifoOrder(g, d);
    if (reversed_) {
      const auto last = static_cast<Priority>(prio.size() - 1);
      for (auto& p : prio) p = last - p;
    }
    return makeSchedule(g, d, name(), prio);
  }

 private:
  bool reversed_;
};

}  // namespace

std::unique_ptr<Analyzer> makeFifo() {
  return std::make_unique<Fifo>(false);
}
std::unique_ptr<Analyzer> makeReverse() {
  return std::make_unique<Fifo>(true);
}

}  // namespace tictac::sched::analyzers
