// rkeys scoped per transfer (windows=1; suite 'verbs', run inside
// tools/softroce-vm). A peer that turns hostile posts its own RDMA WRITEs on
// its QP, with the rkey an advert gave it or with the registration's rkey:
// with windows, a write after the transfer ended, or through the
// registration, must fail the writer's QP and leave the receiver's memory
// untouched; without windows (the default) the
// registration's rkey writes anywhere in the region, which the first case
// shows so that the harness is known to see a write that lands. The
// channel suites run over this configuration too ("verbs-windows").
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/transport/verbs_helper.h"
#include "transport/core/wire.h"
#include "transport/verbs/backend.h"
#include "transport/verbs/factory.h"

namespace tictac::transport::test {
namespace {

ContextOptions windowOptions() {
  ContextOptions o = verbsLoOptions();
  o.backend_config["windows"] = "1";
  return o;
}
const bool registered = registerBackendHelper({"verbs-windows", windowOptions, verbsViable});

constexpr size_t kChunk = 64 << 10, kChunks = 2, kLen = kChunk * kChunks, kPad = 4096;
constexpr uint32_t kIter = 1;
constexpr uint64_t kTensor = 5, kAdvToken = 77;
constexpr char kHostile = 'H';

struct Events : BackendEvents {
  int sends_ok = 0, receives_ok = 0, failures = 0;
  std::vector<void*> offered;  // retained rendezvous payloads
  std::vector<std::pair<size_t, bool>> adverts;
  std::function<void()> on_done;  // run inside onReceiveDone / onAdvertDone
  void onMessage(PeerId, std::span<const std::byte>, Incoming& in) override {
    if (in.data == nullptr) in.retain_into = &offered.emplace_back(nullptr);
  }
  void onSendDone(uint64_t, const Status& s) override { s ? ++sends_ok : ++failures; }
  void onReceiveDone(uint64_t, const Status& s) override {
    s ? ++receives_ok : ++failures;
    if (on_done) on_done();
  }
  void onPeerError(PeerId, const Status&) override { ++failures; }
  void onAdvertDone(uint64_t, size_t bytes, const Status& s) override {
    adverts.emplace_back(bytes, bool(s));
    if (on_done) on_done();
  }
};

// a writes, b receives into dst[kPad, kPad + kLen) out of a registration of all of dst.
struct Pair {
  Events ea, eb;
  std::unique_ptr<Backend> a, b;
  std::vector<char> src = std::vector<char>(kLen), dst = std::vector<char>(kPad + kLen + kPad, 0);
  std::unique_ptr<MemoryRegion> src_mr, dst_mr;
  std::deque<wire::Header> headers;

