// Randomized property test of SendScheduler: random enqueue / next / ack /
// cancel / drop / failPeer sequences checked step by step against a simple reference
// model (a linear scan for the most urgent, oldest op with unsent bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "transport/core/send_scheduler.h"

namespace tictac::transport {
namespace {

struct ModelOp {
  uint32_t priority;
  size_t bytes;
  uint64_t peer;
  uint64_t seq;
  size_t sent = 0;
  size_t in_flight = 0;
  bool queued = true;
};

class Model {
 public:
  Model(size_t chunk, size_t window, size_t max_queued)
      : chunk_(chunk), window_(window), max_queued_(max_queued) {}

  StatusCode enqueue(uint64_t id, uint32_t prio, size_t bytes, uint64_t peer) {
    if (queued() >= max_queued_) return StatusCode::kNoResource;
    if (ops_.count(id)) return StatusCode::kInvalidArgument;
    ops_.emplace(id, ModelOp{prio, bytes, peer, seq_++});
    return StatusCode::kOk;
  }

  std::optional<Chunk> next() {
    auto best = ops_.end();
    for (auto it = ops_.begin(); it != ops_.end(); ++it) {
      if (!it->second.queued) continue;
      if (best == ops_.end() || std::pair(it->second.priority, it->second.seq) <
                                    std::pair(best->second.priority, best->second.seq)) {
        best = it;
      }
    }
    if (best == ops_.end()) return std::nullopt;
    ModelOp& op = best->second;
    size_t len = std::min(chunk_, op.bytes - op.sent);
    if (in_flight_ > 0 && in_flight_ + len > window_) return std::nullopt;
    Chunk c{best->first, op.peer, op.priority, op.sent, len, op.sent + len == op.bytes};
    op.sent += len;
    op.in_flight += len;
    in_flight_ += len;
    if (c.last) op.queued = false;
    settle(best);
    return c;
  }

  void ack(uint64_t id, size_t len) {
    auto it = ops_.find(id);
    if (it == ops_.end()) return;
    size_t credit = std::min(len, it->second.in_flight);
    it->second.in_flight -= credit;
    in_flight_ -= credit;
    settle(it);
  }

  bool cancel(uint64_t id) {
    auto it = ops_.find(id);
    if (it == ops_.end() || !it->second.queued) return false;
    it->second.queued = false;
    settle(it);
    return true;
  }

  bool drop(uint64_t id) {
    auto it = ops_.find(id);
    if (it == ops_.end()) return false;
    in_flight_ -= it->second.in_flight;
    ops_.erase(it);
    return true;
  }

  std::vector<uint64_t> failPeer(uint64_t peer) {
    std::vector<uint64_t> out;
    for (auto it = ops_.begin(); it != ops_.end();) {
      if (it->second.peer != peer) {
        ++it;
        continue;
      }
      out.push_back(it->first);
      in_flight_ -= it->second.in_flight;
      it = ops_.erase(it);
    }
    return out;
  }

  size_t queued() const {
    return static_cast<size_t>(
        std::count_if(ops_.begin(), ops_.end(), [](auto& kv) { return kv.second.queued; }));
  }
  size_t known() const { return ops_.size(); }
  size_t inFlight() const { return in_flight_; }
  const std::map<uint64_t, ModelOp>& ops() const { return ops_; }

 private:
  void settle(std::map<uint64_t, ModelOp>::iterator it) {
    if (!it->second.queued && it->second.in_flight == 0) ops_.erase(it);
  }

