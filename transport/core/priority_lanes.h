// transport/core/priority_lanes.h: one FIFO lane per priority level.
//
// PriorityLanes<T> is the scheduler's send queue as a plain data structure: no
// I/O, no locks, no backend headers; one owner thread. Priorities are any
// uint32_t, lower = more urgent; elements of one level leave in push order.
//
// Layout: a ring buffer per non-empty level (lanes_), a hash index
// priority -> lane, and a binary min-heap of the non-empty levels.
//   push       O(1) into an existing level, O(log L) for a new level
//   front      O(1)          pop   O(1), O(log L) when the level empties
//   remove_if  O(n)          remove_if(priority, pred)  O(size of that level)
// (L = non-empty levels, n = elements). A level that empties returns its lane
// to a free list with its buffer, so steady-state pushes do not allocate.
//
// T must be default-constructible and movable (a popped slot is reset to T{}).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "transport/core/int_map.h"

namespace tictac::transport {

template <typename T>
class PriorityLanes {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }           // elements in all levels
  size_t levels() const { return heap_.size(); }  // non-empty levels

  void push(uint32_t priority, T value) {
    uint32_t lane = index_.find(priority);
    if (lane == IntMap<uint32_t>::kNone) lane = openLevel(priority);
    lanes_[lane].push(std::move(value));
    ++size_;
  }

  // The oldest element of the most urgent level. Precondition: !empty().
  T& front() { return lanes_[heap_.front().lane].front(); }
  const T& front() const { return lanes_[heap_.front().lane].front(); }
  uint32_t frontPriority() const { return heap_.front().priority; }

  // Removes front(). Precondition: !empty().
  void pop() {
    assert(!empty());
    Lane& lane = lanes_[heap_.front().lane];
    lane.pop();
    --size_;
    if (lane.count == 0) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      closeLevel(heap_.back());
      heap_.pop_back();
    }
  }

  // Removes every element for which pred(const T&) is true; returns how many.
  template <typename Pred>
  size_t remove_if(Pred pred) {
    size_t removed = 0;
    for (const Level& level : heap_) removed += lanes_[level.lane].removeIf(pred);
    if (removed != 0) dropEmptyLevels();
    size_ -= removed;
    return removed;
  }

  // Same, restricted to one level (cheaper when the caller knows it).
  template <typename Pred>
  size_t remove_if(uint32_t priority, Pred pred) {
    uint32_t lane = index_.find(priority);
    if (lane == IntMap<uint32_t>::kNone) return 0;
    size_t removed = lanes_[lane].removeIf(pred);
    if (lanes_[lane].count == 0) dropEmptyLevels();
    size_ -= removed;
    return removed;
  }

 private:
  struct Lane {  // ring buffer; capacity a power of two, kept when emptied
    std::vector<T> buf;
    size_t head = 0;
    size_t count = 0;

    T& front() { return buf[head]; }
    const T& front() const { return buf[head]; }
    void push(T value) {
      if (count == buf.size()) grow();
      buf[(head + count) & (buf.size() - 1)] = std::move(value);
      ++count;
    }
    void pop() {
      buf[head] = T{};
      head = (head + 1) & (buf.size() - 1);
      --count;
    }
    void grow() {
      std::vector<T> bigger(buf.empty() ? 4 : buf.size() * 2);
      for (size_t i = 0; i < count; ++i) bigger[i] = std::move(buf[(head + i) & (buf.size() - 1)]);
      buf.swap(bigger);
      head = 0;
    }
    template <typename Pred>
    size_t removeIf(Pred& pred) {
      size_t kept = 0, mask = buf.size() - 1;
      for (size_t i = 0; i < count; ++i) {
        T& item = buf[(head + i) & mask];
        if (pred(static_cast<const T&>(item))) continue;
        if (kept != i) buf[(head + kept) & mask] = std::move(item);
        ++kept;
      }
      for (size_t i = kept; i < count; ++i) buf[(head + i) & mask] = T{};
      size_t removed = count - kept;
      count = kept;
      return removed;
    }
  };

  struct Level {
    uint32_t priority;
    uint32_t lane;
  };
  struct Later {  // heap order: the most urgent (lowest) priority on top
    bool operator()(const Level& a, const Level& b) const { return a.priority > b.priority; }
  };

  uint32_t openLevel(uint32_t priority) {
    uint32_t lane;
    if (!free_lanes_.empty()) {
      lane = free_lanes_.back();
      free_lanes_.pop_back();
    } else {
      lane = static_cast<uint32_t>(lanes_.size());
      lanes_.emplace_back();
    }
    lanes_[lane].head = 0;
    index_.insert(priority, lane);
    heap_.push_back(Level{priority, lane});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    return lane;
  }

  void closeLevel(const Level& level) {
    index_.erase(level.priority);
    free_lanes_.push_back(level.lane);
  }

  void dropEmptyLevels() {
    auto empty = [this](const Level& l) { return lanes_[l.lane].count == 0; };
    for (const Level& level : heap_) {
      if (empty(level)) closeLevel(level);
    }
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(), empty), heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), Later{});
  }

  std::vector<Lane> lanes_;           // lane pool (non-empty ones are in heap_)
  std::vector<uint32_t> free_lanes_;  // empty lanes, buffers kept for reuse
  IntMap<uint32_t> index_;            // priority -> lane, non-empty levels only
  std::vector<Level> heap_;           // min-heap of the non-empty levels
  size_t size_ = 0;
};

}  // namespace tictac::transport
