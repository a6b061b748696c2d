// tictac/transport/types.h: the vocabulary of the channel API.
//
// A tensor is identified on the wire by a 64-bit id plus an iteration number;
// the same tensor is sent again every iteration with the next iteration
// number. The optional name is local: hint providers match on it (a tictac-
// analyze schedule names tensors), it never travels.
//
// Completion contract (every asynchronous call of the API):
// - a completion fires exactly once, with the operation's final Status;
// - never inside the call that posted the operation: always from the progress
//   context (a thread inside Context::progress(), the progress thread, or a
//   thread blocked in Op::wait() that drives progress);
// - once it has fired (callback run, Op::done() true) the buffer belongs to the
//   caller again;
// - a call that fails synchronously (its Result holds an error) posts nothing:
//   no completion will fire for it.
// - a callback may drop the last reference to its context (and channel): the
//   context is then destroyed when the callback's progress pass ends, on the
//   thread that ran it (pending ops complete kCanceled as usual; on the
//   progress thread this teardown finishes after the callback returned, and
//   nothing waits for it). A last reference dropped anywhere else returns
//   only after the teardown.
// - order: the callbacks of one progress pass run in the order their ops
//   ended; an op without a callback may turn done() while the callbacks of
//   ops that ended before it in that pass have not run yet.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "tictac/transport/status.h"

namespace tictac::transport {

// Lower = more urgent, any 32-bit value; FIFO inside one level.
using Priority = uint32_t;

struct TensorKey {
  uint64_t id = 0;
  uint32_t iteration = 0;
  std::string name;  // optional, local only (hint providers)
};

// Called once with the final status; see the completion contract above.
using Completion = std::function<void(const Status&)>;

class Context;

// The pollable / waitable half of a completion. Shared between the caller and
// the library; every method is thread safe.
class Op {
 public:
  using Clock = std::chrono::steady_clock;

  // True once the operation completed (its callback, if any, has returned).
  bool done() const { return done_.load(std::memory_order_acquire); }
  // The final status; kInProgress while !done().
  Status status() const;
  // Blocks until done or until `timeout` passes; returns status() (kTimeout if
  // the deadline passed first: the operation itself goes on). Without a
  // progress thread the waiting thread drives the context's progress. From
  // inside a completion callback, waiting for an op that is not done returns
  // kInvalidArgument at once: completions do not nest, so it would never end.
  Status wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());

  // Library side: the progress function to drive while waiting (null with a
  // progress thread); one per context, shared by its ops (no copy per op).
  using Pump = std::shared_ptr<const std::function<unsigned()>>;
  Op(Pump pump, uint64_t id) : pump_(std::move(pump)), id_(id) {}
  uint64_t id() const { return id_; }
  // Library side: records the status and wakes waiters (callback already ran).
  void finish(const Status& status);

 private:
  Pump pump_;  // Context::progress when no progress thread
  uint64_t id_ = 0;
  std::mutex mu_;
  // Made by the first wait() that blocks (under mu_): most ops are never
  // waited on by blocking, and a condition variable costs calls to build,
  // signal and destroy on every op.
  std::unique_ptr<std::condition_variable> cv_;
  std::atomic<bool> done_{false};
  Status status_;  // written once, by finish(), before done_ is set
  // Set (under mu_) by a wait() about to block: only then does finish() take
  // mu_ to notify. Both are seq_cst, so either the waiter sees done_ or
  // finish() sees waiting_ (appended last: the fields above keep their offsets).
  std::atomic<bool> waiting_{false};
};

using OpHandle = std::shared_ptr<Op>;

}  // namespace tictac::transport
