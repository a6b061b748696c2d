// transport/ucx/factory.h: the UCX (ucp) backend's one entry point.
//
// One ucp context and one worker per tictac Context; data moves as ucp active
// messages (eager for small payloads, rendezvous into the expected buffer for
// large ones). BackendOptions::config entries are ucp configuration keys
// without the UCX_ prefix (e.g. {"TLS", "shm"}), applied over the environment.
// Sets UCX_POSIX_ERROR_HANDLING=y and UCX_SYSV_ERROR_HANDLING=y unless the user
// set them (UCX 1.13 leaves shared memory out of endpoints that need peer
// error handling otherwise).
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tictac::transport::ucx {

Result<std::unique_ptr<Backend>> create(const BackendOptions& options, BackendEvents* events);

}  // namespace tictac::transport::ucx
