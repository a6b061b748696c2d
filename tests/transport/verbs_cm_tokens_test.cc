// Unit test of CmState::issued (a BoundedSet), the rdma_cm blob tokens a
// passive side accepts connect requests for: a token is accepted until
// claimed, and no more than
// kMaxIssued are remembered however many bootstrap connections (a stranger's
// too) made blobs that no handshake ever claimed; the oldest go first.
#include <gtest/gtest.h>

#include <cstdint>

#include "transport/verbs/cm.h"

namespace tictac::transport::verbs {
namespace {

TEST(CmTokens, IssuedUntilClaimed) {
  CmState s;
  s.issued.insert(11);
  s.issued.insert(12);
  EXPECT_TRUE(s.issued.contains(11));
  s.issued.erase(11);  // claimed by addPeer()
  EXPECT_FALSE(s.issued.contains(11));
  EXPECT_TRUE(s.issued.contains(12));
}

TEST(CmTokens, AFloodOfUnclaimedBlobsIsBoundedOldestFirst) {
  CmState s;
  const uint64_t n = 10 * CmState::kMaxIssued;
  for (uint64_t t = 1; t <= n; ++t) s.issued.insert(t);
  EXPECT_EQ(s.issued.size(), CmState::kMaxIssued);
  EXPECT_FALSE(s.issued.contains(n - CmState::kMaxIssued));  // the oldest are gone
  EXPECT_TRUE(s.issued.contains(n - CmState::kMaxIssued + 1));
  EXPECT_TRUE(s.issued.contains(n));
}

}  // namespace
}  // namespace tictac::transport::verbs
