// Adverts of the verbs backend through the public API (suite 'verbs', run
// inside tools/softroce-vm): one held back (advert_batch) whose tensor is
// sent before it left is withdrawn, so the expect completes the usual way
// without waiting for the peer's other adverts to end; one the sender used
// after its expect was canceled hands the tensor to the next expect of it.
#include <gtest/gtest.h>

#include <vector>

#include "tests/transport/verbs_helper.h"

namespace tictac::transport::test {
namespace {

const bool registered = registerBackendHelper({"verbs", verbsLoOptions, verbsViable});
// Two chunks: a rendezvous tensor too large for the express expect (express.cc)
// gets an advert.
constexpr size_t kLen = 1 << 20;

TEST(VerbsAdvertHeld, TensorSentBeforeItsAdvertLeftCompletes) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  ASSERT_TRUE(registered);
  Pair p =
      makePair("verbs", false, [](ContextOptions& o) { o.backend_config["advert_batch"] = "2"; });
  std::vector<std::vector<char>> src(3, std::vector<char>(kLen)), dst(3, std::vector<char>(kLen));
  for (uint64_t i = 0; i < 3; ++i) fillPattern(src[i].data(), kLen, i + 1);
  // Tensors 1 and 2: their adverts leave (the sender holds none yet) ...
  auto e1 = p.ba->expect({1, 0, ""}, dst[0].data(), kLen);
  auto e2 = p.ba->expect({2, 0, ""}, dst[1].data(), kLen);
  ASSERT_TRUE(e1 && e2);
  spin(p, 200);
  // ... and tensor 3's waits for a second one (the sender holds two).
  auto e3 = p.ba->expect({3, 0, ""}, dst[2].data(), kLen);
  ASSERT_TRUE(e3);
  spin(p, 200);
  auto s3 = p.ab->send({3, 0, ""}, src[2].data(), kLen);
  ASSERT_TRUE(s3);
  ASSERT_TRUE(driveUntilDone(p, {s3.value(), e3.value()}, std::chrono::seconds(10)))
      << "tensor 3 waits for its held advert";
  EXPECT_TRUE(e3.value()->status().isOk()) << e3.value()->status().toString();
  EXPECT_EQ(src[2], dst[2]);
  auto s1 = p.ab->send({1, 0, ""}, src[0].data(), kLen);
  auto s2 = p.ab->send({2, 0, ""}, src[1].data(), kLen);
  ASSERT_TRUE(s1 && s2);
  ASSERT_TRUE(driveUntilDone(p, {s1.value(), s2.value(), e1.value(), e2.value()},
                             std::chrono::seconds(10)));
  EXPECT_TRUE(e1.value()->status().isOk() && e2.value()->status().isOk());
  EXPECT_EQ(src[0], dst[0]);
  EXPECT_EQ(src[1], dst[1]);
}

// The sender writes a whole tensor into the advert of an expect that the
// receiver cancels (and posts again) before the withdrawal reaches it: the
// bytes are not lost, the new expect gets them.
TEST(VerbsAdvertHeld, TensorWrittenIntoACanceledExpectGoesToItsSuccessor) {
  TICTAC_REQUIRE_RDMA_DEVICE();
  ASSERT_TRUE(registered);
  Pair p = makePair("verbs", false);
  std::vector<char> src(kLen), old(kLen), dst(kLen);
  fillPattern(src.data(), kLen, 9);
  auto e1 = p.ba->expect({4, 0, ""}, old.data(), kLen);
  ASSERT_TRUE(e1);
  spin(p, 200);  // the sender holds the advert
  auto s = p.ab->send({4, 0, ""}, src.data(), kLen);
  ASSERT_TRUE(s);
  for (int i = 0; i < 200; ++i) p.a->progress();  // written into old's advert
  ASSERT_TRUE(p.ba->cancel(e1.value()));
  auto e2 = p.ba->expect({4, 0, ""}, dst.data(), kLen);
  ASSERT_TRUE(e2);
  ASSERT_TRUE(driveUntilDone(p, {s.value(), e1.value(), e2.value()}, std::chrono::seconds(10)));
  EXPECT_TRUE(s.value()->status().isOk()) << s.value()->status().toString();
  EXPECT_EQ(e1.value()->status().code(), StatusCode::kCanceled);
  EXPECT_TRUE(e2.value()->status().isOk()) << e2.value()->status().toString();
  EXPECT_EQ(src, dst);
}

}  // namespace
}  // namespace tictac::transport::test
