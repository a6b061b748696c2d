// Unit tests of RejectedOps, the bounded set of a peer's rejected send ops:
// membership, forgetting the oldest past its capacity, erased entries that
// must not evict a later insertion of the same op, and a bounded footprint
// under a flood of ops that never end.
#include "transport/core/rejected_ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>

namespace tictac::transport {
namespace {

TEST(RejectedOps, RemembersUntilErased) {
  RejectedOps r;
  EXPECT_TRUE(r.empty());
  r.insert(7);
  r.insert(7);  // twice: one entry
  EXPECT_EQ(r.size(), 1u);
  EXPECT_TRUE(r.contains(7));
  EXPECT_FALSE(r.contains(8));
  r.erase(7);
  EXPECT_FALSE(r.contains(7));
  EXPECT_TRUE(r.empty());
  r.erase(9);  // unknown: nothing happens
  EXPECT_TRUE(r.empty());
}

TEST(RejectedOps, PastTheCapacityTheOldestIsForgotten) {
  RejectedOps r(4);
  for (uint64_t op = 1; op <= 6; ++op) r.insert(op);
  EXPECT_EQ(r.size(), 4u);
  EXPECT_FALSE(r.contains(1));
  EXPECT_FALSE(r.contains(2));
  for (uint64_t op = 3; op <= 6; ++op) EXPECT_TRUE(r.contains(op)) << op;
}

TEST(RejectedOps, AnErasedAndReinsertedOpIsNotEvictedByItsOldEntry) {
  RejectedOps r(3);
  r.insert(1);
  r.insert(2);
  r.erase(1);
  r.insert(1);  // again, now the newest
  r.insert(3);
  r.insert(4);  // one too many: the oldest live op (2) goes, not the new 1
  EXPECT_FALSE(r.contains(2));
  EXPECT_TRUE(r.contains(1));
  EXPECT_TRUE(r.contains(3));
  EXPECT_TRUE(r.contains(4));
}

TEST(RejectedOps, ErasedOpsAgeOutOfTheOrder) {
  RejectedOps r(3);
  for (uint64_t op = 1; op <= 1000; ++op) {  // each op's last chunk arrives
    r.insert(op);
    r.erase(op);
  }
  r.insert(2000);
  r.insert(2001);
  r.insert(2002);
  EXPECT_EQ(r.size(), 3u);  // the erased ones took no place among the last three
  for (uint64_t op = 2000; op <= 2002; ++op) EXPECT_TRUE(r.contains(op)) << op;
}

// A model check: random inserts and erases against the rule "an op is
// remembered until erased or `cap` more ops were inserted after it".
TEST(RejectedOps, MatchesAModelUnderRandomOperations) {
  std::mt19937_64 rng(5);
  const uint64_t cap = 16;
  RejectedOps r(cap);
  std::map<uint64_t, uint64_t> model;  // live op -> the number of its insertion
  uint64_t inserted = 0;
  for (int step = 0; step < 50000; ++step) {
    uint64_t op = rng() % 40;
    if (rng() % 3 != 0) {
      r.insert(op);
      if (model.emplace(op, inserted).second) ++inserted;
      std::erase_if(model, [&](const auto& m) { return inserted - m.second > cap; });
    } else {
      r.erase(op);
      model.erase(op);
    }
    ASSERT_EQ(r.size(), model.size()) << "step " << step;
    for (auto [m, n] : model) ASSERT_TRUE(r.contains(m)) << "step " << step << " op " << m;
  }
}

TEST(RejectedOps, AFloodOfOpsThatNeverEndStaysAtTheCapacity) {
  RejectedOps r;  // the engine's default
  for (uint64_t op = 0; op < 4 * RejectedOps::kDefaultCapacity; ++op) r.insert(op * 977);
  EXPECT_EQ(r.size(), RejectedOps::kDefaultCapacity);
  EXPECT_TRUE(r.contains((4 * RejectedOps::kDefaultCapacity - 1) * 977));
  EXPECT_FALSE(r.contains(0));
}

}  // namespace
}  // namespace tictac::transport
