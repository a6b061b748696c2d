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

#include "transport/core/bounded_set.h"

namespace tictac::transport {

class RejectedOps : public BoundedSet {
 public:
  static constexpr size_t kDefaultCapacity = 65536;
  explicit RejectedOps(size_t capacity = kDefaultCapacity) : BoundedSet(capacity) {}
};

}  // namespace tictac::transport
