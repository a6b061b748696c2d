// tictac-perf: perftest-style bandwidth / latency / priority benchmark of the
// tictac channel (public API, scheduler included; no private fast path).
//
//   server:  tictac-perf [flags]            (listens on --port, serves one session, exits 0)
//   client:  tictac-perf [flags] SERVER     (retries connecting for 10 s, runs, reports)
// The client chooses the parameters and sends them to the server in a config
// tensor before each run. Results: a perftest-like table on stderr; with --json
// one JSON object per result on stdout (stdout carries nothing else: UCX's own
// messages, which go to stdout, are redirected to stderr).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tictac/transport/context.h"

using namespace tictac::transport;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

constexpr uint64_t kConfigId = 5ull << 40, kUrgent = 1ull << 40, kBulk = 2ull << 40,
                   kReply = 3ull << 40, kDone = 4ull << 40;
enum Test : uint32_t { kBw = 1, kLat = 2, kPrio = 3, kQuit = 9 };
enum Mode : uint32_t { kPriority = 0, kFifo = 1, kIsolated = 2 };

struct RunConfig {  // sent client -> server before every run
  uint32_t test = 0, mode = 0;
  uint64_t size = 0, iters = 0, bulk = 0;
};

struct Session {
  std::vector<std::shared_ptr<Context>> ctx;
  std::shared_ptr<Channel> ch, ch2;  // ch2: the second connection (isolated mode)
  uint32_t run = 0;
  void progress() {
    for (auto& c : ctx) c->progress();
  }
  Status wait(const OpHandle& op) {
    while (!op->done()) progress();
    return op->status();
  }
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

json latJson(const std::vector<double>& us) {
  return {{"p50", pct(us, 0.5)}, {"p99", pct(us, 0.99)}, {"p999", pct(us, 0.999)},
          {"max", us.empty() ? 0.0 : *std::max_element(us.begin(), us.end())}};
}

double sinceUs(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

// Keeps `depth` expects posted for ids base+0 .. base+count-1 into buf.
struct ExpectRing {
  Channel* ch;
  uint64_t base, count, next = 0, done = 0;
  uint32_t it;
  std::vector<char>* buf;
  std::function<void(uint64_t)> on_done;
  void fill(uint64_t depth) {
    while (next < count && next - done < depth) {
      uint64_t i = next++;
      auto e = ch->expect({base + i, it, ""}, buf->data(), buf->size(), [this, i](const Status& s) {
        if (!s) std::fprintf(stderr, "tictac-perf: receive failed: %s\n", s.toString().c_str());
        done++;
        if (on_done) on_done(i);
      });
      if (!e) std::fprintf(stderr, "tictac-perf: expect: %s\n", e.status().toString().c_str());
    }
  }
};

// ---- server -----------------------------------------------------------------
int serve(Session& s, Listener& listener) {
  for (;;) {
    RunConfig cfg;
    auto e = s.ch->expect({kConfigId, s.run, ""}, &cfg, sizeof(cfg));
    if (!e || !s.wait(e.value())) return 1;
    if (cfg.test == kQuit) return 0;
    std::vector<char> buf(cfg.size), bulk(cfg.bulk);
    if (cfg.test == kBw) {
      ExpectRing ring{s.ch.get(), 0, cfg.iters, 0, 0, s.run, &buf, {}};
      while (ring.done < cfg.iters) {
        ring.fill(256);
        s.progress();
      }
    } else if (cfg.test == kLat) {
      for (uint64_t i = 0; i < cfg.iters; ++i) {
        auto in = s.ch->expect({i, s.run, ""}, buf.data(), buf.size());
        if (!in || !s.wait(in.value())) return 1;
        auto out = s.ch->send({i, s.run, ""}, buf.data(), buf.size(), 0);
        if (!out) return 1;
      }
    } else if (cfg.test == kPrio) {
      if (cfg.mode == kIsolated) {
        auto c2 = listener.accept(std::chrono::seconds(10));
        if (!c2) return 1;
        s.ch2 = c2.value();
      }
      Channel* urgent_ch = cfg.mode == kIsolated ? s.ch2.get() : s.ch.get();
      uint32_t run = s.run;
      ExpectRing hi{urgent_ch, kUrgent, cfg.iters, 0, 0, run, &buf,
                    [urgent_ch, run](uint64_t i) {  // the 0-byte reply, from the completion
                      (void)urgent_ch->send({kReply + i, run, ""}, nullptr, 0, 0);
                    }};
      uint64_t bulk_total = UINT64_MAX;
      ExpectRing lo{s.ch.get(), kBulk, UINT64_MAX, 0, 0, run, &bulk, {}};
      auto de = s.ch->expect({kDone, run, ""}, &bulk_total, sizeof(bulk_total));
      if (!de) return 1;
      while (!(de.value()->done() && lo.done >= bulk_total && hi.done == cfg.iters)) {
        hi.fill(cfg.iters);
        lo.fill(de.value()->done() ? std::min<uint64_t>(8, bulk_total - lo.done) : 8);
        if (de.value()->done()) lo.count = bulk_total;
        s.progress();
      }
      auto fin = s.ch->send({kDone, run, ""}, nullptr, 0, 0);
      if (!fin || !s.wait(fin.value())) return 1;
      if (s.ch2) s.ch2->close();
      s.ch2.reset();
    }
    s.run++;
  }
}

// ---- client -----------------------------------------------------------------
struct Options {
  std::string backend = "ucx", test = "bw", device, server;
  size_t size = 0, iters = 0, window = 0, chunk = 0, bulk = 8 << 20;
  bool all = false, json_out = false;
  double rate = 0;
  uint16_t port = 18515;
};

Status sendConfig(Session& s, const RunConfig& cfg) {
  auto op = s.ch->send({kConfigId, s.run, ""}, &cfg, sizeof(cfg), 0);
  if (!op) return op.status();
  return s.wait(op.value());
}

// bw: `iters` sends of `size` bytes, at most `depth` outstanding; timed until the
// receiver confirmed the last byte (send completions).
json runBw(Session& s, const Options& o, size_t size, uint64_t iters) {
  RunConfig cfg{kBw, 0, size, iters, 0};
  if (Status st = sendConfig(s, cfg); !st) return {{"error", st.toString()}};
  std::vector<char> buf(size, 'x');
  std::vector<Clock::time_point> posted(iters);
  std::vector<double> lat;
  lat.reserve(iters);
  uint64_t next = 0, done = 0;
  size_t window = s.ctx[0]->options().window_bytes;
  uint64_t depth = std::max<uint64_t>(16, 4 * window / std::max<size_t>(size, 1));
  auto t0 = Clock::now();
  while (done < iters) {
    while (next < iters && next - done < depth) {
      uint64_t i = next++;
      posted[i] = Clock::now();
      auto op = s.ch->send({i, s.run, ""}, buf.data(), size, 0, [&, i](const Status& st) {
        if (!st) std::fprintf(stderr, "tictac-perf: send failed: %s\n", st.toString().c_str());
        lat.push_back(sinceUs(posted[i], Clock::now()));
        done++;
      });
      if (!op) {
        next--;
        break;
      }
    }
    s.progress();
  }
  double us = sinceUs(t0, Clock::now());
  s.run++;
  return {{"test", "bw"}, {"backend", o.backend}, {"size", size}, {"iters", iters},
          {"bw_gbps", static_cast<double>(size) * static_cast<double>(iters) * 8e-3 / us},
          {"msg_rate_mpps", static_cast<double>(iters) / us}, {"lat_us", latJson(lat)},
          {"window", window}, {"chunk", s.ctx[0]->options().chunk_bytes}};
}

json runLat(Session& s, const Options& o, size_t size, uint64_t iters) {
  RunConfig cfg{kLat, 0, size, iters, 0};
  if (Status st = sendConfig(s, cfg); !st) return {{"error", st.toString()}};
  std::vector<char> out(size, 'p'), in(size);
  std::vector<double> half;
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < iters; ++i) {
    auto e = s.ch->expect({i, s.run, ""}, in.data(), size);
    auto t = Clock::now();
    auto op = s.ch->send({i, s.run, ""}, out.data(), size, 0);
    if (!e || !op || !s.wait(e.value())) return {{"error", "ping-pong failed"}};
    half.push_back(sinceUs(t, Clock::now()) / 2);
    (void)s.wait(op.value());
  }
  double us = sinceUs(t0, Clock::now());
  s.run++;
  return {{"test", "lat"}, {"backend", o.backend}, {"size", size}, {"iters", iters},
          {"bw_gbps", static_cast<double>(size) * static_cast<double>(iters) * 8e-3 / us},
          {"msg_rate_mpps", static_cast<double>(iters) / us}, {"lat_us", latJson(half)}};
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
  Priority hi_prio = mode == kFifo ? 100 : 1, lo_prio = 100;
  std::vector<char> hbuf(size, 'u'), lbuf(o.bulk, 'b');
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
  while (replies < iters) {
    auto now = Clock::now();
    if (posted < iters && now >= next_urgent) {
      uint64_t i = posted++;
      (void)urgent_ch->expect({kReply + i, s.run, ""}, nullptr, 0, [&, i](const Status&) {
        half.push_back(sinceUs(sent[i], Clock::now()) / 2);
        replies++;
      });
      sent[i] = Clock::now();
      (void)urgent_ch->send({kUrgent + i, s.run, ""}, hbuf.data(), size, hi_prio);
      next_urgent += std::chrono::milliseconds(1);
    }
    while (bulk_posted - bulk_done < 4) {
      auto op = s.ch->send({kBulk + bulk_posted, s.run, ""}, lbuf.data(), lbuf.size(), lo_prio,
                           [&](const Status&) { bulk_done++; });
      if (!op) break;
      bulk_posted++;
    }
    s.progress();
  }
  double us = sinceUs(t0, Clock::now());
  bulk_bytes = lo_bytes() - lo_start;
  if (mode == kFifo) bulk_bytes -= std::min<uint64_t>(bulk_bytes, iters * size);  // urgent share
  uint64_t total = bulk_posted;
  uint64_t ack = 0;
  auto fin = s.ch->expect({kDone, s.run, ""}, nullptr, 0);
  auto d = s.ch->send({kDone, s.run, ""}, &total, sizeof(total), 0);
  if (!fin || !d || !s.wait(fin.value())) return {{"error", "prio: end of run failed"}};
  (void)ack;
  if (extra) {
    s.ch2->close();
    s.ch2.reset();
    s.ctx.pop_back();
  }
  s.run++;
  static const char* names[] = {"priority", "fifo", "isolated"};
  double lo_bw = static_cast<double>(bulk_bytes) * 8e-3 / us;
  return {{"test", "prio"}, {"mode", names[mode]}, {"backend", o.backend}, {"size", size},
          {"iters", iters}, {"hi_size", size}, {"lo_size", o.bulk},
          {"window", s.ctx[0]->options().window_bytes}, {"chunk", s.ctx[0]->options().chunk_bytes},
          {"hi_lat_us", latJson(half)}, {"lat_us", latJson(half)}, {"lo_bw_gbps", lo_bw},
          {"bw_gbps", lo_bw}, {"msg_rate_mpps", static_cast<double>(iters) / us}};
}

void printRow(const json& r, bool header) {
  if (header) {
    std::fprintf(stderr, "%s\n", std::string(100, '-').c_str());
    std::fprintf(stderr, " %-9s %-9s %-10s %-12s %-12s %-11s %-11s %-11s %-11s\n", "#mode",
                 "#bytes", "#iters", "BW[Gb/s]", "MsgRate[Mpps]", "t_p50[us]", "t_p99[us]",
                 "t_p999[us]", "t_max[us]");
  }
  const json& l = r.contains("hi_lat_us") ? r["hi_lat_us"] : r["lat_us"];
  std::fprintf(stderr, " %-9s %-9zu %-10zu %-12.3f %-13.4f %-11.2f %-11.2f %-11.2f %-11.2f\n",
               r.value("mode", r.value("test", "")).c_str(), r["size"].get<size_t>(),
               r["iters"].get<size_t>(), r["bw_gbps"].get<double>(),
               r["msg_rate_mpps"].get<double>(), l["p50"].get<double>(), l["p99"].get<double>(),
               l["p999"].get<double>(), l["max"].get<double>());
}

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
        json cal = runBw(s, o, size, std::clamp<uint64_t>((64ull << 20) / std::max<size_t>(size, 1), 20, 20000));
        if (cal.contains("error")) return emit(cal), 1;
        double bps = cal["bw_gbps"].get<double>() * 1e9 / 8;
        n = std::clamp<uint64_t>(static_cast<uint64_t>(bps / std::max<size_t>(size, 1)), 10, 2000000);
      }
      emit(runBw(s, o, size, n));
    } else if (o.test == "lat") {
      emit(runLat(s, o, size, o.iters != 0 ? o.iters : 2000));
    } else {
      for (Mode m : {kPriority, kFifo, kIsolated}) {
        emit(runPrio(s, o, m, size, o.iters != 0 ? o.iters : 2000, copts));
      }
    }
  }
  RunConfig quit{kQuit, 0, 0, 0, 0};
  (void)sendConfig(s, quit);
  return rc;
}

