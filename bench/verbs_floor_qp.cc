// verbs_floor's raw verbs: device, QP, posts and polls (see verbs_floor.h).
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/verbs_floor.h"

void fail(const std::string& what, int err) {
  std::fprintf(stderr, "verbs_floor: %s%s%s\n", what.c_str(), err ? ": " : "",
               err ? std::strerror(err) : "");
  std::exit(1);
}

namespace {

// The calls of Load: out of line, reached through a table (as a virtual call is).
unsigned step(unsigned x) {
  return x * 2654435761u + 1;
}
unsigned (*volatile g_step)(unsigned) = step;
volatile unsigned g_sink;

void repost(Verbs& v, uint32_t n) {
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t idx = v.next_repost;
    v.next_repost = (v.next_repost + 1) % static_cast<uint32_t>(v.rq);
    ibv_sge sge{reinterpret_cast<uintptr_t>(v.recv_buf + size_t{idx} * v.recv_bytes),
                static_cast<uint32_t>(v.recv_bytes), v.recv_mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = idx;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(v.qp, &wr, &bad)) fail("ibv_post_recv", rc);
  }
}

}  // namespace

static char* g_pool = nullptr;

void Load::prepare() {
  if (pages == 0) return;
  void* p = mmap(nullptr, size_t(pages) * 4096, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) fail("mmap of the page pool", errno);
  g_pool = static_cast<char*>(p);
}

void Load::run(int turn) {
  const char* pool = g_pool;
  unsigned acc = static_cast<unsigned>(turn);
  for (int c = 0; c < calls; ++c) acc = g_step(acc);
  for (int p = 0; p < pages; ++p) acc += static_cast<unsigned char>(pool[size_t(p) * 4096]);
  for (int w = 0; w < work; ++w) acc = acc * 31 + static_cast<unsigned>(w);
  g_sink = acc;
}

Verbs openVerbs(const std::string& device, bool shared_cq, bool channel, int sq, int rq,
                int inline_max, int recv_bytes) {
  Verbs v;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) fail("no RDMA device (is rdma_rxe loaded and a link added?)");
  for (int i = 0; i < n && v.ctx == nullptr; ++i) {
    if (device.empty() || device == ibv_get_device_name(list[i])) v.ctx = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  if (v.ctx == nullptr) fail("device '" + device + "' not found or not openable");
  if ((v.pd = ibv_alloc_pd(v.ctx)) == nullptr) fail("ibv_alloc_pd", errno);
  if (channel && (v.channel = ibv_create_comp_channel(v.ctx)) == nullptr) {
    fail("ibv_create_comp_channel", errno);
  }
  v.send_cq = ibv_create_cq(v.ctx, sq + rq, nullptr, v.channel, 0);
  v.recv_cq = shared_cq ? v.send_cq : ibv_create_cq(v.ctx, rq, nullptr, v.channel, 0);
  if (v.send_cq == nullptr || v.recv_cq == nullptr) fail("ibv_create_cq", errno);
  ibv_qp_init_attr ia{};
  ia.send_cq = v.send_cq;
  ia.recv_cq = v.recv_cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {static_cast<uint32_t>(sq), static_cast<uint32_t>(rq), 1, 1,
            static_cast<uint32_t>(inline_max)};
  if ((v.qp = ibv_create_qp(v.pd, &ia)) == nullptr) fail("ibv_create_qp", errno);
  v.sq = sq;
  v.rq = rq;
  v.recv_bytes = recv_bytes;
  v.inline_max = static_cast<int>(ia.cap.max_inline_data);
  v.recv_buf = static_cast<char*>(std::aligned_alloc(4096, size_t(recv_bytes) * rq));
  v.send_buf = static_cast<char*>(std::aligned_alloc(4096, size_t(recv_bytes)));
  if (v.recv_buf == nullptr || v.send_buf == nullptr) fail("allocating buffers");
  std::memset(v.send_buf, 'p', recv_bytes);
  v.recv_mr = ibv_reg_mr(v.pd, v.recv_buf, size_t(recv_bytes) * rq, IBV_ACCESS_LOCAL_WRITE);
  v.send_mr = ibv_reg_mr(v.pd, v.send_buf, size_t(recv_bytes), IBV_ACCESS_LOCAL_WRITE);
  if (v.recv_mr == nullptr || v.send_mr == nullptr) fail("ibv_reg_mr", errno);
  for (int i = 0; i < 16 && v.gid_index < 0; ++i) {
    if (ibv_query_gid(v.ctx, 1, i, &v.gid) != 0) break;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(v.gid.raw, mapped, 12) == 0) v.gid_index = i;
  }
  if (v.gid_index < 0) fail("port 1 has no IPv4-mapped (RoCE v2) GID");
  return v;
}

void connectQp(Verbs& v, uint32_t peer_qpn, const uint8_t peer_gid[16]) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;  // --bw
  if (int rc = ibv_modify_qp(
          v.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    fail("QP to INIT", rc);
  }
  repost(v, static_cast<uint32_t>(v.rq));  // receives need INIT
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer_gid, 16);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(v.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (int rc =
          ibv_modify_qp(v.qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    fail("QP to RTR", rc);
  }
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(v.qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
    fail("QP to RTS", rc);
  }
}

void postSend(Verbs& v, size_t size, int id) {
  while (v.sends_out >= v.sq) reapSends(v);
  ibv_sge sge{reinterpret_cast<uintptr_t>(v.send_buf), static_cast<uint32_t>(size),
              v.send_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = static_cast<uint64_t>(id);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (size <= size_t(v.inline_max)) wr.send_flags |= IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(v.qp, &wr, &bad)) fail("ibv_post_send", rc);
  ++v.sends_out;
}

static void take(Verbs& v, ibv_cq* cq) {
  ibv_wc wc[16];
  int n = ibv_poll_cq(cq, 16, wc);
  if (n < 0) fail("ibv_poll_cq failed");
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      fail(std::string("completion error: ") + ibv_wc_status_str(wc[i].status));
    }
    if ((wc[i].opcode & IBV_WC_RECV) == 0) {  // RECV and RECV_RDMA_WITH_IMM have the bit
      --v.sends_out;
    } else if (++v.recvs_ready, ++v.to_repost == 16) {
      repost(v, v.to_repost);
      v.to_repost = 0;
    }
  }
}

// Polls until done(v); nothing for 5 s ends the process naming `what`.
template <class Done>
static void pollUntil(Verbs& v, ibv_cq* cq, Done done, const char* what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (unsigned spins = 0; !done(v); ++spins) {
    take(v, cq);
    if ((spins & 4095) == 4095 && std::chrono::steady_clock::now() > deadline) fail(what);
  }
}

void awaitRecv(Verbs& v) {
  pollUntil(
      v, v.recv_cq, [](const Verbs& s) { return s.recvs_ready > 0; },
      "no message from the peer for 5 s");
  --v.recvs_ready;
}

void reapSends(Verbs& v) {
  take(v, v.send_cq);
}

void reapAll(Verbs& v) {
  take(v, v.send_cq);
  if (v.recv_cq != v.send_cq) take(v, v.recv_cq);
}

void drainSends(Verbs& v) {
  pollUntil(
      v, v.send_cq, [](const Verbs& s) { return s.sends_out == 0; },
      "a SEND did not complete in 5 s");
}
