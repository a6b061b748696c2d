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

#include "tools/perf/perf.h"

using namespace tictac::perf;

namespace {

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
  app.add_option("--warmup", o.warmup, "bw: untimed sends before timing, as perftest does "
                 "(default: a tenth of -n)")->check(CLI::NonNegativeNumber);
  bool no_huge = false;
  app.add_flag("--no-huge-pages", no_huge, "allocate the benchmark's buffers on 4 KiB pages "
               "(default: 2 MiB aligned, advised to use transparent huge pages)");
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
    Buffer::huge_pages = !no_huge;
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
