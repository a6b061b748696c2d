// Unit tests of RegCache (the registration cache every backend's sends and
// expects go through), over a counting fake backend: hits and misses, and
// that no lookup ever returns a region the cache has let go of.
#include "transport/core/reg_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace tictac::transport {
namespace {

struct FakeRegion : MemoryRegion {
  FakeRegion(const void* b, size_t l, int* live) : b_(b), l_(l), live_(live) { ++*live_; }
  ~FakeRegion() override { --*live_; }
  const void* base() const override { return b_; }
  size_t length() const override { return l_; }
  const void* b_;
  size_t l_;
  int* live_;
};

// Only registerMemory is used by RegCache; the rest is never called.
struct CountingBackend : Backend {
  int registrations = 0, live = 0;
  std::string name() const override { return "fake"; }
  std::vector<uint8_t> localAddress() override { return {}; }
  Status addPeer(PeerId, std::span<const uint8_t>) override { return {}; }
  void removePeer(PeerId) override {}
  Result<std::unique_ptr<MemoryRegion>> registerMemory(const void* addr, size_t len) override {
    ++registrations;
    return std::unique_ptr<MemoryRegion>(new FakeRegion(addr, len, &live));
  }
  Status post(PeerId, std::span<const std::byte>, const void*, size_t, const MemoryRegion*,
              uint64_t, uint32_t) override {
    return {};
  }
  Status receive(void*, void*, size_t, const MemoryRegion*, uint64_t) override { return {}; }
  void release(void*) override {}
  unsigned progress() override { return 0; }
  int eventFd() override { return -1; }
  bool arm() override { return false; }
  bool installUnmapHook(UnmapHook, void*) override { return true; }
  void removeUnmapHook(UnmapHook, void*) override {}
};

TEST(RegCache, RepeatedLookupsHitWithoutRegistering) {
  CountingBackend be;
  RegCache cache(&be);
  std::vector<char> a(4096), b(4096);
  const MemoryRegion* ra = cache.lookup(a.data(), a.size()).value();
  const MemoryRegion* rb = cache.lookup(b.data(), b.size()).value();
  for (int i = 0; i < 5; ++i) {  // a ping-pong's alternation, and a third buffer in between
    EXPECT_EQ(cache.lookup(a.data(), 16).value(), ra);
    EXPECT_EQ(cache.lookup(b.data() + 100, 200).value(), rb);
  }
  std::vector<char> c(64);
  const MemoryRegion* rc = cache.lookup(c.data(), c.size()).value();
  EXPECT_EQ(cache.lookup(a.data(), a.size()).value(), ra);
  EXPECT_EQ(cache.lookup(c.data(), c.size()).value(), rc);
  EXPECT_EQ(be.registrations, 3);
  RegistrationStats s = cache.stats();
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 12u);
  EXPECT_EQ(s.entries, 3u);
}

TEST(RegCache, UnmappedRangeIsRegisteredAnew) {
  CountingBackend be;
  RegCache cache(&be);
  std::vector<char> a(8192);
  ASSERT_TRUE(cache.lookup(a.data(), a.size()).isOk());
  ASSERT_TRUE(cache.lookup(a.data(), a.size()).isOk());  // remembered
  RegCache::unmapHook(&cache, a.data() + 4096, 10);      // from munmap/free, any thread
  auto again = cache.lookup(a.data(), a.size());
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(be.registrations, 2);
  EXPECT_EQ(be.live, 1);  // the stale region was deregistered
  EXPECT_EQ(again.value()->base(), a.data());
  EXPECT_EQ(cache.stats().invalidations, 1u);
}

TEST(RegCache, ReleaseAndClearForgetRememberedRegions) {
  CountingBackend be;
  RegCache cache(&be);
  std::vector<char> a(512);
  ASSERT_TRUE(cache.lookup(a.data(), a.size()).isOk());
  cache.release(a.data(), a.size());
  EXPECT_EQ(be.live, 0);
  ASSERT_TRUE(cache.lookup(a.data(), a.size()).isOk());
  EXPECT_EQ(be.registrations, 2);
  cache.clear();
  EXPECT_EQ(be.live, 0);
  ASSERT_TRUE(cache.lookup(a.data(), a.size()).isOk());
  EXPECT_EQ(be.registrations, 3);
}

TEST(RegCache, GrownBufferGetsTheLargerRegion) {
  CountingBackend be;
  RegCache cache(&be);
  std::vector<char> a(1 << 16);
  const MemoryRegion* small = cache.lookup(a.data(), 1024).value();
  EXPECT_EQ(small->length(), 1024u);
  const MemoryRegion* big = cache.lookup(a.data(), a.size()).value();
  EXPECT_EQ(big->length(), a.size());
  // The small region is retired (an op may still use it), not returned again.
  EXPECT_EQ(cache.lookup(a.data(), 512).value(), big);
  EXPECT_EQ(be.live, 2);
  EXPECT_EQ(cache.lookup(nullptr, 0).value(), nullptr);  // nothing to register
}

}  // namespace
}  // namespace tictac::transport
