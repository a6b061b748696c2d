#include "transport/core/context_impl.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "transport/core/cpu_set.h"

namespace tictac::transport {

namespace {
// The initial-exec model makes each use one %fs-relative access instead of a
// __tls_get_addr call: qemu's TCG (the soft-RoCE guest) pays two indirect
// jumps per call, and progress() reads t_in_callbacks on every pass. The cost
// is a few bytes of static TLS, which dlopen (the Python module) takes from
// glibc's reserve.
#define TICTAC_TLS_IE [[gnu::tls_model("initial-exec")]]
TICTAC_TLS_IE thread_local int t_in_callbacks = 0;  // >0 while this thread runs completions
// The context whose completions this thread is running (progress()), if any.
TICTAC_TLS_IE thread_local const ContextImpl* t_dispatching = nullptr;
}  // namespace

bool ContextImpl::inCallbacks() {
  return t_in_callbacks > 0;
}

ContextImpl::ContextImpl(const ContextOptions& options) : opts_(options) {}

namespace {
// The bootstrap liveness knobs: a timeout under two heartbeats loses live
// peers between beats, and past a day (an interval past an hour) the clock
// arithmetic of the monitor overflows.
Status checkLiveness(const ContextOptions& o) {
  using std::chrono::hours, std::chrono::milliseconds;
  const auto ms = [](milliseconds d) { return std::to_string(d.count()) + " ms"; };
  if (o.heartbeat_interval < milliseconds(1) || o.heartbeat_interval > hours(1)) {
    return Status(StatusCode::kInvalidArgument,
                  "heartbeat_interval of " + ms(o.heartbeat_interval) + " is outside 1 ms..1 h");
  }
  if (o.peer_timeout < 2 * o.heartbeat_interval || o.peer_timeout > hours(24)) {
    return Status(StatusCode::kInvalidArgument,
                  "peer_timeout of " + ms(o.peer_timeout) + " must be at least twice " +
                      "heartbeat_interval (" + ms(o.heartbeat_interval) + ") and at most 24 h");
  }
  return Status::ok();
}
}  // namespace

Result<std::shared_ptr<ContextImpl>> ContextImpl::create(const ContextOptions& options) {
  if (Status st = checkLiveness(options); !st) return st;
  std::shared_ptr<ContextImpl> c(new ContextImpl(options), &ContextImpl::destroy);
  BackendOptions bo{options.device, options.backend_config};
  auto backend = createBackend(options.backend, bo, c.get());
  if (!backend) return backend.status();
  c->backend_ = std::move(backend.value());
  c->posts_from_send_ = c->backend_->postsFromSend();
  c->copied_max_ = c->backend_->copiedPayloadMax();
  c->event_fd_ = c->backend_->eventFd();
  c->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);  // -1: sleepers use the slices only
  c->cache_ = std::make_unique<RegCache>(c->backend_.get());
  c->backend_->installUnmapHook(&RegCache::unmapHook, c->cache_.get());
  SchedulerOptions so;
  so.chunk_bytes = options.chunk_bytes;
  so.window_bytes = options.window_bytes;
  so.rate_gbps = options.rate_gbps;
  so.max_queued = SIZE_MAX / 2;  // the channel enforces max_queued itself (see send())
  c->sched_ = std::make_unique<SendScheduler>(so);
  if (c->opts_.max_queued == 0) c->opts_.max_queued = kDefaultMaxQueuedOps;
  if (c->opts_.max_unexpected_bytes == 0)
    c->opts_.max_unexpected_bytes = kDefaultMaxUnexpectedBytes;
  c->opts_.chunk_bytes = c->sched_->options().chunk_bytes;
  // An express send is one chunk in one backend message: at most kInlineMax
  // (or what the backend copies, if more) and a chunk (Backend::copiedPayloadMax).
  c->express_bytes_ = c->posts_from_send_
                          ? std::min(std::max(c->copied_max_, kInlineMax), c->opts_.chunk_bytes)
                          : 0;
  c->opts_.window_bytes = c->sched_->options().window_bytes;
  std::weak_ptr<ContextImpl> weak = c;
  if (!options.progress_thread) {
    c->pump_fn_ = std::make_shared<const std::function<unsigned()>>([weak]() -> unsigned {
      auto self = weak.lock();
      return self ? self->progress() : 0u;
    });
  }
  c->monitor_ = std::make_unique<PeerMonitor>(options.heartbeat_interval, options.peer_timeout,
                                              [raw = c.get()](uint32_t peer, const Status& why) {
                                                // A raw pointer, not a weak_ptr's lock: a
                                                // strong reference taken here could be the
                                                // last, and ~ContextImpl would then join the
                                                // monitor thread from itself. The destructor
                                                // joins this thread before any member dies.
                                                {
                                                  std::lock_guard<std::mutex> lock(raw->sub_mu_);
                                                  raw->lost_.emplace_back(peer, why);
                                                  raw->sub_pending_ = true;
                                                }
                                                raw->wakeSleepers();
                                              });
  if (options.progress_thread) {
    const char* env = std::getenv("TICTAC_PROGRESS_CPUS");
    auto cpus = resolveProgressCpus(
        env != nullptr ? env : options.progress_cpus, [&c] { return c->backend_->localCpus(); },
        allowedCpus());
    if (!cpus) {  // say where a bad value came from
      const Status& s = cpus.status();
      return env == nullptr ? s : Status(s.code(), "TICTAC_PROGRESS_CPUS: " + s.message());
    }
    c->progress_cpus_ = std::move(cpus.value());
    c->progress_thread_ = std::thread([raw = c.get()] { raw->progressLoop(); });
    if (!c->progress_cpus_.empty()) {
      // From here, before create() returns: a failure is the caller's error.
      if (Status s = bindThread(c->progress_thread_.native_handle(), c->progress_cpus_); !s) {
        return s;  // ~ContextImpl stops and joins the thread
      }
    }
  }
  return c;
}

