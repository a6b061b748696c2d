// tests/transport/backend_helper.h: the backends the transport suites run on.
//
// Every conformance test is parameterised over BackendHelper. The built-in
// helpers are "ucx-shm" (UCX_TLS=shm), "ucx-tcp" (UCX_TLS=tcp over lo),
// "ucx-shm-peer" (shm with UCX peer error handling) and "ucx-env" (UCX
// configured only by the environment, for the run that exports nothing but
// UCX_TLS=shm). Another backend adds its helper with
// registerBackendHelper() from a static initializer in its own test file
// (e.g. tests/transport/verbs/verbs_helper.cc); TICTAC_TEST_BACKENDS (comma
// list) selects which helpers run, default "ucx-shm,ucx-tcp,ucx-shm-peer".
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tictac/transport/context.h"

namespace tictac::transport::test {

struct BackendHelper {
  std::string name;
  std::function<ContextOptions()> options;  // fresh options for one context
  std::function<bool()> viable;             // false: the suite skips (no device)
};

bool registerBackendHelper(BackendHelper helper);
// The selected helpers (see above), by name for gtest parameter names.
std::vector<std::string> selectedBackends();
const BackendHelper& backendHelper(const std::string& name);

// Two connected contexts in this process (a listens on port 0, b connects).
struct Pair {
  std::shared_ptr<Context> a, b;
  std::shared_ptr<Channel> ab, ba;  // a's channel to b, b's channel to a
};
// progress_thread: both contexts run their own progress thread.
Pair makePair(const std::string& backend, bool progress_thread,
              const std::function<void(ContextOptions&)>& tweak = {});

// Drives both contexts until pred() holds or timeout; returns pred().
bool driveUntil(Pair& p, const std::function<bool()>& pred,
                std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Calls progress() on both contexts n times.
void spin(Pair& p, int n);

uint64_t checksum(const void* data, size_t len);
void fillPattern(void* data, size_t len, uint64_t seed);

}  // namespace tictac::transport::test