  explicit Pair(const char* windows, const char* adverts = "1") {
    BackendOptions o;
    o.config = {{"address", "127.0.0.1"}, {"windows", windows}, {"adverts", adverts}};
    if (!makeBackendPair(o, &ea, &eb, &a, &b)) return;
    for (size_t k = 0; k < kLen; ++k)
      src[k] = static_cast<char>((k * 7 + 3) & 63);  // never kHostile
    src_mr = a->registerMemory(src.data(), kLen).value();
    dst_mr = b->registerMemory(dst.data(), dst.size()).value();
  }
  // As a context ends: the peers go (and their windows) before the registrations.
  ~Pair() {
    if (a) a->removePeer(1);
    if (b) b->removePeer(1);
  }
  verbs::VerbsBackend::ClassQpInfo qpA() {
    return static_cast<verbs::VerbsBackend&>(*a).peerQps(1).at(0);
  }
  uint64_t bufAddr() const { return reinterpret_cast<uintptr_t>(dst.data() + kPad); }
  template <typename F>
  bool drive(F done) {
    return driveBoth(*a, *b, done);
  }
  // b's advert of dst[kPad, kPad + kLen), once a holds it; the rkey it names.
  uint32_t offer(uint64_t tensor = kTensor) {
    EXPECT_TRUE(b->advertise(1, kIter, tensor, dst.data() + kPad, kLen, dst_mr.get(), kAdvToken));
    EXPECT_TRUE(drive([&] { return qpA().adverts_held == 1; })) << "advert never held";
    return qpA().last_rkey;
  }
  void sendTensor(uint64_t tensor = kTensor) {
    for (size_t i = 0; i < kChunks; ++i) {
      wire::Header& h = headers.emplace_back();
      h.type = uint8_t(wire::MsgType::kData);
      h.src_peer = 1;
      h.iteration = kIter;
      h.tensor_id = tensor;
      h.op_id = 1;
      h.total_len = kLen;
      h.offset = i * kChunk;
      h.length = kChunk;
      if (i + 1 == kChunks) h.flags = wire::kFlagLast;
      ASSERT_TRUE(
          a->post(1, wire::asBytes(h), src.data() + h.offset, kChunk, src_mr.get(), i + 1, 0));
    }
  }
  // Posts, on a's QP to b, a WRITE of 64 bytes of kHostile that a's backend
  // never asked for (its completion is not the backend's: ignored).
  void postHostile(uint64_t addr, uint32_t rkey) {
    std::fill(src.begin(), src.begin() + 64, kHostile);
    ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), 64, verbs::mrOf(src_mr.get())->lkey};
    ibv_send_wr wr{};
    wr.wr_id = uint64_t{1} << 40;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qpA().qp, &wr, &bad), 0);
  }
  size_t hostileBytes() const { return std::count(dst.begin(), dst.end(), kHostile); }
  // Waits (driving a only, when b is to do nothing more) for the posted
  // write's fate. True: it landed; false: a's QP failed it.
  bool hostileLanded(bool drive_b = true) {
    auto state = [&] {
      ibv_qp_attr at{};
      ibv_qp_init_attr ia{};
      return ibv_query_qp(qpA().qp, &at, IBV_QP_STATE, &ia) == 0 ? at.qp_state : IBV_QPS_UNKNOWN;
    };
    auto settled = [&] { return hostileBytes() == 64 || state() == IBV_QPS_ERR; };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!settled() && std::chrono::steady_clock::now() < deadline) {
      a->progress();
      if (drive_b) b->progress();
    }
    EXPECT_TRUE(settled()) << "the write neither landed nor failed";
    return hostileBytes() == 64;
  }
};

TEST(VerbsWindows, WithoutWindowsTheRegistrationRkeyWritesTheWholeRegion) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  ASSERT_TRUE(registered);
  Pair p("0");
  ASSERT_TRUE(p.a && p.b);
  const uint32_t rkey = p.offer();
  EXPECT_EQ(rkey, verbs::mrOf(p.dst_mr.get())->rkey);
  p.postHostile(reinterpret_cast<uintptr_t>(p.dst.data()), rkey);
  EXPECT_TRUE(p.hostileLanded())
      << "the default configuration was expected to let the peer write outside its advert";
}

TEST(VerbsWindows, RegistrationRkeyWritesNothing) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p("1");
  ASSERT_TRUE(p.a && p.b);
  EXPECT_NE(p.offer(), verbs::mrOf(p.dst_mr.get())->rkey) << "the advert must name a window";
  p.postHostile(p.bufAddr(), verbs::mrOf(p.dst_mr.get())->rkey);
  EXPECT_FALSE(p.hostileLanded());
  EXPECT_EQ(p.hostileBytes(), 0u);
}

// The window takes the peer's writes inside the advertised buffer. (Writes
// outside it but inside the registration are the NIC's to refuse: rxe checks
// them against the registration only, docs/softroce.md section 6f.)
TEST(VerbsWindows, WindowTakesWritesInsideTheAdvertisedBuffer) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p("1");
  ASSERT_TRUE(p.a && p.b);
  p.postHostile(p.bufAddr() + kLen - 64, p.offer());
  EXPECT_TRUE(p.hostileLanded());
}

