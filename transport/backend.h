// transport/backend.h: the backend SPI (what the UCX and verbs backends implement).
//
// A backend moves messages between peers: a small header (the core's wire
// header, opaque here) plus an optional payload that the receiver places
// wherever the core says (rendezvous into the expected buffer). It knows
// nothing of tensors, windows or acks, and never orders by priority: the
// core's scheduler decides what is posted and when, and confirms bytes with
// its own ack messages (post() carries the tensor's priority only so that a
// backend may map it to a wire class).
// Peers are numbered by the core; a backend learns them from addPeer() with the
// address blob the remote backend's localAddress() produced (carried by the
// core's TCP bootstrap).
//
// Threading: a backend is used from one thread at a time (the core serializes
// every call under its progress lock). Events are delivered only from inside
// progress(), never from inside another call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tictac/transport/status.h"

namespace tictac::transport {

using PeerId = uint32_t;
// onMessage's `from` when the backend cannot tell the sender (the core then
// trusts the wire header's src_peer, which it validates).
inline constexpr PeerId kUnknownPeer = 0;
// A payload of at most this many bytes posted without a region always arrives
// in place (Incoming::data set): used for the core's control messages.
inline constexpr size_t kInlineMax = 4096;

struct BackendOptions {
  std::string device;                         // empty: backend's choice
  std::map<std::string, std::string> config;  // backend specific (UCX: ucp config keys)
};

// A registration of local memory; destroyed = deregistered.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual const void* base() const = 0;
  virtual size_t length() const = 0;
};

// A payload that has arrived (or announced itself) at the receiver.
struct Incoming {
  size_t length = 0;           // payload bytes
  const void* data = nullptr;  // in place (valid during onMessage only), or null
  // Set by onMessage to keep the payload for a later receive()/release(): the
  // backend writes the payload's descriptor to *retain_into before progress()
  // returns (copying the bytes first if its transport cannot keep them).
  void** retain_into = nullptr;
};

