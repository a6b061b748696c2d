// A hostile peer past the handshake: it speaks the bootstrap and UCX like a
// real peer, then answers a tensor with forged acks (a chunk never sent, an
// absurd offset), or sends a chunk twice. The victim must fail that peer or
// expect with kProtocolError naming the problem: no crash, no unbounded
// allocation, no operation completing kOk.
#include <gtest/gtest.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <vector>

#include "tests/transport/backend_helper.h"
#include "transport/core/bootstrap.h"
#include "transport/core/wire.h"
#include "transport/ucx/backend.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

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
  void sendAm(const wire::Header& h, const void* payload, size_t len, Context* victim) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_AM_SEND_FLAG_EAGER;
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
  // Sends one data chunk [offset, +len) of a `total`-byte tensor 7 as `src_peer`.
  void forgeData(Context& victim, uint32_t src_peer, uint64_t offset, uint32_t len, uint64_t total,
                 bool last) {
    wire::Header h;
    h.type = static_cast<uint8_t>(wire::MsgType::kData);
    h.flags = last ? wire::kFlagLast : 0;
    h.src_peer = src_peer;
    h.tensor_id = 7;
    h.op_id = 77;
    h.total_len = total;
    h.offset = offset;
    h.length = len;
    std::vector<char> payload(len, 'x');
    sendAm(h, payload.data(), len, &victim);
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

void attach(const std::string& backend, Attacker& evil, Victim& v) {
  ContextOptions o = backendHelper(backend).options();
  auto victim = Context::create(o);
  ASSERT_TRUE(victim) << victim.status().message();
  v.ctx = victim.value();
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

struct Forgery {
  const char* what;
  uint64_t offset, bytes;
};

class HostileWireTest : public ::testing::TestWithParam<std::tuple<std::string, Forgery>> {};

TEST_P(HostileWireTest, ForgedAckFailsThePeerNotTheProcess) {
  auto [backend, forgery] = GetParam();
  if (!backendHelper(backend).viable()) GTEST_SKIP() << "backend not available";
  Victim v;       // declared first: destroyed after the attacker
  Attacker evil;  // same UCX_TLS as the victim: the helper set it in the environment or config
  ASSERT_NO_FATAL_FAILURE(attach(backend, evil, v));

  std::vector<char> src(1000, 'v');
  auto s = v.ch->send({1, 0, ""}, src.data(), src.size(), 0);
  ASSERT_TRUE(s);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!evil.got_data && std::chrono::steady_clock::now() < deadline) {
    v.ctx->progress();
    ucp_worker_progress(evil.worker);
  }
  ASSERT_TRUE(evil.got_data) << "the tensor never reached the attacker";
  evil.forgeAck(v.evil_id, evil.data_op, forgery.offset, forgery.bytes);
  while (!s.value()->done() && std::chrono::steady_clock::now() < deadline) {
    v.ctx->progress();
    ucp_worker_progress(evil.worker);
  }
  ASSERT_TRUE(s.value()->done()) << forgery.what << ": the send hung";
  EXPECT_EQ(s.value()->status().code(), StatusCode::kProtocolError)
      << forgery.what << ": " << s.value()->status().toString();
  EXPECT_NE(s.value()->status().message().find("never sent"), std::string::npos)
      << s.value()->status().message();
}

// A chunk sent twice: the chunks then add up to more than the tensor, and the
// expect fails with kProtocolError instead of completing with bytes unwritten.
TEST(HostileWire, AChunkSentTwiceFailsTheExpect) {
  if (!backendHelper("ucx-shm").viable()) GTEST_SKIP() << "backend not available";
  Victim v;
  Attacker evil;
  ASSERT_NO_FATAL_FAILURE(attach("ucx-shm", evil, v));
  std::vector<char> dst(1000, 0);
  auto e = v.ch->expect({7, 0, ""}, dst.data(), dst.size());
  ASSERT_TRUE(e);
  const uint32_t me = v.evil_id;
  evil.forgeData(*v.ctx, me, 0, 500, 1000, false);
  evil.forgeData(*v.ctx, me, 0, 500, 1000, false);  // again
  evil.forgeData(*v.ctx, me, 500, 500, 1000, true);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!e.value()->done() && std::chrono::steady_clock::now() < deadline) {
    v.ctx->progress();
    ucp_worker_progress(evil.worker);
  }
  ASSERT_TRUE(e.value()->done()) << "the expect hung";
  EXPECT_EQ(e.value()->status().code(), StatusCode::kProtocolError)
      << e.value()->status().toString();
  EXPECT_NE(e.value()->status().message().find("sent twice"), std::string::npos)
      << e.value()->status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Backends, HostileWireTest,
    ::testing::Combine(::testing::Values("ucx-shm", "ucx-tcp"),
                       ::testing::Values(Forgery{"absurd_offset", uint64_t{1} << 60, 1000},
                                         Forgery{"wrong_length", 0, 999},
                                         Forgery{"offset_past_the_end", 1000, 1})),
    [](const auto& info) {
      std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param).what;
      for (auto& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

}  // namespace
}  // namespace tictac::transport::test
