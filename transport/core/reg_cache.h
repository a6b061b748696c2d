// transport/core/reg_cache.h: the registration cache.
//
// Maps address ranges to backend MemoryRegions so that sending from (or
// receiving into) the same buffer again costs no new registration. A lookup
// that a cached region covers is a hit; otherwise the range is registered (a
// miss) and cached. Entries are invalidated (deregistered and counted) when
// memory overlapping them is unmapped or freed (the backend's memory hooks call
// noteUnmap from any thread, even inside munmap) or on an explicit release().
// So a buffer freed and mapped again at the same address is registered anew and
// never sends stale pages.
//
// Threading: lookup/release/drain/stats are called under the context's core
// lock. noteUnmap may be called from any thread at any time (inside munmap):
// it takes only a small spin lock, never allocates, and records the range in a
// fixed array; the next lookup applies it. If the array overflows every entry
// is invalidated.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "tictac/transport/context.h"
#include "transport/backend.h"

namespace tictac::transport {

class RegCache {
 public:
  explicit RegCache(Backend* backend) : backend_(backend) {}

  // A region covering [addr, addr+len), registering on a miss. len == 0 gives
  // nullptr with kOk (nothing to register).
  Result<const MemoryRegion*> lookup(const void* addr, size_t len);
  // Invalidates every entry overlapping the range (explicit release).
  void release(const void* addr, size_t len);
  // Drops everything (backend going away); not counted as invalidations.
  void clear();
  RegistrationStats stats();  // applies pending invalidations first

  // From memory hooks, any thread (see above).
  void noteUnmap(const void* addr, size_t len);
  static void unmapHook(void* self, const void* addr, size_t len) {
    static_cast<RegCache*>(self)->noteUnmap(addr, len);
  }

 private:
  struct Range {
    uintptr_t begin, end;
  };
  // Applies invalidations recorded by the unmap hook (none: no call).
  void applyPending() {
    if (any_pending_.load(std::memory_order_acquire)) applyPendingSlow();
  }
  void applyPendingSlow();
  void invalidate(uintptr_t begin, uintptr_t end);
  void remember(uintptr_t begin, const MemoryRegion* r);

  // The last two regions looked up (a ping-pong alternates its send and
  // receive buffers): a repeated lookup skips the map. Emptied whenever an
  // entry leaves entries_ (invalidate, clear), so they never name a dead region.
  struct Memo {
    uintptr_t begin = 0, end = 0;
    const MemoryRegion* region = nullptr;
  };
  std::array<Memo, 2> memo_{};
  unsigned memo_next_ = 0;

  Backend* backend_;
  std::map<uintptr_t, std::unique_ptr<MemoryRegion>> entries_;  // by base address
  std::vector<std::unique_ptr<MemoryRegion>> retired_;          // replaced, maybe still in use
  uint64_t hits_ = 0, misses_ = 0, invalidations_ = 0;

  std::atomic_flag spin_ = ATOMIC_FLAG_INIT;
  std::array<Range, 256> pending_{};
  size_t npending_ = 0;
  bool overflow_ = false;
  std::atomic<bool> any_pending_{false};
};

}  // namespace tictac::transport
