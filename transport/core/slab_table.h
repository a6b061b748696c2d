// transport/core/slab_table.h: the core's per-operation tables (sends,
// expects, backend posts, landings), keyed by a 64-bit id.
//
// Values live in a slab (a deque of slots, reused through a free list) and an
// IntMap indexes them by id: once warm, inserting and erasing allocate
// nothing, and a value never moves, so a reference to one stays valid until
// that id is erased, whatever else is inserted or erased meanwhile (the send
// and receive paths hold references across calls that finish other ops).
//
// Contract: V is default-constructible and movable; erase() resets the slot
// to V{} (releasing what the value held). Plain data structure: no locks, one
// owner thread (the core, under its lock).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "transport/core/int_map.h"

namespace tictac::transport {

template <typename V>
class SlabTable {
 public:
  size_t size() const { return index_.size(); }
  bool empty() const { return index_.size() == 0; }

  // The value of id, or nullptr.
  V* find(uint64_t id) {
    uint32_t i = index_.find(id);
    return i == IntMap<uint64_t>::kNone ? nullptr : &slots_[i].value;
  }

  // Inserts id -> value; the id must be absent (ids are never reused while live).
  V& insert(uint64_t id, V value) {
    uint32_t i;
    if (free_.empty()) {
      i = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      i = free_.back();
      free_.pop_back();
    }
    bool fresh = index_.insert(id, i);
    assert(fresh && "SlabTable: id already present");
    (void)fresh;
    slots_[i].id = id;
    slots_[i].live = true;
    slots_[i].value = std::move(value);
    return slots_[i].value;
  }

  // Removes id and resets its value; false if absent.
  bool erase(uint64_t id) {
    uint32_t i = index_.find(id);
    if (i == IntMap<uint64_t>::kNone) return false;
    index_.erase(id);
    slots_[i].value = V{};
    slots_[i].live = false;
    free_.push_back(i);
    return true;
  }

  // The ids of every live value (a copy: the caller may erase while walking it).
  template <typename Pred>
  std::vector<uint64_t> idsWhere(Pred&& pred) {
    std::vector<uint64_t> ids;
    for (Slot& s : slots_) {
      if (s.live && pred(s.value)) ids.push_back(s.id);
    }
    return ids;
  }

  // Calls f(id, value) for every live value; f must not insert or erase.
  template <typename F>
  void forEach(F&& f) {
    for (Slot& s : slots_) {
      if (s.live) f(s.id, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t id = 0;
    bool live = false;
    V value{};
  };
  std::deque<Slot> slots_;  // a deque: growing never moves a value
  std::vector<uint32_t> free_;
  IntMap<uint64_t> index_;
};

}  // namespace tictac::transport
