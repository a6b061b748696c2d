// The verbs backend's receiver-advertised rendezvous, at the Backend
// interface (suite 'verbs', run inside tools/softroce-vm): an advert the
// sender holds takes a tensor's chunks as RDMA WRITEs (no message reaches the
// receiver, one onAdvertDone with every byte); a data record that crossed the
// advert makes the sender decline it; unadvertise(), the sender's abort and a
// removed peer each end it exactly once, with the bytes written so far.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/verbs_helper.h"
#include "transport/core/wire.h"
#include "transport/verbs/backend.h"
#include "transport/verbs/factory.h"

namespace tictac::transport::test {
namespace {

constexpr size_t kChunk = 64 << 10, kChunks = 4, kLen = kChunk * kChunks;
constexpr uint32_t kIter = 3;
constexpr uint64_t kTensor = 7, kAdvToken = 900;

struct Events : BackendEvents {
  std::vector<std::string> log;  // "msg", "advert <bytes> <ok>" in arrival order
  std::vector<void*> offered;    // retained payloads
  int sends_ok = 0, receives_ok = 0, failures = 0;
  std::vector<std::pair<size_t, bool>> adverts;  // (bytes, ok) of each onAdvertDone
  void onMessage(PeerId, std::span<const std::byte>, Incoming& in) override {
    log.push_back("msg");
    if (in.data == nullptr) in.retain_into = &offered.emplace_back(nullptr);
  }
  void onSendDone(uint64_t, const Status& s) override { s ? ++sends_ok : ++failures; }
  void onReceiveDone(uint64_t, const Status& s) override { s ? ++receives_ok : ++failures; }
  void onPeerError(PeerId, const Status&) override { ++failures; }
  void onAdvertDone(uint64_t token, size_t bytes, const Status& s) override {
    EXPECT_EQ(token, kAdvToken);
    adverts.emplace_back(bytes, bool(s));
    log.push_back("advert " + std::to_string(bytes));
  }
};

struct Pair {  // a (sender) and b (receiver), connected as each other's peer 1
  Events ea, eb;
  std::unique_ptr<Backend> a, b;
  std::vector<char> src = std::vector<char>(kLen), dst = std::vector<char>(kLen, 0);
  std::unique_ptr<MemoryRegion> src_mr, dst_mr;

