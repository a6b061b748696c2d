// transport/core/flat_map.h: an open-addressing hash map for the core's
// per-message tables.
//
// std::unordered_map allocates a node per insert; on the per-message path
// (every send, expect, post and landing) that cost shows, above all in a
// slow guest. FlatMap keeps keys and values in one power-of-two table, at
// most half full, with linear probing and backward-shift deletion (no
// tombstones), so a steady insert/erase pattern never allocates or degrades
// once the table has grown to the working set.
//
// Contract: K is equality-comparable, K and V are default-constructible and
// movable; Hash spreads every input bit (the low bits pick the slot).
// Pointers returned by find() stay valid until the next insert or erase.
// Plain data structure: no locks, one owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tictac::transport {

// Fibonacci hashing of an unsigned integer key: the high half is folded in
// first, the product's high bits folded back into the low ones that pick the
// slot, so keys differing only in high bits (a peer id at bit 48) spread too.
struct FibHash {
  size_t operator()(uint64_t key) const {
    uint64_t x = (key ^ (key >> 32)) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(x ^ (x >> 32));
  }
};

template <typename K, typename V, typename Hash = FibHash>
class FlatMap {
 public:
  FlatMap() { rehash(16); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  V* find(const K& key) {
    if (size_ == 0) return nullptr;  // no hash on an empty table (the idle fast paths)
    for (size_t i = home(key);; i = next(i)) {
      Entry& e = table_[i];
      if (!e.used) return nullptr;
      if (e.key == key) return &e.value;
    }
  }
  const V* find(const K& key) const { return const_cast<FlatMap*>(this)->find(key); }

  // Inserts key -> value; returns {the value's slot, true}, or {the present
  // value's slot, false} changing nothing when the key is already there.
  std::pair<V*, bool> insert(const K& key, V value) {
    if ((size_ + 1) * 2 > table_.size()) rehash(table_.size() * 2);
    size_t i = home(key);
    for (; table_[i].used; i = next(i)) {
      if (table_[i].key == key) return {&table_[i].value, false};
    }
    table_[i].key = key;
    table_[i].value = std::move(value);
    table_[i].used = true;
    ++size_;
    return {&table_[i].value, true};
  }

  // Removes key (its value is reset to V{}); returns false if absent.
  bool erase(const K& key) {
    size_t i = home(key);
    for (;; i = next(i)) {
      if (!table_[i].used) return false;
      if (table_[i].key == key) break;
    }
    // Backward shift: pull later members of the probe run into the hole when
    // their home slot does not lie cyclically in (hole, position].
    size_t hole = i;
    for (size_t j = next(i); table_[j].used; j = next(j)) {
      size_t h = home(table_[j].key);
      bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (!stays) {
        table_[hole] = std::move(table_[j]);
        hole = j;
      }
    }
    table_[hole] = Entry{};
    --size_;
    return true;
  }

  // Calls f(key, value) for every entry; f must not insert or erase.
  template <typename F>
  void forEach(F&& f) {
    for (Entry& e : table_) {
      if (e.used) f(static_cast<const K&>(e.key), e.value);
    }
  }

 private:
  struct Entry {
    K key{};
    V value{};
    bool used = false;
  };

  size_t home(const K& key) const { return Hash{}(key)&mask_; }
  size_t next(size_t i) const { return (i + 1) & mask_; }

  void rehash(size_t capacity) {
    std::vector<Entry> old;
    old.swap(table_);
    table_.resize(capacity);
    mask_ = capacity - 1;
    size_ = 0;
    for (Entry& e : old) {
      if (e.used) insert(e.key, std::move(e.value));
    }
  }

  std::vector<Entry> table_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace tictac::transport
