// sched/sim/engine.cc: the event loop and the compute side of the engine
// (setup.cc builds the static tables, links.cc has the transfer side).
#include "sched/sim/engine.h"

#include <algorithm>
#include <functional>

namespace tictac::sched::simdetail {

void Engine::push(double t, EvKind kind, uint32_t a, uint32_t b) {
  events_.push(Event{t, seq_++, kind, a, b});
}

void Engine::markDirty(uint32_t w) {
  if (!workers_[w].dirty) {
    workers_[w].dirty = true;
    dirty_workers_.push_back(w);
  }
}

void Engine::span(const std::string& name, uint32_t w, uint8_t lane, double start, double dur,
                  uint32_t iter, uint64_t bytes) {
  if (!o_.record_trace) return;
  out_.trace.push_back(TraceSpan{name, w, lane, base_ + start, dur, iter, bytes});
}

void Engine::startForward(uint32_t w, uint32_t k) {
  Worker& wk = workers_[w];
  wk.phase = kFwd;
  wk.iter = k;
  wk.ready.clear();
  wk.fwd_left = n_compute_;
  for (uint32_t s = 0; s < R_; ++s) wk.fwd_left += wk.arrived[s] <= k ? 1 : 0;
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const Op& op = g_.ops[i];
    if (op.kind != OpKind::kCompute) continue;
    uint32_t p = 0;
    for (OpIndex in : op.inputs) {
      p += (slot_of_[in] == UINT32_MAX || wk.arrived[slot_of_[in]] <= k) ? 1 : 0;
    }
    wk.pending[i] = p;
    if (p == 0) wk.ready.push_back(static_cast<OpIndex>(i));
  }
  std::make_heap(wk.ready.begin(), wk.ready.end(), std::greater<>());
  markDirty(w);
  if (wk.fwd_left == 0) finishForward(w);
}

void Engine::finishForward(uint32_t w) {
  Worker& wk = workers_[w];
  if (!training_) {
    wk.phase = kDone;
    end_[size_t{w} * o_.runs + wk.iter] = now_;
    return;
  }
  wk.phase = kBwd;
  wk.bwd_pos = 0;
  for (uint32_t i = grads_start_[0]; i < grads_start_[1]; ++i) enqueue(true, grads_[i], w, wk.iter);
  markDirty(w);
  if (bwd_seq_.empty()) finishBackward(w);
}

void Engine::finishBackward(uint32_t w) {
  Worker& wk = workers_[w];
  const uint32_t k = wk.iter;
  bwd_done_[size_t{w} * o_.runs + k] = 1;
  maybeEndIteration(w, k);
  if (k + 1 < o_.runs) {
    startForward(w, k + 1);
  } else {
    wk.phase = kDone;
  }
}

void Engine::maybeEndIteration(uint32_t w, uint32_t k) {
  const size_t i = size_t{w} * o_.runs + k;
  if (bwd_done_[i] && push_left_[i] == 0) end_[i] = now_;
}

void Engine::dispatchCompute() {
  for (uint32_t w : dirty_workers_) {
    Worker& wk = workers_[w];
    wk.dirty = false;
    if (wk.busy) continue;
    if (wk.phase == kFwd && !wk.ready.empty()) {
      std::pop_heap(wk.ready.begin(), wk.ready.end(), std::greater<>());
      OpIndex op = wk.ready.back();
      wk.ready.pop_back();
      wk.busy = true;
      push(now_ + fwd_time_[op], kFwdDone, w, op);
    } else if (wk.phase == kBwd && wk.bwd_pos < bwd_seq_.size()) {
      wk.busy = true;
      push(now_ + fwd_time_[bwd_seq_[wk.bwd_pos]] * o_.bwd_factor, kBwdDone, w, wk.bwd_pos);
    }
  }
  dirty_workers_.clear();
}

