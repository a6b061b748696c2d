// transport/verbs/backend.h: the libibverbs backend (internal; use factory.h).
//
// One RC QP per peer and priority class (a Conn; one class unless
// class_bounds is set), all on one CQ with a completion channel. The QPs are
// created by localAddress() (their numbers go into the blob) and connected by
// addPeer(). The core's setupPeer() calls both from one thread, so addPeer()
// takes the QPs that the same thread's last localAddress() made (else the
// oldest unconnected ones). post() picks the QP of the priority's class:
// each class has its own GRH traffic class and SL, so a NIC with PFC/ETS can
// serve them apart; every message of one tensor shares a priority, hence a
// QP, and keeps its order.
//
// Outbound work (SENDs of messages, RDMA WRITEs of rendezvous payloads) goes
// through a per-Conn backlog: it is posted while the send queue has room and
// waits otherwise (never dropped); completions make room and progress()
// posts more. Receivers never run out silently: receive buffers are reposted
// after each message, and the QP retries RNR NAKs indefinitely (rnr_retry 7)
// should a peer outrun them. Events reach the core only from progress().
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/verbs/cm.h"
#include "transport/verbs/compact.h"
#include "transport/verbs/conn.h"
#include "transport/verbs/device.h"
#include "transport/verbs/proto.h"
#include "transport/verbs/stats.h"
#include "transport/verbs/tuning.h"

namespace tictac::transport::verbs {

// BackendOptions::config[key], else TICTAC_VERBS_<KEY>; false when neither is set.
bool optionText(const BackendOptions& o, const char* key, std::string* out);
// kIoError "what: strerror(err)".
Status verbsError(const std::string& what, int err);
// kPeerLost "verbs: no live connection to peer N" (post.cc).
Status peerGone(PeerId peer);
// kProtocolError when a peer's blob advertises receive buffers below
// kMinRecvBytes (connect.cc; both connection managers check it).
Status checkRecvBytes(uint32_t recv_bytes);

// lkey/rkey of a region made by VerbsBackend::registerMemory.
const ibv_mr* mrOf(const MemoryRegion* region);

class VerbsBackend final : public Backend {
 public:
  explicit VerbsBackend(BackendEvents* events) : events_(events) {}
  ~VerbsBackend() override;
  Status init(const BackendOptions& options);

  std::string name() const override { return "verbs"; }
  std::vector<uint8_t> localAddress() override;
  Status addPeer(PeerId peer, std::span<const uint8_t> remote_address) override;
  void discardAddress(std::span<const uint8_t> local_address) override;
  size_t connCount() const { return conns_.size(); }  // QPs open (tests)
  void removePeer(PeerId peer) override;
  Result<std::unique_ptr<MemoryRegion>> registerMemory(const void* addr, size_t len) override;
  Status post(PeerId peer, std::span<const std::byte> header, const void* data, size_t len,
              const MemoryRegion* region, uint64_t token, uint32_t priority) override;
  Status receive(void* desc, void* dst, size_t len, const MemoryRegion* region,
                 uint64_t token) override;
  // Every post completes (onSendDone ok) only after the remote NIC acknowledged
  // it: an RC SEND, or for a rendezvous the RDMA WRITE WITH IMMEDIATE that
  // wrote the payload into the receiver's buffer (never at kRts time). A
  // payload the receiver declined (kCts with kFlagDrop) completes too; the
  // core only sends those for chunks it rejected or dropped itself.
  bool confirmsDelivery(size_t, const MemoryRegion*) const override { return true; }
  void release(void* desc) override;
  // A ping-pong's reply leaves from send() (its QP is connected by then).
  bool postsFromSend() const override { return true; }
  // Receiver-advertised rendezvous (advert.cc; proto.h has the protocol):
  // one kAdv record per expect of a rendezvous-sized tensor, on a peer with
  // one class, unless adverts=0.
  bool advertise(PeerId peer, uint32_t iteration, uint64_t tensor, void* dst, size_t len,
                 const MemoryRegion* region, uint64_t token) override;
  void unadvertise(uint64_t token) override;
  // Eager payloads below kZeroCopyEager are copied; a region is never read.
  size_t copiedPayloadMax() const override { return kZeroCopyEager - 1; }
  // The device's NUMA-local CPUs from hwloc (transport/topo); empty for rxe
  // and siw (no PCI device) and in builds without hwloc.
  std::vector<int> localCpus() override;
  unsigned progress() override;
  int eventFd() override;
  bool arm() override;
  bool installUnmapHook(UnmapHook hook, void* arg) override;
  void removeUnmapHook(UnmapHook hook, void* arg) override;