size_t parseSize(const std::string& text) {
  size_t pos = 0;
  double v = std::stod(text, &pos);
  std::string suf = text.substr(pos);
  double mul = suf.empty() ? 1 : suf == "K" || suf == "k" ? 1024 : suf == "M" || suf == "m" ? 1 << 20
               : suf == "G" || suf == "g" ? double(1u << 30) : -1;
  if (mul < 0 || v < 0) throw std::invalid_argument("bad size '" + text + "'");
  return static_cast<size_t>(v * mul);
}

}  // namespace

int main(int argc, char** argv) {
  // stdout carries only results: keep it for them, send everything else (UCX
  // prints its warnings to stdout) to stderr.
  int out_fd = ::dup(1);
  ::dup2(2, 1);
  FILE* out = ::fdopen(out_fd, "w");
  Options o;
  std::string size_s, window_s, chunk_s, bulk_s;
  CLI::App app{"tictac-perf: bandwidth, latency and priority benchmark of the tictac channel.\n"
               "Server when no SERVER is given (serves one session, then exits 0)."};
  app.add_option("--backend", o.backend, "ucx or verbs (verbs without a device: exit 1, no fallback)")
      ->check(CLI::IsMember({"ucx", "verbs"}))->capture_default_str();
  app.add_option("--test", o.test, "bw | lat | prio")->check(CLI::IsMember({"bw", "lat", "prio"}))
      ->capture_default_str();
  auto* s_opt = app.add_option("-s,--size", size_s, "message size in bytes, K/M/G suffix allowed "
                               "(default 65536 for bw and prio, 2 for lat)");
  app.add_flag("-a,--all", o.all, "all sizes 2 B .. 8 MiB (powers of two)")->excludes(s_opt);
  app.add_option("-n,--iters", o.iters, "iterations (default: 2000 for lat and prio; bw: about "
                 "one second of data at the measured rate)");
  app.add_option("--window", window_s, "scheduler window, bytes in flight (default: library's)");
  app.add_option("--chunk", chunk_s, "scheduler chunk size in bytes (default: library's)");
  app.add_option("--bulk-size", bulk_s, "prio: bulk tensor size (default 8 MiB)");
  app.add_option("--rate-gbps", o.rate, "pace sends to this payload rate (0 = unpaced)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--port", o.port, "bootstrap TCP port")->capture_default_str();
  app.add_option("--device", o.device, "device (ucx: UCX_NET_DEVICES; verbs: ibverbs device)");
  app.add_flag("--json", o.json_out, "one JSON object per result on stdout");
  app.add_option("SERVER", o.server, "server host name or address (client mode)");
  try {
    app.parse(argc, argv);
    if (!size_s.empty()) o.size = parseSize(size_s);
    if (!window_s.empty()) o.window = parseSize(window_s);
    if (!chunk_s.empty()) o.chunk = parseSize(chunk_s);
    if (!bulk_s.empty()) o.bulk = parseSize(bulk_s);
  } catch (const CLI::ParseError& e) {
    ::dup2(out_fd, 1);
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tictac-perf: %s\n", e.what());
    return 2;
  }
  ContextOptions copts;
  copts.backend = o.backend;
  copts.device = o.device;
  if (o.backend == "ucx" && !o.device.empty()) copts.backend_config["NET_DEVICES"] = o.device;
  copts.window_bytes = o.window;
  copts.chunk_bytes = o.chunk;
  copts.rate_gbps = o.rate;
  copts.connect_timeout = std::chrono::seconds(10);
  auto ctx = Context::create(copts);
  if (!ctx) {
    std::fprintf(stderr, "tictac-perf: backend %s: %s\n", o.backend.c_str(),
                 ctx.status().toString().c_str());
    return 1;
  }
  Session s;
  s.ctx.push_back(ctx.value());
  if (o.server.empty()) {
    auto l = ctx.value()->listen(o.port);
    if (!l) {
      std::fprintf(stderr, "tictac-perf: %s\n", l.status().toString().c_str());
      return 1;
    }
    std::fprintf(stderr, "tictac-perf: waiting for a client on port %u\n", l.value()->port());
    auto ch = l.value()->accept(std::chrono::hours(24));
    if (!ch) return 1;
    s.ch = ch.value();
    int rc = serve(s, *l.value());
    if (rc != 0) std::fprintf(stderr, "tictac-perf: session failed\n");
    return rc;
  }
  auto ch = ctx.value()->connect(o.server, o.port);
  if (!ch) {
    std::fprintf(stderr, "tictac-perf: connect %s:%u: %s\n", o.server.c_str(), o.port,
                 ch.status().toString().c_str());
    return 1;
  }
  s.ch = ch.value();
  int rc = runClient(s, o, copts, out);
  std::fflush(out);
  return rc;
}
