#include "tests/transport/backend_helper.h"

#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

#include "transport/backend.h"

namespace tictac::transport::test {
namespace {

std::map<std::string, BackendHelper>& registry() {
  static std::map<std::string, BackendHelper> helpers = [] {
    std::map<std::string, BackendHelper> m;
    auto ucx = [](std::map<std::string, std::string> cfg) {
      return [cfg] {
        ContextOptions o;
        o.backend = "ucx";
        o.backend_config = cfg;
        return o;
      };
    };
    auto has_ucx = [] {
      for (auto& n : compiledBackends()) {
        if (n == "ucx") return true;
      }
      return false;
    };
    m["ucx-shm"] = {"ucx-shm", ucx({{"TLS", "shm"}}), has_ucx};
    m["ucx-tcp"] = {"ucx-tcp", ucx({{"TLS", "tcp"}, {"NET_DEVICES", "lo"}}), has_ucx};
    m["ucx-env"] = {"ucx-env", ucx({}), has_ucx};
    // UCX's own peer error handling on shared memory (needs the
    // UCX_POSIX/SYSV_ERROR_HANDLING variables the backend sets).
    m["ucx-shm-peer"] = {"ucx-shm-peer", ucx({{"TLS", "shm"}, {"ERR_HANDLING", "peer"}}), has_ucx};
    return m;
  }();
  return helpers;
}

}  // namespace

bool registerBackendHelper(BackendHelper helper) {
  registry()[helper.name] = std::move(helper);
  return true;
}

std::vector<std::string> selectedBackends() {
  const char* env = std::getenv("TICTAC_TEST_BACKENDS");
  std::string list = env != nullptr && *env ? env : "ucx-shm,ucx-tcp,ucx-shm-peer";
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

const BackendHelper& backendHelper(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) throw std::runtime_error("no backend helper '" + name + "'");
  return it->second;
}

Pair makePair(const std::string& backend, bool progress_thread,
              const std::function<void(ContextOptions&)>& tweak) {
  Pair p;
  auto make = [&] {
    ContextOptions o = backendHelper(backend).options();
    o.progress_thread = progress_thread;
    if (tweak) tweak(o);
    auto c = Context::create(o);
    if (!c) throw std::runtime_error("context: " + c.status().toString());
    return c.value();
  };
  p.a = make();
  p.b = make();
  auto listener = p.a->listen(0, "127.0.0.1");
  if (!listener) throw std::runtime_error("listen: " + listener.status().toString());
  uint16_t port = listener.value()->port();
  Result<std::shared_ptr<Channel>> accepted = Status(StatusCode::kTimeout, "not run");
  std::thread t([&] { accepted = listener.value()->accept(std::chrono::seconds(20)); });
  auto connected = p.b->connect("127.0.0.1", port);
  t.join();
  if (!connected) throw std::runtime_error("connect: " + connected.status().toString());
  if (!accepted) throw std::runtime_error("accept: " + accepted.status().toString());
  p.ab = accepted.value();
  p.ba = connected.value();
  return p;
}

bool driveUntil(Pair& p, const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    p.a->progress();
    p.b->progress();
  }
  return true;
}

void spin(Pair& p, int n) {
  for (int i = 0; i < n; ++i) {
    p.a->progress();
    p.b->progress();
  }
}

uint64_t checksum(const void* data, size_t len) {
  // FNV-1a over 8-byte words (and the tail), position-sensitive.
  uint64_t h = 1469598103934665603ull ^ len;
  auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void fillPattern(void* data, size_t len, uint64_t seed) {
  auto* p = static_cast<unsigned char*>(data);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    __builtin_memcpy(p + i, &x, 8);
  }
  for (; i < len; ++i) p[i] = static_cast<unsigned char>(x >> (8 * (i % 8)));
}

}  // namespace tictac::transport::test
