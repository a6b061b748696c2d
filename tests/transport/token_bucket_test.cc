// Unit tests of TokenBucket (the scheduler's pacing): burst, debt for a send
// larger than the burst, the cap. Deterministic: every time point is injected.
#include "transport/core/token_bucket.h"

#include <gtest/gtest.h>

#include <chrono>

namespace tictac::transport {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;
const Clock::time_point kT0 = Clock::time_point{} + std::chrono::seconds(1000);

TEST(TokenBucket, BurstAndSendsLargerThanTheBurst) {
  TokenBucket unpaced(0, 10);
  EXPECT_FALSE(unpaced.enabled());
  EXPECT_TRUE(unpaced.tryConsume(1u << 30, kT0));

  TokenBucket b(8.0, 3000);  // 1 byte/ns, starts full
  EXPECT_TRUE(b.tryConsume(1000, kT0));
  EXPECT_TRUE(b.tryConsume(2000, kT0));
  EXPECT_FALSE(b.tryConsume(1, kT0));
  EXPECT_TRUE(b.tryConsume(1, kT0 + nanoseconds(1)));
  // 5000 > burst: allowed once the bucket is full, leaving a debt of 2000.
  Clock::time_point ready{};
  EXPECT_FALSE(b.tryConsume(5000, kT0 + nanoseconds(1), &ready));
  EXPECT_EQ(ready, kT0 + nanoseconds(3001));
  EXPECT_TRUE(b.tryConsume(5000, ready));
  EXPECT_DOUBLE_EQ(b.tokens(), -2000.0);
  EXPECT_FALSE(b.tryConsume(0, ready + nanoseconds(1999)));  // still in debt
  EXPECT_TRUE(b.tryConsume(0, ready + nanoseconds(2000)));
  EXPECT_FALSE(b.tryConsume(1, kT0));  // a time in the past adds nothing
  EXPECT_TRUE(b.tryConsume(3000, ready + std::chrono::seconds(1)));  // capped at the burst
  EXPECT_FALSE(b.tryConsume(1, ready + std::chrono::seconds(1)));
}

}  // namespace
}  // namespace tictac::transport
