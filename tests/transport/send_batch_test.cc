// Channel::sendBatch(): the scheduler holds every tensor of a batch before any
// chunk leaves, so the receiver gets them by priority, not by the batch's
// order; errors are all or nothing; each item completes as a send().
//
// The order test runs with one chunk in flight (window = chunk = the tensor
// size), so the receiver's completions follow the order the chunks were
// handed out, once every expect is in the receiver's tables (a fence tensor
// the other way proves that). On a backend that posts from send() (verbs), a
// caller-driven loop of send() posts the first tensor at once into the idle
// scheduler, and so fails this test every time: the batch's first item is
// not the most urgent one. With a progress thread such a loop fails it now
// and then (seen over UCX tcp).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "tests/transport/backend_helper.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kLen = 64 << 10;

class SendBatchTest : public BackendTest {
 protected:
  // One 64 KiB chunk in flight at a time.
  Pair pair(bool progress_thread, size_t max_queued = 0) {
    return makePair(GetParam(), progress_thread, [max_queued](ContextOptions& o) {
      o.chunk_bytes = kLen;
      o.window_bytes = kLen;
      if (max_queued != 0) o.max_queued = max_queued;
    });
  }

  // Waits for ops: through the progress thread when the pair has one (only
  // it runs completions then, in order), else by driving both contexts.
  static void waitAll(Pair& p, bool progress_thread, const std::vector<OpHandle>& ops) {
    for (const auto& h : ops) {
      if (progress_thread) {
        EXPECT_TRUE(h->wait(30s).isOk()) << h->status().toString();
      } else {
        EXPECT_TRUE(driveUntil(p, [&] { return h->done(); }));
        EXPECT_TRUE(h->status().isOk()) << h->status().toString();
      }
    }
  }

  // Posts b's expects of ids 1..n (kLen bytes each, recording the order they
  // complete in), then a's batch of the same ids with `prios`; waits until
  // all are done and checks every byte. Returns the ids in arrival order.
  std::vector<uint64_t> batchArrivals(Pair& p, bool progress_thread,
                                      const std::vector<Priority>& prios) {
    const size_t n = prios.size();
    std::vector<std::vector<char>> src(n, std::vector<char>(kLen)), dst = src;
    std::mutex mu;
    std::vector<uint64_t> order;
    std::vector<OpHandle> ops;
    for (size_t i = 0; i < n; ++i) {
      fillPattern(src[i].data(), kLen, i + 1);
      auto e = p.ba->expect({i + 1, 0, ""}, dst[i].data(), kLen, [&, i](const Status& s) {
        EXPECT_TRUE(s.isOk()) << s.toString();
        std::lock_guard<std::mutex> l(mu);
        order.push_back(i + 1);
      });
      EXPECT_TRUE(e) << e.status().toString();
      if (e) ops.push_back(e.value());
    }
    // The fence: b's submissions start in order, so its send arriving at a
    // means b's expects are in place before any tensor of the batch lands.
    uint64_t f_in = 0, f_out = 7;
    auto fe = p.ab->expect({1000, 0, ""}, &f_in, sizeof f_in);
    auto fs = p.ba->send({1000, 0, ""}, &f_out, sizeof f_out);
    EXPECT_TRUE(fe && fs);
    if (!fe || !fs) return {};
    waitAll(p, progress_thread, {fe.value(), fs.value()});
    std::vector<SendItem> items(n);
    for (size_t i = 0; i < n; ++i) items[i] = {{i + 1, 0, ""}, src[i].data(), kLen, prios[i], {}};
    auto sent = p.ab->sendBatch(std::move(items));
    EXPECT_TRUE(sent) << sent.status().toString();
    if (!sent) return {};
    EXPECT_EQ(sent.value().size(), n);
    for (auto& h : sent.value()) ops.push_back(h);
    waitAll(p, progress_thread, ops);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(std::memcmp(src[i].data(), dst[i].data(), kLen), 0) << "tensor " << i + 1;
    }
    std::lock_guard<std::mutex> l(mu);
    return order;
  }
};

// Item i has priority prios[i] (lower = more urgent): ids arrive 2, 4, 6, 3, 1, 5.
const std::vector<Priority> kPrios = {50, 10, 40, 20, 60, 30};
const std::vector<uint64_t> kByPriority = {2, 4, 6, 3, 1, 5};

