// transport/core/int_map.h: an integer key -> uint32_t value map (an index
// into a caller's pool), for the scheduler's per-chunk path.
//
// A FlatMap (transport/core/flat_map.h: open addressing, no allocation once
// grown) with the scheduler's interface: find() answers kNone when absent.
// Any key value is allowed (0 and the maximum included); the value
// 0xFFFFFFFF is reserved. Plain data structure: no locks, one owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "transport/core/flat_map.h"

namespace tictac::transport {

template <typename K>
class IntMap {
  static_assert(std::is_unsigned_v<K>, "IntMap keys are unsigned integers");

 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  size_t size() const { return map_.size(); }

  // The value of `key`, or kNone.
  uint32_t find(K key) const {
    const uint32_t* v = map_.find(key);
    return v == nullptr ? kNone : *v;
  }

  // Inserts key -> value (value != kNone). Returns false, changing nothing,
  // if the key is present.
  bool insert(K key, uint32_t value) { return map_.insert(key, value).second; }

  // Removes key; returns false if absent.
  bool erase(K key) { return map_.erase(key); }

 private:
  FlatMap<K, uint32_t> map_;
};

}  // namespace tictac::transport
