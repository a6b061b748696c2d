// Unit tests of PriorityLanes<T> (the per-priority send queue) and IntMap.
#include "transport/core/priority_lanes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/core/int_map.h"

namespace tictac::transport {
namespace {

constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();

std::vector<int> drain(PriorityLanes<int>& lanes) {
  std::vector<int> out;
  while (!lanes.empty()) {
    out.push_back(lanes.front());
    lanes.pop();
  }
  return out;
}

TEST(PriorityLanes, EmptyByDefault) {
  PriorityLanes<int> lanes;
  EXPECT_TRUE(lanes.empty());
  EXPECT_EQ(lanes.size(), 0u);
  EXPECT_EQ(lanes.levels(), 0u);
}

TEST(PriorityLanes, FifoWithinALevel) {
  PriorityLanes<int> lanes;
  for (int i = 0; i < 100; ++i) lanes.push(7, i);  // crosses several buffer growths
  EXPECT_EQ(lanes.size(), 100u);
  EXPECT_EQ(lanes.levels(), 1u);
  std::vector<int> out = drain(lanes);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(out[i], i);
}

TEST(PriorityLanes, StrictOrderAcrossLevelsIncludingExtremes) {
  PriorityLanes<int> lanes;
  lanes.push(kMax, 1);
  lanes.push(1u << 31, 2);
  lanes.push(0, 3);
  lanes.push(kMax - 1, 4);
  lanes.push(1, 5);
  lanes.push(0, 6);
  lanes.push(kMax, 7);
  EXPECT_EQ(lanes.levels(), 5u);
  EXPECT_EQ(lanes.frontPriority(), 0u);
  EXPECT_EQ(drain(lanes), (std::vector<int>{3, 6, 5, 2, 4, 1, 7}));
  EXPECT_EQ(lanes.levels(), 0u);
}

TEST(PriorityLanes, UrgentPushOvertakesTheCurrentFront) {
  PriorityLanes<int> lanes;
  lanes.push(100, 1);
  lanes.push(100, 2);
  EXPECT_EQ(lanes.front(), 1);
  lanes.push(50, 3);
  EXPECT_EQ(lanes.front(), 3);
  EXPECT_EQ(lanes.frontPriority(), 50u);
  lanes.pop();
  EXPECT_EQ(lanes.front(), 1);
}

TEST(PriorityLanes, LevelReopensAfterEmptying) {
  PriorityLanes<int> lanes;
  lanes.push(5, 1);
  lanes.pop();
  EXPECT_TRUE(lanes.empty());
  lanes.push(9, 2);
  lanes.push(5, 3);
  EXPECT_EQ(drain(lanes), (std::vector<int>{3, 2}));
}

TEST(PriorityLanes, RemoveIfAcrossLevelsKeepsOrder) {
  PriorityLanes<int> lanes;
  for (int i = 0; i < 20; ++i) lanes.push(static_cast<uint32_t>(i % 4), i);
  EXPECT_EQ(lanes.remove_if([](const int& v) { return v % 2 == 1; }), 10u);  // empties levels 1, 3
  EXPECT_EQ(lanes.size(), 10u);
  EXPECT_EQ(lanes.levels(), 2u);
  EXPECT_EQ(drain(lanes), (std::vector<int>{0, 4, 8, 12, 16, 2, 6, 10, 14, 18}));
}

TEST(PriorityLanes, RemoveIfInOneLevel) {
  PriorityLanes<int> lanes;
  lanes.push(1, 10);
  lanes.push(2, 20);
  lanes.push(1, 11);
  lanes.push(2, 21);
  EXPECT_EQ(lanes.remove_if(2, [](const int& v) { return v == 20 || v == 10; }), 1u);
  EXPECT_EQ(lanes.remove_if(3, [](const int&) { return true; }), 0u);  // absent level
  EXPECT_EQ(lanes.remove_if(1, [](const int&) { return true; }), 2u);  // empties level 1
  EXPECT_EQ(lanes.levels(), 1u);
  EXPECT_EQ(drain(lanes), (std::vector<int>{21}));
}

TEST(PriorityLanes, MoveOnlyElementsAreReleasedOnPop) {
  PriorityLanes<std::unique_ptr<std::string>> lanes;
  auto shared = std::make_shared<int>(0);
  lanes.push(3, std::make_unique<std::string>("c"));
  lanes.push(1, std::make_unique<std::string>("a"));
  EXPECT_EQ(*lanes.front(), "a");
  lanes.pop();
  EXPECT_EQ(*lanes.front(), "c");

  PriorityLanes<std::shared_ptr<int>> held;
  held.push(0, shared);
  EXPECT_EQ(shared.use_count(), 2);
  held.pop();
  EXPECT_EQ(shared.use_count(), 1);  // the popped slot does not keep the element alive
}

// Random pushes, pops and removals against std::map<priority, deque>.
TEST(PriorityLanes, RandomizedAgainstReferenceModel) {
  std::mt19937_64 rng(12345);
  PriorityLanes<int> lanes;
  std::map<uint32_t, std::deque<int>> model;
  size_t model_size = 0;
  std::vector<uint32_t> prios = {0, kMax, 1, kMax - 1};
  for (int i = 0; i < 60; ++i) prios.push_back(static_cast<uint32_t>(rng()));
  int next_value = 0;
  for (int step = 0; step < 20000; ++step) {
    unsigned action = rng() % 10;
    if (action < 5) {
      uint32_t p = prios[rng() % prios.size()];
      lanes.push(p, next_value);
      model[p].push_back(next_value++);
      ++model_size;
    } else if (action < 9) {
      ASSERT_EQ(lanes.empty(), model_size == 0);
      if (model_size == 0) continue;
      auto it = model.begin();
      ASSERT_EQ(lanes.frontPriority(), it->first);
      ASSERT_EQ(lanes.front(), it->second.front());
      lanes.pop();
      it->second.pop_front();
      if (it->second.empty()) model.erase(it);
      --model_size;
    } else {
      int mod = 3 + static_cast<int>(rng() % 5);
      size_t removed = lanes.remove_if([mod](const int& v) { return v % mod == 0; });
      size_t expected = 0;
      for (auto it = model.begin(); it != model.end();) {
        std::erase_if(it->second, [&](int v) { return v % mod == 0 ? (++expected, true) : false; });
        it = it->second.empty() ? model.erase(it) : std::next(it);
      }
      ASSERT_EQ(removed, expected);
      model_size -= expected;
    }
    ASSERT_EQ(lanes.size(), model_size);
    ASSERT_EQ(lanes.levels(), model.size());
  }
}

TEST(IntMap, InsertFindEraseAgainstUnorderedMap) {
  std::mt19937_64 rng(7);
  IntMap<uint64_t> map;
  std::unordered_map<uint64_t, uint32_t> model;
  std::vector<uint64_t> keys = {0, std::numeric_limits<uint64_t>::max()};
  for (int i = 0; i < 500; ++i) keys.push_back(rng() % 4 == 0 ? rng() : rng() % 1000);
  for (int step = 0; step < 50000; ++step) {
    uint64_t key = keys[rng() % keys.size()];
    uint32_t value = static_cast<uint32_t>(rng() % 1000000);
    switch (rng() % 3) {
      case 0:
        ASSERT_EQ(map.insert(key, value), model.emplace(key, value).second);
        break;
      case 1:
        ASSERT_EQ(map.erase(key), model.erase(key) == 1);
        break;
      default: {
        auto it = model.find(key);
        ASSERT_EQ(map.find(key), it == model.end() ? IntMap<uint64_t>::kNone : it->second);
      }
    }
    ASSERT_EQ(map.size(), model.size());
  }
  for (const auto& [k, v] : model) EXPECT_EQ(map.find(k), v);
}

}  // namespace
}  // namespace tictac::transport