  explicit Pair(const std::string& adverts = "1", const std::string& sq_depth = "256") {
    BackendOptions o;
    o.config = {{"address", "127.0.0.1"}, {"adverts", adverts}, {"sq_depth", sq_depth}};
    if (!makeBackendPair(o, &ea, &eb, &a, &b)) return;
    for (size_t k = 0; k < kLen; ++k) src[k] = static_cast<char>(k * 13 + 5);
    src_mr = a->registerMemory(src.data(), kLen).value();
    dst_mr = b->registerMemory(dst.data(), kLen).value();
  }
  // Progresses both until done() or 10 s pass.
  template <typename F>
  bool drive(F done) {
    return driveBoth(*a, *b, done);
  }
  size_t held() { return static_cast<verbs::VerbsBackend&>(*a).peerQps(1).at(0).adverts_held; }
  bool advertise() {
    return b->advertise(1, kIter, kTensor, dst.data(), kLen, dst_mr.get(), kAdvToken);
  }
  // advertise(), then drives until the sender holds the advert.
  bool offer() {
    return advertise() && drive([&] { return held() == 1; });
  }
  // Chunk i of the tensor (a core data header), or its abort; or of another.
  Status postChunk(size_t i, uint8_t type = uint8_t(wire::MsgType::kData),
                   uint64_t tensor = kTensor) {
    wire::Header& h = headers.emplace_back();
    h.type = type;
    h.src_peer = 1;
    h.iteration = kIter;
    h.tensor_id = tensor;
    h.op_id = 1;
    h.total_len = kLen;
    h.offset = i * kChunk;
    const bool data = type == uint8_t(wire::MsgType::kData);
    h.length = data ? kChunk : 0;
    if (data && i + 1 == kChunks) h.flags = wire::kFlagLast;
    return a->post(1, wire::asBytes(h), data ? src.data() + h.offset : nullptr, h.length,
                   data ? src_mr.get() : nullptr, i + 1, 0);
  }
  std::deque<wire::Header> headers;  // posted headers stay put
};

TEST(VerbsAdvert, HeldAdvertTakesTheTensorWithoutMessages) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p;
  ASSERT_TRUE(p.a && p.b);
  ASSERT_TRUE(p.offer()) << "the sender never took the advert";
  for (size_t i = 0; i < kChunks; ++i) ASSERT_TRUE(p.postChunk(i));
  ASSERT_TRUE(p.drive([&] { return p.ea.sends_ok == int{kChunks} && !p.eb.adverts.empty(); }));
  EXPECT_EQ(p.eb.adverts, (std::vector<std::pair<size_t, bool>>{{kLen, true}}));
  EXPECT_TRUE(p.eb.log == std::vector<std::string>{"advert " + std::to_string(kLen)})
      << "no message may reach the receiver";
  EXPECT_EQ(p.held(), 0u);
  EXPECT_EQ(p.src, p.dst);
  EXPECT_EQ(p.ea.failures + p.eb.failures, 0);
}

TEST(VerbsAdvert, DataThatCrossedTheAdvertDeclinesIt) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p;
  ASSERT_TRUE(p.a && p.b);
  ASSERT_TRUE(p.postChunk(0));  // its kRts leaves before b takes anything
  ASSERT_TRUE(p.advertise());
  ASSERT_TRUE(p.drive([&] { return !p.eb.adverts.empty() && p.eb.offered.size() == 1; }));
  EXPECT_EQ(p.eb.adverts, (std::vector<std::pair<size_t, bool>>{{0, true}}));
  EXPECT_EQ(p.held(), 0u);
  // Declined: the tensor goes the usual way, chunk by chunk.
  for (size_t i = 1; i < kChunks; ++i) ASSERT_TRUE(p.postChunk(i));
  ASSERT_TRUE(p.drive([&] { return p.eb.offered.size() == kChunks; }));
  for (size_t i = 0; i < kChunks; ++i) {
    ASSERT_TRUE(
        p.b->receive(p.eb.offered[i], p.dst.data() + i * kChunk, kChunk, p.dst_mr.get(), 100 + i));
  }
  ASSERT_TRUE(p.drive([&] { return p.eb.receives_ok == int{kChunks}; }));
  EXPECT_EQ(p.src, p.dst);
  EXPECT_EQ(p.ea.failures + p.eb.failures, 0);
}

// A data record the sender queued (behind a full send queue) but had not
// posted when the advert came crosses it just as well.
TEST(VerbsAdvert, DataQueuedBehindAFullSendQueueDeclinesIt) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p("1", "8");
  ASSERT_TRUE(p.a && p.b);
  for (uint64_t t = 100; t < 112; ++t) {  // eager-sized tensors fill the 8-deep queue
    wire::Header& h = p.headers.emplace_back();
    h.type = uint8_t(wire::MsgType::kData);
    h.tensor_id = t;
    h.total_len = h.length = 64;
    h.flags = wire::kFlagLast;
    ASSERT_TRUE(p.a->post(1, wire::asBytes(h), p.src.data(), 64, nullptr, 1000 + t, 0));
  }
  ASSERT_TRUE(p.postChunk(0));  // its kRts waits behind them
  ASSERT_TRUE(p.advertise());
  p.b->progress();  // the advert leaves
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(p.drive([&] { return !p.eb.adverts.empty() && p.eb.offered.size() == 1; }));
  EXPECT_EQ(p.eb.adverts, (std::vector<std::pair<size_t, bool>>{{0, true}}));
  EXPECT_EQ(p.held(), 0u);
}

