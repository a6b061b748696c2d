// guest_ops: what one operation of each kind costs on this machine now, in
// nanoseconds. Written for the soft-RoCE guest (qemu TCG), where the costs
// shift with the host's state during a boot (docs/perf.md, "Session 28"): run
// it between benchmark rounds to see which state a round ran in.
//
//   guest_ops [-n ITERS] [--thread] [--json]
//
// Kinds: alu (a dependent multiply-add), call (an indirect call and its
// return), atomic (a lock-prefixed fetch_add), lock (pthread_mutex_trylock +
// unlock), malloc (malloc(200) + free), clock (clock_gettime), page (a load
// from one of 64 pages in turn). --thread starts an idle second thread first,
// as tictac-perf has one (the peer monitor): glibc then takes its
// multi-threaded paths. Exit 0 (also for -h/--help), or 2 on bad usage.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

__attribute__((noinline)) uint64_t stepA(uint64_t x) {
  return x * 3 + 1;
}
__attribute__((noinline)) uint64_t stepB(uint64_t x) {
  return x * 5 + 2;
}
uint64_t (*volatile g_steps[2])(uint64_t) = {stepA, stepB};

template <class F>
double nsPer(long iters, F&& body) {
  auto t0 = Clock::now();
  for (long i = 0; i < iters; ++i) body(i);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / iters;
}

constexpr const char* kUsage =
    "usage: guest_ops [-n ITERS (1000..100000000)] [--thread] [--json]\n";

int usage() {
  std::fputs(kUsage, stderr);
  return 2;
}

int help() {
  std::fputs(kUsage, stdout);
  std::puts(
      "Prints what one operation of each kind costs now, in ns, on one line:\n"
      "  alu     a dependent multiply-add\n"
      "  call    an indirect call and its return\n"
      "  atomic  a lock-prefixed fetch_add\n"
      "  lock    pthread_mutex_trylock + unlock\n"
      "  malloc  malloc(200) + free (iterations / 4)\n"
      "  clock   clock_gettime(CLOCK_MONOTONIC) (iterations / 4)\n"
      "  page    a load from one of 64 pages in turn\n"
      "  -n ITERS  iterations of each kind (default 2000000)\n"
      "  --thread  start an idle second thread first (glibc's multi-threaded paths)\n"
      "  --json    one JSON object instead of name/value pairs\n"
      "In the soft-RoCE guest the figures tell the host's fast and slow states\n"
      "apart (docs/perf.md, \"Soft-RoCE / Session 28\").");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  long iters = 2000000;
  bool thread = false, json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      char* end = nullptr;
      iters = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || iters < 1000 || iters > 100000000) return usage();
    } else if (std::strcmp(argv[i], "--thread") == 0) {
      thread = true;
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      return help();
    } else {
      return usage();
    }
  }
  std::atomic<bool> stop{false};
  std::thread idle;
  if (thread) {
    idle = std::thread([&stop] {
      while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
  }
  volatile uint64_t sink = 0;
  uint64_t x = 1;  // unsigned: the ALU step wraps by design
  std::atomic<long> counter{0};
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  std::vector<char> pages(64 * 4096, 1);
  timespec ts{};
  struct Row {
    const char* name;
    double ns;
  } rows[] = {
      {"alu", nsPer(iters, [&](long) { x = x * 1103515245 + 12345; })},
      {"call", nsPer(iters, [&](long i) { x = g_steps[i & 1](x); })},
      {"atomic", nsPer(iters, [&](long) { counter.fetch_add(1); })},
      {"lock", nsPer(iters,
                     [&](long) {
                       if (pthread_mutex_trylock(&mu) == 0) pthread_mutex_unlock(&mu);
                     })},
      {"malloc", nsPer(iters / 4,
                       [&](long) {
                         void* p = std::malloc(200);
                         if (p != nullptr) *static_cast<volatile char*>(p) = 1;
                         std::free(p);
                       })},
      {"clock", nsPer(iters / 4, [&](long) { clock_gettime(CLOCK_MONOTONIC, &ts); })},
      {"page",
       nsPer(iters, [&](long i) { x += static_cast<unsigned char>(pages[(i & 63) * 4096]); })},
  };
  sink = x + static_cast<uint64_t>(counter.load());
  (void)sink;
  stop = true;
  if (idle.joinable()) idle.join();
  std::string line = json ? "{" : "";
  char field[64];
  for (const Row& r : rows) {
    const char* sep = &r == rows ? "" : json ? "," : " ";
    std::snprintf(field, sizeof(field), json ? "%s\"%s\":%.2f" : "%s%s %.2f", sep, r.name, r.ns);
    line += field;
  }
  std::puts((line + (json ? "}" : "")).c_str());
  return 0;
}
