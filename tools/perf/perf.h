// tools/perf/perf.h: the pieces of tictac-perf (client runs, server loop,
// shared helpers). The client chooses every run's parameters and sends them to
// the server as a config tensor (RunConfig) before the run; both sides drive
// progress from their own thread (Session::progress), no progress thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tictac/transport/context.h"

namespace tictac::perf {

using transport::Channel;
using transport::Context;
using transport::ContextOptions;
using transport::Status;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Tensor id spaces of one run (the low bits count within a space).
constexpr uint64_t kConfigId = 5ull << 40, kUrgent = 1ull << 40, kBulk = 2ull << 40,
                   kReply = 3ull << 40, kDone = 4ull << 40, kReadyId = 6ull << 40;

enum Test : uint32_t { kBw = 1, kLat = 2, kPrio = 3, kQuit = 9 };
enum Mode : uint32_t { kPriority = 0, kFifo = 1, kIsolated = 2 };

// The run-config version. 2: 40 bytes with `version` (since the ready
// tensor); version 1 was 32 bytes without it and never sent a ready tensor,
// so an old peer's expect of the config fails with a size mismatch.
constexpr uint32_t kConfigVersion = 2;

// The largest message, bulk tensor, window or chunk the client asks for and
// the server accepts in a run config (each side allocates `size` and `bulk`).
constexpr uint64_t kMaxBytes = uint64_t{1} << 30;
// The most iterations (and warm-up sends) of a run: the client keeps a
// timestamp per send.
constexpr size_t kMaxIters = 100'000'000;

struct RunConfig {  // sent client -> server before every run
  uint32_t test = 0, mode = 0;
  uint64_t size = 0, iters = 0, bulk = 0;
  uint32_t version = kConfigVersion, reserved = 0;
};
static_assert(sizeof(RunConfig) == 40, "the config's wire size names its version");

// One side's connection(s); `run` numbers the runs (the tensors' iteration).
struct Session {
  std::vector<std::shared_ptr<Context>> ctx;
  std::shared_ptr<Channel> ch, ch2;  // ch2: the second connection (isolated mode)
  uint32_t run = 0;
  void progress() {
    for (auto& c : ctx) c->progress();
  }
  Status wait(const transport::OpHandle& op) {
    while (!op->done()) progress();
    return op->status();
  }
  // As wait(), but gives up after `limit`: kTimeout (the op stays posted; the
  // caller cancels it).
  Status wait(const transport::OpHandle& op, Clock::duration limit) {
    auto end = Clock::now() + limit;
    while (!op->done()) {
      if (Clock::now() >= end) return Status(transport::StatusCode::kTimeout, "deadline passed");
      progress();
    }
    return op->status();
  }
};

struct Options {  // the command line
  std::string backend = "ucx", test = "bw", device, server;
  size_t size = 0, iters = 0, window = 0, chunk = 0, bulk = 8 << 20;
  int64_t warmup = -1;  // bw: untimed sends first; < 0: iters / 10
  bool all = false, json_out = false;
  double rate = 0;
  uint16_t port = 18515;
};

// A benchmark buffer of `size` bytes filled with `fill`: 2 MiB aligned and
// advised to use transparent huge pages (as frameworks' caching allocators
// and UCX's own allocations get), so a shm (CMA) copy or a registration walks
// 2 MiB pages instead of 4 KiB ones. Not copyable.
// `huge_pages` false (--no-huge-pages): plain 4 KiB pages, no advice.
class Buffer {
 public:
  static inline bool huge_pages = true;
  Buffer(size_t size, char fill);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

double pct(std::vector<double> v, double p);
// {p50, p99, p999, max} of latencies in microseconds.
json latJson(const std::vector<double>& us);
double sinceUs(Clock::time_point t0, Clock::time_point t1);

// Keeps `depth` expects posted for ids base+0 .. base+count-1 into buf.
// The first failure (any status but finish()'s kCanceled) is kept in `error` and stops
// the ring: fill() then posts nothing and on_done is not called for it. The
// ring prints nothing; its owner reports `error` once (no line per expect).
struct ExpectRing {
  Channel* ch;
  uint64_t base, count, next = 0, done = 0;
  uint32_t it;
  Buffer* buf;
  std::function<void(uint64_t)> on_done;
  std::deque<transport::OpHandle> pending;  // posted, oldest first (done ones pruned)
  Status error;                             // the first failure; ok while none
  bool finishing = false;                   // finish() cancels: not a failure
  bool failed() const { return !error.isOk(); }
  // Posts expects until `depth` are outstanding (or all `count` were posted).
  void fill(uint64_t depth);  // no-op once failed()
  // Cancels the expects still outstanding and progresses until every one has
  // completed, so no callback runs after the ring (or buf) is gone.
  void finish(Session& s);
};

// Sends the run's config tensor and waits for its completion.
Status sendConfig(Session& s, const RunConfig& cfg);
// Start of a run: the server sends a 0-byte ready tensor once its buffers are
// allocated and its first expects are posted (sendReady), and the client
// starts the clock only after it arrived (waitReady), as perftest syncs both
// sides before measuring. Without it, a prio run's first urgent tensors waited
// for the server's buffer set-up (up to 4 ms), enough to move the p99 of 2000.
Status sendReady(Session& s, transport::Channel& ch);
// waitReady gives up after kReadyWait with kTimeout: a version-1 server never
// sends the ready tensor.
constexpr auto kReadyWait = std::chrono::seconds(30);
Status waitReady(Session& s, transport::Channel& ch);
// One perftest-like table row on stderr (with the header first when asked).
void printRow(const json& r, bool header);

// Server: serves runs until the client's kQuit; 0 ok, 1 on a failed transfer.
int serve(Session& s, transport::Listener& listener);
// Client: every requested run, rows on stderr, JSON lines on `out` with --json;
// 0 ok, 1 when a run failed.
int runClient(Session& s, const Options& o, const ContextOptions& copts, FILE* out);

}  // namespace tictac::perf
