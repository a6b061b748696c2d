#include "transport/core/reg_cache.h"

#include <vector>

namespace tictac::transport {

void RegCache::noteUnmap(const void* addr, size_t len) {
  if (len == 0) return;
  auto b = reinterpret_cast<uintptr_t>(addr);
  while (spin_.test_and_set(std::memory_order_acquire)) {
  }
  if (npending_ < pending_.size()) {
    pending_[npending_++] = Range{b, b + len};
  } else {
    overflow_ = true;
  }
  any_pending_.store(true, std::memory_order_release);
  spin_.clear(std::memory_order_release);
}

void RegCache::applyPendingSlow() {
  std::array<Range, 256> local;
  size_t n = 0;
  bool overflow = false;
  while (spin_.test_and_set(std::memory_order_acquire)) {
  }
  n = npending_;
  for (size_t i = 0; i < n; ++i) local[i] = pending_[i];
  overflow = overflow_;
  npending_ = 0;
  overflow_ = false;
  any_pending_.store(false, std::memory_order_relaxed);
  spin_.clear(std::memory_order_release);
  if (overflow) {
    invalidate(0, UINTPTR_MAX);
    return;
  }
  for (size_t i = 0; i < n; ++i) invalidate(local[i].begin, local[i].end);
}

void RegCache::invalidate(uintptr_t begin, uintptr_t end) {
  if (entries_.empty()) return;
  // Entries are disjoint-ish by base; scan those whose base < end and check overlap.
  std::vector<std::unique_ptr<MemoryRegion>> dead;
  for (auto it = entries_.begin(); it != entries_.end() && it->first < end;) {
    uintptr_t eb = it->first;
    uintptr_t ee = eb + it->second->length();
    if (ee > begin) {
      memo_ = {};
      dead.push_back(std::move(it->second));
      it = entries_.erase(it);
      ++invalidations_;
    } else {
      ++it;
    }
  }
  // `dead` deregisters here; munmap hooks fired meanwhile land in pending_.
}

Result<const MemoryRegion*> RegCache::lookup(const void* addr, size_t len) {
  applyPending();
  if (len == 0) return static_cast<const MemoryRegion*>(nullptr);
  auto b = reinterpret_cast<uintptr_t>(addr);
  for (const Memo& m : memo_) {
    if (m.region != nullptr && b >= m.begin && b + len <= m.end) {
      ++hits_;
      return m.region;
    }
  }
  auto it = entries_.upper_bound(b);
  while (it != entries_.begin()) {
    --it;
    const MemoryRegion* r = it->second.get();
    if (it->first + r->length() >= b + len) {
      ++hits_;
      remember(it->first, r);
      return r;
    }
    if (it->first + r->length() <= b && b - it->first > (64u << 20)) break;  // far below
  }
  auto reg = backend_->registerMemory(addr, len);
  if (!reg) return reg.status();
  ++misses_;
  // Same base, larger range (a grown buffer): the old region may still be in
  // use by an operation in flight, so it is retired, not destroyed.
  auto& slot = entries_[b];
  if (slot) {
    memo_ = {};
    retired_.push_back(std::move(slot));
  }
  const MemoryRegion* r = reg.value().get();
  slot = std::move(reg.value());
  remember(b, r);
  return r;
}

void RegCache::remember(uintptr_t begin, const MemoryRegion* r) {
  memo_[memo_next_] = Memo{begin, begin + r->length(), r};
  memo_next_ ^= 1;
}

void RegCache::release(const void* addr, size_t len) {
  applyPending();
  auto b = reinterpret_cast<uintptr_t>(addr);
  invalidate(b, b + (len == 0 ? 1 : len));
}

void RegCache::clear() {
  applyPending();
  memo_ = {};
  entries_.clear();
  retired_.clear();
}

RegistrationStats RegCache::stats() {
  applyPending();
  RegistrationStats s;
  s.hits = hits_;
  s.misses = misses_;
  s.invalidations = invalidations_;
  s.entries = entries_.size();
  return s;
}

}  // namespace tictac::transport
