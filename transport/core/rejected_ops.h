// transport/core/rejected_ops.h: the send ops of one peer whose remaining
// chunks a receiver drops (acked, never landed): ops it rejected (a size
// mismatch, chunks adding up to more than the expect) or the peer aborted.
// An op leaves the set when its last chunk arrives (the engine erases it).
//
// Bounded: an op is remembered until it is erased or `capacity` more ops
// were inserted after it (so at most `capacity` are, in O(capacity) memory
// whatever is erased or inserted again). An op whose last chunk never comes (aborted before it
// was sent, or after it had arrived; or a hostile peer's made-up op ids)
// would otherwise stay for the life of the peer. A forgotten op's late chunk
// is then treated as new data: it takes `capacity` newer rejections from the
// same peer while that chunk is still on its way (a sender's window bounds
// what is in flight), so the default is far beyond any real run.
//
// Plain data (no lock): one per peer, in engine::Peer, under core_mu_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

namespace tictac::transport {

class RejectedOps {
 public:
  static constexpr size_t kDefaultCapacity = 65536;
  explicit RejectedOps(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  bool empty() const { return live_.empty(); }
  size_t size() const { return live_.size(); }
  bool contains(uint64_t op) const { return live_.count(op) != 0; }
  // Remembers `op` (no-op when it is remembered already), forgetting the op
  // inserted `capacity` insertions before it, if still remembered.
  void insert(uint64_t op) {
    if (!live_.emplace(op, next_seq_).second) return;
    order_.emplace_back(op, next_seq_++);
    // Past the capacity the oldest insertion goes (forgotten when still live);
    // stale heads (erased ops) go too.
    while (!order_.empty() && (order_.size() > capacity_ || !isLive(order_.front()))) {
      auto [old, seq] = order_.front();
      order_.pop_front();
      if (auto it = live_.find(old); it != live_.end() && it->second == seq) live_.erase(it);
    }
  }
  void erase(uint64_t op) { live_.erase(op); }  // its order_ entry goes stale
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
  std::unordered_map<uint64_t, uint64_t> live_;  // op -> its insertion's sequence number
  // Insertions in order, (op, sequence); an entry whose op was erased (or
  // erased and inserted again: another sequence) is stale.
  std::deque<std::pair<uint64_t, uint64_t>> order_;
};

}  // namespace tictac::transport
