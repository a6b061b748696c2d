// Who destroys a context, and when (ContextImpl::destroy). Its last reference
// dropped inside one of its own completion callbacks (a Python closure that
// owns the context does this): the context is destroyed once that callback
// pass ends, on the thread that ran it, with no abort (joining the progress
// thread from itself) and no use after free (the ASan pass runs this suite
// too). Dropped by a user thread while the progress thread runs a callback:
// the teardown is done when the reset returns. And the liveness options
// that create() refuses.
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
OpHandle sendAndDropInCallback(Pair& p, std::shared_ptr<Owned> owned, std::atomic<int>& calls,
                               std::atomic<bool>& dropped) {
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
  static char never[8];
  auto pending = p.ab->expect({99, 0, ""}, never, sizeof(never));  // b never sends it
  ASSERT_TRUE(pending);
  auto owned = std::make_shared<Owned>(Owned{p.a, p.ab});
  p.a.reset();
  p.ab.reset();
  std::atomic<int> calls{0};
  std::atomic<bool> dropped{false};
  OpHandle e = sendAndDropInCallback(p, owned, calls, dropped);
  owned.reset();  // now only the pending send's callback owns a
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->wait(30s).isOk()) << e->status().toString();
  // a's teardown runs on its progress thread: it cancels a's pending expect.
  EXPECT_EQ(pending.value()->wait(30s).code(), StatusCode::kCanceled);
  EXPECT_TRUE(dropped);
  EXPECT_EQ(calls, 1);
  std::this_thread::sleep_for(200ms);  // the rest of it (the backend) before this test ends
}

TEST_P(ContextLifetimeTest, ResetWhileTheProgressThreadRunsACallbackTearsDownBeforeReturning) {
  Pair p = makePair(GetParam(), /*progress_thread=*/true);
  static char src[8] = "x", dst[8], never[8];
  auto pending = p.ab->expect({99, 0, ""}, never, sizeof(never));  // b never sends it
  auto e = p.ba->expect({1, 0, ""}, dst, sizeof(dst));
  std::atomic<bool> in_callback{false}, go{false};
  auto s = p.ab->send({1, 0, ""}, src, sizeof(src), std::nullopt, [&](const Status&) {
    in_callback = true;
    while (!go) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);  // still inside while the test thread resets
  });
  ASSERT_TRUE(pending && e && s);
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!in_callback && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(in_callback);
  go = true;
  p.ab.reset();
  p.a.reset();  // the last reference: returns only after a's teardown
  EXPECT_TRUE(pending.value()->done());
  EXPECT_EQ(pending.value()->status().code(), StatusCode::kCanceled);
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

// The liveness knobs are checked before anything is created: a timeout under
// two heartbeats would lose live peers between beats, huge values overflow.
TEST(ContextOptionsCheck, LivenessOutOfRangeIsRefusedByName) {
  struct Case {
    std::chrono::milliseconds interval, timeout;
    const char* names;
  };
  for (const Case& c : {Case{500ms, 999ms, "peer_timeout of 999 ms must be at least twice"},
                        Case{500ms, 25h, "peer_timeout of 90000000 ms"},
                        Case{0ms, 3s, "heartbeat_interval of 0 ms"},
                        Case{2h, 5h, "heartbeat_interval of 7200000 ms"}}) {
    ContextOptions o;
    o.heartbeat_interval = c.interval;
    o.peer_timeout = c.timeout;
    auto ctx = Context::create(o);
    ASSERT_FALSE(ctx) << c.names;
    EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(ctx.status().message().find(c.names), std::string::npos) << ctx.status().message();
  }
}

}  // namespace
}  // namespace tictac::transport::test
