// A hostile peer past the handshake: it speaks the bootstrap and UCX like a
// real peer, then answers a tensor with forged acks (a chunk never sent, an
// absurd offset), or sends a chunk twice. The victim must fail that peer or
// expect with kProtocolError naming the problem: no crash, no unbounded
// allocation, no operation completing kOk.
#include <gtest/gtest.h>
#include <ucp/api/ucp.h>

#include <string>
#include <vector>

#include "tests/transport/backend_helper.h"
#include "tests/transport/ucx_attacker.h"
#include "transport/core/wire.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

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

// An ack whose entries come as a rendezvous payload (not in place): the
// receiver read them from a null pointer. Now refused; the victim goes on.
TEST(HostileWire, AnAckSentByRendezvousIsRefusedNotRead) {
  if (!backendHelper("ucx-shm").viable()) GTEST_SKIP() << "backend not available";
  Victim v;
  Attacker evil;
  ASSERT_NO_FATAL_FAILURE(attach("ucx-shm", evil, v));
  wire::Header h;
  h.type = static_cast<uint8_t>(wire::MsgType::kAck);
  h.src_peer = v.evil_id;
  h.length = sizeof(wire::AckEntry);
  wire::AckEntry e{1, 0, 24};
  evil.sendAm(h, &e, sizeof e, v.ctx.get(), UCP_AM_SEND_FLAG_RNDV);
  for (int i = 0; i < 100; ++i) v.ctx->progress();
  std::vector<char> dst(100, 0);  // the victim still works with this peer
  auto ex = v.ch->expect({7, 0, ""}, dst.data(), dst.size());
  ASSERT_TRUE(ex);
  evil.forgeData(*v.ctx, v.evil_id, 0, 100, 100, true);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!ex.value()->done() && std::chrono::steady_clock::now() < deadline) {
    v.ctx->progress();
    ucp_worker_progress(evil.worker);
  }
  ASSERT_TRUE(ex.value()->done());
  EXPECT_TRUE(ex.value()->status().isOk()) << ex.value()->status().toString();
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