void Engine::loop() {
  for (;;) {
    while (!events_.empty() && events_.top().t == now_) {
      Event e = events_.top();
      events_.pop();
      ++out_.events;
      Worker* wk = e.kind == kChunkDone ? nullptr : &workers_[e.a];
      if (e.kind == kChunkDone) {
        onChunkDone(e.a);
      } else if (e.kind == kFwdDone) {
        double d = fwd_time_[e.b];
        span(g_.ops[e.b].name, e.a, 1, now_ - d, d, wk->iter, 0);
        wk->busy = false;
        markDirty(e.a);
        for (uint32_t k = cons_start_[e.b]; k < cons_start_[e.b + 1]; ++k) {
          if (--wk->pending[cons_[k]] == 0) {
            wk->ready.push_back(cons_[k]);
            std::push_heap(wk->ready.begin(), wk->ready.end(), std::greater<>());
          }
        }
        if (--wk->fwd_left == 0) finishForward(e.a);
      } else {
        OpIndex op = bwd_seq_[e.b];
        double d = fwd_time_[op] * o_.bwd_factor;
        span(g_.ops[op].name + " (bwd)", e.a, 1, now_ - d, d, wk->iter, 0);
        wk->busy = false;
        markDirty(e.a);
        for (uint32_t i = grads_start_[e.b + 1]; i < grads_start_[e.b + 2]; ++i) {
          enqueue(true, grads_[i], e.a, wk->iter);
        }
        if (++wk->bwd_pos == bwd_seq_.size()) finishBackward(e.a);
      }
    }
    dispatch(false);
    dispatch(true);
    if (!events_.empty() && events_.top().t == now_) continue;
    dispatchCompute();
    if (events_.empty()) break;
    now_ = events_.top().t;
  }
}

void Engine::run() {
  validateSimOptions(o_);
  validateSimTimes(g_, o_);
  if (uint64_t{W_} * g_.ops.size() > 50000000) {
    throw InputError("simulator: workers x ops must be <= 50000000 (per-worker state)");
  }
  buildStatic();
  shardParams();
  if (fixed_ != nullptr) computeRank(*fixed_, fixed_rank_);
  workers_.resize(W_);
  for (Worker& wk : workers_) {
    wk.pending.assign(g_.ops.size(), 0);
    wk.arrived.assign(R_, 0);
  }
  servers_.assign(N_, Server{});
  dir_[0].queue.assign(size_t{N_} * W_, {});
  dir_[1].queue.assign(size_t{N_} * W_, {});
  for (Direction& d : dir_) {
    d.ready.assign(N_, IndexedHeap{});
    d.pos.assign(size_t{N_} * W_, IndexedHeap::kAbsent);
    d.ps_dirty.assign(N_, 0);
  }
  grad_count_.assign(R_, 0);
  const size_t cells = size_t{W_} * o_.runs;
  push_left_.assign(cells, R_);
  bwd_done_.assign(cells, 0);
  end_.assign(cells, 0.0);

  const uint32_t rounds = training_ ? 1 : o_.runs;
  for (uint32_t k = 0; k < rounds; ++k) {
    now_ = 0;
    for (uint32_t w = 0; w < W_; ++w) {
      std::fill(workers_[w].arrived.begin(), workers_[w].arrived.end(), k);
      for (uint32_t s = 0; s < R_; ++s) enqueue(false, s, w, k);
    }
    for (uint32_t w = 0; w < W_; ++w) startForward(w, k);
    loop();
    if (!training_) {
      double e = 0;
      for (uint32_t w = 0; w < W_; ++w) e = std::max(e, end_[size_t{w} * o_.runs + k]);
      base_ += e;
    }
  }

  double prev = 0;
  for (uint32_t k = 0; k < o_.runs; ++k) {
    double lo = end_[k], hi = end_[k];
    for (uint32_t w = 1; w < W_; ++w) {
      lo = std::min(lo, end_[size_t{w} * o_.runs + k]);
      hi = std::max(hi, end_[size_t{w} * o_.runs + k]);
    }
    out_.iteration_samples.push_back(hi - (training_ ? prev : 0.0));
    out_.straggler_samples.push_back(hi - lo);
    prev = hi;
  }
}

}  // namespace tictac::sched::simdetail
