// UCX backend: memory registration and hooks, landing retained payloads,
// progress and wake-up.
#include <ucm/api/ucm.h>

#include <cstring>

#include "transport/ucx/backend.h"

namespace tictac::transport::ucx {

namespace {

class UcxRegion final : public MemoryRegion {
 public:
  UcxRegion(ucp_context_h ctx, ucp_mem_h memh, const void* base, size_t len)
      : ctx_(ctx), memh_(memh), base_(base), len_(len) {}
  ~UcxRegion() override { ucp_mem_unmap(ctx_, memh_); }
  const void* base() const override { return base_; }
  size_t length() const override { return len_; }
  ucp_mem_h memh() const { return memh_; }

 private:
  ucp_context_h ctx_;
  ucp_mem_h memh_;
  const void* base_;
  size_t len_;
};

}  // namespace

ucp_mem_h memhOf(const MemoryRegion* region) {
  return static_cast<const UcxRegion*>(region)->memh();
}

Result<std::unique_ptr<MemoryRegion>> UcxBackend::registerMemory(const void* addr, size_t len) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = const_cast<void*>(addr);
  mp.length = len;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(context_, &mp, &memh);
  if (st != UCS_OK) {
    return Status(StatusCode::kIoError, std::string("ucp_mem_map: ") + ucs_status_string(st));
  }
  return std::unique_ptr<MemoryRegion>(std::make_unique<UcxRegion>(context_, memh, addr, len));
}

Status UcxBackend::receive(void* desc, void* dst, size_t len, const MemoryRegion* region,
                           uint64_t token) {
  auto* r = static_cast<Retained*>(desc);
  if (r->kind == Retained::kRndv) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = &UcxBackend::onRecv;
    rp.user_data = this;
    if (region != nullptr) {
      rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      rp.memh = memhOf(region);
    }
    void* req = ucp_am_recv_data_nbx(worker_, r->ucx, dst, len, &rp);
    freeRetained(r);  // ucp owns the descriptor now
    if (req == nullptr) {
      recvs_done_.emplace_back(token, Status::ok());
    } else if (UCS_PTR_IS_ERR(req)) {
      return {StatusCode::kIoError,
              std::string("ucp_am_recv_data_nbx: ") + ucs_status_string(UCS_PTR_STATUS(req))};
    } else {
      static_cast<RequestData*>(req)->token = token;
    }
    return Status::ok();
  }
  if (len > 0) {
    std::memcpy(dst, r->kind == Retained::kData ? r->ucx : r->copy.data(), len);
  }
  release(desc);
  recvs_done_.emplace_back(token, Status::ok());
  return Status::ok();
}

void UcxBackend::onRecv(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* self = static_cast<UcxBackend*>(user_data);
  uint64_t token = static_cast<RequestData*>(request)->token;
  ucp_request_free(request);
  Status st = Status::ok();
  if (status != UCS_OK) {
    st = Status(peerGone(status) ? StatusCode::kPeerLost : StatusCode::kIoError,
                std::string("UCX receive failed: ") + ucs_status_string(status));
  }
  self->events_->onReceiveDone(token, st);
}

void UcxBackend::release(void* desc) {
  auto* r = static_cast<Retained*>(desc);
  if (r == nullptr) return;
  if (r->kind != Retained::kCopy) ucp_am_data_release(worker_, r->ucx);
  freeRetained(r);
}

UcxBackend::Retained* UcxBackend::newRetained() {
  if (free_retained_.empty()) return new Retained();
  Retained* r = free_retained_.back();
  free_retained_.pop_back();
  return r;
}

void UcxBackend::freeRetained(Retained* r) {
  constexpr size_t kKeep = 1024;
  if (free_retained_.size() >= kKeep || r->copy.capacity() > kInlineMax) {
    delete r;
    return;
  }
  r->ucx = nullptr;
  r->copy.clear();
  free_retained_.push_back(r);
}

unsigned UcxBackend::progress() {
  unsigned n = ucp_worker_progress(worker_);
  // Immediate completions are reported here, never inside the posting call.
  n += deliverDeferred(sends_done_, recvs_done_, events_);
  for (size_t i = 0; i < closing_.size();) {
    if (ucp_request_check_status(closing_[i]) != UCS_INPROGRESS) {
      ucp_request_free(closing_[i]);
      closing_[i] = closing_.back();
      closing_.pop_back();
    } else {
      ++i;
    }
  }
  return n;
}

int UcxBackend::eventFd() {
  int fd = -1;
  return ucp_worker_get_efd(worker_, &fd) == UCS_OK ? fd : -1;
}

bool UcxBackend::arm() {
  if (!sends_done_.empty() || !recvs_done_.empty()) return false;
  return ucp_worker_arm(worker_) == UCS_OK;
}

void UcxBackend::onUnmap(ucm_event_type_t, ucm_event_t* event, void* arg) {
  auto* self = static_cast<UcxBackend*>(arg);
  if (self->hook_ != nullptr) {
    self->hook_(self->hook_arg_, event->vm_unmapped.address, event->vm_unmapped.size);
  }
}

bool UcxBackend::installUnmapHook(UnmapHook hook, void* arg) {
  if (hook_ != nullptr) return false;
  hook_ = hook;
  hook_arg_ = arg;
  ucs_status_t st = ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, &UcxBackend::onUnmap, this);
  if (st != UCS_OK) {
    hook_ = nullptr;
    return false;  // no hooks here: the cache relies on explicit releaseMemory()
  }
  return true;
}

void UcxBackend::removeUnmapHook(UnmapHook hook, void* arg) {
  if (hook_ == nullptr || hook_ != hook || hook_arg_ != arg) return;
  ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, &UcxBackend::onUnmap, this);
  hook_ = nullptr;
}

}  // namespace tictac::transport::ucx
