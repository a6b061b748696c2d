// The verbs backend's data path (suite 'verbs', run inside tools/softroce-vm):
// implied delivery confirmation, rendezvous WRITEs split into pieces under a
// send-queue budget with SENDs posted ahead of them, and the checks of the
// options that tune them. On a host without an RDMA device the cases that
// need one skip; inside the guest (TICTAC_GUEST set) that is a failure.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/transport/verbs_helper.h"
#include "transport/verbs/device.h"
#include "transport/verbs/stats.h"

namespace tictac::transport::test {
namespace {

const bool registered = registerBackendHelper({"verbs", verbsLoOptions, verbsViable});

// TICTAC_VERBS_STATS's medians: 0.5 us buckets, the last one open-ended.
TEST(VerbsStats, HistogramMedianIsTheMiddleSample) {
  verbs::Histogram h;
  EXPECT_EQ(h.medianUs(), 0);  // empty
  for (uint64_t ns : {1000, 1200, 30000, 30100, 30200}) h.add(ns);
  EXPECT_DOUBLE_EQ(h.medianUs(), 30.25);                  // 30.0-30.5 us holds the third of five
  for (int i = 0; i < 10; ++i) h.add(uint64_t{1} << 40);  // beyond 128 us
  EXPECT_DOUBLE_EQ(h.medianUs(), 127.75);
  EXPECT_EQ(h.count, 15u);
}

TEST(VerbsDataPath, TuningOptionsAreChecked) {
  ASSERT_TRUE(registered);
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"write_piece_bytes", "100"},
                                                        {"write_queue_bytes", "0"},
                                                        {"write_piece_bytes", "2147483648"},
                                                        {"idle_spin_us", "20000000"},
                                                        {"idle_spin_us", "x"},
                                                        {"repost_batch", "0"},
                                                        {"rts_batch", "0"},
                                                        {"rts_batch", "33"},
                                                        {"rndv_spin_us", "-1"},
                                                        {"rndv_nap_us", "100001"},
                                                        {"advert_batch", "0"},
                                                        {"advert_batch", "4097"},
                                                        {"qp_timeout", "0"},
                                                        {"qp_timeout", "32"}}) {
    ContextOptions o = verbsLoOptions();
    o.backend_config[key] = value;
    auto c = Context::create(o);
    ASSERT_FALSE(c) << key << "=" << value;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().toString();
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().toString();
  }
}

// A rendezvous send completes only after its RDMA WRITE WITH IMMEDIATE was
// acknowledged by the receiving NIC: when the sender sees the completion, the
// receiver's buffer already holds every byte, before the receiver's core has
// looked at it again.
TEST(VerbsDataPath, RendezvousSendCompletesOnlyOnceTheBytesAreThere) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p = makePair("verbs", false);
  for (size_t len : {size_t{300000}, size_t{1} << 20}) {
    std::vector<char> src(len), dst(len, 0);
    fillPattern(src.data(), len, len);
    Transfer t = post(p, {len, 7, ""}, src.data(), dst.data(), len);
    ASSERT_TRUE(t) << len;
    OpHandle send = t.send.value();
    ASSERT_TRUE(driveUntil(p, [&] { return send->done(); })) << len;
    ASSERT_TRUE(send->status().isOk()) << send->status().toString();
    EXPECT_EQ(checksum(src.data(), len), checksum(dst.data(), len)) << len;
    ASSERT_TRUE(driveUntilDone(p, {t.expect.value()})) << len;
    EXPECT_TRUE(t.expect.value()->status().isOk()) << t.expect.value()->status().toString();
  }
}

// With a budget of one 4 KiB piece, every rendezvous payload becomes hundreds
// of WRITEs queued behind the budget while eager messages and the handshakes
// of the other transfers go ahead of them: everything still lands intact.
TEST(VerbsDataPath, TinyWritePiecesAndBudgetKeepDataIntact) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p = makePair("verbs", false, [](ContextOptions& o) {
    o.backend_config["write_piece_bytes"] = "4096";
    o.backend_config["write_queue_bytes"] = "4096";
  });
  const std::vector<size_t> sizes{1 << 20, 16, 300001, 4000, 2 << 20, 0, 8192, 1 << 20, 64};
  std::vector<std::vector<char>> src, dst;
  std::vector<Transfer> ts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.emplace_back(sizes[i]);
    dst.emplace_back(sizes[i]);
    fillPattern(src[i].data(), sizes[i], i + 3);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    ts.push_back(post(p, {i, 9, ""}, src[i].data(), dst[i].data(), sizes[i], Priority(i % 3)));
    ASSERT_TRUE(ts.back()) << i;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    expectDelivered(p, ts[i], src[i].data(), dst[i].data(), sizes[i]);
  }
}