// Implemented by the core; called only from inside Backend::progress(). A
// handler records what happened and returns; it never calls the backend.
class BackendEvents {
 public:
  virtual ~BackendEvents() = default;
  // A message from `from`. If in.data is set the payload can be read now;
  // otherwise (or to read it later) set in.retain_into and call receive()/release().
  virtual void onMessage(PeerId from, std::span<const std::byte> header, Incoming& in) = 0;
  virtual void onSendDone(uint64_t token, const Status& status) = 0;     // post() finished
  virtual void onReceiveDone(uint64_t token, const Status& status) = 0;  // receive() finished
  virtual void onPeerError(PeerId peer, const Status& status) = 0;       // endpoint failed
  // The end of an advert (Backend::advertise) with `bytes` of the tensor
  // written into its buffer: all of it (no data message of the tensor will
  // come), none (declined: the tensor comes as data messages, as without the
  // advert), or a part (the sender canceled its send or answered
  // unadvertise()). Not ok: the peer was lost; the buffer is no longer written.
  virtual void onAdvertDone(uint64_t token, size_t bytes, const Status& status) {
    (void)token;
    (void)bytes;
    (void)status;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Address blob for the peer's addPeer() (worker address, QP info, keys...).
  virtual std::vector<uint8_t> localAddress() = 0;
  virtual Status addPeer(PeerId peer, std::span<const uint8_t> remote_address) = 0;
  // A localAddress() blob whose handshake ended without addPeer() taking it
  // (the peer left, was refused, or was a stranger): frees what it reserved.
  // A blob that addPeer() took, or an empty one, is ignored.
  virtual void discardAddress(std::span<const uint8_t> local_address) { (void)local_address; }
  // Forgets a peer; posted operations on it complete (with an error) later.
  virtual void removePeer(PeerId peer) = 0;

  virtual Result<std::unique_ptr<MemoryRegion>> registerMemory(const void* addr, size_t len) = 0;

  // Sends header + payload [data, data+len) to peer; onSendDone(token) later.
  // `region` covers the payload when non-null. The payload must stay valid
  // until onSendDone. Errors returned here mean nothing was posted.
  // `priority` is the scheduler's priority of the tensor the message belongs
  // to (lower = more urgent; the core's acks and nacks use 0, an abort its
  // tensor's). The backend never reorders by it; it may pick a wire class
  // with it (verbs: one QP per class, class_bounds), so every message of one
  // tensor travels in one class and keeps its order.
  virtual Status post(PeerId peer, std::span<const std::byte> header, const void* data, size_t len,
                      const MemoryRegion* region, uint64_t token, uint32_t priority) = 0;
  // Lands a retained payload in dst; onReceiveDone(token) later (also on error).
  virtual Status receive(void* desc, void* dst, size_t len, const MemoryRegion* region,
                         uint64_t token) = 0;
  // Drops a retained payload.
  virtual void release(void* desc) = 0;

  // True when a successful onSendDone() of a post of `len` payload bytes
  // covered by `region` (null: none) proves the peer's memory already holds
  // the message: an RC SEND or RDMA WRITE the remote NIC acknowledged, a UCX
  // rendezvous the receiver finished. The core then takes that completion as
  // the chunk's delivery confirmation (window credit) and flags the chunk so
  // the receiver does not ack it (it still acks one it has to stash, because a
  // rendezvous send cannot complete before the matching expect; the sender
  // credits each chunk once, on whichever arrives first). post() must honour
  // the answer for the same (len, region): a pure function, any thread.
  virtual bool confirmsDelivery(size_t len, const MemoryRegion* region) const {
    (void)len;
    (void)region;
    return false;
  }

  // True when post() may be called from inside the user's send() (caller-
  // driven contexts, with the core's lock held, right after the send entered
  // an idle scheduler), not only from progress(). A backend says no when a
  // post made before its endpoint finished wiring up can break its teardown
  // (UCX 1.13 asserts in wireup_ep.c). Events still reach the core only from
  // progress(). A pure function, any thread.
  virtual bool postsFromSend() const { return false; }

  // Payloads of at most this many bytes need no region: post() copies them
  // (into the message or a bounce slot) and posts them as well without one,
  // and receive() lands them as well without one. The core then skips the
  // registration cache for them (sends and expects). On a backend that
  // postsFromSend() and confirmsDelivery(), the core may post a send of up
  // to max(copiedPayloadMax(), kInlineMax) bytes straight from send() (the
  // express send, docs/thread_model.md; with its region above
  // copiedPayloadMax()). Such a backend must copy the header before post()
  // returns (the express send's lives on the stack) and send payloads of up
  // to kInlineMax bytes in one message. 0: any payload may use its region, and the header
  // must stay valid until onSendDone. A pure function, any thread.
  virtual size_t copiedPayloadMax() const { return 0; }

  // Receiver-advertised rendezvous (optional). The core calls advertise()
  // for an expect of tensor (iteration, tensor) from `peer` when nothing of
  // that tensor has arrived yet and [dst, dst+len) is covered by `region`.
  // True: the backend took the advert and tells the peer, now or later (it
  // may hold it back; a chunk sent meanwhile comes the usual way); the
  // peer's backend may then write the tensor's chunks straight into dst (no
  // handshake, no data message). The backend reports onAdvertDone(token,
  // ...) exactly once, and until it does, dst may still be written. False:
  // nothing was taken (the default). unadvertise(token) withdraws it (the
  // expect failed, or its data came the usual way); onAdvertDone still
  // follows. Unknown or finished tokens are ignored. Neither call delivers
  // events.
  virtual bool advertise(PeerId peer, uint32_t iteration, uint64_t tensor, void* dst, size_t len,
                         const MemoryRegion* region, uint64_t token) {
    (void)peer, (void)iteration, (void)tensor, (void)dst, (void)len, (void)region, (void)token;
    return false;
  }
  virtual void unadvertise(uint64_t token) { (void)token; }

  // The CPUs close to the backend's device (its NUMA node's), ascending;
  // empty when unknown (a software device, no hwloc) or not applicable. The
  // core binds its progress thread there (ContextOptions::progress_cpus
  // "auto"). Called at most once, before any progress(); may take tens of
  // milliseconds (hwloc reads the machine's topology).
  virtual std::vector<int> localCpus() { return {}; }

  // Makes progress and delivers events; returns how many were handled.
  virtual unsigned progress() = 0;
  // An fd that becomes readable when arm() returned true and events arrive;
  // -1 if the backend cannot sleep (then the caller polls).
  virtual int eventFd() = 0;
  // Prepares to sleep on eventFd(); false means events are pending (progress).
  virtual bool arm() = 0;

  // Counters of memory invalidations seen by the backend's memory hooks are
  // reported through this callback (addr, len), from any thread.
  using UnmapHook = void (*)(void* arg, const void* addr, size_t len);
  virtual bool installUnmapHook(UnmapHook hook, void* arg) = 0;
  virtual void removeUnmapHook(UnmapHook hook, void* arg) = 0;
};

// Completions a backend finished inside a posting call and defers to its next
// progress() (the contract: events never fire inside the call that posted).
using DeferredDone = std::deque<std::pair<uint64_t, Status>>;
// Reports and empties both queues, sends first; returns how many it reported.
unsigned deliverDeferred(DeferredDone& sends, DeferredDone& recvs, BackendEvents* events);

// Each backend folder exposes one factory (transport/<name>/factory.h):
//   Result<std::unique_ptr<Backend>> create(const BackendOptions&, BackendEvents*);
// createBackend() dispatches by name; kUnsupported when not compiled in.
Result<std::unique_ptr<Backend>> createBackend(const std::string& name,
                                               const BackendOptions& options,
                                               BackendEvents* events);
// Names of the backends compiled into this build.
std::vector<std::string> compiledBackends();

}  // namespace tictac::transport
