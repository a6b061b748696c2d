// tictac-perf client: the bw, lat and prio runs and their JSON results.
#include <algorithm>

#include "tools/perf/perf.h"

namespace tictac::perf {

using transport::Priority;

namespace {

// bw: `warmup` untimed sends, then `iters` timed sends of `size` bytes, at most
// `depth` outstanding; timed until the receiver confirmed the last byte (send
// completions). The warm-up (perftest's, default iters/10) takes first-use
// costs out of the figure: registrations, UCX lane wire-up, page faults.
json runBw(Session& s, const Options& o, size_t size, uint64_t iters) {
  uint64_t warmup = o.warmup >= 0 ? static_cast<uint64_t>(o.warmup) : iters / 10;
  RunConfig cfg{kBw, 0, size, warmup + iters, 0};
  if (Status st = sendConfig(s, cfg); !st) return {{"error", st.toString()}};
  if (Status st = waitReady(s, *s.ch); !st) return {{"error", st.toString()}};
  Buffer buf(size, 'x');
  // What the completions touch, behind one pointer: the callback then fits
  // std::function's inline storage (no allocation per message in the loop).
  struct Progress {
    std::vector<Clock::time_point> posted;
    std::vector<double> lat;
    uint64_t warmup = 0, done = 0;
    Status error;  // the first failed send; stops the run (reported once, by the caller)
  } p;
  p.posted.resize(warmup + iters);
  p.lat.reserve(iters);
  p.warmup = warmup;
  uint64_t next = 0;
  size_t window = s.ctx[0]->options().window_bytes;
  uint64_t depth = std::max<uint64_t>(16, 4 * window / std::max<size_t>(size, 1));
  auto sendUntil = [&](uint64_t end) {  // sends ids [next, end), waits for all
    while (p.done < end) {
      if (!p.error.isOk()) end = next;  // post no more; wait for what is out (p outlives it)
      while (next < end && next - p.done < depth) {
        uint64_t i = next++;
        p.posted[i] = Clock::now();
        auto op = s.ch->send({i, s.run, ""}, buf.data(), size, 0, [pp = &p, i](const Status& st) {
          if (!st && pp->error.isOk()) pp->error = st;
          if (i >= pp->warmup) pp->lat.push_back(sinceUs(pp->posted[i], Clock::now()));
          pp->done++;
        });
        if (!op) {  // back-pressure: retry after progress; anything else ends the run
          next--;
          if (op.status().code() != transport::StatusCode::kNoResource) p.error = op.status();
          break;
        }
      }
      s.progress();
    }
  };
  sendUntil(warmup);
  auto t0 = Clock::now();
  if (p.error.isOk()) sendUntil(warmup + iters);
  double us = sinceUs(t0, Clock::now());
  if (!p.error) return {{"error", "bw run: send failed: " + p.error.toString()}};
  s.run++;
  return {{"test", "bw"},
          {"backend", o.backend},
          {"size", size},
          {"iters", iters},
          {"warmup", warmup},
          {"huge_pages", Buffer::huge_pages},
          {"bw_gbps", static_cast<double>(size) * static_cast<double>(iters) * 8e-3 / us},
          {"msg_rate_mpps", static_cast<double>(iters) / us},
          {"lat_us", latJson(p.lat)},
          {"window", window},
          {"chunk", s.ctx[0]->options().chunk_bytes}};
}

json runLat(Session& s, const Options& o, size_t size, uint64_t iters) {
  RunConfig cfg{kLat, 0, size, iters, 0};
  if (Status st = sendConfig(s, cfg); !st) return {{"error", st.toString()}};
  if (Status st = waitReady(s, *s.ch); !st) return {{"error", st.toString()}};
  Buffer out(size, 'p'), in(size, 0);
  // As perftest's ib_send_lat: one clock read per round trip, just before
  // the ping is sent, and a round trip is the time between two such reads.
  // The echo's expect is posted while the ping travels (ib_send_lat keeps its
  // receives posted); an echo polled before it waits for it (and is copied).
  // The previous round trip's handles are dropped once the next ping is
  // out (the server does the same): freeing them is not on the echo's path.
  std::vector<Clock::time_point> sent;
  sent.reserve(iters + 1);
  transport::OpHandle last_ping, last_echo;
  for (uint64_t i = 0; i < iters; ++i) {
    sent.push_back(Clock::now());
    auto op = s.ch->send({i, s.run, ""}, out.data(), size, 0);
    auto e = s.ch->expect({i, s.run, ""}, in.data(), size);
    last_ping.reset();
    last_echo.reset();
    if (!e || !op || !s.wait(e.value())) return {{"error", "ping-pong failed"}};
    (void)s.wait(op.value());
    last_ping = std::move(op).value();
    last_echo = std::move(e).value();
  }
  sent.push_back(Clock::now());
  std::vector<double> half(iters);
  for (uint64_t i = 0; i < iters; ++i) half[i] = sinceUs(sent[i], sent[i + 1]) / 2;
  double us = sinceUs(sent.front(), sent.back());
  s.run++;
  return {{"test", "lat"},
          {"backend", o.backend},
          {"size", size},
          {"iters", iters},
          {"bw_gbps", static_cast<double>(size) * static_cast<double>(iters) * 8e-3 / us},
          {"msg_rate_mpps", static_cast<double>(iters) / us},
          {"lat_us", latJson(half)}};
}

// prio: urgent tensors of `size` every millisecond (each answered by a 0-byte
// reply from the server's completion) while 4 bulk tensors stay queued.
json runPrio(Session& s, const Options& o, Mode mode, size_t size, uint64_t iters,
             const ContextOptions& copts) {
  RunConfig cfg{kPrio, mode, size, iters, o.bulk};
  if (Status st = sendConfig(s, cfg); !st) return {{"error", st.toString()}};
  Channel* urgent_ch = s.ch.get();
  std::shared_ptr<Context> extra;
  if (mode == kIsolated) {  // a second context: its own scheduler, worker and connection
    auto c = Context::create(copts);
    if (!c) return {{"error", c.status().toString()}};
    extra = c.value();
    auto ch2 = extra->connect(o.server, o.port);
    if (!ch2) return {{"error", ch2.status().toString()}};
    s.ch2 = ch2.value();
    s.ctx.push_back(extra);
    urgent_ch = s.ch2.get();
  }
  if (Status st = waitReady(s, *s.ch); !st) return {{"error", st.toString()}};
  Priority hi_prio = mode == kFifo ? 100 : 1, lo_prio = 100;
  Buffer hbuf(size, 'u'), lbuf(o.bulk, 'b');
  std::vector<Clock::time_point> sent(iters);
  std::vector<double> half;
  uint64_t replies = 0, posted = 0, bulk_posted = 0, bulk_done = 0, bulk_bytes = 0;
  // Bulk bytes handed out by the scheduler during the urgent phase (chunk
  // granularity; the window bounds what is not yet confirmed).
  auto lo_bytes = [&] {
    uint64_t b = 0;
    for (auto& st : s.ctx[0]->priorityStats()) {
      if (st.priority == lo_prio) b += st.bytes_sent;
    }
    return b;
  };
  uint64_t lo_start = lo_bytes();
  auto t0 = Clock::now();
  auto next_urgent = t0;
  Status error;  // the first failure ends the run (a lost server: no more posting)
  uint64_t expected = 0;
  auto failed = [&](const Status& st) {
    if (!st && error.isOk()) error = st;
  };
  while (replies < iters && error.isOk()) {
    auto now = Clock::now();
    if (posted < iters && now >= next_urgent) {
      uint64_t i = posted++;
      auto e = urgent_ch->expect({kReply + i, s.run, ""}, nullptr, 0, [&, i](const Status& st) {
        failed(st);
        half.push_back(sinceUs(sent[i], Clock::now()) / 2);
        replies++;
      });
      if (!e) failed(e.status());
      expected += e ? 1 : 0;
      sent[i] = Clock::now();
      if (auto u = urgent_ch->send({kUrgent + i, s.run, ""}, hbuf.data(), size, hi_prio); !u) {
        failed(u.status());
      }
      next_urgent += std::chrono::milliseconds(1);
    }
    while (bulk_posted - bulk_done < 4) {
      auto op = s.ch->send({kBulk + bulk_posted, s.run, ""}, lbuf.data(), lbuf.size(), lo_prio,
                           [&](const Status& st) {
                             failed(st);
                             bulk_done++;
                           });
      if (!op && op.status().code() != transport::StatusCode::kNoResource) failed(op.status());
      if (!op) break;
      bulk_posted++;
    }
    if (!s.ch->alive() || !urgent_ch->alive()) {
      failed(Status(transport::StatusCode::kPeerLost, "the connection to the server failed"));
    }
    s.progress();
  }
  if (!error.isOk()) {  // the completions above touch this frame: let them all run first
    auto end = Clock::now() + std::chrono::seconds(10);
    while ((replies < expected || bulk_done < bulk_posted) && Clock::now() < end) s.progress();
    return {{"error", "prio run: " + error.toString()}};
  }
  double us = sinceUs(t0, Clock::now());
  bulk_bytes = lo_bytes() - lo_start;
  if (mode == kFifo) bulk_bytes -= std::min<uint64_t>(bulk_bytes, iters * size);  // urgent share
  uint64_t total = bulk_posted;
  auto fin = s.ch->expect({kDone, s.run, ""}, nullptr, 0);
  auto d = s.ch->send({kDone, s.run, ""}, &total, sizeof(total), 0);
  if (!fin || !d || !s.wait(fin.value())) return {{"error", "prio: end of run failed"}};
  if (extra) {
    s.ch2->close();
    s.ch2.reset();
    s.ctx.pop_back();
  }
  s.run++;
  static const char* names[] = {"priority", "fifo", "isolated"};
  double lo_bw = static_cast<double>(bulk_bytes) * 8e-3 / us;
  return {{"test", "prio"},
          {"mode", names[mode]},
          {"backend", o.backend},
          {"size", size},
          {"iters", iters},
          {"hi_size", size},
          {"lo_size", o.bulk},
          {"window", s.ctx[0]->options().window_bytes},
          {"chunk", s.ctx[0]->options().chunk_bytes},
          {"hi_lat_us", latJson(half)},
          {"lat_us", latJson(half)},
          {"lo_bw_gbps", lo_bw},
          {"bw_gbps", lo_bw},
          {"msg_rate_mpps", static_cast<double>(iters) / us}};
}

}  // namespace

int runClient(Session& s, const Options& o, const ContextOptions& copts, FILE* out) {
  std::vector<size_t> sizes;
  if (o.all) {
    for (size_t sz = 2; sz <= (8u << 20); sz *= 2) sizes.push_back(sz);
  } else {
    sizes.push_back(o.size != 0 ? o.size : (o.test == "lat" ? 2 : 65536));
  }
  bool first = true;
  int rc = 0;
  auto emit = [&](const json& r) {
    if (r.contains("error")) {
      std::fprintf(stderr, "tictac-perf: %s\n", r["error"].get<std::string>().c_str());
      rc = 1;
      return;
    }
    printRow(r, first);
    first = false;
    if (o.json_out) std::fprintf(out, "%s\n", r.dump().c_str());
  };
  for (size_t size : sizes) {
    if (rc != 0) break;
    if (o.test == "bw") {
      uint64_t n = o.iters;
      if (n == 0) {  // about one second of data at the rate of a short calibration run
        json cal = runBw(
            s, o, size, std::clamp<uint64_t>((64ull << 20) / std::max<size_t>(size, 1), 20, 20000));
        if (cal.contains("error")) return emit(cal), 1;
        double bps = cal["bw_gbps"].get<double>() * 1e9 / 8;
        n = std::clamp<uint64_t>(static_cast<uint64_t>(bps / std::max<size_t>(size, 1)), 10,
                                 2000000);
      }
      emit(runBw(s, o, size, n));
    } else if (o.test == "lat") {
      emit(runLat(s, o, size, o.iters != 0 ? o.iters : 2000));
    } else {
      for (Mode m : {kPriority, kFifo, kIsolated}) {
        if (rc != 0) break;  // one failure, one line
        emit(runPrio(s, o, m, size, o.iters != 0 ? o.iters : 2000, copts));
      }
    }
  }
  // After a failure the server has failed too (or will, when this process
  // closes the connection): a quit could wait for an expect that never comes.
  RunConfig quit{kQuit, 0, 0, 0, 0};
  if (rc == 0) (void)sendConfig(s, quit);
  return rc;
}

}  // namespace tictac::perf
