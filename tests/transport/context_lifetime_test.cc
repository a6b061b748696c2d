// A context whose last reference is dropped inside one of its own completion
// callbacks (a Python closure that owns the context does this): the context
// is destroyed once the callback returns, on the thread that ran it, with no
// abort (joining the progress thread from itself) and no use after free
// (the ASan pass runs this suite too).
#include <atomic>
#include <chrono>
#include <thread>

#include "tests/transport/backend_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

class ContextLifetimeTest : public BackendTest {};

// What the callback owns: the only references to a's context and channel.
struct Owned {
  std::shared_ptr<Context> ctx;
  std::shared_ptr<Channel> ch;
};

// b expects one tensor; a sends it with a callback that drops `owned`.
// Returns b's expect, which completes whether or not a is gone by then.
OpHandle sendAndDropInCallback(Pair& p, std::shared_ptr<Owned> owned,
                               std::atomic<int>& calls, std::atomic<bool>& dropped) {
  static char src[64] = "lifetime", dst[64];
  auto e = p.ba->expect({1, 0, ""}, dst, sizeof(dst));
  EXPECT_TRUE(e) << e.status().toString();
  auto s = owned->ch->send({1, 0, ""}, src, sizeof(src), std::nullopt,
                           [owned, &calls, &dropped](const Status&) mutable {
                             calls++;
                             owned->ctx.reset();
                             owned->ch.reset();
                             owned.reset();  // the closure's copy: the last reference
                             dropped = true;
                           });
  EXPECT_TRUE(s) << s.status().toString();
  return e ? e.value() : nullptr;
}

TEST_P(ContextLifetimeTest, LastReferenceDroppedInACallbackOnTheProgressThread) {
  Pair p = makePair(GetParam(), /*progress_thread=*/true);
  auto owned = std::make_shared<Owned>(Owned{p.a, p.ab});
  p.a.reset();
  p.ab.reset();
  std::atomic<int> calls{0};
  std::atomic<bool> dropped{false};
  OpHandle e = sendAndDropInCallback(p, owned, calls, dropped);
  owned.reset();  // now only the pending send's callback owns a
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->wait(30s).isOk()) << e->status().toString();
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!dropped && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(dropped);
  std::this_thread::sleep_for(50ms);  // a's destruction finishes on its progress thread
  EXPECT_EQ(calls, 1);
}

TEST_P(ContextLifetimeTest, LastReferenceDroppedInACallbackOfAProgressWithTimeout) {
  Pair p = makePair(GetParam(), /*progress_thread=*/false);
  auto owned = std::make_shared<Owned>(Owned{p.a, p.ab});
  Context* a = p.a.get();  // the caller's only handle: a raw pointer
  p.a.reset();
  p.ab.reset();
  std::atomic<int> calls{0};
  std::atomic<bool> dropped{false};
  OpHandle e = sendAndDropInCallback(p, owned, calls, dropped);
  owned.reset();
  ASSERT_NE(e, nullptr);
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!dropped && std::chrono::steady_clock::now() < deadline) {
    a->progress(100us);  // the call during which a is destroyed: must not touch it after
    p.b->progress();
  }
  EXPECT_TRUE(dropped);
  EXPECT_EQ(calls, 1);
  while (!e->done() && std::chrono::steady_clock::now() < deadline) p.b->progress();
  EXPECT_TRUE(e->done());
}

TICTAC_INSTANTIATE_BACKENDS(ContextLifetimeTest);

}  // namespace
}  // namespace tictac::transport::test
