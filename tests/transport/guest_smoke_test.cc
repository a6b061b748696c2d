// Smoke test of the soft-RoCE test machine (suite 'verbs'): real libibverbs
// calls on the rxe device bound to lo. Inside tools/softroce-vm (TICTAC_GUEST=1)
// the device must be there; on a host without an RDMA device every case skips
// with the reason. Two RC QPs on the one device are connected to each other
// over the IPv4-mapped RoCE v2 GID of 127.0.0.1, as the verbs backend does.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

bool inGuest() {
  return std::getenv("TICTAC_GUEST") != nullptr;
}

// The ::ffff:127.0.0.1 GID a RoCE v2 port has when rxe is bound to lo.
ibv_gid loopbackGid() {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  in_addr_t a = htonl(INADDR_LOOPBACK);
  std::memcpy(&g.raw[12], &a, 4);
  return g;
}

struct DevListDeleter {
  void operator()(ibv_device** l) const { ibv_free_device_list(l); }
};
struct CtxDeleter {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};
struct PdDeleter {
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
};
struct MrDeleter {
  void operator()(ibv_mr* m) const { ibv_dereg_mr(m); }
};
struct CqDeleter {
  void operator()(ibv_cq* c) const { ibv_destroy_cq(c); }
};
struct QpDeleter {
  void operator()(ibv_qp* q) const { ibv_destroy_qp(q); }
};

// Opens the device and port that carry the loopback RoCE v2 GID; sets
// gidIndex. Leaves ctx empty (with why) when there is none.
struct LoopbackPort {
  std::unique_ptr<ibv_context, CtxDeleter> ctx;
  ibv_port_attr port{};
  int gidIndex = -1;
  std::string why;

  LoopbackPort() {
    int n = 0;
    std::unique_ptr<ibv_device*, DevListDeleter> list(ibv_get_device_list(&n));
    if (!list || n == 0) {
      why = "libibverbs finds no RDMA device (run inside tools/softroce-vm, or rdma link add)";
      return;
    }
    const ibv_gid want = loopbackGid();
    for (int d = 0; d < n && gidIndex < 0; ++d) {
      std::unique_ptr<ibv_context, CtxDeleter> c(ibv_open_device(list.get()[d]));
      ibv_port_attr pa{};
      if (!c || ibv_query_port(c.get(), 1, &pa) != 0) continue;
      for (int i = 0; i < pa.gid_tbl_len; ++i) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(c.get(), 1, i, &e, 0) != 0) continue;
        if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(&e.gid, &want, sizeof want) == 0) {
          gidIndex = i;
          port = pa;
          ctx = std::move(c);
          break;
        }
      }
    }
    if (!ctx)
      why = std::to_string(n) + " RDMA device(s), none with the RoCE v2 GID ::ffff:127.0.0.1";
  }
};

#define REQUIRE_PORT(p)                                     \
  do {                                                      \
    if (!(p).ctx) {                                         \
      if (inGuest()) FAIL() << "in the guest: " << (p).why; \
      GTEST_SKIP() << (p).why;                              \
    }                                                       \
  } while (0)

// Polls until one completion arrives or 5 s pass (false then).
bool pollOne(ibv_cq* cq, ibv_wc* wc) {
  const auto end = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < end) {
    int got = ibv_poll_cq(cq, 1, wc);
    if (got != 0) return got == 1;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return false;
}

// Two RC QPs on one device, each connected to the other.
struct QpPair {
  std::unique_ptr<ibv_pd, PdDeleter> pd;
  std::unique_ptr<ibv_cq, CqDeleter> cq;
  std::unique_ptr<ibv_qp, QpDeleter> a, b;

  bool create(LoopbackPort& p) {
    pd.reset(ibv_alloc_pd(p.ctx.get()));
    if (!pd) return false;
    cq.reset(ibv_create_cq(p.ctx.get(), 64, nullptr, nullptr, 0));
    if (!cq) return false;
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq.get();
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 64;
    a.reset(ibv_create_qp(pd.get(), &ia));
    b.reset(ibv_create_qp(pd.get(), &ia));
    return a && b && connect(p, a.get(), b->qp_num) && connect(p, b.get(), a->qp_num);
  }

