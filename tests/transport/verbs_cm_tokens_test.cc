// Unit test of CmState::issue, the rdma_cm blob tokens a passive side accepts
// connect requests for: a token is accepted until claimed, and no more than
// kMaxIssued are remembered however many bootstrap connections (a stranger's
// too) made blobs that no handshake ever claimed; the oldest go first.
#include <gtest/gtest.h>

#include <cstdint>

#include "transport/verbs/cm.h"

namespace tictac::transport::verbs {
namespace {

TEST(CmTokens, IssuedUntilClaimed) {
  CmState s;
  s.issue(11);
  s.issue(12);
  EXPECT_EQ(s.issued.count(11), 1u);
  s.issued.erase(11);  // claimed by addPeer()
  EXPECT_EQ(s.issued.count(11), 0u);
  EXPECT_EQ(s.issued.count(12), 1u);
}

TEST(CmTokens, AFloodOfUnclaimedBlobsIsBoundedOldestFirst) {
  CmState s;
  const uint64_t n = 10 * CmState::kMaxIssued;
  for (uint64_t t = 1; t <= n; ++t) s.issue(t);
  EXPECT_EQ(s.issued.size(), CmState::kMaxIssued);
  EXPECT_LE(s.issued_order.size(), CmState::kMaxIssued);
  EXPECT_EQ(s.issued.count(n - CmState::kMaxIssued), 0u);  // the oldest are gone
  EXPECT_EQ(s.issued.count(n - CmState::kMaxIssued + 1), 1u);
  EXPECT_EQ(s.issued.count(n), 1u);
}

}  // namespace
}  // namespace tictac::transport::verbs