  // Diagnostics (tests): a peer's QPs in class order, with the work
  // requests posted on each.
  struct ClassQpInfo {
    ibv_qp* qp;
    uint8_t cls;
    uint64_t posted;
    uint64_t compact;     // of those, compact eager messages (compact.h)
    size_t adverts_held;  // the peer's adverts accepted and not yet ended (advert.cc)
    uint32_t last_rkey;   // of the peer's last kCts or advert taken
  };
  std::vector<ClassQpInfo> peerQps(PeerId peer) const;
  static constexpr size_t kMaxClasses = 8;

  // For memory hooks (memory.cc).
  UnmapHook hook_ = nullptr;
  void* hook_arg_ = nullptr;

 private:
  // Creates a Conn's QP with `make` (rdma_cm) or ibv_create_qp, moves it to
  // INIT and, unless post_recvs is false (the caller posts them later), posts
  // its receive buffers.
  using QpMaker = std::function<ibv_qp*(ibv_qp_init_attr*)>;
  Result<Conn*> newConn(const QpMaker& make = {}, bool post_recvs = true);
  // cm=rdmacm (cm.cc): setup, the blob, addPeer and incoming requests.
  Status initCm(const BackendOptions& options, DeviceConfig* dc);
  std::vector<uint8_t> cmLocalAddress();
  Status addPeerCm(PeerId peer, std::span<const uint8_t> remote);
  Status acceptCm(rdma_cm_id* id, const CmRequest& request);
  void dropConn(uint32_t qpn);
  Status connectQp(Conn& c, const AddressBlob& remote);
  void killConn(Conn& c, const Status& why);
  void destroyConn(Conn& c);
  Conn* connOf(PeerId peer, size_t cls = 0);
  size_t classCount() const { return tune_.class_bounds.size() + 1; }
  size_t classOf(uint32_t priority) const {
    if (tune_.class_bounds.empty()) return 0;
    return static_cast<size_t>(
        std::upper_bound(tune_.class_bounds.begin(), tune_.class_bounds.end(), priority) -
        tune_.class_bounds.begin());
  }
  Status parseClasses(const BackendOptions& options);  // connect.cc
  Conn* connByQpn(uint32_t qpn);
  uint64_t allocWork();  // a live slot of works_ (contents left to the caller)
  uint64_t queueWork(Conn& c, Work w);
  bool postInlineNow(Conn& c, const MsgHdr& mh, std::span<const std::byte> header, const void* data,
                     uint64_t token);
  void freeWork(uint64_t id);
  bool inFlight() const;       // posted work or a rendezvous not yet completed
  bool sendsInFlight() const;  // the same, rendezvous receives excepted
  void flush(Conn& c);
  int postWork(Conn& c, Work& w, uint64_t id);  // 0, ENOMEM (full) or an errno
  // Lays out one SEND's bytes at p: MsgHdr (hdr_len set), core header,
  // payload; returns the total. p must hold that many bytes.
  // One signaled SEND of len bytes at p (in c's send MR, or inline): wr_id id.
  int postSend(Conn& c, uint64_t id, const char* p, size_t len, bool inl);
  // A signaled SEND WITH IMMEDIATE of the payload alone (a compact message):
  // inline, or from (p, lkey).
  int postCompact(Conn& c, uint64_t id, const char* p, size_t len, uint32_t lkey, bool inl,
                  uint32_t imm);
  // A signaled work request of one SGE (the caller fills the rest).
  static ibv_send_wr signaledWr(uint64_t id, ibv_sge* sge, ibv_wr_opcode op, unsigned flags);
  static size_t packMsg(char* p, const MsgHdr& mh, const void* header, size_t header_len,
                        const void* data, size_t len);
  Work makeMsg(Conn& c, const MsgHdr& mh, std::span<const std::byte> header, const void* data);
  void queueWrite(Conn& c, RndvSendArgs a);
  // Receive buffer `index` of c (Conn::split_recv): its first kRecvHead bytes
  // land in a dense array of heads at the end of c.rbuf, the rest in the
  // buffer past its first kRecvHead bytes. Small messages (compact ones,
  // handshakes, adverts) thus fill consecutive slots of a few pages instead of
  // a new 8 KiB buffer each: in the soft-RoCE guest every page a turn touches
  // first costs qemu a software page walk (docs/perf.md, "Session 27").
  // recvSges() fills sge[0..1] and returns how many; recvView() returns a
  // received message's bytes contiguous (a longer one's head is copied in
  // front of its rest).
  static constexpr uint32_t kRecvHead = 256;
  char* recvBuf(Conn& c, uint32_t index) const;   // receive buffer `index`
  char* recvHead(Conn& c, uint32_t index) const;  // head slot `index` (split_recv)
  int recvSges(Conn& c, uint32_t index, ibv_sge* sge) const;
  const char* recvView(Conn& c, uint32_t index, size_t len) const;
  void repost(Conn& c, uint32_t index);
  // Reposts c.to_repost in one chain (all of them: the rest of an error).
  void repostBatch(Conn& c);
  void onCompletion(const ibv_wc& wc);
  void onSendCompletion(const ibv_wc& wc);
  void onRecv(Conn& c, const ibv_wc& wc);
  // Reports c's peer broken (once; delivered by progress()): the core fails it.
  void peerBroke(Conn& c, Status why);
  // One record of a received SEND; returns its bytes (0: malformed, reported).
  size_t onMsg(Conn& c, const char* buf, size_t bytes);
  // An eager payload (full or compact) to the core; copied if it keeps it.
  void deliverEager(Conn& c, std::span<const std::byte> header, const char* data, size_t len);
  // A compact message (SEND WITH IMMEDIATE): its header rebuilt, then delivered.
  void onCompact(Conn& c, const char* buf, size_t len, uint32_t imm);
  // Handshake record (kRts, kCts) batching (messages.cc): defer one (posted
  // at once when rts_batch is 1), post a Conn's, post every Conn's (true when
  // some were deferred), and the single-SEND post of a batch.
  void deferRecord(Conn& c, Work w);
  void flushRecords(Conn& c);
  bool flushAllRecords();
  bool postRecordBatch(Conn& c, const std::vector<Work>& works);
  void failSendWork(Work& w, const Status& st);
  void finishRecv(uint32_t recv_id, const Status& st);
  void finishRndvSend(uint64_t send_id, const Status& st);
  Result<ibv_mr*> regTemp(const void* addr, size_t len);
  // Adverts (advert.cc). noteTx: a record leaves on c (every SEND path).
  void noteTx(Conn& c, uint8_t kind, const void* core_header, size_t header_len);
  void onAdvert(Conn& c, const MsgHdr& mh, const AdvBody& body);
  void onAdvertRevoke(Conn& c, const MsgHdr& mh);
  // post() of a data chunk whose tensor has an accepted advert: written
  // there (true), else false (*st: an error to return).
  bool postToAdvert(Conn& c, std::span<const std::byte> header, const void* data, size_t len,
                    const MemoryRegion* region, uint64_t token, Status* st);
  void endAdvert(Conn& c, uint32_t imm, uint64_t written);  // queues the kAdvEnd
  // Ends advert imm of QP qpn (reported by progress()); false: no such advert.
  // from_peer: reported by the peer (a kAdvEnd, the last WRITE's immediate),
  // which can only end an advert that was sent.
  bool finishAdvert(uint32_t qpn, uint32_t imm, uint64_t bytes, const Status& st, bool from_peer);
  void failAdverts(uint32_t qpn, const Status& st);
  // Held kAdv records go out (as deferred records) once advert_batch of them
  // wait or the peer holds fewer than advert_batch of this side's adverts.
  void releaseAdverts(Conn& c);
  unsigned drainChannel();
  // rkeys scoped per transfer (window.cc, Tuning::windows): the device check,
  // a window bound on c (kBind queued), a transfer's end (true: its window's
  // invalidation is queued and its completion reports the receive or advert;
  // false: the window, if any, is gone and the caller reports), a kInval's
  // end, a window given up, a kBind/kInval's post, the windows of the kInvals
  // of QP qpn (0: all, with their temporary MRs) dropped at once (their
  // completions still report), and teardown.
  Status checkWindows() const;
  Result<Window> bindWindow(Conn& c, ibv_mr* mr, uint64_t addr, size_t len);
  bool closeWindow(uint32_t qpn, Window win, const Status& st, uint64_t token, uint64_t bytes,
                   bool advert, ibv_mr* own);
  void windowClosed(Work& w, bool invalidated);
  void dropWindow(Window win);
  int postWindowWork(Conn& c, Work& w, uint64_t id);
  void dropPostedWindows(uint32_t qpn);
  void freeWindows();
  std::vector<Window> free_windows_;  // invalidated, ready to bind again

