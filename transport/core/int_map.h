// transport/core/int_map.h: a small open-addressing hash map from an integer
// key to a uint32_t value (an index into a caller's pool).
//
// Used on the scheduler's per-chunk path where std::unordered_map would
// allocate a node per insert. Linear probing over a power-of-two table kept at
// most half full, Fibonacci hashing, and backward-shift deletion (no
// tombstones), so a steady insert/erase pattern never allocates or degrades.
// Any key value is allowed (0 and the maximum included); the value
// 0xFFFFFFFF is reserved. Plain data structure: no locks, one owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace tictac::transport {

template <typename K>
class IntMap {
  static_assert(std::is_unsigned_v<K>, "IntMap keys are unsigned integers");

 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  IntMap() { rehash(16); }

  size_t size() const { return size_; }

  // The value of `key`, or kNone.
  uint32_t find(K key) const {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.value == kNone) return kNone;
      if (e.key == key) return e.value;
    }
  }

  // Inserts key -> value (value != kNone). Returns false, changing nothing,
  // if the key is present.
  bool insert(K key, uint32_t value) {
    if ((size_ + 1) * 2 > table_.size()) rehash(table_.size() * 2);
    size_t i = home(key);
    for (; table_[i].value != kNone; i = (i + 1) & mask_) {
      if (table_[i].key == key) return false;
    }
    table_[i] = Entry{key, value};
    ++size_;
    return true;
  }

  // Removes key; returns false if absent.
  bool erase(K key) {
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (table_[i].value == kNone) return false;
      if (table_[i].key == key) break;
    }
    // Backward shift: pull later members of the probe run into the hole when
    // their home position does not lie cyclically in (hole, position].
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; table_[j].value != kNone; j = (j + 1) & mask_) {
      size_t h = home(table_[j].key);
      bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (!stays) {
        table_[hole] = table_[j];
        hole = j;
      }
    }
    table_[hole].value = kNone;
    --size_;
    return true;
  }

 private:
  struct Entry {
    K key = 0;
    uint32_t value = kNone;
  };

  size_t home(K key) const {
    return static_cast<size_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void rehash(size_t capacity) {
    std::vector<Entry> old;
    old.swap(table_);
    table_.assign(capacity, Entry{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Entry& e : old) {
      if (e.value != kNone) insert(e.key, e.value);
    }
  }

  std::vector<Entry> table_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace tictac::transport