void ContextImpl::destroy(ContextImpl* c) {
  if (t_dispatching == c) {
    c->delete_after_pass_ = true;  // progress() or progressLoop deletes it
    return;
  }
  delete c;
}

ContextImpl::~ContextImpl() {
  stop_ = true;
  if (progress_thread_.get_id() == std::this_thread::get_id()) {
    progress_thread_.detach();  // the last reference died in a callback on it (progressLoop)
  } else if (progress_thread_.joinable()) {
    progress_thread_.join();
  }
  if (backend_) flushBeforeClose(0);  // acks owed to peers leave before their kBye
  monitor_.reset();                   // closes every bootstrap link (peers see kBye)
  struct CloseWake {                  // last: the callbacks below may still send
    int fd;
    ~CloseWake() {
      if (fd >= 0) ::close(fd);
    }
  } close_wake{wake_fd_};
  if (!backend_) return;  // creation failed before the backend existed
  std::vector<Ready> ready;
  {
    std::lock_guard<std::mutex> lock(core_mu_);
    drainSubmissions();
    std::vector<uint32_t> ids;
    for (auto& [id, peer] : peers_) ids.push_back(id);
    // Every pending op completes (kCanceled) exactly once, even now.
    for (uint32_t id : ids) failPeer(id, Status(StatusCode::kCanceled, "context destroyed"));
    for (auto& [key, q] : stash_) {
      for (auto& st : q) backend_->release(st.desc);
    }
    stash_.clear();
    for (void* desc : release_after_ctrl_) {
      if (desc != nullptr) backend_->release(desc);
    }
    release_after_ctrl_.clear();
    backend_->removeUnmapHook(&RegCache::unmapHook, cache_.get());
    ready.swap(ready_);
  }
  ++t_in_callbacks;
  for (auto& r : ready) {
    if (r.cb) r.cb(r.status);
    r.handle->finish(r.status);
  }
  --t_in_callbacks;
  cache_->clear();
  backend_.reset();
}

