// Verbs backend: memory registration (ibv_reg_mr) and the unmap hook.
//
// The registration cache needs to hear about unmapped memory: UCX's memory
// hook library (libucm: only its mmap/munmap hooks, UCX itself is never
// initialized) reports it when the build has UCX; otherwise there is no hook
// and the cache relies on Context::releaseMemory().
#include <cerrno>
#include <cstring>

#include "transport/verbs/backend.h"
#include "transport/verbs/config.h"
#if TICTAC_VERBS_UCM
#include <ucm/api/ucm.h>
#endif

namespace tictac::transport::verbs {

namespace {

class VerbsRegion final : public MemoryRegion {
 public:
  VerbsRegion(ibv_mr* mr, const void* base, size_t len) : mr_(mr), base_(base), len_(len) {}
  ~VerbsRegion() override { ibv_dereg_mr(mr_); }
  const void* base() const override { return base_; }
  size_t length() const override { return len_; }
  const ibv_mr* mr() const { return mr_; }

 private:
  ibv_mr* mr_;
  const void* base_;
  size_t len_;
};

// Writable memory gets remote write access (a receive target), or with
// windows=1 only the right to bind memory windows (window.cc: the peer then
// writes through a window, never through the registration); read-only
// memory (a const send buffer) is registered for local reads only. Never
// remote read: the protocol only writes (RDMA WRITE WITH IMMEDIATE), and a
// peer given one region's rkey could otherwise read all of it.
ibv_mr* regMr(ibv_pd* pd, const void* addr, size_t len, bool windows, int* err) {
  void* a = const_cast<void*>(addr);
  const int remote = windows ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mr = ibv_reg_mr(pd, a, len, IBV_ACCESS_LOCAL_WRITE | remote);
  if (mr == nullptr) mr = ibv_reg_mr(pd, a, len, 0);
  if (mr == nullptr) *err = errno;
  return mr;
}

#if TICTAC_VERBS_UCM
void onUnmap(ucm_event_type_t, ucm_event_t* event, void* arg) {
  auto* self = static_cast<VerbsBackend*>(arg);
  if (self->hook_ != nullptr) {
    self->hook_(self->hook_arg_, event->vm_unmapped.address, event->vm_unmapped.size);
  }
}
#endif

}  // namespace

const ibv_mr* mrOf(const MemoryRegion* region) {
  return static_cast<const VerbsRegion*>(region)->mr();
}

Result<std::unique_ptr<MemoryRegion>> VerbsBackend::registerMemory(const void* addr, size_t len) {
  if (len == 0) return Status(StatusCode::kInvalidArgument, "verbs: registering 0 bytes");
  int err = 0;
  ibv_mr* mr = regMr(dev_->pd, addr, len, tune_.windows != 0, &err);
  if (mr == nullptr) {
    return Status(StatusCode::kIoError,
                  "ibv_reg_mr of " + std::to_string(len) + " bytes: " + std::strerror(err));
  }
  return std::unique_ptr<MemoryRegion>(std::make_unique<VerbsRegion>(mr, addr, len));
}

Result<ibv_mr*> VerbsBackend::regTemp(const void* addr, size_t len) {
  int err = 0;
  ibv_mr* mr = regMr(dev_->pd, addr, len, tune_.windows != 0, &err);
  if (mr == nullptr) {
    return Status(StatusCode::kIoError,
                  "ibv_reg_mr of " + std::to_string(len) + " bytes: " + std::strerror(err));
  }
  return mr;
}

bool VerbsBackend::installUnmapHook(UnmapHook hook, void* arg) {
#if TICTAC_VERBS_UCM
  if (hook_ != nullptr) return false;
  hook_ = hook;
  hook_arg_ = arg;
  if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, &onUnmap, this) != UCS_OK) {
    hook_ = nullptr;
    return false;
  }
  return true;
#else
  (void)hook;
  (void)arg;
  return false;
#endif
}

void VerbsBackend::removeUnmapHook(UnmapHook hook, void* arg) {
  if (hook_ == nullptr || hook_ != hook || hook_arg_ != arg) return;
#if TICTAC_VERBS_UCM
  ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, &onUnmap, this);
#endif
  hook_ = nullptr;
}

}  // namespace tictac::transport::verbs
