// Expect matching over every backend: the express expect (one expect held
// outside the core's tables, transport/core/express.cc) and the tables it is
// promoted into must land every arrival shape and order alike.
#include <gtest/gtest.h>

#include <vector>

#include "tests/transport/backend_helper.h"

namespace tictac::transport::test {
namespace {

class ChannelExpectTest : public BackendTest {};

std::vector<char> pattern(size_t len, uint64_t seed) {
  std::vector<char> v(len);
  fillPattern(v.data(), len, seed);
  return v;
}

// The express expect (one expect held outside the tables, transport/core/
// express.cc): the first expect posted takes it, later ones the tables. Every
// shape of arrival for it (whole, chunked, in any order among the others)
// lands intact; a cancel or a duplicate of it behaves as for any expect.
TEST_P(ChannelExpectTest, ExpectsLandWhateverTheArrivalOrderAndShape) {
  // 4 KiB chunks: the first tensor arrives as three eager chunks.
  Pair p = makePair(GetParam(), false, [](ContextOptions& o) { o.chunk_bytes = 4096; });
  const std::vector<size_t> sizes = {10005, 8, 0, 4096};
  std::vector<std::vector<char>> src, dst;
  std::vector<OpHandle> expects, sends;
  int fired = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.push_back(pattern(sizes[i], 40 + i));
    dst.emplace_back(sizes[i]);
    auto e = p.ba->expect({40 + i, 1, ""}, dst[i].data(), sizes[i], [&](const Status&) { fired++; });
    ASSERT_TRUE(e) << e.status().toString();
    expects.push_back(e.value());
  }
  auto dup = p.ba->expect({40, 1, ""}, dst[0].data(), sizes[0]);  // the express one's key
  ASSERT_TRUE(dup);
  for (size_t i = sizes.size(); i-- > 0;) {  // last posted arrives first
    auto s = p.ab->send({40 + i, 1, ""}, src[i].data(), sizes[i], 0);
    ASSERT_TRUE(s) << s.status().toString();
    sends.push_back(s.value());
  }
  ASSERT_TRUE(driveUntil(p, [&] {
    for (auto& op : expects) {
      if (!op->done()) return false;
    }
    for (auto& op : sends) {
      if (!op->done()) return false;
    }
    return dup.value()->done();
  }));
  EXPECT_EQ(dup.value()->status().code(), StatusCode::kInvalidArgument);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(expects[i]->status().isOk()) << i << ": " << expects[i]->status().toString();
    EXPECT_EQ(checksum(dst[i].data(), sizes[i]), checksum(src[i].data(), sizes[i])) << i;
  }
  for (auto& op : sends) EXPECT_TRUE(op->status().isOk()) << op->status().toString();
  spin(p, 20);
  EXPECT_EQ(fired, static_cast<int>(sizes.size()));  // each callback exactly once
  // A canceled express expect completes kCanceled; its key can be expected again.
  auto c = p.ba->expect({50, 1, ""}, dst[0].data(), sizes[0]);
  ASSERT_TRUE(c);
  EXPECT_TRUE(p.ba->cancel(c.value()));
  ASSERT_TRUE(driveUntil(p, [&] { return c.value()->done(); }));
  EXPECT_EQ(c.value()->status().code(), StatusCode::kCanceled);
  auto again = p.ba->expect({50, 1, ""}, dst[0].data(), sizes[0]);
  auto s = p.ab->send({50, 1, ""}, src[0].data(), sizes[0], 0);
  ASSERT_TRUE(again && s);
  ASSERT_TRUE(driveUntil(p, [&] { return again.value()->done() && s.value()->done(); }));
  EXPECT_TRUE(again.value()->status().isOk()) << again.value()->status().toString();
  EXPECT_EQ(checksum(dst[0].data(), sizes[0]), checksum(src[0].data(), sizes[0]));
}

TICTAC_INSTANTIATE_BACKENDS(ChannelExpectTest);

}  // namespace
}  // namespace tictac::transport::test
