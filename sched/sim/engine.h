// sched/sim/engine.h: the discrete-event engine behind simulate().
//
// One Engine simulates one call of simulate() on the calling thread. Events
// (chunk finished, compute op finished) sit in a binary heap ordered by (time,
// sequence number). After all events of one instant are handled, the links
// are arbitrated (greedy: of the (PS, worker) pairs with a queued transfer and
// both links free, the one whose head transfer has the smallest key starts,
// until none is left) and then every worker whose state changed picks its next
// compute op. Arbitration keeps, per PS, an indexed heap of the pairs whose
// worker-side link is free, so one decision costs O(N + log W), not O(W).
// setup.cc builds the static tables once per run, engine.cc holds the event
// loop and the compute side, links.cc the transfer side.
#pragma once

#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "sched/sim/indexed_heap.h"
#include "tictac/sched/sim.h"

namespace tictac::sched::simdetail {

class Engine {
 public:
  Engine(const Graph& g, const OrderSource* order, const PriorityVector* fixed, const SimOptions& o,
         SimResult& out);
  // Runs every iteration and fills out's samples, counters, shard and trace.
  void run();
  // Work units spent on link arbitration during run(): heap sift steps,
  // candidate pops and pairs visited when a worker's link is taken or freed.
  // A test bound, not a result: O((N + log W) x chunks).
  uint64_t arbitrationWork() const { return arb_work_; }

 private:
  enum EvKind : uint32_t { kChunkDone, kFwdDone, kBwdDone };
  enum Phase : uint8_t { kWaiting, kFwd, kBwd, kDone };
  struct Event {
    double t;
    uint64_t seq;
    EvKind kind;
    uint32_t a, b;
  };
  struct EventLater {
    bool operator()(const Event& x, const Event& y) const {
      return x.t != y.t ? x.t > y.t : x.seq > y.seq;
    }
  };
  struct Xfer {
    uint32_t slot, w, ps, iter;
    bool grad, started;
    uint64_t left, key1;  // key: (iter, key1, w)
    uint64_t chunk = 0;   // bytes of the chunk in flight
    double chunk_start = 0;
  };
  struct Worker {
    Phase phase = kWaiting;
    bool busy = false, in_busy = false, out_busy = false, dirty = false;
    uint32_t iter = 0, fwd_left = 0, bwd_pos = 0;
    std::vector<uint32_t> pending, arrived;
    std::vector<OpIndex> ready;  // min-heap of op indices
    std::vector<uint32_t> rank[2];
    uint32_t rank_iter[2] = {UINT32_MAX, UINT32_MAX};
  };
  struct Server {
    bool out_busy = false, in_busy = false;
  };
  // One arbitration domain: params (PS out -> worker in) or gradients (worker
  // out -> PS in). Pair p = ps * W + w. Invariant between events: ready[j]
  // holds exactly the pairs (j, w) with a non-empty queue whose worker-side
  // link is free, ordered by their queue head; a PS that may have become
  // startable (freed link or a new entry) is listed in dirty_ps.
  struct Direction {
    std::vector<std::vector<uint32_t>> queue;  // per pair: heap of xfer ids
    std::vector<IndexedHeap> ready;            // per PS
    std::vector<uint32_t> pos;                 // per pair: index in ready[ps]
    std::vector<uint32_t> dirty_ps;
    std::vector<uint8_t> ps_dirty;
  };

  void buildStatic();
  void shardParams();
  const std::vector<uint32_t>& rankFor(uint32_t w, uint32_t k);
  void computeRank(const PriorityVector& pv, std::vector<uint32_t>& rank) const;
  bool xferLess(uint32_t a, uint32_t b) const;
  void enqueue(bool grad, uint32_t slot, uint32_t w, uint32_t k);
  void dispatch(bool grad);
  bool workerLinkFree(bool grad, uint32_t w) const;
  bool psLinkFree(bool grad, uint32_t j) const;
  void markPs(Direction& d, uint32_t j);
  void fixReady(Direction& d, size_t pair);       // (re)insert pair into ready[its PS]
  void takeWorkerLink(Direction& d, uint32_t w);  // drops w's pairs from every ready heap
  void startChunk(uint32_t id);
  void setLinksBusy(const Xfer& x, bool busy);  // both links x's chunks use
  void onChunkDone(uint32_t id);
  void onParamArrived(const Xfer& x);
  void onGradPushed(const Xfer& x);
  void startForward(uint32_t w, uint32_t k);
  void finishForward(uint32_t w);
  void finishBackward(uint32_t w);
  void maybeEndIteration(uint32_t w, uint32_t k);
  void dispatchCompute();
  void markDirty(uint32_t w);
  void push(double t, EvKind kind, uint32_t a, uint32_t b);
  void loop();
  void span(const std::string& name, uint32_t w, uint8_t lane, double start, double dur,
            uint32_t iter, uint64_t bytes);

  const Graph& g_;
  const OrderSource* order_;
  const PriorityVector* fixed_;
  const SimOptions& o_;
  SimResult& out_;
  uint32_t W_, N_, R_;
  bool training_;

  // Static graph data.
  std::vector<OpIndex> recvs_;               // slot -> op
  std::vector<uint32_t> slot_of_;            // op -> slot (UINT32_MAX if compute)
  std::vector<uint32_t> name_rank_;          // slot -> rank of its name
  std::vector<uint32_t> cons_start_, cons_;  // consumers (CSR, duplicates kept)
  std::vector<double> fwd_time_;             // per op (compute, scaled)
  std::vector<OpIndex> bwd_seq_;
  std::vector<uint32_t> grads_start_, grads_;  // per backward position + 1 (CSR); 0 = at start
  std::vector<uint32_t> shard_;                // slot -> PS
  std::vector<uint32_t> fixed_rank_;
  uint32_t n_compute_ = 0;

  // Dynamic state.
  double now_ = 0, base_ = 0;
  uint64_t seq_ = 0, grad_seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, EventLater> events_;
  std::vector<Xfer> xfers_;
  std::vector<uint32_t> free_xfers_;
  std::vector<Worker> workers_;
  std::vector<Server> servers_;
  Direction dir_[2];  // 0 params, 1 gradients
  std::vector<uint32_t> dirty_workers_;
  std::vector<uint32_t> grad_count_;                 // slot -> gradients summed this round
  std::vector<uint32_t> push_left_;                  // (w, k) -> gradient pushes outstanding
  std::vector<uint8_t> bwd_done_;                    // (w, k)
  std::vector<double> end_;                          // (w, k) -> iteration end
  std::vector<std::pair<uint32_t, uint32_t>> cand_;  // dispatch scratch: (head xfer, PS)
  uint64_t arb_work_ = 0;
};

}  // namespace tictac::sched::simdetail
