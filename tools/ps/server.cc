// tools/ps/server.cc: the parameter-server role.
//
// Inference: every iteration waits for READY(k) from all workers (a barrier, so
// every worker's iteration starts together, as in tictac-sim) and then queues
// all its parameters to every worker at once (one sendBatch() a worker); the
// transport's per-priority queues put them on the wire in the order. Training:
// iteration 0 starts the same way; after that, parameter p of iteration k+1 is
// queued to every worker as soon as all W gradients of p of iteration k are in
// and their sum checks out (no global barrier). Priorities: the static orders
// go through the bridge's ScheduleHintProvider (sends without a priority);
// random gives an explicit priority per worker and iteration.
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>

#include "nlohmann/json.hpp"
#include "tictac/schedule_hints.h"
#include "tools/ps/roles.h"

namespace tictac::ps {

using namespace tictac::transport;
using sched::OpIndex;

namespace {
bool waitAll(std::vector<OpHandle>& ops, std::string& err) {
  for (auto& op : ops) {
    Status s = op->wait(std::chrono::seconds(120));
    if (!s.isOk() && err.empty()) err = s.toString();
  }
  ops.clear();
  return err.empty();
}
}  // namespace

int runServer(const Job& job, uint32_t rank) {
  const Config& c = job.config();
  const auto& g = job.graph();
  // Declared before the context: its destructor may still run completions
  // (kCanceled) that touch these.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<OpIndex, uint32_t>> ready;
  std::string cb_err;  // written by completions, under mu
  std::vector<uint32_t> count(g.ops.size(), 0);
  std::vector<std::vector<uint8_t>> pbuf[2];
  std::vector<std::vector<std::vector<uint8_t>>> gbuf;
  std::vector<uint32_t> dummy(c.workers);
  ContextOptions co = contextOptions(c);
  if (!job.randomOrder()) {
    // The bridge: the analyzer's schedule becomes the context's hints.
    co.hints = std::make_shared<ScheduleHintProvider>([&] {
      sched::Schedule s;
      s.algo = c.order;
      auto pv = job.order(0, 0);
      for (OpIndex r : job.recvs()) s.entries.push_back({g.ops[r].name, r, pv[r]});
      return s;
    }());
  }
  auto ctx = Context::create(co);
  if (!ctx.isOk()) {
    std::cerr << "tictac-ps ps" << rank << ": " << ctx.status().toString() << "\n";
    return 1;
  }
  auto listener = ctx.value()->listen(static_cast<uint16_t>(c.port + rank));
  if (!listener.isOk()) {
    std::cerr << "tictac-ps ps" << rank << ": " << listener.status().toString() << "\n";
    return 1;
  }
  // Accept every worker's bootstrap link first, then read the hellos: a slow
  // hello from one worker must not hold the others' handshakes in the backlog
  // past their connect deadline.
  std::vector<std::shared_ptr<Channel>> accepted, ch(c.workers);
  std::vector<uint32_t> who(c.workers, 0);
  std::vector<OpHandle> hellos;
  for (uint32_t i = 0; i < c.workers; ++i) {
    auto a = listener.value()->accept(std::chrono::seconds(60));
    if (!a.isOk()) {
      std::cerr << "tictac-ps ps" << rank << ": accept: " << a.status().toString() << "\n";
      return 1;
    }
    auto e = a.value()->expect(TensorKey{kCtrlHello, 0, ""}, &who[i], sizeof who[i]);
    if (!e.isOk()) {
      std::cerr << "tictac-ps ps" << rank << ": " << e.status().toString() << "\n";
      return 1;
    }
    accepted.push_back(a.value());
    hellos.push_back(e.value());
  }
  for (uint32_t i = 0; i < c.workers; ++i) {
    Status hs = hellos[i]->wait(std::chrono::seconds(30));
    if (!hs.isOk() || who[i] >= c.workers || ch[who[i]]) {
      std::cerr << "tictac-ps ps" << rank << ": bad hello from " << accepted[i]->peerName() << ": "
                << (hs.isOk() ? "rank " + std::to_string(who[i]) + " out of range or taken"
                              : hs.toString())
                << "\n";
      return 1;
    }
    ch[who[i]] = accepted[i];
  }
  std::vector<OpIndex> mine;
  for (OpIndex r : job.recvs())
    if (job.shardOf(r) == rank) mine.push_back(r);
  // Parameter buffers by iteration parity; gradient buffers per worker.
  for (auto& b : pbuf) b.resize(g.ops.size());
  gbuf.assign(c.workers, std::vector<std::vector<uint8_t>>(g.ops.size()));
  for (OpIndex r : mine) {
    for (auto& b : pbuf) b[r].resize(g.ops[r].bytes);
    if (c.training())
      for (auto& w : gbuf) w[r].resize(g.ops[r].bytes);
  }
  std::vector<std::vector<OpHandle>> sent(g.ops.size());  // per param, last iteration's sends
  std::string err;
  // Parameter r of iteration k as a send (explicit priority from pv, if any).
  auto paramItem = [&](OpIndex r, uint32_t k, const sched::PriorityVector* pv) {
    std::optional<Priority> prio;
    if (pv) prio = (*pv)[r];
    auto& b = pbuf[k % 2][r];
    return SendItem{TensorKey{r, k, g.ops[r].name}, b.data(), b.size(), prio, {}};
  };
  auto sendParam = [&](OpIndex r, uint32_t k, uint32_t w, const sched::PriorityVector* pv) {
    SendItem it = paramItem(r, k, pv);
    auto s = ch[w]->send(it.tensor, it.buf, it.len, it.priority);
    if (!s.isOk()) {
      if (err.empty()) err = s.status().toString();
      return;
    }
    sent[r].push_back(s.value());
  };
  // One batch a worker: the scheduler orders that worker's iteration, however
  // late this thread posts its last tensor (a loop of send() may let the
  // progress thread start the first ones before the more urgent are queued).
  auto sendAll = [&](uint32_t k) {
    for (uint32_t w = 0; w < c.workers && err.empty(); ++w) {
      sched::PriorityVector pv;
      if (job.randomOrder()) pv = job.order(w, k);
      std::vector<SendItem> items;
      for (OpIndex r : mine) items.push_back(paramItem(r, k, job.randomOrder() ? &pv : nullptr));
      auto s = ch[w]->sendBatch(std::move(items));
      if (!s.isOk()) {
        err = s.status().toString();
        return;
      }
      for (size_t i = 0; i < mine.size(); ++i) sent[mine[i]].push_back(s.value()[i]);
    }
  };
  auto barrier = [&](uint32_t k) {
    std::vector<OpHandle> rops;
    for (uint32_t w = 0; w < c.workers; ++w) {
      auto e = ch[w]->expect(TensorKey{kCtrlReady, k, ""}, &dummy[w], sizeof(uint32_t));
      if (!e.isOk()) {
        err = e.status().toString();
        return false;
      }
      rops.push_back(e.value());
    }
    return waitAll(rops, err);
  };
  uint64_t grads_ok = 0, grads_bad = 0;
  for (OpIndex r : mine) fillParam(pbuf[0][r].data(), pbuf[0][r].size(), r, 0);
  if (!c.training()) {
    for (uint32_t k = 0; k < c.iterations && err.empty(); ++k) {
      if (k > 0) {
        for (OpIndex r : mine) {
          waitAll(sent[r], err);
          fillParam(pbuf[k % 2][r].data(), pbuf[k % 2][r].size(), r, k);
        }
      }
      if (barrier(k)) sendAll(k);
    }
  } else {
    // Gradient completions (progress thread) queue (param, iteration) when
    // all W are in; this thread sums, refills and sends.
    auto postGrads = [&](OpIndex r, uint32_t k) {
      for (uint32_t w = 0; w < c.workers; ++w) {
        auto e = ch[w]->expect(TensorKey{kGradBit | r, k, ""}, gbuf[w][r].data(), gbuf[w][r].size(),
                               [&, r, k](const Status& s) {
                                 std::lock_guard<std::mutex> l(mu);
                                 if (!s.isOk()) {
                                   if (cb_err.empty()) cb_err = s.toString();
                                   cv.notify_all();
                                   return;
                                 }
                                 if (++count[r] == c.workers) {
                                   count[r] = 0;
                                   ready.emplace_back(r, k);
                                   cv.notify_all();
                                 }
                               });
        if (!e.isOk() && err.empty()) err = e.status().toString();
      }
    };
    for (OpIndex r : mine) postGrads(r, 0);
    if (barrier(0)) sendAll(0);
    size_t remaining = mine.size() * c.iterations;
    while (remaining > 0 && err.empty()) {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return !ready.empty() || !cb_err.empty(); });
      if (!cb_err.empty()) {
        err = cb_err;
        break;
      }
      auto [r, k] = ready.front();
      ready.pop_front();
      l.unlock();
      std::vector<const uint8_t*> bufs;
      for (auto& w : gbuf) bufs.push_back(w[r].data());
      (checkGradSum(bufs, g.ops[r].bytes, r, k) ? grads_ok : grads_bad)++;
      --remaining;
      if (k + 1 >= c.iterations) continue;
      postGrads(r, k + 1);
      std::string e2;
      waitAll(sent[r], e2);
      fillParam(pbuf[(k + 1) % 2][r].data(), g.ops[r].bytes, r, k + 1);
      for (uint32_t w = 0; w < c.workers; ++w) {
        sched::PriorityVector pv;
        if (job.randomOrder()) pv = job.order(w, k + 1);
        sendParam(r, k + 1, w, job.randomOrder() ? &pv : nullptr);
      }
    }
  }
  for (OpIndex r : mine) waitAll(sent[r], err);
  nlohmann::json out = {{"type", "ps"},         {"rank", rank},           {"params", mine.size()},
                        {"grads_ok", grads_ok}, {"grads_bad", grads_bad}, {"error", err}};
  std::cout << out.dump() << "\n" << std::flush;
  if (!err.empty()) std::cerr << "tictac-ps ps" << rank << ": " << err << "\n";
  return err.empty() && grads_bad == 0 ? 0 : 1;
}

}  // namespace tictac::ps
