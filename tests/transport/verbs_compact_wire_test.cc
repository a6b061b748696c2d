// Compact eager messages over rxe (suite 'verbs', run inside
// tools/softroce-vm): two verbs backends, a stream of data headers of every
// kind (compact-eligible with small and large changes, acked, hashed ids)
// and payloads from 0 B to the largest eager size, copied and zero-copy, over
// one QP and over two priority classes. The receiver must see every header
// byte for byte and every payload intact, each QP's in order, and the sender
// must have sent compact exactly the messages transport/verbs/compact.h
// allows; a compact message before any full one is a protocol error, and so
// is a write with immediate that names no receive of its connection.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/transport/verbs_helper.h"
#include "transport/core/wire.h"
#include "transport/verbs/backend.h"
#include "transport/verbs/compact.h"
#include "transport/verbs/factory.h"

namespace tictac::transport::test {
namespace {

struct Events : BackendEvents {
  std::vector<std::string> headers, payloads;
  int sends_ok = 0, failures = 0;
  std::string error;
  void onMessage(PeerId, std::span<const std::byte> h, Incoming& in) override {
    headers.emplace_back(reinterpret_cast<const char*>(h.data()), h.size());
    payloads.emplace_back(static_cast<const char*>(in.data), in.length);
  }
  void onSendDone(uint64_t, const Status& s) override { s ? ++sends_ok : ++failures; }
  void onReceiveDone(uint64_t, const Status&) override {}
  void onPeerError(PeerId, const Status& s) override {
    ++failures;
    error = s.toString();
  }
};

std::unique_ptr<Backend> makeBackend(Events* ev, const std::string& bounds = "") {
  BackendOptions o;
  o.config = {{"address", "127.0.0.1"}};
  if (!bounds.empty()) o.config["class_bounds"] = bounds;
  auto b = verbs::create(o, ev);
  EXPECT_TRUE(b) << b.status().toString();
  return b ? std::move(b.value()) : nullptr;
}

// Two backends on rxe, a's peer 1 is b and b's peer 1 is a.
void connectPair(Events* ea, Events* eb, std::unique_ptr<Backend>* a, std::unique_ptr<Backend>* b,
                 const std::string& bounds = "") {
  *a = makeBackend(ea, bounds);
  *b = makeBackend(eb, bounds);
  ASSERT_TRUE(*a && *b);
  auto la = (*a)->localAddress(), lb = (*b)->localAddress();
  ASSERT_TRUE((*a)->addPeer(1, lb));
  ASSERT_TRUE((*b)->addPeer(1, la));
}

// One QP per peer, and two (class_bounds "100": priorities 0 and 500 take
// different QPs, each with its own base; the stream alternates between them).
class VerbsCompactWire : public ::testing::TestWithParam<std::string> {};

TEST_P(VerbsCompactWire, EveryHeaderAndPayloadArrivesAsPosted) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  const std::string bounds = GetParam();
  const size_t classes = bounds.empty() ? 1 : 2;
  Events ea, eb;
  std::unique_ptr<Backend> a, b;
  ASSERT_NO_FATAL_FAILURE(connectPair(&ea, &eb, &a, &b, bounds));

