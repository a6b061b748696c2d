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
  if (!d.pair_dirty[pair]) {
    d.pair_dirty[pair] = 1;
    d.dirty_pairs.push_back(static_cast<uint32_t>(pair));
  }
}

// Greedy arbitration: every pair whose queue or links changed is a candidate;
// candidates whose two links are free start in order of their head's key.
// Starting a transfer only takes links, so other candidates' heads stay valid.
void Engine::dispatch(bool grad) {
  Direction& d = dir_[grad ? 1 : 0];
  if (d.dirty_pairs.empty()) return;
  auto freeLinks = [&](uint32_t pair) {
    const uint32_t j = pair / W_, w = pair % W_;
    return grad ? (!workers_[w].out_busy && !servers_[j].in_busy)
                : (!servers_[j].out_busy && !workers_[w].in_busy);
  };
  std::vector<uint32_t> cand;
  for (uint32_t pair : d.dirty_pairs) {
    d.pair_dirty[pair] = 0;
    if (!d.queue[pair].empty() && freeLinks(pair)) cand.push_back(pair);
  }
  d.dirty_pairs.clear();
  std::sort(cand.begin(), cand.end(), [&](uint32_t a, uint32_t b) {
    return xferLess(d.queue[a].front(), d.queue[b].front());
  });
  for (uint32_t pair : cand) {
    if (!freeLinks(pair)) continue;
    auto& q = d.queue[pair];
    std::pop_heap(q.begin(), q.end(), [this](uint32_t a, uint32_t b) { return xferLess(b, a); });
    uint32_t id = q.back();
    q.pop_back();
    startChunk(id);
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
  auto touch = [&](size_t pair) {
    if (!d.queue[pair].empty() && !d.pair_dirty[pair]) {
      d.pair_dirty[pair] = 1;
      d.dirty_pairs.push_back(static_cast<uint32_t>(pair));
    }
  };
  // Free both links; every pair using one of them may start now.
  setLinksBusy(x, false);
  for (uint32_t w = 0; w < W_; ++w) touch(size_t{x.ps} * W_ + w);
  for (uint32_t j = 0; j < N_; ++j) touch(size_t{j} * W_ + x.w);

  if (x.left > 0) {
    const size_t pair = size_t{x.ps} * W_ + x.w;
    auto& q = d.queue[pair];
    q.push_back(id);
    std::push_heap(q.begin(), q.end(), [this](uint32_t a, uint32_t b) { return xferLess(b, a); });
    touch(pair);
    return;
  }
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
