// Address blobs whose handshake failed free their QPs (suite 'verbs', run
// inside tools/softroce-vm): every bootstrap connection, a stranger's too,
// makes a blob, and with cm=tcp a blob holds one QP per priority class with
// its receive buffers. discardAddress() must close exactly the QPs of the
// blob it is given: blobs never paired, blobs a malformed peer address left
// unpaired, at one and two classes; a blob addPeer() took stays connected.
#include <gtest/gtest.h>

#include <memory>
#include <string>
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

std::unique_ptr<verbs::VerbsBackend> make(NoEvents* ev, const std::string& bounds) {
  BackendOptions o;
  o.config = {{"address", "127.0.0.1"}};
  if (!bounds.empty()) o.config["class_bounds"] = bounds;
  auto b = verbs::create(o, ev);
  EXPECT_TRUE(b) << b.status().toString();
  if (!b) return nullptr;
  auto p = std::move(b).value();
  return std::unique_ptr<verbs::VerbsBackend>(static_cast<verbs::VerbsBackend*>(p.release()));
}

// "" = one QP per peer, "100" = two priority classes (two QPs per blob).
class VerbsDiscard : public ::testing::TestWithParam<std::string> {};

TEST_P(VerbsDiscard, UnpairedBlobsLeaveNoQp) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  const size_t per_blob = GetParam().empty() ? 1 : 2;
  NoEvents ea;
  auto a = make(&ea, GetParam());
  ASSERT_TRUE(a);
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
  TICTAC_REQUIRE_RDMA_DEVICE();
  const size_t per_blob = GetParam().empty() ? 1 : 2;
  NoEvents ea;
  auto a = make(&ea, GetParam());
  ASSERT_TRUE(a);
  auto mine = a->localAddress();
  std::vector<uint8_t> junk(mine.size(), 0x5a);  // right size, wrong magic
  EXPECT_FALSE(a->addPeer(1, junk));
  EXPECT_EQ(a->connCount(), per_blob);
  a->discardAddress(mine);
  EXPECT_EQ(a->connCount(), 0u);
}

TEST_P(VerbsDiscard, APairedBlobIsNotDiscarded) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  const size_t per_blob = GetParam().empty() ? 1 : 2;
  NoEvents ea, eb;
  auto a = make(&ea, GetParam());
  auto b = make(&eb, GetParam());
  ASSERT_TRUE(a && b);
  auto la = a->localAddress(), lb = b->localAddress();
  ASSERT_TRUE(a->addPeer(1, lb));
  ASSERT_TRUE(b->addPeer(1, la));
  a->discardAddress(la);  // taken by addPeer: a late discard must not close it
  EXPECT_EQ(a->connCount(), per_blob);
  EXPECT_EQ(a->peerQps(1).size(), per_blob);
}

INSTANTIATE_TEST_SUITE_P(Classes, VerbsDiscard, ::testing::Values("", "100"),
                         [](const auto& info) { return info.param.empty() ? "one" : "two"; });

}  // namespace
}  // namespace tictac::transport::test
