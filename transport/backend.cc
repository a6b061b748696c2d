// transport/backend.cc: createBackend() by name over the backends compiled in.
// This file (not core/) is the one place that knows the backend folders.
#include "transport/backend.h"

#include "transport/backends_config.h"
#if TICTAC_HAVE_UCX
#include "transport/ucx/factory.h"
#endif
#if TICTAC_HAVE_VERBS && __has_include("transport/verbs/factory.h")
#include "transport/verbs/factory.h"
#define TICTAC_VERBS_BACKEND 1
#else
#define TICTAC_VERBS_BACKEND 0
#endif

namespace tictac::transport {

std::vector<std::string> compiledBackends() {
  std::vector<std::string> names;
  if (TICTAC_HAVE_UCX) names.push_back("ucx");
  if (TICTAC_VERBS_BACKEND) names.push_back("verbs");
  return names;
}

Result<std::unique_ptr<Backend>> createBackend(const std::string& name,
                                               const BackendOptions& options,
                                               BackendEvents* events) {
#if TICTAC_HAVE_UCX
  if (name == "ucx") return ucx::create(options, events);
#endif
#if TICTAC_VERBS_BACKEND
  if (name == "verbs") return verbs::create(options, events);
#endif
  (void)options;
  (void)events;
  if (name == "ucx" || name == "verbs") {
    return Status(StatusCode::kUnsupported,
                  "backend '" + name + "' is not compiled into this build of tictac");
  }
  return Status(StatusCode::kInvalidArgument, "unknown backend '" + name + "' (ucx, verbs)");
}

unsigned deliverDeferred(DeferredDone& sends, DeferredDone& recvs, BackendEvents* events) {
  unsigned n = 0;
  for (; !sends.empty(); ++n) {
    auto [token, st] = std::move(sends.front());
    sends.pop_front();
    events->onSendDone(token, st);
  }
  for (; !recvs.empty(); ++n) {
    auto [token, st] = std::move(recvs.front());
    recvs.pop_front();
    events->onReceiveDone(token, st);
  }
  return n;
}

}  // namespace tictac::transport
