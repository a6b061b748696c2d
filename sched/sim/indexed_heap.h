// sched/sim/indexed_heap.h: a binary min-heap of small integer items whose
// keys may change while they are inside, with O(log n) insert, re-key and
// erase of any item (internal to the simulator's link arbitration).
//
// The caller owns the key (the `less` functor compares two items by their
// current keys) and the position table `pos` (item -> index in this heap, or
// kAbsent); one table may be shared by several heaps whose item sets are
// disjoint. After an item's key changes, call fix(); `steps` counts the sift
// steps taken (the simulator's work counter). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tictac::sched::simdetail {

class IndexedHeap {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  bool empty() const { return items_.empty(); }
  // The smallest item; the heap must not be empty.
  uint32_t top() const { return items_.front(); }

  // Inserts `item` if absent; otherwise restores its place after a key change.
  template <class Less>
  void fix(uint32_t item, std::vector<uint32_t>& pos, Less less, uint64_t& steps) {
    size_t i = pos[item];
    if (i == kAbsent) {
      i = items_.size();
      items_.push_back(item);
      pos[item] = static_cast<uint32_t>(i);
    }
    siftDown(siftUp(i, pos, less, steps), pos, less, steps);
  }

  // Removes `item` if present.
  template <class Less>
  void erase(uint32_t item, std::vector<uint32_t>& pos, Less less, uint64_t& steps) {
    const size_t i = pos[item];
    if (i == kAbsent) return;
    pos[item] = kAbsent;
    const uint32_t last = items_.back();
    items_.pop_back();
    if (i == items_.size()) return;
    items_[i] = last;
    pos[last] = static_cast<uint32_t>(i);
    siftDown(siftUp(i, pos, less, steps), pos, less, steps);
  }

 private:
  template <class Less>
  size_t siftUp(size_t i, std::vector<uint32_t>& pos, Less& less, uint64_t& steps) {
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!less(items_[i], items_[parent])) break;
      swapAt(i, parent, pos);
      i = parent;
      ++steps;
    }
    return i;
  }

  template <class Less>
  void siftDown(size_t i, std::vector<uint32_t>& pos, Less& less, uint64_t& steps) {
    for (;;) {
      const size_t l = 2 * i + 1, r = l + 1;
      size_t m = i;
      if (l < items_.size() && less(items_[l], items_[m])) m = l;
      if (r < items_.size() && less(items_[r], items_[m])) m = r;
      if (m == i) return;
      swapAt(i, m, pos);
      i = m;
      ++steps;
    }
  }

  void swapAt(size_t a, size_t b, std::vector<uint32_t>& pos) {
    std::swap(items_[a], items_[b]);
    pos[items_[a]] = static_cast<uint32_t>(a);
    pos[items_[b]] = static_cast<uint32_t>(b);
  }

  std::vector<uint32_t> items_;
};

}  // namespace tictac::sched::simdetail
