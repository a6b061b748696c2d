// The verbs backend's handshake batching, at the Backend interface (suite
// 'verbs', run inside tools/softroce-vm): the kRts of the rendezvous payloads
// posted in one pass reach the peer in one SEND, and the kCts of the receives
// the peer starts in one pass go back in one SEND too (rts_batch > 1), or one
// SEND each (rts_batch = 1); either way every payload lands intact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/transport/verbs_helper.h"
#include "transport/verbs/backend.h"
#include "transport/verbs/factory.h"

namespace tictac::transport::test {
namespace {

struct Events : BackendEvents {
  std::vector<void*> offered;  // retained rendezvous payloads, in arrival order
  int sends_ok = 0, receives_ok = 0, failures = 0;
  void onMessage(PeerId, std::span<const std::byte>, Incoming& in) override {
    if (in.data == nullptr) in.retain_into = &offered.emplace_back(nullptr);
  }
  void onSendDone(uint64_t, const Status& s) override { s ? ++sends_ok : ++failures; }
  void onReceiveDone(uint64_t, const Status& s) override { s ? ++receives_ok : ++failures; }
  void onPeerError(PeerId, const Status&) override { ++failures; }
};

std::unique_ptr<Backend> makeBackend(Events* ev, const std::string& batch) {
  BackendOptions o;
  o.config = {{"address", "127.0.0.1"}, {"rts_batch", batch}};
  auto b = verbs::create(o, ev);
  EXPECT_TRUE(b) << b.status().toString();
  return b ? std::move(b.value()) : nullptr;
}

uint64_t sendsPosted(Backend& b) {
  uint64_t n = 0;
  for (auto& q : static_cast<verbs::VerbsBackend&>(b).peerQps(1)) n += q.posted;
  return n;
}

// Progresses both until done() or 10 s pass.
template <typename F>
bool driveUntil(Backend& a, Backend& b, F done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    a.progress();
    b.progress();
  }
  return done();
}

TEST(VerbsHandshakeBatch, ClearToSendOfOnePassShareOneSend) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  constexpr size_t kPayloads = 5, kLen = 64 << 10;  // rendezvous: above the 8 KiB SEND
  for (const char* batch : {"16", "1"}) {
    SCOPED_TRACE(::testing::Message() << "rts_batch " << batch);
    Events ea, eb;
    auto a = makeBackend(&ea, batch);
    auto b = makeBackend(&eb, batch);
    ASSERT_TRUE(a && b);
    auto la = a->localAddress(), lb = b->localAddress();
    ASSERT_TRUE(a->addPeer(1, lb));
    ASSERT_TRUE(b->addPeer(1, la));
    std::vector<std::vector<char>> src(kPayloads, std::vector<char>(kLen)),
        dst(kPayloads, std::vector<char>(kLen, 0));
    for (size_t i = 0; i < kPayloads; ++i) {
      for (size_t k = 0; k < kLen; ++k) src[i][k] = static_cast<char>(k * 7 + i);
      std::string h = std::to_string(i);
      ASSERT_TRUE(a->post(1, std::as_bytes(std::span(h.data(), h.size())), src[i].data(), kLen,
                          nullptr, i + 1, 0));
    }
    ASSERT_TRUE(driveUntil(*a, *b, [&] { return eb.offered.size() == kPayloads; }));
    ASSERT_EQ(eb.failures, 0);
    // The payloads' receives start in one pass of b (as the core lands them).
    const uint64_t before = sendsPosted(*b);
    for (size_t i = 0; i < kPayloads; ++i) {
      ASSERT_TRUE(b->receive(eb.offered[i], dst[i].data(), kLen, nullptr, 100 + i));
    }
    b->progress();
    const uint64_t want = std::strcmp(batch, "1") == 0 ? kPayloads : 1;
    EXPECT_EQ(sendsPosted(*b) - before, want) << "kCts SENDs for " << kPayloads << " receives";
    ASSERT_TRUE(driveUntil(
        *a, *b, [&] { return ea.sends_ok == int{kPayloads} && eb.receives_ok == int{kPayloads}; }));
    EXPECT_EQ(ea.failures + eb.failures, 0);
    for (size_t i = 0; i < kPayloads; ++i) EXPECT_EQ(src[i], dst[i]) << "payload " << i;
  }
}

}  // namespace
}  // namespace tictac::transport::test