  BackendEvents* events_;
  std::unique_ptr<CmState> cm_;  // cm=rdmacm only; its ids outlive dev_'s PD
  std::unique_ptr<Device> dev_;
  Tuning tune_;
  std::map<uint32_t, std::unique_ptr<Conn>> conns_;  // by QP number
  std::map<PeerId, std::vector<uint32_t>> peers_;    // peer -> qpn of each class
  // One-entry caches of connByQpn() and connOf(), which every message calls
  // (map walks otherwise); forgetHot() when a Conn dies or peers_ changes.
  Conn* hot_qpn_ = nullptr;
  Conn* hot_conn_ = nullptr;
  PeerId hot_peer_ = 0;
  size_t hot_cls_ = 0;
  void forgetHot() { hot_qpn_ = hot_conn_ = nullptr; }
  std::deque<std::vector<uint32_t>> unconnected_;  // QPs of each localAddress()
  // Outbound work by wr_id (a slab: no allocation per message once warm).
  std::vector<Work> works_;
  std::vector<uint32_t> free_works_;
  uint32_t sq_total_ = 0;  // posted send WRs not yet completed, all QPs
  std::unordered_map<uint64_t, RndvSend> rsends_;
  std::unordered_map<uint32_t, RndvRecv> rrecvs_;
  uint64_t next_send_id_ = 1;
  uint32_t next_recv_id_ = 1;
  // An immediate that names no kCts receive (rrecvs_) nor advert in flight.
  uint32_t newImmediate() {
    uint32_t id = next_recv_id_++;
    while (id == 0 || rrecvs_.count(id) != 0 || adverts_out_.count(id) != 0) id = next_recv_id_++;
    return id;
  }
  DeferredDone sends_done_, recvs_done_;  // completed inside a post; reported by progress()
  std::unordered_map<uint32_t, AdvertOut> adverts_out_;  // by immediate (ids shared with rrecvs_)
  std::unordered_map<uint64_t, uint32_t> advert_imm_;    // token -> immediate
  struct AdvertDone {
    uint64_t token;
    uint64_t bytes;
    Status status;
  };
  std::vector<AdvertDone> adverts_done_;  // reported by progress()
  std::vector<std::pair<PeerId, Status>> pending_peer_errors_;
  uint32_t max_inline_ = 0;
  // On a QP that takes two send SGEs (Conn::two_sge), an eager payload of at
  // least kZeroCopyEager bytes in registered memory is sent from there, not
  // copied to a bounce slot.
  static constexpr size_t kZeroCopyEager = 1024;
  // A connection whose backlogs stay above kMaxQueuedWorks works for kStallNs
  // fails its peer (queueWork). A window of 8-byte tensors is 131,072 chunks,
  // but 0-byte tensors take no window and a healthy peer may pause its
  // receives, so a long queue alone proves nothing; one that stays long does.
  static constexpr size_t kMaxQueuedWorks = size_t{1} << 20;
  static constexpr uint64_t kStallNs = 30'000'000'000;
  std::vector<ibv_wc> polled_;  // completions seen by arm()
  unsigned unacked_events_ = 0;
  uint32_t idle_ = 0;           // consecutive progress() calls without work
  uint64_t idle_since_ns_ = 0;  // when the idle stretch reached idle_spins calls
  uint64_t idle_ns_ = 0;        // idle since then (updated every 16th call)
  bool armed_ = false;
  // progress() walks the connections only when one may need it: a backlog
  // left by flush(), or a dead QP to destroy once flushed (killConn).
  bool backlogged_ = false, reap_ = false;
  bool records_deferred_ = false;      // some Conn has records
  bool adverts_check_ = false;         // some Conn's held adverts may be due (releaseAdverts)
  std::vector<Work> records_scratch_;  // flushRecords's batch being posted
  Stats stats_;                        // TICTAC_VERBS_STATS=1
};

}  // namespace tictac::transport::verbs
