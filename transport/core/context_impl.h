// transport/core/context_impl.h: the engine behind Context and Channel.
//
// State and its owners:
// - submissions (sends/expects posted by any thread) and lost-peer notices:
//   guarded by sub_mu_, drained into the core at the start of progress();
// - everything else (scheduler, backend, op tables, registration cache,
//   peers): guarded by core_mu_, held by the one thread inside progress() (or
//   briefly by connect/accept/cancel/close);
// - completions with a callback are collected under core_mu_ and run after
//   it is released, in the thread that ran progress(), with nested progress()
//   calls refused; an op without one that ends in a progress() round is
//   finished there (complete()).
// Send path: send_path.cc; receive path: recv_path.cc; express (one-step
// small sends and expects): express.cc. Each file's head says how it works.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tictac/transport/context.h"
#include "transport/backend.h"
#include "transport/core/flat_map.h"
#include "transport/core/peer_monitor.h"
#include "transport/core/records.h"
#include "transport/core/reg_cache.h"
#include "transport/core/send_scheduler.h"
#include "transport/core/slab_table.h"
#include "transport/core/wire.h"

namespace tictac::transport {

// How long close() / context destruction waits for the acks it owes peers.
inline constexpr std::chrono::milliseconds kCloseFlushTimeout{1500};

class ContextImpl : public BackendEvents {
 public:
  static Result<std::shared_ptr<ContextImpl>> create(const ContextOptions& options);
  // create()'s deleter. A completion callback may drop the last reference (a
  // closure that owns the context): when that happens inside this context's
  // callback pass on this thread, the context is deleted when the pass ends
  // (by progress(), or by progressLoop on the progress thread, whose
  // destructor then detaches that thread); anywhere else at once, so a user
  // thread's last reset still returns only after the teardown (joining the
  // progress thread).
  static void destroy(ContextImpl* c);
  ~ContextImpl() override;

  Result<OpHandle> send(uint32_t peer, const TensorKey& key, const void* buf, size_t len,
                        std::optional<Priority> prio, Completion cb);
  Result<std::vector<OpHandle>> sendBatch(uint32_t peer, std::vector<SendItem>& items);
  Result<OpHandle> expect(uint32_t peer, const TensorKey& key, void* dst, size_t len,
                          Completion cb);
  bool cancel(uint32_t peer, const OpHandle& op);
  void closePeer(uint32_t peer);
  bool peerAlive(uint32_t peer);
  std::string peerName(uint32_t peer);
  // Handshake over a connected bootstrap fd, then adds the peer everywhere.
  Result<uint32_t> setupPeer(int fd, bool initiator, const std::string& name);

  unsigned progress();
  // Caller-driven sleep (wait.cc; Context::eventFd/arm/progress(timeout)).
  // eventFd(): the backend's fd, -1 when it cannot sleep. arm(): true when
  // the caller may sleep until eventFd() is readable: nothing is pending
  // (no submission, no backend event, no pacing deadline); false from inside
  // a completion. progressFor(): progress(), and when it handled nothing,
  // sleep on the fd (at most max_wait, and at most until pacing admits a
  // chunk) and progress() again. max_wait: at most a year (Context::progress()
  // clamps it; the deadline is now + max_wait, unsaturated).
  int eventFd();
  bool arm();
  unsigned progressFor(std::chrono::nanoseconds max_wait);
  static bool inCallbacks();  // this thread is running completions
  Status registerMemory(const void* addr, size_t len);
  void releaseMemory(const void* addr, size_t len);
  RegistrationStats registrationStats();
  std::vector<PriorityStats> priorityStats();
  ReceiveStats receiveStats();
  const ContextOptions& options() const { return opts_; }
  std::string backendName() const { return backend_->name(); }
  const std::vector<int>& progressCpus() const { return progress_cpus_; }