unsigned ContextImpl::progress() {
  if (t_in_callbacks > 0) return 0;
  std::unique_lock<std::mutex> lock(core_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;
  finish_inline_ = true;
  unsigned n = 0;
  if (sub_pending_.load(std::memory_order_acquire)) {
    drainSubmissions();
    handleLostPeers();
    n++;
  }
  // New sends go out before this pass polls the backend: a reply sent from
  // a completion callback or after a wait leaves now, not after a CQ poll
  // and the landing and control passes (each costs microseconds in the
  // guest). The pump below sends what acks and completions admitted.
  // The checks inline here spare an empty pass two calls and returns (each
  // an indirect jump that qemu's TCG looks up: the guest's polling loop).
  n += pump();
  n += backend_->progress();
  if (!to_land_.empty()) n += startLandings();
  n += flushControl();
  n += pump();
  finish_inline_ = false;
  n += finished_inline_;  // ops finished in this round count as work (progressFor)
  finished_inline_ = 0;
  if (ready_.empty()) {
    if (n > 0) progress_gen_.fetch_add(1, std::memory_order_release);
    return n;
  }
  // A per-thread buffer swapped with ready_ keeps both capacities (no
  // allocation per pass). Safe: a nested progress() from a callback on this
  // thread returns at t_in_callbacks above, before touching it.
  TICTAC_TLS_IE static thread_local std::vector<Ready> ready;
  ready.swap(ready_);
  lock.unlock();
  ++t_in_callbacks;
  const ContextImpl* outer = t_dispatching;
  t_dispatching = this;  // a callback (or a closure's destruction) may drop the last reference
  for (auto& r : ready) {
    if (r.cb) r.cb(r.status);
    r.handle->finish(r.status);
  }
  auto count = static_cast<unsigned>(ready.size());
  ready.clear();
  t_dispatching = outer;
  --t_in_callbacks;
  progress_gen_.fetch_add(1, std::memory_order_release);
  if (delete_after_pass_ && std::this_thread::get_id() != progress_thread_.get_id()) {
    delete this;  // the last reference died in a callback above (destroy())
  }
  return n + count;
}

Status ContextImpl::registerMemory(const void* addr, size_t len) {
  std::lock_guard<std::mutex> lock(core_mu_);
  auto r = cache_->lookup(addr, len);
  return r ? Status::ok() : r.status();
}

void ContextImpl::releaseMemory(const void* addr, size_t len) {
  std::lock_guard<std::mutex> lock(core_mu_);
  cache_->release(addr, len);
}

RegistrationStats ContextImpl::registrationStats() {
  std::lock_guard<std::mutex> lock(core_mu_);
  return cache_->stats();
}

ReceiveStats ContextImpl::receiveStats() {
  std::lock_guard<std::mutex> lock(core_mu_);
  ReceiveStats s;
  for (const auto& [id, peer] : peers_) {
    s.unexpected_chunks += peer.stashed_chunks;
    s.unexpected_bytes += peer.stashed_bytes;
    s.rejected_ops += peer.rejected.size();
  }
  return s;
}

std::vector<PriorityStats> ContextImpl::priorityStats() {
  std::lock_guard<std::mutex> lock(core_mu_);
  std::vector<PriorityStats> out;
  for (auto& [prio, c] : sched_->counters()) {
    PriorityStats s;
    s.priority = prio;
    s.bytes_sent = c.bytes_sent;
    s.chunks = c.chunks;
    s.ops = c.ops;
    s.queue_delay_us_mean = c.ops ? c.queue_delay_us_sum / static_cast<double>(c.ops) : 0;
    s.queue_delay_us_max = c.queue_delay_us_max;
    out.push_back(s);
  }
  return out;
}

}  // namespace tictac::transport
