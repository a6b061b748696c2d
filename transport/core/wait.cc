// Sleeping instead of spinning: the progress thread's idle path and the
// caller-driven equivalents (Context::eventFd/arm/progress(timeout)).
//
// A context may sleep only on its backend's event fd (UCX's worker efd, the
// verbs completion channel) after arming it, and only when nothing is pending
// that the fd would not announce: a submission from another thread, an
// event the backend already holds, or a pacing deadline (the token bucket
// admits the next chunk at a time, not on an event).
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "transport/core/context_impl.h"

namespace tictac::transport {

namespace {
using Clock = SendScheduler::Clock;

// ppoll on fd and wake (each skipped when < 0) for at most `d`; true when
// one is readable. A readable wake eventfd is drained.
bool sleepOn(int fd, Clock::duration d, int wake = -1) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  pollfd p[2];
  nfds_t n = 0;
  if (fd >= 0) p[n++] = {fd, POLLIN, 0};
  if (wake >= 0) p[n++] = {wake, POLLIN, 0};
  if (::ppoll(p, n, &ts, nullptr) <= 0) return false;
  if (wake >= 0 && (p[n - 1].revents & POLLIN) != 0) {
    uint64_t v;
    (void)!::read(wake, &v, sizeof(v));
  }
  return true;
}

// How long until pacing admits a chunk: max() when no pacing wait is pending.
Clock::duration untilPacing(const std::atomic<int64_t>& retry_at) {
  int64_t retry = retry_at.load(std::memory_order_relaxed);
  if (retry == INT64_MAX) return Clock::duration::max();
  return Clock::time_point(Clock::duration(retry)) - SendScheduler::now();
}
}  // namespace

void ContextImpl::progressLoop() {
  constexpr auto kMaxSleep = std::chrono::milliseconds(1);
  unsigned idle = 0;
  while (!stop_) {
    unsigned n = progress();
    if (delete_after_pass_) {  // a callback dropped the last reference (destroy())
      delete this;             // detaches this thread; touch nothing after it
      return;
    }
    if (n > 0) {
      idle = 0;
      continue;
    }
    auto until_retry = untilPacing(pace_retry_);
    if (until_retry <= Clock::duration::zero()) continue;  // pacing admits a chunk now
    // Spin a little for latency, unless pacing tells how long nothing will go.
    if (until_retry > kMaxSleep && ++idle < 1000) continue;
    // Idle: sleep on the backend's event fd (so two cores are not both spun),
    // at most until pacing admits the next chunk, and at most 1 ms. A backend
    // without an fd is polled every millisecond.
    bool armed;
    {
      std::lock_guard<std::mutex> lock(core_mu_);
      armed = backend_->arm();
    }
    if (sub_pending_ || (!armed && event_fd_ >= 0)) continue;  // events pending: progress
    sleepOn(armed ? event_fd_ : -1, std::min<Clock::duration>(until_retry, kMaxSleep));
    idle = 0;
  }
}

int ContextImpl::eventFd() {
  return event_fd_;
}

// wakeSleepers() (context_impl.h) calls this when a sleeper is counted. Its
// fetch_add(0) pairs with progressFor()'s increment before it looks for
// work: either the sleeper sees what was published before it, or it sees the
// sleeper. A read-modify-write, not a fence and a load: the two RMWs on
// sleepers_ are ordered, and the later one synchronizes with the earlier
// (ThreadSanitizer models this; it does not model fences).
void ContextImpl::wakeNow() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

bool ContextImpl::armIdle() {
  if (inCallbacks() || progress_thread_.joinable()) return false;
  if (sub_pending_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(core_mu_);
  // send()/expect() start an op in the caller's thread when the core is free
  // (startNow: no submission flag): its chunks wait for pump(), the landing
  // of a tensor that arrived before its expect for startLandings(); neither
  // is announced on the fd. pump() here sends what may leave (and sets the
  // pacing deadline the callers read after this).
  if (pump() > 0 || !ready_.empty() || !to_land_.empty() || event_fd_ < 0) {
    return false;
  }
  return backend_->arm();
}

bool ContextImpl::arm() {
  return armIdle() && pace_retry_.load(std::memory_order_relaxed) == INT64_MAX;
}

// The caller holds a reference (Context::progress(max_wait)): a callback that
// drops the last one would otherwise delete this before `sleeper` is undone.
unsigned ContextImpl::progressFor(std::chrono::nanoseconds max_wait) {
  uint64_t gen = progress_gen_.load(std::memory_order_acquire);
  unsigned n = progress();
  if (n > 0 || inCallbacks() || progress_thread_.joinable()) return n;
  auto deadline = SendScheduler::now() + max_wait;  // Context::progress() caps it at a year
  auto recheck = std::max<Clock::duration>(opts_.wait_recheck, std::chrono::milliseconds(1));
  struct Sleeper {  // counted while this call may sleep (see wakeSleepers())
    std::atomic<int>& n;
    explicit Sleeper(std::atomic<int>& c) : n(c) { n.fetch_add(1, std::memory_order_seq_cst); }
    ~Sleeper() { n.fetch_sub(1, std::memory_order_relaxed); }
  } sleeper(sleepers_);
  for (;;) {
    // Another thread's pass handled events (maybe this caller's): return.
    if (progress_gen_.load(std::memory_order_acquire) != gen) return 0;
    auto left = deadline - SendScheduler::now();
    if (left <= Clock::duration::zero()) return 0;
    auto sleep = std::min<Clock::duration>(left, untilPacing(pace_retry_));
    if (sleep > Clock::duration::zero() && armIdle()) {
      sleep = std::min<Clock::duration>(sleep, untilPacing(pace_retry_));  // armIdle() pumped
      auto slice = std::clamp<Clock::duration>(sleep, Clock::duration::zero(), recheck);
      if (sleepOn(event_fd_, slice, wake_fd_) || slice == sleep) return progress();
      continue;  // a quiet slice: look again for what the fd does not announce
    }
    // Something is pending (or the backend cannot sleep): progress again.
    if ((n = progress()) > 0) return n;
  }
}

}  // namespace tictac::transport
