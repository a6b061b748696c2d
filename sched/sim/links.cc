// sched/sim/links.cc: the transfer side of the engine: per-pair queues, link
// arbitration, chunks, and what happens when a parameter or gradient lands.
#include <algorithm>

#include "sched/sim/engine.h"

namespace tictac::sched::simdetail {

bool Engine::xferLess(uint32_t a, uint32_t b) const {
  const Xfer& x = xfers_[a];
  const Xfer& y = xfers_[b];
  if (x.iter != y.iter) return x.iter < y.iter;
  if (x.key1 != y.key1) return x.key1 < y.key1;
  if (x.w != y.w) return x.w < y.w;
  return a < b;
}

void Engine::enqueue(bool grad, uint32_t slot, uint32_t w, uint32_t k) {
  uint32_t id;
  if (free_xfers_.empty()) {
    id = static_cast<uint32_t>(xfers_.size());
    xfers_.emplace_back();
  } else {
    id = free_xfers_.back();
    free_xfers_.pop_back();
  }
  Xfer& x = xfers_[id];
  x.slot = slot;
  x.w = w;
  x.ps = shard_[slot];
  x.iter = k;
  x.grad = grad;
  x.started = false;
  x.left = g_.ops[recvs_[slot]].bytes;
  x.key1 = grad ? grad_seq_++ : rankFor(w, k)[slot];
  ++out_.transfers;

  Direction& d = dir_[grad ? 1 : 0];
  const size_t pair = size_t{x.ps} * W_ + w;
  auto& q = d.queue[pair];
  q.push_back(id);
  std::push_heap(q.begin(), q.end(), [this](uint32_t a, uint32_t b) { return xferLess(b, a); });
  if (workerLinkFree(grad, w)) {
    fixReady(d, pair);
    markPs(d, x.ps);
  }
}

bool Engine::workerLinkFree(bool grad, uint32_t w) const {
  return grad ? !workers_[w].out_busy : !workers_[w].in_busy;
}

bool Engine::psLinkFree(bool grad, uint32_t j) const {
  return grad ? !servers_[j].in_busy : !servers_[j].out_busy;
}

void Engine::markPs(Direction& d, uint32_t j) {
  if (!d.ps_dirty[j]) {
    d.ps_dirty[j] = 1;
    d.dirty_ps.push_back(j);
  }
}

void Engine::fixReady(Direction& d, size_t pair) {
  auto headLess = [&](uint32_t a, uint32_t b) {
    return xferLess(d.queue[a].front(), d.queue[b].front());
  };
  d.ready[pair / W_].fix(static_cast<uint32_t>(pair), d.pos, headLess, arb_work_);
}

void Engine::takeWorkerLink(Direction& d, uint32_t w) {
  auto headLess = [&](uint32_t a, uint32_t b) {
    return xferLess(d.queue[a].front(), d.queue[b].front());
  };
  for (uint32_t j = 0; j < N_; ++j) {
    ++arb_work_;
    d.ready[j].erase(static_cast<uint32_t>(size_t{j} * W_ + w), d.pos, headLess, arb_work_);
  }
}

// Greedy arbitration, smallest head key first among the pairs whose two links
// are free. Such a pair is the top of ready[j] for a free PS j; after a
// dispatch no free PS has a non-empty ready heap, so only PS marked since can
// hold one. Candidates are those PS keyed by their top's head; starting a
// transfer takes both links and drops the worker's pairs from every heap,
// which can only raise other tops, so a popped candidate whose top changed is
// pushed back with its new head (keys do not change during a dispatch). The
// result is the same as sorting all eligible pairs by head and starting each
// whose links are still free.
void Engine::dispatch(bool grad) {
  Direction& d = dir_[grad ? 1 : 0];
  if (d.dirty_ps.empty()) return;
  auto head = [&](uint32_t j) { return d.queue[d.ready[j].top()].front(); };
  auto later = [this](const std::pair<uint32_t, uint32_t>& a,
                      const std::pair<uint32_t, uint32_t>& b) {
    return xferLess(b.first, a.first);
  };
  cand_.clear();
  for (uint32_t j : d.dirty_ps) {
    d.ps_dirty[j] = 0;
    if (psLinkFree(grad, j) && !d.ready[j].empty()) cand_.emplace_back(head(j), j);
  }
  d.dirty_ps.clear();
  std::make_heap(cand_.begin(), cand_.end(), later);
  while (!cand_.empty()) {
    std::pop_heap(cand_.begin(), cand_.end(), later);
    const auto [x, j] = cand_.back();
    cand_.pop_back();
    ++arb_work_;
    if (!psLinkFree(grad, j) || d.ready[j].empty()) continue;
    if (head(j) != x) {
      cand_.emplace_back(head(j), j);
      std::push_heap(cand_.begin(), cand_.end(), later);
      continue;
    }
    const uint32_t pair = d.ready[j].top();
    takeWorkerLink(d, pair % W_);
    auto& q = d.queue[pair];
    std::pop_heap(q.begin(), q.end(), [this](uint32_t a, uint32_t b) { return xferLess(b, a); });
    q.pop_back();
    startChunk(x);
  }
}

void Engine::startChunk(uint32_t id) {
  Xfer& x = xfers_[id];
  const uint64_t c = o_.chunk_bytes > 0 ? std::min(o_.chunk_bytes, x.left) : x.left;
  double dur = static_cast<double>(c) * 8.0 / (o_.bandwidth_gbps * 1e3);
  if (!x.started) dur += o_.latency_us;
  x.started = true;
  x.left -= c;
  x.chunk = c;
  x.chunk_start = now_;
  ++out_.chunks;
  setLinksBusy(x, true);
  push(now_ + dur, kChunkDone, id, 0);
}

void Engine::setLinksBusy(const Xfer& x, bool busy) {
  if (x.grad) {  // worker out-link -> PS in-link
    workers_[x.w].out_busy = busy;
    servers_[x.ps].in_busy = busy;
  } else {  // PS out-link -> worker in-link
    servers_[x.ps].out_busy = busy;
    workers_[x.w].in_busy = busy;
  }
}

void Engine::onChunkDone(uint32_t id) {
  Xfer x = xfers_[id];
  const std::string& name = g_.ops[recvs_[x.slot]].name;
  span(x.grad ? name + " (grad)" : name, x.w, x.grad ? 2 : 0, x.chunk_start, now_ - x.chunk_start,
       x.iter, x.chunk);
  Direction& d = dir_[x.grad ? 1 : 0];
  // Free both links: the PS may start again, and every pair of the worker
  // with a queued transfer is ready again.
  setLinksBusy(x, false);
  markPs(d, x.ps);
  const size_t pair = size_t{x.ps} * W_ + x.w;
  if (x.left > 0) {
    auto& q = d.queue[pair];
    q.push_back(id);
    std::push_heap(q.begin(), q.end(), [this](uint32_t a, uint32_t b) { return xferLess(b, a); });
  }
  for (uint32_t j = 0; j < N_; ++j) {
    const size_t p = size_t{j} * W_ + x.w;
    ++arb_work_;
    if (d.queue[p].empty()) continue;
    fixReady(d, p);
    markPs(d, j);
  }
  if (x.left > 0) return;
  free_xfers_.push_back(id);
  if (x.grad) {
    onGradPushed(x);
  } else {
    onParamArrived(x);
  }
}

void Engine::onParamArrived(const Xfer& x) {
  Worker& wk = workers_[x.w];
  ++wk.arrived[x.slot];
  // Parameters of iteration k only arrive once the worker has finished the
  // forward of k-1, so it is either computing k or still in backward k-1.
  if (wk.phase != kFwd || wk.iter != x.iter) return;
  const OpIndex r = recvs_[x.slot];
  for (uint32_t k = cons_start_[r]; k < cons_start_[r + 1]; ++k) {
    if (--wk.pending[cons_[k]] == 0) {
      wk.ready.push_back(cons_[k]);
      std::push_heap(wk.ready.begin(), wk.ready.end(), std::greater<>());
    }
  }
  markDirty(x.w);
  if (--wk.fwd_left == 0) finishForward(x.w);
}

void Engine::onGradPushed(const Xfer& x) {
  const size_t cell = size_t{x.w} * o_.runs + x.iter;
  --push_left_[cell];
  maybeEndIteration(x.w, x.iter);
  if (++grad_count_[x.slot] < W_) return;
  grad_count_[x.slot] = 0;
  if (x.iter + 1 < o_.runs) {
    for (uint32_t w = 0; w < W_; ++w) enqueue(false, x.slot, w, x.iter + 1);
  }
}

}  // namespace tictac::sched::simdetail
