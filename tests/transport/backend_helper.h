// tests/transport/backend_helper.h: the backends the transport suites run on,
// and the fixture pieces those suites share (pairs, transfers, checks).
//
// Every conformance test is parameterised over BackendHelper. The built-in
// helpers are "ucx-shm" (UCX_TLS=shm), "ucx-tcp" (UCX_TLS=tcp over lo),
// "ucx-shm-peer" (shm with UCX peer error handling) and "ucx-env" (UCX
// configured only by the environment, for the run that exports nothing but
// UCX_TLS=shm). Another backend adds its helper with
// registerBackendHelper() from a static initializer in its own test file
// (e.g. tests/transport/verbs_test.cc); TICTAC_TEST_BACKENDS (comma
// list) selects which helpers run, default "ucx-shm,ucx-tcp,ucx-shm-peer".
//
// A suite over backend names derives its fixture from BackendTest and ends
// with TICTAC_INSTANTIATE_BACKENDS(Fixture): its cases are named
// Backends/Fixture.Case/<backend> with non-alphanumerics as '_'.
// Everything here runs on the test's thread; nothing is thread safe unless
// the context under it is (helpers that drive progress need no progress
// thread, and are harmless with one).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
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

// Drives both contexts until every op is done or timeout; returns whether all are.
bool driveUntilDone(Pair& p, std::initializer_list<OpHandle> ops,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

uint64_t checksum(const void* data, size_t len);
void fillPattern(void* data, size_t len, uint64_t seed);

// One tensor a -> b: b's expect and a's send. A member holds its post error
// (or "not posted") when the post failed; the Transfer tests true when both
// were posted.
struct Transfer {
  Result<OpHandle> expect = Status(StatusCode::kInvalidArgument, "not posted");
  Result<OpHandle> send = Status(StatusCode::kInvalidArgument, "not posted");
  explicit operator bool() const { return expect && send; }
};

// Posts b's expect of `key` into dst, then a's send of src.
Transfer post(Pair& p, const TensorKey& key, const void* src, void* dst, size_t len,
              std::optional<Priority> priority = std::nullopt);

// post(), then drives until both ops are done. Returns the first failure:
// of a post, kTimeout, the expect's status, else the send's status.
Status sendAndWait(Pair& p, const TensorKey& key, const void* src, void* dst, size_t len);

// gtest check: both ops of t were posted, complete kOk while driving p, and
// dst holds src's len bytes (failures name the size). Fatal failures return
// early: call under ASSERT_NO_FATAL_FAILURE when later steps need the data.
void expectDelivered(Pair& p, const Transfer& t, const void* src, const void* dst, size_t len);

// The priority race: b expects `bulk` and `urgent`; a sends bulk, drives
// `head_start` progress rounds (bulk is on the wire), then sends urgent;
// drives until both expects and both sends completed. `order` gets "bulk" /
// "urgent" in the order the expects completed. Fatal gtest failure if a post
// fails or the ops do not complete in 30 s.
struct RaceLeg {
  TensorKey key;
  size_t len;
  std::optional<Priority> priority;
};
void raceUrgentPastBulk(Pair& p, const RaceLeg& bulk, const RaceLeg& urgent, int head_start,
                        std::vector<std::string>& order);

// The fixture of a suite over backend names: skips when GetParam()'s backend
// is not viable here (no device).
class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!backendHelper(GetParam()).viable()) GTEST_SKIP() << GetParam() << " not available";
  }
};

// gtest parameter name of a backend: non-alphanumerics become '_'.
std::string backendParamName(const ::testing::TestParamInfo<std::string>& info);

#define TICTAC_INSTANTIATE_BACKENDS(Fixture)                                                   \
  INSTANTIATE_TEST_SUITE_P(Backends, Fixture,                                                  \
                           ::testing::ValuesIn(::tictac::transport::test::selectedBackends()), \
                           ::tictac::transport::test::backendParamName)

}  // namespace tictac::transport::test
