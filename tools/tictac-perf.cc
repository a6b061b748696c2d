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
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/cli_checks.h"
#include "tools/perf/perf.h"

using namespace tictac::perf;

namespace {

// A byte count: a number with an optional K/M/G suffix (powers of 1024) that
// comes to a whole number of bytes in [min, kMaxBytes]; throws
// std::invalid_argument naming the flag otherwise.
size_t parseSize(const char* flag, const std::string& text, uint64_t min) {
  const std::string bad = std::string(flag) + ": bad size '" + text + "'";
  const size_t digits = text.find_first_not_of("0123456789.");
  const std::string num = text.substr(0, digits),
                    suf = digits == std::string::npos ? "" : text.substr(digits);
  double mul = suf.empty()                ? 1
               : suf == "K" || suf == "k" ? 1024
               : suf == "M" || suf == "m" ? 1 << 20
               : suf == "G" || suf == "g" ? double(1u << 30)
                                          : -1;
  size_t pos = 0;
  double v = -1;
  try {
    if (!num.empty() && num.front() != '.') v = std::stod(num, &pos);
  } catch (const std::exception&) {
  }
  if (mul < 0 || v < 0 || pos != num.size()) {
    throw std::invalid_argument(bad + " (expected a number with an optional K, M or G suffix)");
  }
  const double bytes = v * mul;
  if (bytes != std::floor(bytes)) {
    throw std::invalid_argument(bad + " (not a whole number of bytes)");
  }
  if (bytes < double(min) || bytes > double(kMaxBytes)) {
    throw std::invalid_argument(bad + " (must be " + std::to_string(min) + " .. " +
                                std::to_string(kMaxBytes >> 30) + "G)");
  }
  return static_cast<size_t>(bytes);
}

// Runs one side's session; an allocation failure (or any other exception)
// ends it with one line and exit status 1 instead of an abort.
int guarded(const std::function<int()>& session) {
  try {
    return session();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tictac-perf: out of memory for the run's buffers\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tictac-perf: %s\n", e.what());
  }
  return 1;
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
  CLI::App app{
      "tictac-perf: bandwidth, latency and priority benchmark of the tictac channel.\n"
      "Server when no SERVER is given (serves one session, then exits 0)."};
  app.add_option("--backend", o.backend,
                 "ucx or verbs (verbs without a device: exit 1, no fallback)")
      ->check(CLI::IsMember({"ucx", "verbs"}))
      ->capture_default_str();
  app.add_option("--test", o.test, "bw | lat | prio")
      ->check(CLI::IsMember({"bw", "lat", "prio"}))
      ->capture_default_str();
  auto* s_opt = app.add_option("-s,--size", size_s,
                               "message size in bytes, 1 .. 1G, K/M/G suffix "
                               "allowed (default 65536 for bw and prio, 2 for lat)");
  app.add_flag("-a,--all", o.all, "all sizes 2 B .. 8 MiB (powers of two)")->excludes(s_opt);
  app.add_option("-n,--iters", o.iters,
                 "iterations (default: 2000 for lat and prio; bw: about "
                 "one second of data at the measured rate; at most 10^8)")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(size_t{0}, kMaxIters));
  app.add_option("--warmup", o.warmup,
                 "bw: untimed sends before timing, as perftest does "
                 "(default: a tenth of -n)")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(int64_t{0}, int64_t{kMaxIters}));
  bool no_huge = false;
  app.add_flag("--no-huge-pages", no_huge,
               "allocate the benchmark's buffers on 4 KiB pages "
               "(default: 2 MiB aligned, advised to use transparent huge pages)");
  app.add_option("--window", window_s,
                 "scheduler window, bytes in flight (0 or unset: library's; at most 1G)");
  app.add_option("--chunk", chunk_s,
                 "scheduler chunk size in bytes (0 or unset: library's; at most 1G)");
  app.add_option("--bulk-size", bulk_s, "prio: bulk tensor size, 1 B .. 1G (default 8 MiB)");
  app.add_option("--rate-gbps", o.rate, "pace sends to this payload rate (0 = unpaced)")
      ->check(tictac::tools::finiteNumber(false));
  app.add_option("--port", o.port, "bootstrap TCP port (server: 0 = any free port, printed)")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--device", o.device, "device (ucx: UCX_NET_DEVICES; verbs: ibverbs device)");
  std::vector<std::string> backend_opts;
  std::map<std::string, std::string> backend_config;  // from backend_opts
  app.add_option("--backend-opt", backend_opts,
                 "KEY=VALUE backend option, repeatable (verbs: the keys listed in "
                 "transport/verbs/factory.h, e.g. windows=1; ucx: UCX configuration names "
                 "without UCX_, e.g. TLS=tcp; NET_DEVICES=... wins over --device)")
      ->allow_extra_args(false);
  app.add_flag("--json", o.json_out, "one JSON object per result on stdout");
  app.add_option("SERVER", o.server, "server host name or address (client mode)");
  try {
    app.parse(argc, argv);
    Buffer::huge_pages = !no_huge;
    if (app.count("SERVER") > 0 && o.server.empty()) {
      throw std::invalid_argument(
          "SERVER is empty: give a host name or address (or none to serve)");
    }
    if (o.rate > 0 && o.rate < 1e-3) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g", o.rate);
      throw std::invalid_argument(std::string("--rate-gbps ") + rate +
                                  ": below 0.001 (1 Mbit/s); 0 means unpaced");
    }
    if (!o.server.empty() && o.port == 0) {
      throw std::invalid_argument(
          "--port 0 (any free port) is for a server; a client needs the "
          "server's port");
    }
    for (const std::string& kv : backend_opts) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw std::invalid_argument("--backend-opt '" + kv + "': expected KEY=VALUE");
      }
      backend_config[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (s_opt->count() > 0) o.size = parseSize("--size", size_s, 1);
    if (app.count("--window") > 0) o.window = parseSize("--window", window_s, 0);
    if (app.count("--chunk") > 0) o.chunk = parseSize("--chunk", chunk_s, 0);
    if (app.count("--bulk-size") > 0) o.bulk = parseSize("--bulk-size", bulk_s, 1);
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
  for (const auto& [key, value] : backend_config) copts.backend_config[key] = value;  // wins
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
    if (!ch) {  // e.g. a connection that is not a tictac peer
      std::fprintf(stderr, "tictac-perf: accepting a client: %s\n", ch.status().toString().c_str());
      return 1;
    }
    s.ch = ch.value();
    int rc = guarded([&] { return serve(s, *l.value()); });
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
  int rc = guarded([&] { return runClient(s, o, copts, out); });
  std::fflush(out);
  return rc;
}