  size_t chunk_, window_, max_queued_;
  uint64_t seq_ = 0;
  size_t in_flight_ = 0;
  std::map<uint64_t, ModelOp> ops_;
};

void expectSameChunk(const std::optional<Chunk>& got, const std::optional<Chunk>& want) {
  ASSERT_EQ(got.has_value(), want.has_value());
  if (!got) return;
  EXPECT_EQ(got->op_id, want->op_id);
  EXPECT_EQ(got->peer, want->peer);
  EXPECT_EQ(got->priority, want->priority);
  EXPECT_EQ(got->offset, want->offset);
  EXPECT_EQ(got->length, want->length);
  EXPECT_EQ(got->last, want->last);
}

class SchedulerProperty : public ::testing::TestWithParam<std::tuple<size_t, size_t, uint64_t>> {};

TEST_P(SchedulerProperty, MatchesReferenceModel) {
  auto [chunk, window, seed] = GetParam();
  const size_t max_queued = 24;
  std::mt19937_64 rng(seed);
  SendScheduler s(SchedulerOptions{chunk, window, 0, max_queued});
  Model m(chunk, window, max_queued);
  std::vector<uint32_t> prios = {0, std::numeric_limits<uint32_t>::max(), 1u << 31};
  for (int i = 0; i < 13; ++i) prios.push_back(static_cast<uint32_t>(rng()));
  const auto now = SendScheduler::Clock::time_point{};
  uint64_t next_id = 1;

  for (int step = 0; step < 30000; ++step) {
    unsigned action = rng() % 100;
    if (action < 30) {
      // Sometimes reuse a recent id to exercise the duplicate check.
      uint64_t id = (rng() % 8 == 0 && next_id > 3) ? next_id - 1 - rng() % 3 : next_id++;
      size_t bytes = rng() % 6 == 0 ? 0 : rng() % (4 * chunk + 1);
      uint32_t prio = prios[rng() % prios.size()];
      uint64_t peer = rng() % 3;
      Status st = s.enqueue(SendRequest{id, prio, bytes, peer}, now);
      ASSERT_EQ(st.code(), m.enqueue(id, prio, bytes, peer)) << "step " << step;
    } else if (action < 65) {
      expectSameChunk(s.next(now), m.next());
    } else if (action < 93) {
      std::vector<std::pair<uint64_t, size_t>> owed;
      for (const auto& [id, op] : m.ops()) {
        if (op.in_flight > 0) owed.emplace_back(id, op.in_flight);
      }
      if (owed.empty()) continue;
      auto [id, max_len] = owed[rng() % owed.size()];
      size_t len = rng() % 2 ? max_len : 1 + rng() % max_len;
      s.ack(id, len);
      m.ack(id, len);
    } else if (action < 96) {
      uint64_t id = 1 + rng() % next_id;
      ASSERT_EQ(s.cancel(id), m.cancel(id));
    } else if (action < 98) {
      uint64_t id = 1 + rng() % next_id;
      ASSERT_EQ(s.drop(id), m.drop(id));
    } else {
      uint64_t peer = rng() % 3;
      std::vector<uint64_t> dropped;
      s.failPeer(peer, &dropped);
      std::sort(dropped.begin(), dropped.end());
      ASSERT_EQ(dropped, m.failPeer(peer));
    }
    ASSERT_EQ(s.inFlightBytes(), m.inFlight()) << "step " << step;
    ASSERT_LE(s.inFlightBytes(), std::max(window, chunk));
    ASSERT_EQ(s.queuedOps(), m.queued());
    ASSERT_EQ(s.knownOps(), m.known());
    if (HasFailure()) return;
  }

  // Liveness: with acks, everything still queued is sent and then forgotten.
  while (s.queuedOps() > 0 || s.inFlightBytes() > 0) {
    auto c = s.next(now);
    expectSameChunk(c, m.next());
    if (!c) {
      for (const auto& [id, op] : std::map<uint64_t, ModelOp>(m.ops())) {
        s.ack(id, op.in_flight);
        m.ack(id, op.in_flight);
      }
    }
    if (HasFailure()) return;
  }
  for (const auto& [id, op] : m.ops()) s.ack(id, op.in_flight);
  EXPECT_EQ(s.knownOps(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SchedulerProperty,
                         ::testing::Values(std::make_tuple(size_t{100}, size_t{400}, uint64_t{1}),
                                           std::make_tuple(size_t{100}, size_t{250}, uint64_t{2}),
                                           std::make_tuple(size_t{1000}, size_t{300}, uint64_t{3}),
                                           std::make_tuple(size_t{7}, size_t{7}, uint64_t{4})));

}  // namespace
}  // namespace tictac::transport
