// tictac/transport/context.h: the transport context.
//
// A Context owns one backend (its device, worker and progress), the send
// scheduler shared by all its peers, the registration cache and the TCP
// bootstrap links. Channels to peers come from listen()/accept() on one side
// and connect() on the other; both sides must use the same backend and job
// token. See docs/transport.md (API, bootstrap and wire protocol) and
// docs/thread_model.md (which thread runs what).
//
// Threading: every method is thread safe. Completions run in the progress
// context: inside progress() (one thread at a time; a nested or concurrent
// call returns 0 at once), on the progress thread when options.progress_thread
// is set, or in a thread blocked in Op::wait().
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tictac/transport/channel.h"
#include "tictac/transport/hints.h"
#include "tictac/transport/status.h"
#include "tictac/transport/types.h"

namespace tictac::transport {

class ContextImpl;
class ListenerImpl;

struct ContextOptions {
  std::string backend = "ucx";                        // "ucx" or "verbs"
  std::string device;                                 // backend device; empty = backend's choice
  std::map<std::string, std::string> backend_config;  // e.g. UCX: {"TLS", "tcp"}
  bool progress_thread = false;                       // run progress on an internal thread
  // Where that thread runs: "auto" = the CPUs local to the device (the NIC's
  // NUMA node, from hwloc; unbound when unknown, e.g. rxe or UCX), "none", or
  // a CPU list such as "0-3,8". TICTAC_PROGRESS_CPUS overrides it. A bad list
  // or a CPU outside the process's set fails create() (kInvalidArgument).
  std::string progress_cpus = "auto";
  uint64_t job_token = 0;                             // peers with another token are refused
  std::chrono::milliseconds heartbeat_interval{500};  // bootstrap heartbeat period
  // Silence that declares a peer lost: at least twice heartbeat_interval and
  // at most 24 h (heartbeat_interval: 1 ms..1 h), else create() fails kInvalidArgument.
  std::chrono::milliseconds peer_timeout{3000};
  std::chrono::milliseconds connect_timeout{10000};  // connect() retries this long
  // progress(max_wait): a sleep is cut into slices this long, after each of
  // which it looks for what no fd announces (another thread's progress()
  // passes; other threads' ops and lost peers also wake it at once).
  std::chrono::milliseconds wait_recheck{20};
  // Scheduler knobs (0 = library default, see docs/transport.md).
  size_t chunk_bytes = 0;
  size_t window_bytes = 0;
  double rate_gbps = 0;   // payload pacing; 0 = unpaced
  size_t max_queued = 0;  // sends queued (not yet started) before kNoResource
  // What one peer's tensors that came before their expect() may hold here
  // (payloads the backend kept in memory, plus 1 KiB a chunk); a peer that
  // sends more is failed (its ops end kPeerLost, naming this limit; the peer
  // is told). 0 = 1 GiB. docs/transport.md: "what early and late data may hold".
  size_t max_unexpected_bytes = 0;
  Priority default_priority = 1u << 31;       // when send() has no priority and no hint
  std::shared_ptr<const HintProvider> hints;  // optional
};

struct RegistrationStats {
  uint64_t hits = 0;           // send/expect found the buffer already registered
  uint64_t misses = 0;         // a new registration was made
  uint64_t invalidations = 0;  // entries dropped because memory was unmapped/freed/released
  uint64_t entries = 0;        // registrations currently cached
};

// The receive side's memory for what came early or late (receiveStats()).
struct ReceiveStats {
  uint64_t unexpected_chunks = 0;  // chunks kept until their expect() comes
  uint64_t unexpected_bytes = 0;   // what they count against max_unexpected_bytes
  uint64_t rejected_ops = 0;       // send ops whose remaining chunks are dropped
};

struct PriorityStats {
  Priority priority = 0;
  uint64_t bytes_sent = 0;
  uint64_t chunks = 0;
  uint64_t ops = 0;
  // Enqueue to first chunk (0 for a send posted at once from an idle scheduler).
  double queue_delay_us_mean = 0;
  double queue_delay_us_max = 0;
};

class Listener {
 public:
  ~Listener();
  uint16_t port() const;  // the bound port (useful after listen(0))
  // Waits for one peer (handshake included) for up to `timeout`; kCanceled
  // once close() was called.
  Result<std::shared_ptr<Channel>> accept(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
  // Stops listening, from any thread (a server's shutdown): the port refuses
  // new connections at once, an accept() waiting for one returns kCanceled
  // ("listener is closed"; one already in a handshake finishes it, within
  // connect_timeout, and may return a channel), and so do later calls. The
  // destructor releases the socket. Calling it again does nothing.
  void close();
  explicit Listener(std::unique_ptr<ListenerImpl> impl);

 private:
  std::unique_ptr<ListenerImpl> impl_;
};

class Context {
 public:
  // Creates the backend; kNoDevice / kUnsupported when it cannot run here.
  static Result<std::shared_ptr<Context>> create(const ContextOptions& options);
  ~Context();

