// transport/core/records.h: the engine's per-operation records (ContextImpl's
// tables hold them; transport/core/context_impl.h says who owns what).
// Plain data, no behaviour: every field is read and written under the
// engine's lock (core_mu_) only, except Submission, which a caller fills
// before handing it to the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tictac/transport/types.h"
#include "transport/backend.h"
#include "transport/core/rejected_ops.h"
#include "transport/core/wire.h"

namespace tictac::transport {

struct PeerKey {  // (peer, tensor id, iteration)
  uint32_t peer;
  uint32_t iteration;
  uint64_t tensor;
  bool operator==(const PeerKey&) const = default;
};
struct PeerKeyHash {  // every input bit reaches every output bit (splitmix64 finalizer)
  size_t operator()(const PeerKey& k) const {
    uint64_t x = k.tensor ^ ((uint64_t{k.iteration} << 32 | k.peer) * 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<size_t>(x ^ (x >> 31));
  }
};

namespace engine {

struct SendOp {
  OpHandle handle;
  Completion cb;
  uint32_t peer = 0;
  uint64_t tensor = 0;
  uint32_t iteration = 0;
  const char* buf = nullptr;
  size_t len = 0;
  const MemoryRegion* region = nullptr;
  uint32_t priority = 0;  // the scheduler's; passed to every post() of the op
  size_t acked = 0;       // bytes confirmed (acks, and completions of kFlagNoAck chunks)
  unsigned posts = 0;     // backend posts not yet done
  size_t handed = 0;      // bytes handed to the backend (chunks [0, handed))
  // Chunks already credited (by completion or ack), by chunk index
  // (offset / chunk_bytes): bit i of credited0 for i < 64, then credited_more.
  uint64_t credited0 = 0;
  std::vector<uint64_t> credited_more;
  bool all_handed = false, zero_acked = false, in_sched = false;
  std::optional<Status> failed;
};
struct RecvOp {
  OpHandle handle;
  Completion cb;
  PeerKey key{};
  char* dst = nullptr;
  size_t len = 0;
  const MemoryRegion* region = nullptr;
  size_t received = 0;
  size_t chunk_bytes = 0;  // bytes of the data messages routed to it (each byte once)
  unsigned pending = 0;    // backend receives (and its advert) not yet done
  uint64_t advert = 0;     // its advert's backend token until onAdvertDone; 0: none
  bool started = false, seen_last = false;
  std::optional<Status> failed;
};
struct Stashed {  // a chunk that arrived before its expect (already acked)
  wire::Header h;
  void* desc;
  size_t held;  // what it counts against Peer::stashed_bytes (recv_path.cc)
};
struct Post {  // one backend post in flight
  wire::Header h;
  uint64_t op = 0;  // send op (data) or 0 (control)
  uint32_t peer = 0;
  std::vector<wire::AckEntry> acks;
};
struct Landing {  // one backend receive in flight or to start
  uint64_t recv_op = 0;
  uint32_t peer = 0;
  uint64_t send_op = 0;
  size_t len = 0;
  bool ack = false;
  bool last = false;
  void* desc = nullptr;
  size_t offset = 0;
};
struct Peer {
  std::string name;
  uint32_t my_id_there = 0;  // the id the peer gave us (our src_peer)
  bool alive = true;
  std::vector<wire::AckEntry> acks;
  // Nacks / aborts to send, each with its post() priority (an abort travels
  // in its tensor's wire class, behind the chunks it cancels).
  std::vector<std::pair<wire::Header, uint32_t>> ctrl;
  // Receiver side: its send ops whose remaining chunks are dropped (acked),
  // and its stashed chunks: their number, what they count against
  // ContextOptions::max_unexpected_bytes, and whether they passed it (the
  // peer's failure is reported, not yet handled: its chunks are dropped).
  RejectedOps rejected;
  size_t stashed_chunks = 0, stashed_bytes = 0;
  bool over_limit = false;
};
struct Submission {
  bool is_send;
  uint64_t id;
  uint32_t peer;
  TensorKey key;
  char* buf;
  size_t len;
  Priority prio;
  Completion cb;
  OpHandle handle;           // made by handleOf() when first needed
  OpHandle* user = nullptr;  // send()/expect()'s copy, written then (null once queued)
};
struct Ready {
  Ready(OpHandle h, Completion c, Status s)
      : handle(std::move(h)), cb(std::move(c)), status(std::move(s)) {}
  OpHandle handle;
  Completion cb;
  Status status;
};
struct Express {       // the express send in flight (ContextImpl::startExpress)
  uint64_t token = 0;  // the post's backend token; 0: no express send pending
  PeerKey key{};
  OpHandle handle;
  Completion cb;
};

}  // namespace engine
}  // namespace tictac::transport
