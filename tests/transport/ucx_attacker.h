// A hostile peer for tests: it speaks the bootstrap and UCX like a real
// peer (tictac's wire header over the same active-message id), then writes
// whatever wire messages a test forges. UCX backends only.
#pragma once

#include <gtest/gtest.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "tests/transport/backend_helper.h"
#include "tictac/transport/context.h"
#include "transport/core/bootstrap.h"
#include "transport/core/wire.h"
#include "transport/ucx/backend.h"

namespace tictac::transport::test {

// The attacker: its own ucp context and worker; records the data headers it gets.
struct Attacker {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  std::vector<uint8_t> address;
  std::atomic<uint64_t> data_op{0};
  std::atomic<bool> got_data{false};

  Attacker() {
    ucp_config_t* cfg = nullptr;
    EXPECT_EQ(ucp_config_read(nullptr, nullptr, &cfg), UCS_OK);
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_AM;
    EXPECT_EQ(ucp_init(&p, cfg, &ctx), UCS_OK);
    ucp_config_release(cfg);
    ucp_worker_params_t wp{};
    EXPECT_EQ(ucp_worker_create(ctx, &wp, &worker), UCS_OK);
    ucp_address_t* a = nullptr;
    size_t n = 0;
    EXPECT_EQ(ucp_worker_get_address(worker, &a, &n), UCS_OK);
    address.assign(reinterpret_cast<uint8_t*>(a), reinterpret_cast<uint8_t*>(a) + n);
    ucp_worker_release_address(worker, a);
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = ucx::kAmId;
    hp.arg = this;
    hp.cb = [](void* arg, const void* header, size_t len, void*, size_t,
               const ucp_am_recv_param_t*) -> ucs_status_t {
      auto* self = static_cast<Attacker*>(arg);
      wire::Header h;
      if (len == sizeof h) {
        std::memcpy(&h, header, sizeof h);
        if (h.type == static_cast<uint8_t>(wire::MsgType::kData)) {
          self->data_op = h.op_id;
          self->got_data = true;
        }
      }
      return UCS_OK;  // consumed (eager) or dropped
    };
    EXPECT_EQ(ucp_worker_set_am_recv_handler(worker, &hp), UCS_OK);
  }
  ~Attacker() {
    if (ep != nullptr) {
      ucp_request_param_t rp{};
      rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* r = ucp_ep_close_nbx(ep, &rp);
      while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
      }
      if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
    }
    if (worker != nullptr) ucp_worker_destroy(worker);
    if (ctx != nullptr) ucp_cleanup(ctx);
  }
  void connectTo(const std::vector<uint8_t>& remote) {
    ucp_ep_params_t ep_p{};
    ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_p.address = reinterpret_cast<const ucp_address_t*>(remote.data());
    ASSERT_EQ(ucp_ep_create(worker, &ep_p, &ep), UCS_OK);
  }
  // Sends header + payload eagerly and waits for it, progressing `victim`
  // too when given (a first message needs the endpoint's wireup).
  void sendAm(const wire::Header& h, const void* payload, size_t len, Context* victim,
              uint32_t flags = UCP_AM_SEND_FLAG_EAGER) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = flags;
    void* r = ucp_am_send_nbx(ep, ucx::kAmId, &h, sizeof h, payload, len, &rp);
    while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS) {
      ucp_worker_progress(worker);
      if (victim != nullptr) victim->progress();
    }
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
  }
  // Sends one forged ack {op, offset, bytes} as peer `src_peer`.
  void forgeAck(uint32_t src_peer, uint64_t op, uint64_t offset, uint64_t bytes) {
    wire::Header h;
    h.type = static_cast<uint8_t>(wire::MsgType::kAck);
    h.src_peer = src_peer;
    h.length = sizeof(wire::AckEntry);
    wire::AckEntry e{op, offset, bytes};
    sendAm(h, &e, sizeof e, nullptr);
  }
  // Sends one data chunk [offset, +len) of a `total`-byte tensor (op `op`) as
  // `src_peer`, every byte `fill`.
  void forgeData(Context& victim, uint32_t src_peer, uint64_t offset, uint32_t len, uint64_t total,
                 bool last, uint64_t tensor = 7, uint64_t op = 77, char fill = 'x') {
    wire::Header h;
    h.type = static_cast<uint8_t>(wire::MsgType::kData);
    h.flags = last ? wire::kFlagLast : 0;
    h.src_peer = src_peer;
    h.tensor_id = tensor;
    h.op_id = op;
    h.total_len = total;
    h.offset = offset;
    h.length = len;
    std::vector<char> payload(len, fill);
    sendAm(h, payload.data(), len, &victim);
  }
  // Sends an abort of op `op` (tensor `tensor`) as `src_peer`.
  void forgeAbort(Context& victim, uint32_t src_peer, uint64_t op, uint64_t tensor) {
    wire::Header h;
    h.type = static_cast<uint8_t>(wire::MsgType::kAbort);
    h.status = static_cast<int32_t>(StatusCode::kCanceled);
    h.src_peer = src_peer;
    h.tensor_id = tensor;
    h.op_id = op;
    sendAm(h, nullptr, 0, &victim);
  }
};

// A victim context and the channel it accepted from `evil`, which spoke the
// bootstrap and connected its UCX endpoint: evil then writes wire messages.
struct Victim {
  std::shared_ptr<Context> ctx;
  std::shared_ptr<Channel> ch;
  uint32_t evil_id = 0;  // the id the victim assigned to evil
  int fd = -1;
  ~Victim() {
    if (fd >= 0) ::close(fd);
  }
};

// Connects `evil` to a new victim context of `backend` (tune: adjusts its options).
// An attacker sends no heartbeats: the victim's peer_timeout is a minute, so
// that nothing a test sees comes from the victim's monitor giving up on it.
// A Victim whose ctx is set already gets one more attacker (a second link).
inline void attach(const std::string& backend, Attacker& evil, Victim& v,
                   const std::function<void(ContextOptions&)>& tune = {}) {
  using namespace std::chrono_literals;
  ContextOptions o = backendHelper(backend).options();
  o.peer_timeout = 60s;
  if (tune) tune(o);
  if (!v.ctx) {
    auto victim = Context::create(o);
    ASSERT_TRUE(victim) << victim.status().message();
    v.ctx = victim.value();
  }
  auto listener = v.ctx->listen(0);
  ASSERT_TRUE(listener);
  auto accepted = std::async(std::launch::async, [&] { return listener.value()->accept(10s); });
  auto fd = bootstrap::connectTcp("127.0.0.1", listener.value()->port(),
                                  std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(fd);
  v.fd = fd.value();
  bootstrap::Hello mine;
  mine.job_token = o.job_token;
  mine.assigned_id = 1;
  mine.backend = "ucx";
  mine.address = evil.address;
  auto theirs = bootstrap::handshake(v.fd, true, mine, std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(theirs) << theirs.status().message();
  auto ch = accepted.get();
  ASSERT_TRUE(ch) << ch.status().message();
  v.ch = ch.value();
  v.evil_id = theirs.value().assigned_id;
  evil.connectTo(theirs.value().address);
}

}  // namespace tictac::transport::test
