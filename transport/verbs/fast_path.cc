// Verbs backend: the per-message fast paths of a ping-pong (caller's thread,
// under the core's lock): a small SEND posted straight from post(), and
// consumed receive buffers reposted in batches instead of one by one. In the
// soft-RoCE guest every user-space step of a message costs about a
// microsecond, so each step these skip shows in tictac-perf --test lat.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {

// The latency path: an eager message that fits inline, on a QP with nothing
// queued before it and room in its send queue, is built on the stack (or,
// compact, posted from the caller's payload: ibv_post_send copies inline
// data) and posted at once. Its Work records only what its completion needs (no copy
// of the header, none of the payload). False: take the backlog path.
bool VerbsBackend::postInlineNow(Conn& c, const MsgHdr& mh, std::span<const std::byte> header,
                                 const void* data, uint64_t token) {
  const CompactPlan cp = compactPlan(c.tx_base, header.data(), header.size());
  const size_t total = cp.compact ? mh.len : sizeof(EagerHdr) + header.size() + mh.len;
  if (total > max_inline_ || total > kInlineBuf || !c.backlog.empty() || c.dead || !c.connected ||
      c.sq_used >= tune_.sq_depth) {
    return false;
  }
  alignas(8) char inl[kInlineBuf];
  if (!cp.compact) packMsg(inl, mh, header.data(), header.size(), data, mh.len);
  uint64_t id = allocWork();
  Work& w = works_[id];
  w.kind = Work::kMsg;
  w.qpn = c.qpn;
  w.token = token;
  w.report = true;
  w.fail_send = 0;
  w.fail_recv = 0;
  w.data = nullptr;
  w.len = 0;
  w.own_mr = nullptr;
  w.slot = -1;
  w.rts_ns = 0;
  w.posted_ns = 0;
  const uint64_t t0 = stats_.on ? Stats::nowNs() : 0;
  const int rc = cp.compact
                     ? postCompact(c, id, static_cast<const char*>(data), total, 0, true, cp.imm)
                     : postSend(c, id, inl, total, true);
  if (rc != 0) {  // the backlog path reports or retries it
    freeWork(id);
    return false;
  }
  noteTx(c, mh.kind, header.data(), header.size());
  if (cp.eligible) compactUpdate(c.tx_base, cp.h);
  if (stats_.on) {
    w.posted_ns = Stats::nowNs();
    stats_.post_hist.add(w.posted_ns - t0);
    ++stats_.inline_sends;
    ++stats_.direct_sends;
    stats_.onMsgPosted(w.posted_ns);
  }
  c.sq_used++;
  sq_total_++;
  return true;
}

int VerbsBackend::postSend(Conn& c, uint64_t id, const char* p, size_t len, bool inl) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(p), static_cast<uint32_t>(len), c.smr->lkey};
  ibv_send_wr wr = signaledWr(id, &sge, IBV_WR_SEND, inl ? IBV_SEND_INLINE : 0);
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(c.qp, &wr, &bad);
  if (rc == 0) ++c.posted;
  return rc;
}

int VerbsBackend::postCompact(Conn& c, uint64_t id, const char* p, size_t len, uint32_t lkey,
                              bool inl, uint32_t imm) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(p), static_cast<uint32_t>(len), lkey};
  ibv_send_wr wr = signaledWr(id, &sge, IBV_WR_SEND_WITH_IMM, inl ? IBV_SEND_INLINE : 0);
  wr.num_sge = len > 0 ? 1 : 0;
  wr.imm_data = htonl(imm);
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(c.qp, &wr, &bad);
  if (rc == 0) {
    ++c.posted;
    ++c.compact;
    if (stats_.on) ++stats_.compact_sends;
  }
  return rc;
}

ibv_send_wr VerbsBackend::signaledWr(uint64_t id, ibv_sge* sge, ibv_wr_opcode op, unsigned flags) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED | flags;
  return wr;
}

size_t VerbsBackend::packMsg(char* p, const MsgHdr& mh, const void* header, size_t header_len,
                             const void* data, size_t len) {
  const size_t head = msgHdrBytes(mh.kind);
  if (head == sizeof(EagerHdr)) {
    EagerHdr eh;
    eh.hdr_len = static_cast<uint16_t>(header_len);
    eh.len = static_cast<uint32_t>(mh.len);
    std::memcpy(p, &eh, sizeof(eh));
  } else {
    std::memcpy(p, &mh, sizeof(MsgHdr));
    reinterpret_cast<MsgHdr*>(p)->hdr_len = static_cast<uint16_t>(header_len);
  }
  if (header_len > 0) std::memcpy(p + head, header, header_len);
  if (len > 0) std::memcpy(p + head + header_len, data, len);
  return head + header_len + len;
}

uint64_t VerbsBackend::allocWork() {
  uint64_t id;
  if (!free_works_.empty()) {
    id = free_works_.back();
    free_works_.pop_back();
  } else {
    id = works_.size();
    works_.emplace_back();
  }
  works_[id].live = true;
  return id;
}

void VerbsBackend::repostBatch(Conn& c) {
  constexpr size_t kChain = 64;
  ibv_sge sge[kChain][2];
  ibv_recv_wr wr[kChain];
  while (!c.to_repost.empty()) {
    size_t n = std::min(kChain, c.to_repost.size());
    const uint32_t* idx = c.to_repost.data() + c.to_repost.size() - n;
    for (size_t i = 0; i < n; ++i) {
      wr[i] = ibv_recv_wr{};
      wr[i].wr_id = kRecvBit | idx[i];
      wr[i].sg_list = sge[i];
      wr[i].num_sge = recvSges(c, idx[i], sge[i]);
      wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    int rc = ibv_post_recv(c.qp, wr, &bad);
    size_t posted = rc == 0 || bad == nullptr ? (rc == 0 ? n : 0) : static_cast<size_t>(bad - wr);
    c.rq_posted += static_cast<uint32_t>(posted);
    c.to_repost.resize(c.to_repost.size() - n);
    if (rc != 0) break;  // the QP is unusable (its error reaches the core through the CQ)
  }
  c.to_repost.clear();
}

}  // namespace tictac::transport::verbs
