// tictac/transport/channel.h: a connection to one peer.
//
// send() queues a tensor for the peer; it leaves the buffer in place (zero
// copy from registered memory: the buffer is registered on demand through the
// context's cache) and the context's scheduler puts it on the wire most-urgent-
// first, chunk by chunk. The send completes when the receiver has confirmed
// every byte. expect() pre-posts where a tensor lands: data goes straight into
// it. A send and an expect match on (id, iteration); the sizes must be equal,
// otherwise both fail with kSizeMismatch (the sender of a tensor that fits
// one eager message may complete ok first, where the backend's completion
// confirms delivery: verbs; and so may the sender of an eager tensor that
// arrived before its expect; see docs/transport.md). An incoming tensor without an expect
// waits (its data stays with the backend) until one is posted.
//
// Threading: every method is thread safe and never blocks on the network.
// Completions follow the contract in tictac/transport/types.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tictac/transport/status.h"
#include "tictac/transport/types.h"

namespace tictac::transport {

class ContextImpl;

// One tensor of Channel::sendBatch(): send()'s arguments.
struct SendItem {
  TensorKey tensor;
  const void* buf = nullptr;
  size_t len = 0;
  std::optional<Priority> priority;
  Completion completion;
};

class Channel {
 public:
  // Queues `len` bytes at `buf` (must stay valid and unchanged until the
  // completion). Priority: the given one, else the context's hint provider,
  // else options.default_priority. Synchronous errors (nothing posted):
  // kNoResource (queue limit, retry after completions), kInvalidArgument
  // (null buffer with len > 0). Through the completion: kInvalidArgument when
  // the same (id, iteration) is already being sent on this channel, kPeerLost
  // when the channel has failed, kSizeMismatch, kCanceled.
  Result<OpHandle> send(const TensorKey& tensor, const void* buf, size_t len,
                        std::optional<Priority> priority = std::nullopt,
                        Completion completion = {});

  // Queues several tensors as one submission: the scheduler holds all of them
  // before any of their chunks leaves, so they go out by priority whatever
  // their order in `items`. (A loop of send() does not promise that: the
  // first tensor may be on the wire, posted at once into an idle scheduler or
  // started by the progress thread, before the last one is queued.) Returns
  // the handles in the items' order. All or nothing: none is queued and no
  // completion runs when any item has a synchronous error of send()
  // (kInvalidArgument naming the item's index), when the batch is larger
  // than options.max_queued (kInvalidArgument: it never fits), or when it
  // does not fit now (kNoResource: retry after completions). Each item then
  // completes as its send() would: a tensor twice in one batch, for one,
  // fails the second through its completion. An empty batch is no error.
  Result<std::vector<OpHandle>> sendBatch(std::vector<SendItem> items);

  // Posts the destination of (id, iteration). Completes kOk when all bytes
  // arrived, kSizeMismatch when the sender's size differs from `len`.
  Result<OpHandle> expect(const TensorKey& tensor, void* dst, size_t len,
                          Completion completion = {});

  // Cancels a send or expect of this channel. A send whose bytes are not all
  // handed to the backend, or an expect not yet receiving data, completes with
  // kCanceled. Returns false when it is too late (the op will complete
  // normally) or the op is unknown/finished.
  bool cancel(const OpHandle& op);

  // Fails every pending op with kCanceled and closes the bootstrap link; the
  // peer sees kPeerLost. Idempotent; also done by the destructor.
  void close();

  bool alive() const;
  std::string peerName() const;  // "host:port" of the bootstrap link
  uint32_t peerId() const;

  ~Channel();
  Channel(std::shared_ptr<ContextImpl> ctx, uint32_t peer);

 private:
  std::shared_ptr<ContextImpl> ctx_;
  uint32_t peer_;
};

}  // namespace tictac::transport