TEST(VerbsAdvert, UnadvertiseEndsItWithTheBytesWritten) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  for (size_t written : {size_t{0}, size_t{2}}) {
    SCOPED_TRACE(::testing::Message() << written << " chunks written first");
    Pair p;
    ASSERT_TRUE(p.a && p.b);
    ASSERT_TRUE(p.offer());
    for (size_t i = 0; i < written; ++i) ASSERT_TRUE(p.postChunk(i));
    ASSERT_TRUE(p.drive([&] { return p.ea.sends_ok == int(written); }));
    p.b->unadvertise(kAdvToken);
    p.b->unadvertise(kAdvToken);  // once is enough; a second is ignored
    ASSERT_TRUE(p.drive([&] { return !p.eb.adverts.empty(); }));
    EXPECT_EQ(p.eb.adverts, (std::vector<std::pair<size_t, bool>>{{written * kChunk, true}}));
    EXPECT_EQ(p.held(), 0u);
    EXPECT_TRUE(std::equal(p.src.begin(), p.src.begin() + long(written * kChunk), p.dst.begin()));
    if (written > 0) {
      // Withdrawn mid-tensor: the rest of the send fails (it has nowhere
      // to go), and its abort goes the usual way.
      Status st = p.postChunk(written);
      EXPECT_EQ(st.code(), StatusCode::kCanceled) << st.toString();
      ASSERT_TRUE(p.postChunk(written, uint8_t(wire::MsgType::kAbort)));
    } else {
      ASSERT_TRUE(p.postChunk(written));  // the whole tensor goes the usual way
    }
    ASSERT_TRUE(p.drive([&] { return p.eb.log.size() == 2; }));  // the advert's end, a message
    p.b->unadvertise(kAdvToken);                                 // finished: ignored
    for (int i = 0; i < 100; ++i) p.b->progress();
    EXPECT_EQ(p.eb.adverts.size(), 1u);
  }
}

TEST(VerbsAdvert, AbortEndsTheAdvertBeforeItArrives) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p;
  ASSERT_TRUE(p.a && p.b);
  ASSERT_TRUE(p.offer());
  ASSERT_TRUE(p.postChunk(0));
  ASSERT_TRUE(p.postChunk(1, uint8_t(wire::MsgType::kAbort)));
  ASSERT_TRUE(p.drive([&] { return p.eb.log.size() == 2; }));
  std::sort(p.eb.log.begin(), p.eb.log.end());  // the core takes them in either order
  EXPECT_EQ(p.eb.log, (std::vector<std::string>{"advert " + std::to_string(kChunk), "msg"}));
  EXPECT_EQ(p.held(), 0u);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.begin() + long(kChunk), p.dst.begin()));
}

TEST(VerbsAdvert, RemovedPeerFailsIt) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p;
  ASSERT_TRUE(p.a && p.b);
  ASSERT_TRUE(p.offer());
  p.b->removePeer(1);
  ASSERT_TRUE(p.drive([&] { return !p.eb.adverts.empty(); }));
  EXPECT_EQ(p.eb.adverts, (std::vector<std::pair<size_t, bool>>{{0, false}}));
}

TEST(VerbsAdvert, OnlyRendezvousSizedTensorsAndOnlyWhenOn) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair on;
  ASSERT_TRUE(on.a && on.b);
  EXPECT_FALSE(on.b->advertise(1, kIter, kTensor, on.dst.data(), 1024, on.dst_mr.get(), 1))
      << "an eager-sized tensor";
  EXPECT_FALSE(on.b->advertise(1, kIter, kTensor, on.dst.data(), kLen, nullptr, 1)) << "no region";
  EXPECT_FALSE(on.b->advertise(2, kIter, kTensor, on.dst.data(), kLen, on.dst_mr.get(), 1))
      << "an unknown peer";
  Pair off("0");
  ASSERT_TRUE(off.a && off.b);
  EXPECT_FALSE(off.advertise());
}

}  // namespace
}  // namespace tictac::transport::test
