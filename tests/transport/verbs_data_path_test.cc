// The verbs backend's data path (suite 'verbs', run inside tools/softroce-vm):
// implied delivery confirmation, rendezvous WRITEs split into pieces under a
// send-queue budget with SENDs posted ahead of them, and the checks of the
// options that tune them. On a host without an RDMA device the cases that
// need one skip; inside the guest (TICTAC_GUEST set) that is a failure.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/transport/verbs_helper.h"

namespace tictac::transport::test {
namespace {

const bool registered = registerBackendHelper({"verbs", verbsLoOptions, verbsViable});

TEST(VerbsDataPath, TuningOptionsAreChecked) {
  ASSERT_TRUE(registered);
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"write_piece_bytes", "100"},
                                                        {"write_queue_bytes", "0"},
                                                        {"write_piece_bytes", "2147483648"},
                                                        {"idle_spin_us", "20000000"},
                                                        {"idle_spin_us", "x"}}) {
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

}  // namespace
}  // namespace tictac::transport::test