  // BackendEvents (inside backend_->progress(), core_mu_ held).
  void onMessage(PeerId from, std::span<const std::byte> header, Incoming& in) override;
  void onSendDone(uint64_t token, const Status& status) override;
  void onReceiveDone(uint64_t token, const Status& status) override;
  void onPeerError(PeerId peer, const Status& status) override;
  void onAdvertDone(uint64_t token, size_t bytes, const Status& status) override;

 private:
  // The per-operation records (transport/core/records.h).
  using SendOp = engine::SendOp;
  using RecvOp = engine::RecvOp;
  using Stashed = engine::Stashed;
  using Post = engine::Post;
  using Landing = engine::Landing;
  using Peer = engine::Peer;
  using Submission = engine::Submission;
  using Ready = engine::Ready;
  using Express = engine::Express;

  explicit ContextImpl(const ContextOptions& options);
  OpHandle newHandle(uint64_t id);
  // s's handle, made on first use (an express send's: after its post), copied to *s.user.
  OpHandle& handleOf(Submission& s) {
    if (!s.handle) {
      s.handle = newHandle(s.id);
      if (s.user != nullptr) *s.user = s.handle;
      s.user = nullptr;  // written once: a second handle would not be the caller's
    }
    return s.handle;
  }
  void drainSubmissions();
  // Caller-driven contexts: starts `s` here when the core is free (after queued
  // submissions, which keep their order); false when another thread holds it.
  bool startNow(Submission& s);
  bool startBatchNow(std::span<Submission> subs);  // the same, all before one pump()
  void submit(Submission& s);                      // startNow() or the queue, then wakeSleepers()
  void queueSubmissions(std::span<Submission> subs);  // for the next drain, under one lock
  // send()'s synchronous checks; the op's priority (given, hinted or default).
  Result<Priority> checkSend(const TensorKey& key, const void* buf, size_t len,
                             std::optional<Priority> prio);
  Status reserveSends(size_t n);  // n more queued sends, or kNoResource (none taken)
  bool cancelOp(uint32_t peer, const OpHandle& op);  // cancel() without the wake-up
  // at_once: handed out in this pass (idle, unpaced scheduler: posted here when
  // it fits one chunk, SendScheduler::sendWhole): no enqueue time read.
  void startSend(Submission& s, bool at_once = false);
  // A send that never reached the engine's tables: queues its completion with st.
  void failSend(Submission& s, Status st);
  // The express send: see express.cc. False: take startSend().
  bool startExpress(Submission& s);
  void endExpress(Status st);  // completes it with st (complete()); frees the slot
  // Posts an expect: into the express slot (xexpect_) when the slot is free
  // and nothing of the tensor arrived yet, else into recvs_/expect_index_
  // (and lands what the stash holds of it).
  void startExpect(Submission& s);
  // The express expect: see express.cc. True: landed and finished.
  bool landExpress(const wire::Header& h, Incoming& in, Peer& peer);
  void promoteExpect();  // xexpect_ -> recvs_ and expect_index_ (none: no-op)
  bool isExpressExpect(const PeerKey& key) const { return xexpect_id_ != 0 && xexpect_.key == key; }
  void handleLostPeers();
  void failPeer(uint32_t peer, const Status& why);
  // Hands the chunks the scheduler admits to the backend. Idle or window-bound:
  // only clears the pacing deadline, inline (no call, no clock read).
  unsigned pump() {
    if (sched_->mayAdmit()) return pumpChunks();
    pace_retry_.store(INT64_MAX, std::memory_order_relaxed);
    return 0;
  }
  unsigned pumpChunks();  // send_path.cc
  // Builds chunk c's header and posts it (pumpChunks, and startSend's whole
  // sends). False when the post failed: the op is failed then (and may be
  // gone from sends_).
  bool postChunk(SendOp& op, const Chunk& c);
  unsigned startLandings();
  unsigned flushControl();
  // Before a bootstrap link closes (close(), context destruction): posts the
  // queued acks/nacks/aborts of `peer` (0 = every peer) and progresses the
  // backend until their sends completed or kCloseFlushTimeout passed, so the
  // peer learns that its last tensors arrived before it sees the link's EOF.
  // Caller holds no lock; the progress thread may run meanwhile.
  void flushBeforeClose(uint32_t peer);
  bool controlPending(uint32_t peer);  // core_mu_ held
  void onData(const wire::Header& h, Incoming& in);
  void onAcks(const wire::Header& h, const Incoming& in);
  void onNack(const wire::Header& h);
  void land(RecvOp& r, uint64_t rid, const wire::Header& h, Incoming* in, void* desc, bool ack);
  void queueCtrl(uint32_t peer, wire::MsgType type, const wire::Header& about, StatusCode code,
                 uint32_t priority = 0);
  void failSend(uint64_t id, const Status& s, bool tell_peer);
  // Confirms one chunk of op `id`: returns its window credit and counts its
  // bytes, once per chunk (a kFlagNoAck chunk's completion and ack, a failed
  // post and a late ack, or a duplicate ack credit it only the first time).
  void confirmChunk(uint64_t id, SendOp& op, uint64_t offset, size_t len);
  // True when (offset, bytes) is exactly a chunk of `op` already handed out.
  bool ackNamesAChunk(const SendOp& op, uint64_t offset, uint64_t bytes) const;
  void releaseLater(void* desc);  // a dropped payload, after this pass's control messages
  void failExpect(uint64_t id, const Status& s);
  // Offers a new expect's buffer to its peer (Backend::advertise; recv_path.cc);
  // an advert counts as a pending receive until onAdvertDone.
  void advertise(RecvOp& r, uint64_t id);
  // An advert a canceled expect `id` still held took the whole tensor (sent before the
  // withdrawal arrived): a later expect of that key and size gets a copy (recv_path.cc).
  void handOver(uint64_t id);
  std::vector<std::pair<uint32_t, Status>> dying_;  // lost_ as handleLostPeers() fails it
  // An op a backend fails on a dying peer before its onPeerError is drained (UCX:
  // a CMA get from a killed process; a post on a failed endpoint) fails as peer lost.
  Status lostOr(uint32_t peer, const Status& s);
  void dropStash(const PeerKey& key);
  void unstash(uint32_t peer, const std::deque<Stashed>& q);  // Peer::stashed_bytes -= theirs
  void tryFinishSend(uint64_t id);
  // Ends a started op with `st`. Without a callback, inside a progress round
  // (finish_inline_), it is finished here (no user code to keep outside
  // core_mu_; Op::finish takes only Op::mu_, never under it core_mu_) and
  // counted in finished_inline_; else queued for the callback pass (ready_).
  // send(), expect(), cancel() and close() run with finish_inline_ false.
  void complete(OpHandle& h, Completion& cb, Status st) {
    if (finish_inline_ && !cb) {
      h->finish(st);
      h.reset();
      ++finished_inline_;
      return;
    }
    ready_.emplace_back(std::move(h), std::move(cb), std::move(st));
  }
  void tryFinishExpect(uint64_t id);
  void progressLoop();
  bool armIdle();  // arm() without the pacing condition (wait.cc)
 public:
  // After publishing work a sleeper must see. Inline: send() and expect()
  // call it every time, and there is rarely a sleeper to wake (wait.cc).
  void wakeSleepers() {
    if (wake_fd_ >= 0 && sleepers_.fetch_add(0, std::memory_order_seq_cst) != 0) wakeNow();
  }
  void wakeNow();  // writes wake_fd_ (wait.cc)
 private:
  ContextOptions opts_;
  std::unique_ptr<Backend> backend_;
  bool posts_from_send_ = false;  // backend_->postsFromSend(), read once by create()
  size_t copied_max_ = 0;         // backend_->copiedPayloadMax(), read once by create()
  // min(max(copied_max_, kInlineMax), chunk) if posts_from_send_, else 0
  size_t express_bytes_ = 0;
  std::unique_ptr<RegCache> cache_;
  std::unique_ptr<PeerMonitor> monitor_;
  std::unique_ptr<SendScheduler> sched_;

