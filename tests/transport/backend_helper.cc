#include "tests/transport/backend_helper.h"

#include <cctype>
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

bool driveUntilDone(Pair& p, std::initializer_list<OpHandle> ops,
                    std::chrono::milliseconds timeout) {
  return driveUntil(
      p,
      [&] {
        for (const OpHandle& op : ops) {
          if (!op->done()) return false;
        }
        return true;
      },
      timeout);
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

Transfer post(Pair& p, const TensorKey& key, const void* src, void* dst, size_t len,
              std::optional<Priority> priority) {
  Transfer t;
  t.expect = p.ba->expect(key, dst, len);
  t.send = p.ab->send(key, src, len, priority);
  return t;
}

Status sendAndWait(Pair& p, const TensorKey& key, const void* src, void* dst, size_t len) {
  Transfer t = post(p, key, src, dst, len);
  if (!t.expect) return t.expect.status();
  if (!t.send) return t.send.status();
  if (!driveUntilDone(p, {t.send.value(), t.expect.value()})) {
    return {StatusCode::kTimeout, "round trip"};
  }
  if (!t.expect.value()->status()) return t.expect.value()->status();
  return t.send.value()->status();
}

void expectDelivered(Pair& p, const Transfer& t, const void* src, const void* dst, size_t len) {
  ASSERT_TRUE(t.expect) << t.expect.status().toString();
  ASSERT_TRUE(t.send) << t.send.status().toString();
  const OpHandle& s = t.send.value();
  const OpHandle& e = t.expect.value();
  ASSERT_TRUE(driveUntilDone(p, {s, e})) << "size " << len;
  EXPECT_TRUE(s->status().isOk()) << s->status().toString();
  EXPECT_TRUE(e->status().isOk()) << e->status().toString();
  EXPECT_EQ(checksum(src, len), checksum(dst, len)) << "size " << len;
}

void raceUrgentPastBulk(Pair& p, const RaceLeg& bulk, const RaceLeg& urgent, int head_start,
                        std::vector<std::string>& order) {
  std::vector<char> big(bulk.len, 1), bigdst(bulk.len), hi(urgent.len, 2), hidst(urgent.len);
  auto eb = p.ba->expect(bulk.key, bigdst.data(), bulk.len,
                         [&](const Status&) { order.push_back("bulk"); });
  auto eu = p.ba->expect(urgent.key, hidst.data(), urgent.len,
                         [&](const Status&) { order.push_back("urgent"); });
  auto sb = p.ab->send(bulk.key, big.data(), bulk.len, bulk.priority);
  spin(p, head_start);
  auto su = p.ab->send(urgent.key, hi.data(), urgent.len, urgent.priority);
  ASSERT_TRUE(eb && eu && sb && su);
  ASSERT_TRUE(driveUntil(p, [&] { return order.size() == 2; }));
  // The sends finish with their acks; they must not outlive the buffers.
  ASSERT_TRUE(driveUntilDone(p, {sb.value(), su.value()}));
}

std::string backendParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (auto& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
}

}  // namespace tictac::transport::test