// Receive buffers are reposted in batches and small messages are posted
// straight from send() when nothing is queued: with 8 receive buffers
// (reposted 2 at a time) and 8 send-queue entries, ping-pongs, bursts of more
// eager messages than either queue holds (backlog, receiver-not-ready
// retries) and unexpected arrivals all land intact, in both directions.
TEST(VerbsDataPath, SmallQueuesAndBatchedRepostsKeepEagerMessagesIntact) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p = makePair("verbs", false, [](ContextOptions& o) {
    o.backend_config["rq_depth"] = "8";
    o.backend_config["sq_depth"] = "8";
    o.backend_config["repost_batch"] = "16";  // capped at rq_depth / 4 = 2
  });
  // 1023 B is copied into a bounce slot; 1024 B and 4096 B go zero-copy
  // (two SGEs: headers, then the caller's registered buffer).
  for (size_t len : {size_t{8}, size_t{1023}, size_t{1024}, size_t{4096}}) {
    std::vector<char> ping(len), pong(len), in_b(len), in_a(len);
    for (uint64_t i = 0; i < 100; ++i) {  // a -> b, then b -> a, as tictac-perf --test lat
      fillPattern(ping.data(), len, i);
      fillPattern(pong.data(), len, i + 1000);
      auto e = p.ba->expect({i, 1, ""}, in_b.data(), len);
      auto back = p.ab->expect({i, 2, ""}, in_a.data(), len);
      auto s = p.ab->send({i, 1, ""}, ping.data(), len);
      ASSERT_TRUE(e && back && s) << i;
      ASSERT_TRUE(driveUntilDone(p, {e.value()})) << len << " " << i;
      auto r = p.ba->send({i, 2, ""}, pong.data(), len);
      ASSERT_TRUE(r) << i;
      ASSERT_TRUE(driveUntilDone(p, {back.value(), s.value(), r.value()})) << len << " " << i;
      ASSERT_TRUE(e.value()->status().isOk() && back.value()->status().isOk());
      ASSERT_EQ(checksum(ping.data(), len), checksum(in_b.data(), len)) << len << " " << i;
      ASSERT_EQ(checksum(pong.data(), len), checksum(in_a.data(), len)) << len << " " << i;
    }
    constexpr size_t kBurst = 40;  // > sq_depth and > rq_depth
    std::vector<std::vector<char>> src(kBurst, std::vector<char>(len)), dst = src;
    std::vector<Transfer> ts;
    for (size_t i = 0; i < kBurst; ++i) fillPattern(src[i].data(), len, i + 77);
    for (size_t i = 0; i < kBurst; ++i) {  // every other one unexpected until the end
      Transfer t;
      t.send = p.ab->send({i, 3, ""}, src[i].data(), len);
      if (i % 2 == 0) t.expect = p.ba->expect({i, 3, ""}, dst[i].data(), len);
      ts.push_back(std::move(t));
    }
    spin(p, 200);
    for (size_t i = 1; i < kBurst; i += 2)
      ts[i].expect = p.ba->expect({i, 3, ""}, dst[i].data(), len);
    for (size_t i = 0; i < kBurst; ++i) {
      ASSERT_NO_FATAL_FAILURE(expectDelivered(p, ts[i], src[i].data(), dst[i].data(), len))
          << len << " " << i;
    }
  }
}

// rxe has no bus device in sysfs: Device::software, which turns on the
// receiver's naps (Tuning::rndv_nap_us) by default.
TEST(VerbsDataPath, RxeIsASoftwareDevice) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  ContextOptions o = verbsLoOptions();
  auto cfg = verbs::deviceConfig(BackendOptions{o.device, o.backend_config});
  ASSERT_TRUE(cfg) << cfg.status().toString();
  auto dev = verbs::Device::open(cfg.value());
  ASSERT_TRUE(dev) << dev.status().toString();
  EXPECT_EQ(dev.value()->software, dev.value()->name.rfind("rxe", 0) == 0) << dev.value()->name;
}

// A receiver that naps while it awaits rendezvous WRITEs (long naps, both
// with a progress thread and without) still gets every byte of a burst of
// large tensors, in both directions.
TEST(VerbsDataPath, NappingReceiverKeepsRendezvousIntact) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  for (bool thread : {false, true}) {
    Pair p = makePair("verbs", thread,
                      [](ContextOptions& o) { o.backend_config["rndv_nap_us"] = "5000"; });
    const std::vector<size_t> sizes{1 << 20, 65536, 3 << 20, 100, 200000};
    std::vector<std::vector<char>> src, dst;
    for (size_t i = 0; i < sizes.size(); ++i) {
      src.emplace_back(sizes[i]);
      dst.emplace_back(sizes[i]);
      fillPattern(src[i].data(), sizes[i], i + 11);
    }
    std::vector<Transfer> ts;
    for (size_t i = 0; i < sizes.size(); ++i) {  // odd ones from b to a
      Transfer t;
      auto& to = i % 2 == 0 ? p.ba : p.ab;
      auto& from = i % 2 == 0 ? p.ab : p.ba;
      t.expect = to->expect({i, 4, ""}, dst[i].data(), sizes[i]);
      t.send = from->send({i, 4, ""}, src[i].data(), sizes[i]);
      ts.push_back(std::move(t));
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      ASSERT_NO_FATAL_FAILURE(expectDelivered(p, ts[i], src[i].data(), dst[i].data(), sizes[i]))
          << thread << " " << i;
    }
  }
}

