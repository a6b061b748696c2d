// verbs_floor's bandwidth mode (--bw): RDMA WRITEs on raw libibverbs, as
// ib_write_bw posts them, or WRITEs WITH IMMEDIATE whose receive completions
// a sleeping receiver takes, as the verbs backend's rendezvous does. See
// verbs_floor.h.
#include <fcntl.h>
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/verbs_floor.h"

namespace {

constexpr auto kQuiet = std::chrono::seconds(5);  // longest wait for any completion

}  // namespace

ibv_mr* registerBulk(Verbs& v, size_t size) {
  void* p = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (p == nullptr) fail("allocating the " + std::to_string(size) + "-byte bulk buffer");
  std::memset(p, 'w', size);
  ibv_mr* mr = ibv_reg_mr(v.pd, p, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) fail("ibv_reg_mr of the bulk buffer failed");
  return mr;
}

double runWrites(Verbs& v, ibv_mr* src, BwTarget t, size_t size, int iters, int depth, bool imm) {
  auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  int posted = 0;
  while (posted < iters || v.sends_out > 0) {
    while (posted < iters && v.sends_out < depth) {
      ibv_sge sge{reinterpret_cast<uintptr_t>(src->addr), static_cast<uint32_t>(size), src->lkey};
      ibv_send_wr wr{};
      wr.wr_id = static_cast<uint64_t>(posted);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
      wr.imm_data = static_cast<uint32_t>(posted);
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = t.addr;
      wr.wr.rdma.rkey = t.rkey;
      ibv_send_wr* bad = nullptr;
      if (int rc = ibv_post_send(v.qp, &wr, &bad)) fail("ibv_post_send (WRITE)", rc);
      ++v.sends_out;
      ++posted;
    }
    int before = v.sends_out;
    reapSends(v);
    auto now = std::chrono::steady_clock::now();
    if (v.sends_out != before) {
      last = now;
    } else if (now - last > kQuiet) {
      fail("no WRITE completed for 5 s");
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void sinkImms(Verbs& v, int iters, bool block) {
  auto last = std::chrono::steady_clock::now();
  int seen = 0;
  auto take = [&] {  // the receive completions there now (reposted as they go)
    reapAll(v);
    int got = v.recvs_ready;
    seen += got;
    v.recvs_ready = 0;
    if (got > 0) last = std::chrono::steady_clock::now();
    return got > 0;
  };
  // The channel is read without blocking: events of arms whose re-check
  // found completions are drained before the next arm (as the backend does).
  // (--imm without --spin needs the channel: parse() refuses --no-channel.)
  if (block && ::fcntl(v.channel->fd, F_SETFL, ::fcntl(v.channel->fd, F_GETFL) | O_NONBLOCK) != 0) {
    fail("making the completion channel non-blocking failed");
  }
  auto drainEvents = [&] {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    while (ibv_get_cq_event(v.channel, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  };
  while (seen < iters) {
    if (take()) continue;
    if (std::chrono::steady_clock::now() - last > kQuiet) {
      fail("no WRITE WITH IMMEDIATE arrived for 5 s");
    }
    if (!block) continue;
    // Idle: arm, look once more (a completion may have landed before the arm), sleep.
    drainEvents();
    if (ibv_req_notify_cq(v.recv_cq, 0) != 0) fail("ibv_req_notify_cq failed");
    if (take()) continue;
    pollfd p{v.channel->fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) drainEvents();
  }
}
