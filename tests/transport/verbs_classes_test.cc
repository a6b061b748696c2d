// One QP per priority class on the verbs backend (class_bounds; suite
// 'verbs', run inside tools/softroce-vm): the option checks, which QP each
// priority takes and the traffic class and SL each QP carries, a peer with
// other classes refused by name, and the channel conformance suite
// (channel_test.cc) over a three-class context ("verbs-classes").
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/transport/verbs_helper.h"
#include "transport/verbs/backend.h"
#include "transport/verbs/factory.h"

namespace tictac::transport::test {
namespace {

ContextOptions classOptions() {
  ContextOptions o = verbsLoOptions();
  o.backend_config["class_bounds"] = "100,100000";  // urgent < 100 <= bulk < 100000 <= default
  return o;
}
const bool registered = registerBackendHelper({"verbs", verbsLoOptions, verbsViable}) &&
                        registerBackendHelper({"verbs-classes", classOptions, verbsViable});

TEST(VerbsClasses, OptionsAreChecked) {
  ASSERT_TRUE(registered);
  using Opts = std::vector<std::pair<std::string, std::string>>;
  for (const Opts& bad :
       {Opts{{"class_bounds", "5,5"}}, Opts{{"class_bounds", "10,5"}}, Opts{{"class_bounds", "x"}},
        Opts{{"class_bounds", ""}}, Opts{{"class_bounds", "1,2,3,4,5,6,7,8"}},
        Opts{{"class_bounds", "-1"}}, Opts{{"class_bounds", "10"}, {"class_traffic_class", "184"}},
        Opts{{"class_bounds", "10"}, {"class_traffic_class", "184,256"}},
        Opts{{"class_bounds", "10"}, {"class_sl", "1,16"}}, Opts{{"class_sl", "1,2"}}}) {
    ContextOptions o = verbsLoOptions();
    for (auto& [k, v] : bad) o.backend_config[k] = v;
    auto c = Context::create(o);
    ASSERT_FALSE(c) << bad.back().first << "=" << bad.back().second;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().toString();
    EXPECT_NE(c.status().message().find(bad.back().first), std::string::npos)
        << c.status().toString();
  }
}

struct Events : BackendEvents {
  std::vector<std::string> headers;
  int sends_ok = 0, failures = 0;
  void onMessage(PeerId, std::span<const std::byte> h, Incoming&) override {
    headers.emplace_back(reinterpret_cast<const char*>(h.data()), h.size());
  }
  void onSendDone(uint64_t, const Status& s) override { s ? ++sends_ok : ++failures; }
  void onReceiveDone(uint64_t, const Status&) override {}
  void onPeerError(PeerId, const Status&) override { ++failures; }
};

std::unique_ptr<Backend> makeBackend(Events* ev, const std::string& bounds,
                                     const std::string& tcs = "") {
  BackendOptions o;
  o.config = {{"address", "127.0.0.1"}};
  if (!bounds.empty()) o.config["class_bounds"] = bounds;
  if (!tcs.empty()) o.config["class_traffic_class"] = tcs;
  auto b = verbs::create(o, ev);
  EXPECT_TRUE(b) << b.status().toString();
  return b ? std::move(b.value()) : nullptr;
}

TEST(VerbsClasses, EachPriorityTakesItsClassQp) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Events ea, eb;
  auto a = makeBackend(&ea, "100,100000", "184,96,0");
  auto b = makeBackend(&eb, "100,100000", "184,96,0");
  ASSERT_TRUE(a && b);
  auto la = a->localAddress(), lb = b->localAddress();
  ASSERT_EQ(la.size(), 40u + 2 * 8u);  // the blob and two more QPs
  ASSERT_TRUE(a->addPeer(1, lb));
  ASSERT_TRUE(b->addPeer(1, la));
  // Two messages of class 1, one of each other class.
  const std::vector<std::pair<std::string, uint32_t>> msgs = {
      {"urgent", 0}, {"bulk-a", 100}, {"bulk-b", 99999}, {"late", 1u << 31}};
  uint64_t token = 1;
  for (auto& [h, prio] : msgs) {
    ASSERT_TRUE(a->post(1, std::as_bytes(std::span(h.data(), h.size())), nullptr, 0, nullptr,
                        token++, prio));
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((eb.headers.size() < msgs.size() || ea.sends_ok < 4) && ea.failures == 0 &&
         std::chrono::steady_clock::now() < until) {
    a->progress();
    b->progress();
  }
  ASSERT_EQ(eb.headers.size(), msgs.size());
  EXPECT_EQ(ea.sends_ok, 4);
  EXPECT_EQ(ea.failures, 0);
  // bulk-a before bulk-b: one QP keeps a class's order.
  auto pos = [&](const std::string& h) {
    return std::find(eb.headers.begin(), eb.headers.end(), h) - eb.headers.begin();
  };
  EXPECT_LT(pos("bulk-a"), pos("bulk-b"));
  auto qps = static_cast<verbs::VerbsBackend*>(a.get())->peerQps(1);
  ASSERT_EQ(qps.size(), 3u);
  const uint64_t want_posted[] = {1, 2, 1};
  const uint8_t want_tc[] = {184, 96, 0}, want_sl[] = {2, 1, 0};  // SL: the default
  for (size_t k = 0; k < qps.size(); ++k) {
    EXPECT_EQ(qps[k].cls, k);
    EXPECT_EQ(qps[k].posted, want_posted[k]) << "class " << k;
    ibv_qp_attr at{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(qps[k].qp, &at, IBV_QP_AV, &init), 0);
    EXPECT_EQ(at.ah_attr.grh.traffic_class, want_tc[k]) << "class " << k;
    // RoCE has no SL field: rxe keeps none (ibv_query_qp reads 0 back).
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(qps[k].qp->context, 1, &pa), 0);
    if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
      EXPECT_EQ(at.ah_attr.sl, want_sl[k]) << "class " << k;
    }
  }
}

TEST(VerbsClasses, PeerWithOtherClassesIsRefusedByName) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Events ea, eb;
  auto a = makeBackend(&ea, "100");
  auto b = makeBackend(&eb, "");
  ASSERT_TRUE(a && b);
  auto la = a->localAddress(), lb = b->localAddress();
  Status s = a->addPeer(1, lb);
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_NE(s.message().find("class_bounds"), std::string::npos) << s.toString();
  s = b->addPeer(1, la);
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_NE(s.message().find("class_bounds"), std::string::npos) << s.toString();
  // A truncated blob is refused too, not read past its end.
  la.resize(la.size() - 4);
  Events ec;
  auto c = makeBackend(&ec, "100");
  (void)c->localAddress();
  EXPECT_EQ(c->addPeer(1, la).code(), StatusCode::kProtocolError);
}

// A peer that advertises receive buffers too small for the small messages
// every peer sends eager (a hostile or broken blob) is refused by name.
TEST(VerbsClasses, PeerWithTinyReceiveBuffersIsRefused) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Events ea, eb;
  auto a = makeBackend(&ea, "");
  auto b = makeBackend(&eb, "");
  ASSERT_TRUE(a && b);
  (void)a->localAddress();
  auto lb = b->localAddress();
  verbs::AddressBlob blob;
  ASSERT_GE(lb.size(), sizeof(blob));
  std::memcpy(&blob, lb.data(), sizeof(blob));
  blob.recv_bytes = 64;
  std::memcpy(lb.data(), &blob, sizeof(blob));
  Status s = a->addPeer(1, lb);
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_NE(s.message().find("receive buffers of 64 bytes"), std::string::npos) << s.toString();
}

}  // namespace
}  // namespace tictac::transport::test
