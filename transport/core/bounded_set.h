// transport/core/bounded_set.h: a set of 64-bit ids that forgets the oldest.
// An id is remembered until it is erased or `capacity` more ids were inserted
// after it, so at most `capacity` are, in O(capacity) memory whatever is
// erased or inserted again. For ids a peer can make up without end: the send
// ops a receiver drops (RejectedOps) and the rdma_cm tokens of address blobs
// no handshake claimed (verbs CmState::issued).
//
// Plain data (no lock): its owner serializes the calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

namespace tictac::transport {

class BoundedSet {
 public:
  explicit BoundedSet(size_t capacity) : capacity_(capacity) {}

  bool empty() const { return live_.empty(); }
  size_t size() const { return live_.size(); }
  bool contains(uint64_t id) const { return live_.count(id) != 0; }
  // Remembers `id` (nothing happens when it is remembered already), forgetting the id
  // inserted `capacity` insertions before it, if still remembered.
  void insert(uint64_t id) {
    if (!live_.emplace(id, next_seq_).second) return;
    order_.emplace_back(id, next_seq_++);
    // Past the capacity the oldest insertion goes (forgotten when still live);
    // stale heads (erased ids) go too.
    while (!order_.empty() && (order_.size() > capacity_ || !isLive(order_.front()))) {
      auto [old, seq] = order_.front();
      order_.pop_front();
      if (auto it = live_.find(old); it != live_.end() && it->second == seq) live_.erase(it);
    }
  }
  void erase(uint64_t id) { live_.erase(id); }  // its order_ entry goes stale
  void clear() {
    live_.clear();
    order_.clear();
  }

 private:
  bool isLive(const std::pair<uint64_t, uint64_t>& e) const {
    auto it = live_.find(e.first);
    return it != live_.end() && it->second == e.second;
  }
  size_t capacity_;
  uint64_t next_seq_ = 0;
  std::unordered_map<uint64_t, uint64_t> live_;  // id -> its insertion's sequence number
  // Insertions in order, (id, sequence); an entry whose id was erased (or
  // erased and inserted again: another sequence) is stale.
  std::deque<std::pair<uint64_t, uint64_t>> order_;
};

}  // namespace tictac::transport
