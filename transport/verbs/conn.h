// transport/verbs/conn.h: the records a VerbsBackend's state is made of
// (internal; backend.h has the class and its contracts): a Conn (one RC QP
// to a peer, with its buffers, queues and advert bookkeeping), a Work (one
// outbound SEND or WRITE, queued or posted), and the rendezvous and advert
// records that wait for the peer. Only the backend's owner touches them
// (the core's lock).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "transport/backend.h"
#include "transport/verbs/compact.h"
#include "transport/verbs/proto.h"

namespace tictac::transport::verbs {

// A tensor as adverts name it (advert.cc).
struct AdvTag {
  uint64_t tensor = 0;
  uint32_t iteration = 0;
  bool operator==(const AdvTag&) const = default;
};
struct AdvTagHash {
  size_t operator()(const AdvTag& t) const {
    return std::hash<uint64_t>()(t.tensor * 0x9E3779B97F4A7C15ull ^ t.iteration);
  }
};

// A type-2 memory window (windows=1, window.cc): the rkey a peer is given
// for one transfer's buffer, bound on that peer's QP and invalidated when the
// transfer ends.
struct Window {
  ibv_mw* mw = nullptr;
  uint32_t rkey = 0;  // of the current (or last) binding
};

struct Work {  // one outbound operation, queued or posted
  // kBind/kInval: a window bound over (bind_mr, raddr, len) / invalidated.
  enum Kind : uint8_t { kMsg, kWrite, kBind, kInval } kind = kMsg;
  uint32_t qpn = 0;
  uint64_t token = 0;
  bool report = false;     // onSendDone(token) when it completes
  uint64_t fail_send = 0;  // kRts: the transfer to fail if this fails
  uint32_t fail_recv = 0;  // kCts: the receive to fail if this fails
  MsgHdr mh{};
  uint8_t hdr[kMaxCoreHeader];
  const char* data = nullptr;  // kEager payload, kWrite source
  size_t len = 0;
  uint32_t lkey = 0, rkey = 0, imm = 0;
  uint64_t raddr = 0;
  bool with_imm = false;      // kWrite: the transfer's last piece
  bool zero_copy = false;     // kMsg: payload sent from data (lkey), not copied
  bool after_writes = false;  // kMsg: queued behind the WRITEs (a kAdvEnd)
  ibv_mr* own_mr = nullptr;   // deregistered when the work is done
  Window win;                 // kBind, kInval
  ibv_mr* bind_mr = nullptr;  // kBind
  bool advert_end = false;    // kInval: its end reports an advert (len bytes), else a receive
  int slot = -1;
  uint64_t posted_ns = 0;  // Stats: when it was posted
  uint64_t rts_ns = 0;     // Stats (kCts): when the kRts it answers was polled
  bool live = false;       // slot of works_ in use
};

struct Conn {
  uint32_t qpn = 0;
  PeerId peer = 0;
  ibv_qp* qp = nullptr;
  std::vector<char> rbuf, sbuf;  // receive buffers (+ heads: split_recv), send bounce slots
  ibv_mr* rmr = nullptr;
  ibv_mr* smr = nullptr;
  std::vector<uint32_t> free_slots;
  std::vector<uint32_t> to_repost;  // consumed receive buffers not yet reposted
  std::deque<uint64_t> backlog;     // work ids of SENDs (posted first)
  std::deque<uint64_t> wbacklog;    // work ids of WRITEs (posted within write_queue)
  std::vector<Work> records;        // kRts/kCts deferred to share one SEND (messages.cc)
  size_t wbytes = 0;                // WRITE bytes posted, not completed
  uint32_t sq_used = 0, rq_posted = 0, psn = 0;
  uint32_t send_bytes = 0;       // largest SEND the peer accepts
  uint8_t cls = 0;               // priority class (index into Tuning::class_*)
  uint64_t posted = 0;           // send work requests posted (peerQps)
  uint64_t compact = 0;          // ... of which compact eager messages
  bool two_sge = false;          // the QP takes two send SGEs (zero-copy eager SENDs)
  bool split_recv = false;       // two receive SGEs: heads apart (VerbsBackend::recvSges)
  CompactBase tx_base, rx_base;  // compact eager messages, each direction (compact.h)
  // Adverts (advert.cc). Records are counted in wire order both ways; the
  // data records (eager, kRts) this side posted that the peer may not have
  // taken yet are kept with their number, to decline a crossing advert.
  uint64_t tx_records = 0, rx_records = 0;
  std::deque<std::pair<uint64_t, AdvTag>> tx_data;
  uint64_t tx_forgot = 0;  // records up to this one were dropped from tx_data
  struct AdvertIn {        // an accepted advert of the peer
    uint32_t imm;
    uint32_t rkey;
    uint64_t addr, len, written;
  };
  std::unordered_map<AdvTag, AdvertIn, AdvTagHash> adverts_in;
  std::unordered_set<AdvTag, AdvTagHash> adverts_cut;  // revoked after some bytes
  std::vector<Work> adverts_held;                      // this side's kAdv records not sent yet
  uint32_t adverts_sent = 0;                           // ... sent, their end not yet arrived
  uint64_t over_since_ns = 0;  // backlogs above kMaxQueuedWorks since (queueWork)
  uint32_t last_rkey = 0;      // of the peer's last kCts or advert taken (diagnostics)
  bool connected = false, dead = false, reported = false;
};
struct RndvSend {  // a posted rendezvous payload waiting for its kCts
  uint64_t token;
  uint32_t qpn;
  const char* data;
  size_t len;
  uint32_t lkey;
  ibv_mr* own_mr;   // registered here when the core gave no region
  uint64_t rts_ns;  // Stats: when the kRts was queued
};
struct RndvSendArgs {  // a kCts accepted: what to write where
  uint64_t token;
  const char* data;
  size_t len;
  uint32_t lkey;
  ibv_mr* own_mr;
  uint64_t raddr;
  uint32_t rkey, imm;
  bool with_imm = true;  // the last piece WITH IMMEDIATE imm (else all plain WRITEs)
};
struct RndvRecv {  // a kCts sent; the WRITE WITH IMMEDIATE is awaited
  uint64_t token;
  uint32_t qpn;
  ibv_mr* own_mr;
  Window win;  // windows=1: the rkey the kCts gave
};
struct AdvertOut {  // a kAdv sent; its end (WRITE WITH IMMEDIATE or kAdvEnd) awaited
  uint64_t token;
  uint32_t qpn;
  uint64_t len;
  AdvTag tag;
  bool revoked;
  bool sent;             // else still in its Conn's adverts_held
  ibv_mr* mr = nullptr;  // the buffer's registration
  Window win;            // windows=1: bound when the kAdv leaves (releaseAdverts)
};
struct Retained {
  bool rndv = false;
  std::vector<char> copy;  // eager payload
  uint32_t qpn = 0;
  uint64_t send_id = 0, len = 0;
  uint64_t arrived_ns = 0;  // Stats: when its kRts was polled
};

}  // namespace tictac::transport::verbs