  std::mutex sub_mu_;
  std::vector<Submission> subs_;
  std::vector<Submission> subs_run_;  // core_mu_: the batch drainSubmissions() runs
  std::vector<std::pair<uint32_t, Status>> lost_;
  std::atomic<bool> sub_pending_{false};
  std::atomic<size_t> queued_sends_{0};
  std::atomic<uint64_t> next_id_{1};
  Op::Pump pump_fn_;  // what Op::wait() drives (null with a progress thread); set by create()

  std::mutex core_mu_;
  std::unordered_map<uint32_t, Peer> peers_;  // never erased (a lost peer stays, !alive)
  // peers_'s values by id (node addresses are stable): the per-message paths
  // look peers up here, without a hash-table call.
  std::vector<Peer*> peer_index_;
  Peer* findPeer(uint32_t id) { return id < peer_index_.size() ? peer_index_[id] : nullptr; }
  Peer* livePeer(uint32_t id) {
    Peer* p = findPeer(id);
    return p != nullptr && p->alive ? p : nullptr;
  }
  uint32_t next_peer_ = 1;
  // Per-message tables: slabs and flat maps, so that a warm context posts,
  // lands and completes tensors without allocating (slab_table.h, flat_map.h).
  SlabTable<SendOp> sends_;
  SlabTable<RecvOp> recvs_;
  FlatMap<PeerKey, uint64_t, PeerKeyHash> expect_index_;
  FlatMap<PeerKey, bool, PeerKeyHash> send_keys_;  // (peer, tensor) with a send pending
  Express express_;          // the express send in flight (at most one; not in send_keys_)
  uint64_t xexpect_id_ = 0;  // the express expect's op id; 0: the slot is free
  RecvOp xexpect_;           // the express expect (not in recvs_ nor expect_index_)
  std::unordered_map<PeerKey, std::deque<Stashed>, PeerKeyHash> stash_;
  SlabTable<Post> posts_;        // by backend token
  SlabTable<Landing> landings_;  // by backend token
  std::deque<Landing> to_land_;  // deque: backends write descs into its slots
  // Dropped payloads (rejected, size mismatch) released at the end of
  // flushControl(), after the nacks: a backend that completes the sender's
  // post on release (UCX rendezvous) must not let that completion, which
  // confirms a kFlagNoAck chunk, overtake the nack. Slots written by the
  // backend (retain_into) before progress() returns: a deque keeps them put.
  std::deque<void*> release_after_ctrl_;
  // Adverts of failed expects and of expects whose data came the usual way,
  // withdrawn (Backend::unadvertise) by the next flushControl(): failExpect()
  // and land() run inside event handlers too, which must not call the backend.
  std::vector<uint64_t> unadverts_;
  uint64_t next_token_ = 1;
  std::vector<Ready> ready_;
  bool finish_inline_ = false;    // core_mu_: inside progress()'s round (complete())
  unsigned finished_inline_ = 0;  // core_mu_: ops complete() finished this round

  // When pacing (rate_gbps) next allows a chunk while sends wait for tokens,
  // as steady_clock ticks; INT64_MAX when no pacing wait is pending. Written
  // by pump(), read by the progress thread to sleep exactly that long.
  std::atomic<int64_t> pace_retry_{INT64_MAX};
  // Bumped by every progress() pass that handled something (any thread):
  // progressFor() returns when another thread's pass may have done its work.
  std::atomic<uint64_t> progress_gen_{0};
  int event_fd_ = -1;  // backend_->eventFd(), read once at create()
  // A sleeper in progressFor() also polls wake_fd_ (an eventfd): send(),
  // expect(), cancel(), close() and the monitor's lost-peer notice write it
  // when sleepers_ > 0, so another thread's work ends the sleep at once.
  int wake_fd_ = -1;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  bool delete_after_pass_ = false;  // destroy() ran inside this thread's callback pass
  std::thread progress_thread_;
  std::vector<int> progress_cpus_;  // its binding (cpu_set.h); empty: unbound
};

}  // namespace tictac::transport
