// tictac-ps: a parameter server and workers on the public transport API.
//
//   tictac-ps GRAPH [--mode inference|training] [--workers W] [--ps N]
//             [--iterations K] [--order random|fifo|tic|tac|reverse|FILE.tsv]
//             [--rate-gbps F] [--compute-scale X] [--json] [--trace FILE]
//             [--autotune] ...
// Without --role it is the launcher: it spawns every PS and worker as its own
// process (inside the namespaces of tools/netns-cluster when TICTAC_NETNS is
// set), then prints the report: a table on stderr, with --json one JSON
// object on stdout. With --role ps|worker --rank i --peers host:port,... it
// runs one role (multi-host or hand-made runs). docs/ps.md has the details.
#include <sys/time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "tools/cli_checks.h"
#include "tools/ps/launch.h"
#include "tools/ps/roles.h"
#include "transport/core/send_scheduler.h"

using namespace tictac::ps;
using nlohmann::json;

namespace {

std::string selfPath(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(argv0);
}

// One run of the whole job; the report, or an error string.
bool runOnce(const std::string& self, const Config& c, double timeout, json& report, json* trace,
             std::string& err) {
  Job job(c);
  RunOutput out = launch(self, c, timeout);
  if (!out.error.empty()) {
    err = out.error;
    return false;
  }
  report = buildReport(job, out, trace);
  return true;
}

// Coordinate search over chunk size, then window, a few iterations per
// setting; each setting is a fresh run of the job (the transport's knobs are
// fixed per context).
json autotune(const std::string& self, Config c, double timeout, std::string& err) {
  c.iterations = std::min<uint32_t>(c.iterations, 3);
  c.trace_iteration = UINT32_MAX;
  auto measure = [&](size_t chunk, size_t window, double& us) {
    Config t = c;
    t.chunk_bytes = chunk;
    t.window_bytes = window;
    json r;
    if (!runOnce(self, t, timeout, r, nullptr, err)) return false;
    us = r["iteration_us"]["mean"];
    std::cerr << "tictac-ps: autotune chunk " << chunk << " window " << window << ": " << us / 1e3
              << " ms\n";
    return true;
  };
  double base = 0, best = 0;
  size_t bc = tictac::transport::kDefaultChunkBytes, bw = tictac::transport::kDefaultWindowBytes;
  if (!measure(bc, bw, base)) return {};
  best = base;
  for (size_t chunk : {size_t{128} << 10, size_t{1} << 20}) {
    double us = 0;
    if (!measure(chunk, bw, us)) return {};
    if (us < best) {
      best = us;
      bc = chunk;
    }
  }
  for (size_t window : {bc * 2, size_t{4} << 20}) {
    double us = 0;
    if (window == bw || !measure(bc, window, us)) {
      if (!err.empty()) return {};
      continue;
    }
    if (us < best) {
      best = us;
      bw = window;
    }
  }
  return {{"chunk_bytes", bc},
          {"window_bytes", bw},
          {"default_iteration_us", base},
          {"chosen_iteration_us", best},
          {"gain", base > 0 ? (base - best) / base : 0},
          {"iterations_per_setting", c.iterations}};
}

// --role with --timeout: a role that is still running after `seconds` (a
// peer that never came) says so and exits 1. The message is built now: the
// signal handler may only write it.
void giveUpAfter(double seconds, const std::string& role, uint32_t rank) {
  static std::string msg;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", seconds);
  msg = "tictac-ps: " + role + " " + std::to_string(rank) + ": --timeout of " + secs +
        " s passed; giving up\n";
  std::signal(SIGALRM, [](int) {
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(1);
  });
  itimerval t{};
  t.it_value.tv_sec = static_cast<time_t>(seconds);
  t.it_value.tv_usec = static_cast<suseconds_t>((seconds - std::floor(seconds)) * 1e6);
  if (t.it_value.tv_sec == 0 && t.it_value.tv_usec == 0) t.it_value.tv_usec = 1;
  if (::setitimer(ITIMER_REAL, &t, nullptr) != 0) {
    throw std::runtime_error(std::string("--timeout: setitimer: ") + std::strerror(errno));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  std::string role, peers, trace;
  uint32_t rank = 0;
  bool json_out = false, tune = false;
  double timeout = 600;
  CLI::App app{"tictac-ps: parameter server and workers over the tictac transport"};
  app.add_option("graph", c.graph, "model graph (.json interchange format or .onnx)")->required();
  app.add_option("--mode", c.mode, "inference or training")
      ->check(CLI::IsMember({"inference", "training"}));
  app.add_option("--workers", c.workers, "number of workers")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(1, 64));
  app.add_option("--ps", c.ps, "number of parameter servers (sharded as tictac-sim shards)")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(1, 64));
  app.add_option("--iterations", c.iterations, "iterations to run")
      ->check(tictac::tools::unsignedInteger())
      ->check(CLI::Range(1, 100000));
  app.add_option("--order", c.order,
                 "random (each worker its own order every iteration), fifo, tic, tac, reverse, or "
                 "a name<TAB>priority file");
  app.add_option("--seed", c.seed,
                 "seed of --order random: worker w, iteration k uses seed+w*iterations+k")
      ->check(tictac::tools::unsignedInteger());
  app.add_option("--backend", c.backend, "ucx or verbs (verbs: soft-RoCE guest only)")
      ->check(CLI::IsMember({"ucx", "verbs"}));
  app.add_option("--rate-gbps", c.rate_gbps,
                 "link rate: the scheduler paces every sender to it (loopback emulation), and "
                 "tictac-sim's prediction uses it; 0 = unpaced")
      ->check(tictac::tools::finiteNumber(false));
  app.add_option("--compute-scale", c.compute_scale,
                 "multiplies every op's time_us (compute is a sleep)")
      ->check(tictac::tools::finiteNumber(false));
  app.add_option("--bwd-factor", c.bwd_factor,
                 "training: backward time = factor x forward time (tictac-sim's default 2)")
      ->check(tictac::tools::finiteNumber(false));
  app.add_option("--chunk", c.chunk_bytes, "transport chunk size in bytes (0 = library default)")
      ->check(tictac::tools::unsignedInteger());
  app.add_option("--window", c.window_bytes,
                 "transport in-flight window in bytes (0 = library default)")
      ->check(tictac::tools::unsignedInteger());
  auto* port_opt = app.add_option("--port", c.port,
                                  "PS i listens on port + i (default 18600; a launch on loopback "
                                  "without --port takes free ports instead)")
                       ->check(tictac::tools::unsignedInteger())
                       ->check(CLI::Range(1, 65535));
  app.add_option("--trace-iteration", c.trace_iteration, "the iteration --trace shows")
      ->check(tictac::tools::unsignedInteger());
  app.add_flag("--json", json_out, "print the report as one JSON object on stdout");
  app.add_option("--trace", trace,
                 "write a Chrome trace of one iteration (network and compute lanes per worker)")
      ->check(tictac::tools::nonEmptyPath());
  app.add_flag("--autotune", tune,
               "search chunk size and window over short runs first; report the choice and its gain "
               "over the defaults");
  app.add_option("--timeout", timeout,
                 "launcher: kill the roles after this many seconds; --role: give up (exit 1) "
                 "after it (at most 1e8)")
      ->check(tictac::tools::finiteNumber(true, 1e8));
  app.add_option("--role", role, "run one role: ps or worker (default: launch all locally)")
      ->check(CLI::IsMember({"ps", "worker"}));
  app.add_option("--rank", rank, "rank of --role")->check(tictac::tools::unsignedInteger());
  app.add_option("--peers", peers, "--role: host:port of every PS, comma separated");
  app.add_flag("--shaped", c.shaped, "links are shaped outside (netns + tbf): no pacing");
  try {
    app.parse(argc, argv);
    c.port_set = port_opt->count() > 0;
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : (app.exit(e), 2);
  }
  if (role.empty() && (app.count("--rank") > 0 || app.count("--peers") > 0)) {
    std::cerr << "tictac-ps: --rank and --peers are for --role ps|worker\n";
    return 2;
  }
  if (role.empty() && app.count("--trace-iteration") > 0 &&
      c.trace_iteration >= c.iterations) {  // roles: the launcher's word (autotune: none)
    std::cerr << "tictac-ps: --trace-iteration " << c.trace_iteration << " with --iterations "
              << c.iterations << ": must be below it\n";
    return 2;
  }
  if (c.iterations <= c.trace_iteration) c.trace_iteration = c.iterations > 1 ? 1 : 0;
  if (c.port + uint64_t{c.ps} - 1 > 65535) {
    std::cerr << "tictac-ps: --port " << c.port << " with --ps " << c.ps << ": the PS ports "
              << c.port << ".." << c.port + c.ps - 1 << " must lie in 1..65535\n";
    return 2;
  }
  try {
    if (!role.empty()) {
      if (app.count("--timeout") > 0) giveUpAfter(timeout, role, rank);
      std::stringstream ss(peers);
      for (std::string p; std::getline(ss, p, ',');) {
        std::string h;
        uint16_t port;
        if (!splitPeer(p, h, port)) {
          std::cerr << "tictac-ps: bad --peers entry '" << p << "'\n";
          return 2;
        }
        c.peers.push_back(p);
      }
      if (role == "worker" && c.peers.size() != c.ps) {
        std::cerr << "tictac-ps: --peers needs " << c.ps << " entries\n";
        return 2;
      }
      if (rank >= (role == "ps" ? c.ps : c.workers)) {
        std::cerr << "tictac-ps: --rank out of range\n";
        return 2;
      }
      Job job(c);
      return role == "ps" ? runServer(job, rank) : runWorker(job, rank);
    }
    if (std::getenv("TICTAC_NETNS") != nullptr) c.shaped = true;
    Job check(c);  // bad graph or order: exit 2 before spawning anything
    const std::string self = selfPath(argv[0]);
    std::string err;
    json tuned;
    if (tune) {
      tuned = autotune(self, c, timeout, err);
      if (!err.empty()) {
        std::cerr << "tictac-ps: " << err << "\n";
        return 1;
      }
      c.chunk_bytes = tuned["chunk_bytes"];
      c.window_bytes = tuned["window_bytes"];
    }
    json report, tr;
    if (!runOnce(self, c, timeout, report, trace.empty() ? nullptr : &tr, err)) {
      std::cerr << "tictac-ps: " << err << "\n";
      return 1;
    }
    if (tune) report["autotune"] = tuned;
    if (!trace.empty()) {
      std::ofstream f(trace, std::ios::binary | std::ios::trunc);
      f << tr.dump();
      f.close();  // a write error may show only when the buffer is flushed
      if (!f) {
        std::cerr << "tictac-ps: cannot write " << trace << "\n";
        return 1;
      }
    }
    std::cerr << tableHeader() << "\n" << tableRow(report) << "\n";
    if (tune) std::cerr << "autotune: " << tuned.dump() << "\n";
    if (json_out) std::cout << report.dump() << "\n" << std::flush;
    if (!std::cout) {
      std::cerr << "tictac-ps: cannot write the report to stdout\n";
      return 1;
    }
    return tableRow(report).find("FAILED") == std::string::npos ? 0 : 1;
  } catch (const tictac::sched::InputError& e) {
    std::cerr << "tictac-ps: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tictac-ps: " << e.what() << "\n";
    return 1;
  }
}
