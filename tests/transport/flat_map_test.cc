// Unit tests of the core's per-message tables: FlatMap (open addressing with
// backward-shift deletion) against std::unordered_map, with a hash that makes
// long collision runs, and SlabTable's stable references and slot reuse.
#include "transport/core/flat_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/core/slab_table.h"

namespace tictac::transport {
namespace {

struct Key {
  uint32_t a = 0;
  uint64_t b = 0;
  bool operator==(const Key&) const = default;
};
struct CrowdedHash {  // 8 distinct hashes for every key: probe runs wrap and interleave
  size_t operator()(const Key& k) const { return (k.a * 7 + k.b) % 8 * 0x9E3779B9u; }
};
struct ModelHash {
  size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.b * 31 + k.a); }
};

TEST(FlatMap, InsertFindEraseAgainstUnorderedMapUnderCollisions) {
  std::mt19937_64 rng(11);
  FlatMap<Key, std::string, CrowdedHash> map;
  std::unordered_map<Key, std::string, ModelHash> model;
  for (int step = 0; step < 40000; ++step) {
    Key key{static_cast<uint32_t>(rng() % 5), rng() % 120};
    switch (rng() % 3) {
      case 0: {
        std::string v = std::to_string(rng());
        auto [slot, fresh] = map.insert(key, v);
        auto [it, model_fresh] = model.emplace(key, v);
        ASSERT_EQ(fresh, model_fresh);
        ASSERT_EQ(*slot, it->second);  // a present key keeps its value
        break;
      }
      case 1:
        ASSERT_EQ(map.erase(key), model.erase(key) == 1);
        break;
      default: {
        auto it = model.find(key);
        const std::string* v = map.find(key);
        ASSERT_EQ(v == nullptr, it == model.end());
        if (v != nullptr) {
          ASSERT_EQ(*v, it->second);
        }
      }
    }
    ASSERT_EQ(map.size(), model.size());
  }
  size_t seen = 0;
  map.forEach([&](const Key& k, std::string& v) {
    ++seen;
    EXPECT_EQ(model.at(k), v);
  });
  EXPECT_EQ(seen, model.size());
}

TEST(FlatMap, KeysDifferingOnlyInHighBitsSpread) {
  // Receive-side keys put the peer id at bit 48; FibHash must still spread them.
  FlatMap<uint64_t, uint32_t> map;
  for (uint32_t i = 0; i < 4096; ++i) ASSERT_TRUE(map.insert(uint64_t{i} << 48, i).second);
  for (uint32_t i = 0; i < 4096; ++i) ASSERT_EQ(*map.find(uint64_t{i} << 48), i);
  EXPECT_EQ(map.find(uint64_t{4096} << 48), nullptr);
}

TEST(SlabTable, ReferencesSurviveOtherInsertsAndErasesAndSlotsAreReused) {
  SlabTable<std::vector<int>> table;
  std::vector<int>& first = table.insert(1, {1, 2, 3});
  for (uint64_t id = 2; id < 2000; ++id)
    table.insert(id, std::vector<int>(4, static_cast<int>(id)));
  for (uint64_t id = 2; id < 2000; id += 2) ASSERT_TRUE(table.erase(id));
  EXPECT_EQ(first, (std::vector<int>{1, 2, 3}));  // never moved
  EXPECT_EQ(&first, table.find(1));
  EXPECT_EQ(table.size(), 1000u);
  EXPECT_FALSE(table.erase(2));  // already gone
  EXPECT_EQ(table.find(2), nullptr);
  // Erased slots are reset and reused before the slab grows.
  std::vector<int>* reused = &table.insert(5000, {});
  EXPECT_TRUE(reused->empty());
  auto odd = table.idsWhere([](const std::vector<int>& v) { return !v.empty() && v[0] % 2 == 1; });
  EXPECT_EQ(odd.size(), 1000u);  // 1 and 3..1999 (5000 is empty)
  for (uint64_t id : odd) ASSERT_TRUE(table.erase(id));
  EXPECT_EQ(table.size(), 1u);
  size_t walked = 0;
  table.forEach([&](uint64_t id, std::vector<int>&) { walked += id == 5000; });
  EXPECT_EQ(walked, 1u);
}

}  // namespace
}  // namespace tictac::transport