  static bool connect(LoopbackPort& p, ibv_qp* qp, uint32_t remoteQpn) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (ibv_modify_qp(qp, &at,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return false;
    at = {};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = p.port.active_mtu;
    at.dest_qp_num = remoteQpn;
    at.max_dest_rd_atomic = 1;
    at.min_rnr_timer = 12;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = loopbackGid();
    at.ah_attr.grh.sgid_index = static_cast<uint8_t>(p.gidIndex);
    at.ah_attr.grh.hop_limit = 64;
    at.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &at,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return false;
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &at,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
  }
};

TEST(GuestSmoke, PortIsActiveEthernet) {
  LoopbackPort p;
  REQUIRE_PORT(p);
  EXPECT_EQ(p.port.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.port.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_GE(p.gidIndex, 0);
  EXPECT_GE(p.port.active_mtu, IBV_MTU_1024);
}

TEST(GuestSmoke, RdmaWriteLoopbackCopiesBytes) {
  LoopbackPort p;
  REQUIRE_PORT(p);
  QpPair qps;
  ASSERT_TRUE(qps.create(p)) << "QP setup failed: " << std::strerror(errno);
  constexpr size_t kLen = 1 << 20;
  std::vector<unsigned char> src(kLen), dst(kLen, 0);
  for (size_t i = 0; i < kLen; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  std::unique_ptr<ibv_mr, MrDeleter> smr(
      ibv_reg_mr(qps.pd.get(), src.data(), kLen, IBV_ACCESS_LOCAL_WRITE));
  std::unique_ptr<ibv_mr, MrDeleter> dmr(
      ibv_reg_mr(qps.pd.get(), dst.data(), kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  ASSERT_TRUE(smr && dmr) << "ibv_reg_mr: " << std::strerror(errno);

  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(kLen), smr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 42;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data());
  wr.wr.rdma.rkey = dmr->rkey;
  ASSERT_EQ(ibv_post_send(qps.a.get(), &wr, &bad), 0);
  ibv_wc wc{};
  ASSERT_TRUE(pollOne(qps.cq.get(), &wc)) << "no completion within 5 s";
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kLen), 0);
}

TEST(GuestSmoke, WriteWithImmediateCompletesAtReceiver) {
  LoopbackPort p;
  REQUIRE_PORT(p);
  QpPair qps;
  ASSERT_TRUE(qps.create(p)) << "QP setup failed: " << std::strerror(errno);
  char dst[64] = {};
  std::unique_ptr<ibv_mr, MrDeleter> dmr(
      ibv_reg_mr(qps.pd.get(), dst, sizeof dst, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  ASSERT_TRUE(dmr);
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 7;  // a write with immediate consumes a receive, no scatter list needed
  ASSERT_EQ(ibv_post_recv(qps.b.get(), &rwr, &rbad), 0);

  const char msg[] = "tictac inline";
  ibv_sge sge{reinterpret_cast<uintptr_t>(msg), sizeof msg, 0};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 8;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.imm_data = htonl(0x00c0ffee);
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst);
  wr.wr.rdma.rkey = dmr->rkey;
  ASSERT_EQ(ibv_post_send(qps.a.get(), &wr, &bad), 0);
  bool sent = false, received = false;
  for (int i = 0; i < 2; ++i) {
    ibv_wc wc{};
    ASSERT_TRUE(pollOne(qps.cq.get(), &wc)) << "completion " << i << " missing after 5 s";
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.wr_id == 8) {
      sent = true;
    } else {
      received = true;
      EXPECT_EQ(wc.wr_id, 7u);
      EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(ntohl(wc.imm_data), 0x00c0ffeeu);
      EXPECT_EQ(wc.byte_len, sizeof msg);
    }
  }
  EXPECT_TRUE(sent && received);
  EXPECT_STREQ(dst, msg);
}

}  // namespace
