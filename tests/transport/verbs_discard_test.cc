// Address blobs whose handshake failed free their QPs (suite 'verbs', run
// inside tools/softroce-vm): every bootstrap connection, a stranger's too,
// makes a blob, and with cm=tcp a blob holds one QP per priority class with
// its receive buffers. discardAddress() must close exactly the QPs of the
// blob it is given: blobs never paired, blobs a malformed peer address left
// unpaired, at one and two classes; a blob addPeer() took stays connected.
// With cm=rdmacm a blob holds a token, and a connect request the peer sent
// for it before the handshake failed holds an accepted QP: discarding the
// blob closes that QP. And a thread whose localAddress() failed does not
// connect another thread's blob.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/verbs_helper.h"
#include "transport/verbs/backend.h"
#include "transport/verbs/factory.h"

namespace tictac::transport::test {
namespace {

struct NoEvents : BackendEvents {
  void onMessage(PeerId, std::span<const std::byte>, Incoming&) override {}
  void onSendDone(uint64_t, const Status&) override {}
  void onReceiveDone(uint64_t, const Status&) override {}
  void onPeerError(PeerId, const Status&) override {}
};

std::unique_ptr<verbs::VerbsBackend> make(NoEvents* ev, const std::string& bounds, bool cm = false,
                                          std::map<std::string, std::string> extra = {}) {
  BackendOptions o;
  o.config = {{"address", "127.0.0.1"}};
  o.config.insert(extra.begin(), extra.end());
  if (!bounds.empty()) o.config["class_bounds"] = bounds;
  if (cm) {  // the guest's rdma_cm address (tools/softroce-vm-init), as verbs_cm_test
    const char* e = std::getenv("TICTAC_TEST_CM_ADDRESS");
    o.config = {{"cm", "rdmacm"},
                {"address", e != nullptr && *e ? e : "192.0.2.1"},
                {"cm_timeout_ms", "3000"}};
  }
  auto b = verbs::create(o, ev);
  EXPECT_TRUE(b) << b.status().toString();
  if (!b) return nullptr;
  auto p = std::move(b).value();
  return std::unique_ptr<verbs::VerbsBackend>(static_cast<verbs::VerbsBackend*>(p.release()));
}

// "" = one QP per peer, "100" = two priority classes (two QPs per blob).
class VerbsDiscard : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    TICTAC_REQUIRE_RDMA_DEVICE();
    per_blob = GetParam().empty() ? 1 : 2;
    a = make(&ea, GetParam());
    ASSERT_TRUE(a);
  }
  size_t per_blob = 1;
  NoEvents ea;
  std::unique_ptr<verbs::VerbsBackend> a;
};

TEST_P(VerbsDiscard, UnpairedBlobsLeaveNoQp) {
  std::vector<std::vector<uint8_t>> blobs;
  for (int i = 0; i < 20; ++i) blobs.push_back(a->localAddress());
  EXPECT_EQ(a->connCount(), 20 * per_blob);
  for (size_t i = 0; i < blobs.size(); i += 2) a->discardAddress(blobs[i]);  // every other one
  EXPECT_EQ(a->connCount(), 10 * per_blob);
  a->discardAddress(blobs[0]);  // again: nothing left to close
  a->discardAddress({});        // a blob localAddress() could not make
  EXPECT_EQ(a->connCount(), 10 * per_blob);
  for (size_t i = 1; i < blobs.size(); i += 2) a->discardAddress(blobs[i]);
  EXPECT_EQ(a->connCount(), 0u);
}

TEST_P(VerbsDiscard, AMalformedPeerAddressLeavesTheBlobToDiscard) {
  auto mine = a->localAddress();
  std::vector<uint8_t> junk(mine.size(), 0x5a);  // right size, wrong magic
  EXPECT_FALSE(a->addPeer(1, junk));
  EXPECT_EQ(a->connCount(), per_blob);
  a->discardAddress(mine);
  EXPECT_EQ(a->connCount(), 0u);
}

TEST_P(VerbsDiscard, APairedBlobIsNotDiscarded) {
  NoEvents eb;
  auto b = make(&eb, GetParam());
  ASSERT_TRUE(b);
  auto la = a->localAddress(), lb = b->localAddress();
  ASSERT_TRUE(a->addPeer(1, lb));
  ASSERT_TRUE(b->addPeer(1, la));
  a->discardAddress(la);  // taken by addPeer: a late discard must not close it
  EXPECT_EQ(a->connCount(), per_blob);
  EXPECT_EQ(a->peerQps(1).size(), per_blob);
}