  // Listens for bootstrap connections on `port` (0 = any free port) with
  // SO_REUSEADDR, on `bind_address` (default: all interfaces).
  Result<std::unique_ptr<Listener>> listen(uint16_t port, const std::string& bind_address = "");
  // Connects to a listening peer, retrying refused connections until
  // options.connect_timeout.
  Result<std::shared_ptr<Channel>> connect(const std::string& host, uint16_t port);

  // Registers [addr, addr+len) ahead of time (send/expect register on demand
  // otherwise). Cached; a later call covering the same range is a hit.
  Status registerMemory(const void* addr, size_t len);
  // Drops every cached registration overlapping the range (call before freeing
  // memory if the backend has no memory hooks; harmless otherwise).
  void releaseMemory(const void* addr, size_t len);
  RegistrationStats registrationStats() const;
  std::vector<PriorityStats> priorityStats() const;
  ReceiveStats receiveStats() const;

  // Runs the progress engine once: backend events, scheduler, completions.
  // Returns the number of events handled (0 when idle or when another thread
  // is inside progress()).
  unsigned progress();
  // The same, but when that pass handled nothing, sleeps until the backend has
  // events (a message, a completion) or `max_wait` passed, then runs progress
  // once more: a caller-driven loop that need not spin a core. Pacing
  // (rate_gbps) shortens the sleep to when the next chunk may leave. Another
  // thread's send(), expect(), cancel() or close() and a lost peer end the
  // sleep at once (the context's wake-up eventfd). Events another thread's
  // progress() handled are noticed within options.wait_recheck (20 ms): the
  // sleep is cut into such slices, and it returns 0 then (that pass may have
  // run this caller's completions: check them). It may return 0 early after
  // an empty wake-up
  // (UCX tcp). max_wait is capped at a year. With progress_thread set, or
  // inside a completion of any context on this thread, it returns at once.
  unsigned progress(std::chrono::microseconds max_wait);
  // For a caller that sleeps on several contexts (or in its own event loop),
  // as with ucp_worker_get_efd/ucp_worker_arm: when arm() returns true,
  // eventFd() becomes readable once this context has events, and the caller
  // may sleep on it (then call progress()). False means "call progress()
  // now": something is pending, pacing waits for a time rather than an event,
  // the backend cannot sleep (eventFd() is -1), a progress thread runs, or
  // the call came from inside a completion (of any context, on this thread).
  // arm() may itself send chunks that
  // became sendable (it runs the scheduler). Such a caller must bound its
  // sleep (tens of ms) for what the fd does not announce (see above).
  int eventFd();
  bool arm();

  const ContextOptions& options() const;
  std::string backendName() const;
  // The CPUs the progress thread is bound to; empty when there is none or it
  // is unbound (see ContextOptions::progress_cpus).
  std::vector<int> progressCpus() const;
  ContextImpl& impl() { return *impl_; }

  explicit Context(std::shared_ptr<ContextImpl> impl);

 private:
  std::shared_ptr<ContextImpl> impl_;
};

}  // namespace tictac::transport