// Backend::postsFromSend: without a progress thread, a send into an idle
// scheduler reaches the wire inside send(), so the receiver gets it although
// the sender's context is never progressed again (eager sizes: a rendezvous
// kRts waits for the backend's next progress() to share one SEND).
TEST(VerbsDataPath, AnIdleSendLeavesFromSendItself) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p = makePair("verbs", false);
  {
    char x = 1, y = 0;  // connected and warm
    auto e = p.ba->expect({1, 6, ""}, &y, 1);
    auto s = p.ab->send({1, 6, ""}, &x, 1);
    ASSERT_TRUE(e && s && driveUntilDone(p, {e.value(), s.value()}));
  }
  for (size_t len : {size_t{8}, size_t{4096}}) {
    std::vector<char> src(len), dst(len);
    fillPattern(src.data(), len, len);
    auto e = p.ba->expect({len, 7, ""}, dst.data(), len);
    auto s = p.ab->send({len, 7, ""}, src.data(), len);
    ASSERT_TRUE(e && s) << len;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!e.value()->done() && std::chrono::steady_clock::now() < deadline) p.b->progress();
    ASSERT_TRUE(e.value()->done()) << len << " B: not received without the sender's progress";
    EXPECT_TRUE(e.value()->status().isOk()) << e.value()->status().toString();
    EXPECT_EQ(checksum(src.data(), len), checksum(dst.data(), len)) << len;
    ASSERT_TRUE(driveUntilDone(p, {s.value()})) << len;
    EXPECT_TRUE(s.value()->status().isOk()) << s.value()->status().toString();
  }
}

// The handshakes of rendezvous chunks posted together share one SEND (several
// kRts records, inline or in a bounce slot), deferred to the next progress()
// or arm() and sent ahead of any later eager message to the same peer; a
// receiver may sleep while it awaits the peer's WRITEs (rndv_spin_us). With
// batches of 2 (inline), 32 (a bounce slot) and none, an 8-entry send queue,
// with and without a progress thread: bursts of rendezvous tensors mixed
// with eager ones land intact in both directions.
TEST(VerbsDataPath, BatchedHandshakesKeepRendezvousAndEagerDataIntact) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  const std::vector<std::pair<std::string, std::string>> configs{
      {"2", "0"}, {"32", "0"}, {"1", "4294967295"}};
  for (bool thread : {false, true}) {
    for (const auto& [batch, rndv_spin] : configs) {
      SCOPED_TRACE("rts_batch " + batch + " rndv_spin_us " + rndv_spin + " thread " +
                   std::to_string(thread));
      Pair p = makePair("verbs", thread, [&](ContextOptions& o) {
        o.backend_config["rts_batch"] = batch;
        o.backend_config["rndv_spin_us"] = rndv_spin;
        o.backend_config["idle_spins"] = "0";
        o.backend_config["sq_depth"] = "8";
      });
      const std::vector<size_t> sizes{65536, 16, 200000, 65536, 8, 65536, 1 << 20, 100, 70000};
      constexpr size_t kTensors = 36;
      std::vector<std::vector<char>> src, dst;
      std::vector<Transfer> ts;
      for (size_t i = 0; i < kTensors; ++i) {
        size_t len = sizes[i % sizes.size()];
        src.emplace_back(len);
        dst.emplace_back(len);
        fillPattern(src[i].data(), len, i + 11);
      }
      for (size_t i = 0; i < kTensors; ++i) {
        if (i % 4 == 3) {  // every fourth goes b -> a: kRts and kCts cross
          Transfer t;
          t.expect = p.ab->expect({i, 5, ""}, dst[i].data(), dst[i].size());
          t.send = p.ba->send({i, 5, ""}, src[i].data(), src[i].size(), Priority(i % 2));
          ts.push_back(std::move(t));
        } else {
          ts.push_back(
              post(p, {i, 5, ""}, src[i].data(), dst[i].data(), src[i].size(), Priority(i % 2)));
        }
        ASSERT_TRUE(ts.back()) << i;
      }
      for (size_t i = 0; i < kTensors; ++i) {
        ASSERT_NO_FATAL_FAILURE(
            expectDelivered(p, ts[i], src[i].data(), dst[i].data(), src[i].size()))
            << i;
      }
    }
  }
}

}  // namespace
}  // namespace tictac::transport::test