  constexpr int kMsgs = 300;
  const size_t lens[] = {0, 8, 1000, 4032, 4096, 4097, 8000};
  std::vector<std::vector<char>> src(kMsgs);
  std::vector<std::unique_ptr<MemoryRegion>> regions(kMsgs);
  std::vector<wire::Header> sent(kMsgs);
  verbs::CompactBase model[2];
  uint64_t want_compact[2] = {0, 0}, want_posted[2] = {0, 0};
  for (int i = 0; i < kMsgs; ++i) {
    const uint32_t prio = i % 3 == 0 ? 0 : 500;
    const size_t cls = classes == 2 && prio >= 100 ? 1 : 0;
    const size_t len = lens[i % 7];
    src[i].resize(len);
    for (size_t k = 0; k < len; ++k) src[i][k] = static_cast<char>(k * 13 + i);
    wire::Header& h = sent[i];
    h.type = static_cast<uint8_t>(wire::MsgType::kData);
    h.flags = i % 11 == 5 ? wire::kFlagLast : verbs::kCompactFlags;  // some acked: full
    h.src_peer = 7;
    h.tensor_id = i % 13 == 3 ? 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i) : i % 50;
    h.iteration = static_cast<uint32_t>(i / 50);
    h.op_id = 2 * static_cast<uint64_t>(i) + 1;
    h.total_len = len;
    h.length = static_cast<uint32_t>(len);
    uint32_t imm = 0;
    want_compact[cls] += verbs::compactEncode(model[cls], h, &imm);
    want_posted[cls]++;
    if (verbs::compactEligible(h)) verbs::compactUpdate(model[cls], h);
    const MemoryRegion* region = nullptr;
    if (i % 2 == 1 && len > 0) {  // registered: zero-copy from 1 KiB
      auto r = a->registerMemory(src[i].data(), len);
      ASSERT_TRUE(r) << r.status().toString();
      regions[i] = std::move(r.value());
      region = regions[i].get();
    }
    ASSERT_TRUE(a->post(1, wire::asBytes(h), src[i].data(), len, region, i + 1, prio));
  }
  ASSERT_GT(want_compact[0] + want_compact[1], 100u);  // the stream exercises the compact form

  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((eb.headers.size() < kMsgs || ea.sends_ok < kMsgs) && ea.failures + eb.failures == 0 &&
         std::chrono::steady_clock::now() < until) {
    a->progress();
    b->progress();
  }
  ASSERT_EQ(ea.failures + eb.failures, 0) << ea.error << eb.error;
  ASSERT_EQ(eb.headers.size(), size_t{kMsgs});
  EXPECT_EQ(ea.sends_ok, kMsgs);
  // Each message once, intact; a QP's messages in their posting order (the
  // op id, 2i + 1, names the message: the QPs' streams interleave).
  std::vector<int> seen(kMsgs, 0);
  int last[2] = {-1, -1};
  for (size_t n = 0; n < eb.headers.size(); ++n) {
    ASSERT_EQ(eb.headers[n].size(), sizeof(wire::Header)) << n;
    wire::Header got;
    std::memcpy(&got, eb.headers[n].data(), sizeof(got));
    const auto i = static_cast<int>((got.op_id - 1) / 2);
    ASSERT_TRUE(got.op_id % 2 == 1 && i < kMsgs) << "op id " << got.op_id;
    EXPECT_EQ(std::memcmp(&got, &sent[i], sizeof(got)), 0) << "header " << i;
    EXPECT_EQ(eb.payloads[n], std::string(src[i].data(), src[i].size())) << "payload " << i;
    const size_t cls = classes == 2 && i % 3 != 0 ? 1 : 0;
    EXPECT_GT(i, last[cls]) << "class " << cls;
    last[cls] = i;
    seen[i]++;
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kMsgs);
  auto qps = static_cast<verbs::VerbsBackend*>(a.get())->peerQps(1);
  ASSERT_EQ(qps.size(), classes);
  for (size_t k = 0; k < classes; ++k) {
    EXPECT_EQ(qps[k].compact, want_compact[k]) << "class " << k;
    EXPECT_EQ(qps[k].posted, want_posted[k]) << "class " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Qps, VerbsCompactWire, ::testing::Values("", "100"), [](const auto& info) {
  return info.param.empty() ? "OneQp" : "TwoClasses";
});

// A hostile or broken peer: b posts raw work requests on its own QP to a,
// bypassing its logic (unsignaled: b's CQ sees nothing of them); a must
// report a protocol error of that peer by name and deliver nothing.
class VerbsCompactWireHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    TICTAC_REQUIRE_RDMA_DEVICE();
    ASSERT_NO_FATAL_FAILURE(connectPair(&ea, &eb, &a, &b));
    auto qps = static_cast<verbs::VerbsBackend*>(b.get())->peerQps(1);
    ASSERT_EQ(qps.size(), 1u);
    qp = qps[0].qp;
  }
  // Posts wr raw on b's QP, then progresses a until it reports a failure.
  void postAndWait(ibv_send_wr& wr) {
    ibv_send_wr* bad = nullptr;
    wr.wr_id = 1;
    ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ea.failures == 0 && std::chrono::steady_clock::now() < until) a->progress();
  }
  Events ea, eb;
  std::unique_ptr<Backend> a, b;
  ibv_qp* qp = nullptr;
};

// A SEND WITH IMMEDIATE first (a compact message with no full one before it
// to rebuild from).
TEST_F(VerbsCompactWireHostile, CompactMessageBeforeAnyFullOneIsAProtocolError) {
  char payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ibv_sge sge{reinterpret_cast<uintptr_t>(payload), sizeof(payload), 0};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_INLINE;
  wr.imm_data = htonl(0x00100001u);
  ASSERT_NO_FATAL_FAILURE(postAndWait(wr));
  EXPECT_EQ(ea.failures, 1);
  EXPECT_NE(ea.error.find("compact message before any full one"), std::string::npos) << ea.error;
  EXPECT_TRUE(ea.headers.empty());
}

// A WRITE WITH IMMEDIATE (zero bytes: no rkey is checked) whose immediate
// names no receive (kCts) or advert of its connection: never the completion
// of some other receive.
TEST_F(VerbsCompactWireHostile, AWriteWithImmediateNamingNoReceiveIsAProtocolError) {
  ibv_send_wr wr{};
  wr.num_sge = 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(77777);
  ASSERT_NO_FATAL_FAILURE(postAndWait(wr));
  EXPECT_EQ(ea.failures, 1);
  EXPECT_NE(ea.error.find("write with immediate 77777 names no receive"), std::string::npos)
      << ea.error;
}

}  // namespace
}  // namespace tictac::transport::test
