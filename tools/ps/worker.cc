// tools/ps/worker.cc: the worker role.
//
// Per iteration: the expects of all parameters are posted (so data lands in
// place), READY(k) goes to every PS (inference, and iteration 0 of training),
// and this thread executes the graph: a compute op starts when its inputs are
// there (ready ops by list position, one at a time) and sleeps time_us x
// compute-scale. Parameters are verified in their completion (progress
// thread), which records the arrival time. Training then runs the backward
// pass as tictac-sim models it and pushes each gradient when the backward ops
// of all its consumers are done; the next iteration's expects are posted when
// the forward pass ends. Output: one JSON line per iteration (see docs/ps.md).
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "nlohmann/json.hpp"
#include "tools/ps/roles.h"

namespace tictac::ps {

using namespace tictac::transport;
using nlohmann::json;
using sched::OpIndex;

namespace {
void sleepFor(int64_t start_ns, double us) {
  int64_t end = start_ns + static_cast<int64_t>(us * 1000);
  while (true) {
    int64_t left = end - nowNs();
    if (left <= 0) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(left));
  }
}
}  // namespace

int runWorker(const Job& job, uint32_t rank) {
  const Config& c = job.config();
  const auto& g = job.graph();
  const size_t n = g.ops.size();
  // State touched by completions lives before the context (see server.cc).
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> arrived[2] = {std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0)};
  std::vector<OpIndex> arrival_order[2];
  uint64_t params_ok = 0, params_bad = 0;
  std::string cb_err;
  std::vector<std::vector<uint8_t>> pbuf[2] = {std::vector<std::vector<uint8_t>>(n),
                                               std::vector<std::vector<uint8_t>>(n)};
  std::vector<std::vector<uint8_t>> gbuf(n);
  std::vector<int64_t> push_end(n, 0);  // completion time of each gradient push
  for (OpIndex r : job.recvs()) {
    for (auto& b : pbuf) b[r].resize(g.ops[r].bytes);
    if (c.training()) gbuf[r].resize(g.ops[r].bytes);
  }
  uint32_t my_rank = rank;
  auto ctx = Context::create(contextOptions(c));
  if (!ctx.isOk()) {
    std::cerr << "tictac-ps w" << rank << ": " << ctx.status().toString() << "\n";
    return 1;
  }
  std::vector<std::shared_ptr<Channel>> ch;
  for (const auto& peer : c.peers) {
    std::string host;
    uint16_t port = 0;
    splitPeer(peer, host, port);
    auto r = ctx.value()->connect(host, port);
    if (!r.isOk()) {
      std::cerr << "tictac-ps w" << rank << ": connect " << peer << ": " << r.status().toString()
                << "\n";
      return 1;
    }
    auto h = r.value()->send(TensorKey{kCtrlHello, 0, ""}, &my_rank, sizeof my_rank, 0);
    Status hs = h.isOk() ? h.value()->wait(std::chrono::seconds(30)) : h.status();
    if (!hs.isOk()) {
      std::cerr << "tictac-ps w" << rank << ": hello to " << peer << " failed: " << hs.toString()
                << "\n";
      return 1;
    }
    ch.push_back(r.value());
  }
  auto postExpects = [&](uint32_t k) {
    const int par = k % 2;
    {
      std::lock_guard<std::mutex> l(mu);
      std::fill(arrived[par].begin(), arrived[par].end(), 0);
      arrival_order[par].clear();
    }
    for (OpIndex r : job.recvs()) {
      auto& b = pbuf[par][r];
      auto e = ch[job.shardOf(r)]->expect(
          TensorKey{r, k, ""}, b.data(), b.size(), [&, r, k, par](const Status& s) {
            bool ok = s.isOk() && checkParam(pbuf[par][r].data(), pbuf[par][r].size(), r, k);
            std::lock_guard<std::mutex> l(mu);
            if (!s.isOk() && cb_err.empty()) cb_err = s.toString();
            (ok ? params_ok : params_bad)++;
            arrived[par][r] = nowNs();
            arrival_order[par].push_back(r);
            cv.notify_all();
          });
      if (!e.isOk()) return e.status().toString();
    }
    return std::string();
  };
  // Static structure: topological order, consumers per recv (backward).
  const auto topo = g.topoOrder();
  std::vector<uint32_t> consumers(n, 0);
  for (OpIndex i = 0; i < n; ++i)
    for (OpIndex in : g.ops[i].inputs)
      if (g.isRecv(in)) consumers[in]++;
  std::string err;
  int64_t prev_end = 0;
  for (uint32_t k = 0; k < c.iterations && err.empty(); ++k) {
    const int par = k % 2;
    json rec = {{"type", "iter"}, {"worker", rank}, {"iteration", k}};
    json spans = json::array();
    const bool tracing = k == c.trace_iteration;
    if (!c.training() || k == 0) {
      err = postExpects(k);
      if (!err.empty()) break;
    }
    int64_t start = nowNs();
    if (!c.training() || k == 0) {
      for (auto& chan : ch) {
        auto s = chan->send(TensorKey{kCtrlReady, k, ""}, &my_rank, sizeof my_rank, 0);
        if (!s.isOk()) {
          err = s.status().toString();
          break;
        }
      }
    } else {
      start = prev_end;
    }
    rec["start_ns"] = start;
    // Forward: run the ready compute op listed first, one at a time.
    std::vector<int64_t> done(n, 0);
    int64_t first_compute = 0;
    size_t left = 0;
    for (OpIndex i = 0; i < n; ++i) left += !g.isRecv(i);
    while (left > 0 && err.empty()) {
      OpIndex pick = n;
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait_for(l, std::chrono::seconds(120), [&] {
          if (!cb_err.empty()) return true;
          for (OpIndex i = 0; i < n && pick == n; ++i) {
            if (g.isRecv(i) || done[i]) continue;
            bool ready = true;
            for (OpIndex in : g.ops[i].inputs)
              ready = ready && (g.isRecv(in) ? arrived[par][in] != 0 : done[in] != 0);
            if (ready) pick = i;
          }
          return pick != n;
        });
        if (!cb_err.empty()) {
          err = cb_err;
          break;
        }
      }
      if (pick == n) {
        err = "timed out waiting for parameters";
        break;
      }
      int64_t t0 = nowNs();
      double us = g.ops[pick].time_us * c.compute_scale;
      if (us > 0 && first_compute == 0) first_compute = t0;
      sleepFor(t0, us);
      done[pick] = nowNs();
      --left;
      if (tracing)
        spans.push_back(
            {{"lane", 1}, {"name", g.ops[pick].name}, {"start_ns", t0}, {"end_ns", done[pick]}});
    }
    int64_t fwd_end = nowNs();
    std::vector<OpHandle> pushes;
    if (c.training() && err.empty()) {
      if (k + 1 < c.iterations) err = postExpects(k + 1);
      std::vector<uint32_t> pending = consumers;
      for (auto it = topo.rbegin(); it != topo.rend() && err.empty(); ++it) {
        OpIndex op = *it;
        if (g.isRecv(op)) continue;
        int64_t t0 = nowNs();
        std::vector<OpIndex> ready;
        for (OpIndex in : g.ops[op].inputs)
          if (g.isRecv(in) && --pending[in] == 0) ready.push_back(in);
        for (OpIndex r : ready)
          fillGrad(gbuf[r].data(), gbuf[r].size(), r, k, rank);  // inside the op's time
        sleepFor(t0, g.ops[op].time_us * c.compute_scale * c.bwd_factor);
        if (tracing)
          spans.push_back({{"lane", 1},
                           {"name", g.ops[op].name + " (bwd)"},
                           {"start_ns", t0},
                           {"end_ns", nowNs()}});
        for (OpIndex r : ready) {
          auto s = ch[job.shardOf(r)]->send(TensorKey{kGradBit | r, k, ""}, gbuf[r].data(),
                                            gbuf[r].size(), std::nullopt, [&, r](const Status&) {
                                              std::lock_guard<std::mutex> l(mu);
                                              push_end[r] = nowNs();
                                            });
          if (!s.isOk()) {
            err = s.status().toString();
            break;
          }
          pushes.push_back(s.value());
          if (tracing)
            spans.push_back(
                {{"lane", 2}, {"name", g.ops[r].name}, {"start_ns", nowNs()}, {"op", r}});
        }
      }
    }
    for (auto& p : pushes) {
      Status s = p->wait(std::chrono::seconds(120));
      if (!s.isOk() && err.empty()) err = s.toString();
    }
    int64_t end = nowNs();
    prev_end = end;
    std::lock_guard<std::mutex> l(mu);
    int64_t last_param = 0;
    json order = json::array();
    for (auto& sp : spans)
      if (sp["lane"] == 2) sp["end_ns"] = push_end[sp["op"].get<OpIndex>()];
    for (OpIndex r : arrival_order[par]) {
      last_param = std::max(last_param, arrived[par][r]);
      order.push_back(r);
      if (tracing)
        spans.push_back({{"lane", 0},
                         {"name", g.ops[r].name},
                         {"end_ns", arrived[par][r]},
                         {"bytes", g.ops[r].bytes}});
    }
    rec.update({{"fwd_end_ns", fwd_end},
                {"end_ns", end},
                {"first_compute_ns", first_compute},
                {"last_param_ns", last_param},
                {"arrival_order", order},
                {"params_ok", params_ok},
                {"params_bad", params_bad},
                {"error", err}});
    if (tracing) rec["spans"] = spans;
    std::cout << rec.dump() << "\n" << std::flush;
  }
  if (!err.empty()) std::cerr << "tictac-ps w" << rank << ": " << err << "\n";
  return err.empty() && params_bad == 0 ? 0 : 1;
}

}  // namespace tictac::ps