TEST_P(SendBatchTest, CallerDrivenGoesOutByPriorityNotByItemOrder) {
  Pair p = pair(false);
  EXPECT_EQ(batchArrivals(p, false, kPrios), kByPriority);
}

TEST_P(SendBatchTest, ProgressThreadGoesOutByPriorityNotByItemOrder) {
  Pair p = pair(true);
  EXPECT_EQ(batchArrivals(p, true, kPrios), kByPriority);
}

// A bad item, a batch larger than max_queued, or one that does not fit the
// queue now queues nothing and runs no completion: the same ids then go
// through (none of them is "already being sent"), and the count was given back.
TEST_P(SendBatchTest, ErrorsQueueNothing) {
  Pair p = pair(false, 4);
  std::vector<char> buf(kLen, 7);
  std::atomic<int> called{0};
  auto items = [&](uint64_t first, size_t n, int null_at) {
    std::vector<SendItem> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = {{first + i, 0, ""},
              static_cast<int>(i) == null_at ? nullptr : buf.data(),
              kLen,
              std::nullopt,
              [&](const Status&) { ++called; }};
    }
    return v;
  };
  auto bad = p.ab->sendBatch(items(1, 3, 1));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("item 1 of the batch: send: null buffer"),
            std::string::npos)
      << bad.status().message();
  auto over = p.ab->sendBatch(items(1, 5, -1));
  ASSERT_FALSE(over);
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("a batch of 5 sends exceeds max_queued (4)"),
            std::string::npos)
      << over.status().message();
  std::vector<std::vector<char>> dst(6, std::vector<char>(kLen));
  std::vector<OpHandle> ops;
  for (uint64_t i = 0; i < 6; ++i) {
    ops.push_back(p.ba->expect({i + 1, 0, ""}, dst[i].data(), kLen).value());
  }
  auto first = p.ab->sendBatch(items(1, 3, -1));
  ASSERT_TRUE(first) << first.status().toString();
  // At most one of the first three has started (no progress since): 3 more do not fit.
  auto full = p.ab->sendBatch(items(4, 3, -1));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.status().code(), StatusCode::kNoResource) << full.status().toString();
  for (auto& h : first.value()) ASSERT_TRUE(driveUntil(p, [&] { return h->done(); }));
  EXPECT_EQ(called.load(), 3);
  auto second = p.ab->sendBatch(items(4, 3, -1));
  ASSERT_TRUE(second) << second.status().toString();
  for (auto& h : second.value()) ops.push_back(h);
  for (auto& h : first.value()) ops.push_back(h);
  for (auto& h : ops) {
    ASSERT_TRUE(driveUntil(p, [&] { return h->done(); }));
    EXPECT_TRUE(h->status().isOk()) << h->status().toString();
  }
  EXPECT_EQ(called.load(), 6);
  for (auto& d : dst) EXPECT_EQ(d, buf);
  EXPECT_TRUE(p.ab->sendBatch({}).value().empty());  // an empty batch is no error
}

// Each item completes as its own send(): a key twice in one batch fails the
// second through its completion; the first is delivered.
TEST_P(SendBatchTest, ItemsCompleteLikeSends) {
  Pair p = pair(false);
  std::vector<char> a(kLen, 1), b(kLen, 2), dst(kLen);
  auto e = p.ba->expect({9, 0, ""}, dst.data(), kLen);
  ASSERT_TRUE(e);
  std::vector<SendItem> v(2);
  v[0] = {{9, 0, ""}, a.data(), kLen, 5, {}};
  v[1] = {{9, 0, ""}, b.data(), kLen, 5, {}};
  auto sent = p.ab->sendBatch(std::move(v));
  ASSERT_TRUE(sent) << sent.status().toString();
  const auto& h = sent.value();
  ASSERT_EQ(h.size(), 2u);
  ASSERT_TRUE(driveUntil(p, [&] { return h[0]->done() && h[1]->done() && e.value()->done(); }));
  EXPECT_TRUE(h[0]->status().isOk()) << h[0]->status().toString();
  EXPECT_EQ(h[1]->status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h[1]->status().message().find("already being sent"), std::string::npos);
  EXPECT_TRUE(e.value()->status().isOk());
  EXPECT_EQ(dst, a);
}

TICTAC_INSTANTIATE_BACKENDS(SendBatchTest);

}  // namespace
}  // namespace tictac::transport::test
