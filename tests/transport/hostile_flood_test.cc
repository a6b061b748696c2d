// A hostile peer that floods the receiver's memory for early and late data:
// aborts of made-up ops (each remembered so that the op's late chunks are
// dropped) and chunks of tensors nobody expects (kept until their expect).
// Both stay bounded (RejectedOps' capacity, ContextOptions::
// max_unexpected_bytes): no unbounded growth, the flooding peer failed with
// the limit named, other work untouched.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "tests/transport/backend_helper.h"
#include "tests/transport/ucx_attacker.h"
#include "transport/core/bootstrap.h"
#include "transport/core/rejected_ops.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

bool waitDone(Victim& v, Attacker& evil, const OpHandle& op) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!op->done() && std::chrono::steady_clock::now() < deadline) {
    v.ctx->progress();
    ucp_worker_progress(evil.worker);
  }
  return op->done();
}

TEST(HostileFlood, AbortsOfMadeUpOpsStayAtTheCapacity) {
  if (!backendHelper("ucx-shm").viable()) GTEST_SKIP() << "backend not available";
  Victim v;
  Attacker evil;
  ASSERT_NO_FATAL_FAILURE(attach("ucx-shm", evil, v));
  const uint64_t n = RejectedOps::kDefaultCapacity + 5000;
  for (uint64_t op = 1; op <= n; ++op) evil.forgeAbort(*v.ctx, v.evil_id, op * 7919, op);
  for (int i = 0; i < 100; ++i) v.ctx->progress();
  EXPECT_EQ(v.ctx->receiveStats().rejected_ops, RejectedOps::kDefaultCapacity);
  // The peer is still served: a tensor of a recent op id is dropped (its op
  // was aborted), a tensor of a new op lands.
  std::vector<char> dst(100, 0);
  auto e = v.ch->expect({n, 0, ""}, dst.data(), dst.size());
  ASSERT_TRUE(e);
  evil.forgeData(*v.ctx, v.evil_id, 0, 100, 100, true, n, n * 7919, 'a');  // aborted: dropped
  evil.forgeData(*v.ctx, v.evil_id, 0, 100, 100, true, n, 1);              // a fresh op
  ASSERT_TRUE(waitDone(v, evil, e.value())) << "the expect hung";
  EXPECT_TRUE(e.value()->status().isOk()) << e.value()->status().toString();
  EXPECT_EQ(dst[0], 'x') << "the aborted op's chunk landed";
}

TEST(HostileFlood, UnexpectedTensorsPastTheLimitFailThePeer) {
  if (!backendHelper("ucx-shm").viable()) GTEST_SKIP() << "backend not available";
  Victim v;
  Attacker evil;
  const size_t limit = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(
      attach("ucx-shm", evil, v, [&](ContextOptions& o) { o.max_unexpected_bytes = limit; }));
  const uint32_t len = 64 * 1024;
  // Below the limit the chunks are kept and counted; an expect takes one.
  evil.forgeData(*v.ctx, v.evil_id, 0, len, len, true, 1, 1);
  evil.forgeData(*v.ctx, v.evil_id, 0, len, len, true, 2, 2);
  for (int i = 0; i < 10; ++i) v.ctx->progress();
  ReceiveStats before = v.ctx->receiveStats();
  EXPECT_EQ(before.unexpected_chunks, 2u);
  EXPECT_GE(before.unexpected_bytes, 2u * len);
  std::vector<char> dst(len, 0);
  auto first = v.ch->expect({1, 0, ""}, dst.data(), dst.size());
  ASSERT_TRUE(first);
  ASSERT_TRUE(waitDone(v, evil, first.value()));
  EXPECT_TRUE(first.value()->status().isOk()) << first.value()->status().toString();
  EXPECT_EQ(v.ctx->receiveStats().unexpected_chunks, 1u);
  EXPECT_LT(v.ctx->receiveStats().unexpected_bytes, before.unexpected_bytes);
  // A pending expect of another tensor, then a flood past the limit.
  std::vector<char> other(10, 0);
  auto pending = v.ch->expect({999, 0, ""}, other.data(), other.size());
  ASSERT_TRUE(pending);
  for (uint64_t t = 3; t < 3 + 2 * limit / len && !pending.value()->done(); ++t) {
    evil.forgeData(*v.ctx, v.evil_id, 0, len, len, true, t, t);
    EXPECT_LE(v.ctx->receiveStats().unexpected_bytes, limit);
  }
  ASSERT_TRUE(waitDone(v, evil, pending.value())) << "the flooding peer was not failed";
  EXPECT_EQ(pending.value()->status().code(), StatusCode::kPeerLost);
  EXPECT_NE(pending.value()->status().message().find("max_unexpected_bytes"), std::string::npos)
      << pending.value()->status().message();
  EXPECT_EQ(v.ctx->receiveStats().unexpected_bytes, 0u);
  EXPECT_EQ(v.ctx->receiveStats().unexpected_chunks, 0u);
  // The peer is told: a kBye on its bootstrap link (the victim's monitor
  // would give up on it only after its 60 s peer_timeout), so a real
  // sender's ops fail instead of waiting for acks.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool bye = false;
  while (!bye && std::chrono::steady_clock::now() < deadline) {
    auto f = bootstrap::recvFrame(v.fd, deadline);
    if (!f) break;
    bye = f.value().type == bootstrap::FrameType::kBye;
  }
  EXPECT_TRUE(bye) << "the victim did not tell the failed peer";
}

// One peer's rejected ops are its own: an abort naming another peer's op id
// (which, under a key of op id ^ peer << 48, it could forge) does not drop
// that peer's chunks.
TEST(HostileFlood, AnAbortCannotNameAnotherPeersOp) {
  if (!backendHelper("ucx-shm").viable()) GTEST_SKIP() << "backend not available";
  Victim v, v2;  // one victim context (v2.ctx = v.ctx), two links
  Attacker evil, honest;
  ASSERT_NO_FATAL_FAILURE(attach("ucx-shm", evil, v));
  v2.ctx = v.ctx;
  ASSERT_NO_FATAL_FAILURE(attach("ucx-shm", honest, v2));
  const uint64_t op = 5;
  const uint64_t forged = op ^ (uint64_t{v.evil_id ^ v2.evil_id} << 48);
  evil.forgeAbort(*v.ctx, v.evil_id, forged, 1);
  for (int i = 0; i < 10; ++i) v.ctx->progress();
  std::vector<char> dst(100, 0);
  auto e = v2.ch->expect({2, 0, ""}, dst.data(), dst.size());
  ASSERT_TRUE(e);
  honest.forgeData(*v.ctx, v2.evil_id, 0, 100, 100, true, 2, op);
  ASSERT_TRUE(waitDone(v, honest, e.value())) << "the other peer's tensor was dropped";
  EXPECT_TRUE(e.value()->status().isOk()) << e.value()->status().toString();
  EXPECT_EQ(dst[99], 'x');
}

}  // namespace
}  // namespace tictac::transport::test