// The advert's window is dead by the time onAdvertDone runs: a write posted
// from inside that callback, with b doing nothing more, must fail.
TEST(VerbsWindows, AdvertWindowDiesBeforeItsEndIsReported) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p("1");
  ASSERT_TRUE(p.a && p.b);
  const uint32_t rkey = p.offer();
  ASSERT_NO_FATAL_FAILURE(p.sendTensor());
  p.eb.on_done = [&] {
    EXPECT_TRUE(std::equal(p.src.begin(), p.src.end(), p.dst.begin() + kPad));
    p.postHostile(p.bufAddr(), rkey);
  };
  ASSERT_TRUE(p.drive([&] { return p.ea.sends_ok == int{kChunks} && !p.eb.adverts.empty(); }));
  EXPECT_EQ(p.eb.adverts, (std::vector<std::pair<size_t, bool>>{{kLen, true}}));
  EXPECT_EQ(p.ea.failures + p.eb.failures, 0);
  EXPECT_FALSE(p.hostileLanded(false));
  EXPECT_EQ(p.hostileBytes(), 0u);
}

// A window goes back to a pool once invalidated and is bound again with a
// new key: the next advert of the same buffer names another rkey, and the
// old one stays dead while the new one is live.
TEST(VerbsWindows, ReboundWindowTakesANewKey) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p("1");
  ASSERT_TRUE(p.a && p.b);
  const uint32_t first = p.offer(kTensor);
  ASSERT_NO_FATAL_FAILURE(p.sendTensor(kTensor));
  ASSERT_TRUE(p.drive([&] { return p.ea.sends_ok == int{kChunks} && p.eb.adverts.size() == 1; }));
  const uint32_t second = p.offer(kTensor + 1);
  EXPECT_NE(second, first);
  p.postHostile(p.bufAddr(), first);
  EXPECT_FALSE(p.hostileLanded(false));
  EXPECT_EQ(p.hostileBytes(), 0u);
}

// The same for a receive by kRts/kCts (adverts off): the kCts named a window,
// dead by the time onReceiveDone runs.
TEST(VerbsWindows, ReceiveWindowDiesBeforeTheReceiveIsReported) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Pair p("1", "0");
  ASSERT_TRUE(p.a && p.b);
  ASSERT_NO_FATAL_FAILURE(p.sendTensor());
  ASSERT_TRUE(p.drive([&] { return p.eb.offered.size() == kChunks; }));
  uint32_t rkey = 0;
  p.eb.on_done = [&] {
    if (p.eb.receives_ok < int{kChunks}) return;
    rkey = p.qpA().last_rkey;
    p.postHostile(p.bufAddr() + kLen - kChunk, rkey);  // the last chunk's buffer
  };
  for (size_t i = 0; i < kChunks; ++i) {
    ASSERT_TRUE(p.b->receive(p.eb.offered[i], p.dst.data() + kPad + i * kChunk, kChunk,
                             p.dst_mr.get(), 100 + i));
  }
  ASSERT_TRUE(p.drive([&] { return p.eb.receives_ok == int{kChunks}; }));
  EXPECT_NE(rkey, verbs::mrOf(p.dst_mr.get())->rkey) << "the kCts must name a window";
  EXPECT_EQ(p.ea.failures + p.eb.failures, 0);
  EXPECT_FALSE(p.hostileLanded(false));
  EXPECT_EQ(p.hostileBytes(), 0u);
  EXPECT_TRUE(std::equal(p.src.begin() + 64, p.src.end(), p.dst.begin() + kPad + 64));
}

TEST(VerbsWindows, OptionIsChecked) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  Events ev;
  BackendOptions o;
  o.config = {{"address", "127.0.0.1"}, {"windows", "2"}};
  auto b = verbs::create(o, &ev);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("windows"), std::string::npos) << b.status().toString();
}

}  // namespace
}  // namespace tictac::transport::test