uint16_t cmPort(const std::vector<uint8_t>& blob) {
  verbs::CmBlob cb;
  std::memcpy(&cb, blob.data() + sizeof(verbs::AddressBlob), sizeof(cb));
  return ntohs(cb.port);
}

TEST(VerbsDiscardCm, ARequestAcceptedForADiscardedBlobIsClosed) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  NoEvents ex, ey;
  auto x = make(&ex, "", true);
  auto y = make(&ey, "", true);
  ASSERT_TRUE(x && y);
  auto bx = x->localAddress(), by = y->localAddress();
  ASSERT_EQ(bx.size(), sizeof(verbs::AddressBlob) + sizeof(verbs::CmBlob));
  // The side whose listener sorts lower connects; the other accepts.
  const bool x_passive = cmPort(bx) > cmPort(by);
  verbs::VerbsBackend* passive = x_passive ? x.get() : y.get();
  verbs::VerbsBackend* active = x_passive ? y.get() : x.get();
  const auto& passive_blob = x_passive ? bx : by;
  // A peer whose listener sorts lower still, and which never connects: the
  // passive side waits for its request (cm_timeout_ms), meanwhile accepting
  // the active side's request for passive_blob, which nobody claims.
  auto nobody = x_passive ? by : bx;
  verbs::CmBlob cb;
  std::memcpy(&cb, nobody.data() + sizeof(verbs::AddressBlob), sizeof(cb));
  cb.port = htons(1);
  std::memcpy(nobody.data() + sizeof(verbs::AddressBlob), &cb, sizeof(cb));
  std::thread connector([&] { (void)active->addPeer(1, passive_blob); });
  Status st = passive->addPeer(1, nobody);
  connector.join();
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.toString();
  EXPECT_EQ(passive->connCount(), 1u) << "the accepted request's QP";
  passive->discardAddress(passive_blob);
  EXPECT_EQ(passive->connCount(), 0u);
}

// The largest completion queue any RDMA device here allows (rxe: 32767).
int largestMaxCqe() {
  int n = 0, most = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; i < n; ++i) {
    ibv_context* c = ibv_open_device(list[i]);
    ibv_device_attr a{};
    if (c != nullptr && ibv_query_device(c, &a) == 0) most = std::max(most, a.max_cqe);
    if (c != nullptr) ibv_close_device(c);
  }
  if (list != nullptr) ibv_free_device_list(list);
  return most;
}

// A thread whose localAddress() failed must not connect the blob another
// thread made: addPeer() takes the calling thread's own blob, and after a
// failed one none. The failure: a QP of 8192 + 8192 work requests needs as
// many completion queue entries, and a second one outgrows rxe's 32767.
TEST(VerbsLocalAddress, AFailedAddressTakesNoOtherThreadsBlob) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  if (largestMaxCqe() >= 2 * (8192 + 8192) + 64) {
    GTEST_SKIP() << "a completion queue here holds two deep QPs: no failure to provoke";
  }
  NoEvents ea, eb;
  const std::map<std::string, std::string> deep = {{"sq_depth", "8192"}, {"rq_depth", "8192"}};
  auto a = make(&ea, "", false, deep);
  auto b = make(&eb, "");
  ASSERT_TRUE(a && b);
  auto la = a->localAddress(), lb = b->localAddress();
  ASSERT_FALSE(la.empty());
  Status other;
  size_t made = 0;
  std::thread t([&] {
    std::vector<uint8_t> mine;
    for (int i = 0; i < 8 && !(mine = a->localAddress()).empty(); ++i) ++made;
    if (mine.empty()) other = a->addPeer(1, lb);
  });
  t.join();
  ASSERT_LT(made, 8u) << "the completion queue never ran out";
  EXPECT_EQ(other.code(), StatusCode::kIoError) << other.toString();
  EXPECT_NE(other.message().find("this side's address failed"), std::string::npos)
      << other.toString();
  EXPECT_EQ(a->connCount(), 1 + made) << "a failed address closes its own QPs only";
  ASSERT_TRUE(a->addPeer(1, lb));  // this thread's blob is still there for it
  ASSERT_TRUE(b->addPeer(1, la));
  EXPECT_EQ(a->peerQps(1).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Classes, VerbsDiscard, ::testing::Values("", "100"),
                         [](const auto& info) { return info.param.empty() ? "one" : "two"; });

}  // namespace
}  // namespace tictac::transport::test
