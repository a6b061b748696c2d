// More channel tests in one process: registration cache and remapped memory,
// several sending threads, the progress thread and its CPUs, waitable
// handles, hints.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include "tests/transport/backend_helper.h"
#include "transport/core/cpu_set.h"

namespace tictac::transport::test {
namespace {

using namespace std::chrono_literals;

// Runs body(i, k) for k in [0, per) in each of `threads` threads, i = t * per
// + k, and joins them.
void inThreads(int threads, int per, const std::function<void(int, int)>& body) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&body, t, per] {
      for (int k = 0; k < per; ++k) body(t * per + k, k);
    });
  }
  for (auto& t : pool) t.join();
}

class ChannelMoreTest : public BackendTest {};

TEST_P(ChannelMoreTest, RegistrationCacheHitsOnReuse) {
  Pair p = makePair(GetParam(), false);
  std::vector<char> src(1 << 20, 5), dst(1 << 20);
  ASSERT_TRUE(sendAndWait(p, {1, 0, ""}, src.data(), dst.data(), src.size()).isOk());
  auto first = p.a->registrationStats();
  ASSERT_TRUE(sendAndWait(p, {2, 0, ""}, src.data(), dst.data(), src.size()).isOk());
  auto second = p.a->registrationStats();
  EXPECT_EQ(second.misses, first.misses);
  EXPECT_EQ(second.hits, first.hits + 1);
  EXPECT_GE(second.entries, 1u);
  p.a->releaseMemory(src.data(), src.size());
  EXPECT_EQ(p.a->registrationStats().invalidations, second.invalidations + 1);
}

TEST_P(ChannelMoreTest, RemappedBufferSendsNewBytes) {
  Pair p = makePair(GetParam(), false);
  const size_t len = 4 << 20;
  void* buf = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(buf, MAP_FAILED);
  std::vector<char> dst(len);
  std::memset(buf, 'A', len);
  ASSERT_TRUE(sendAndWait(p, {1, 0, ""}, buf, dst.data(), len).isOk());
  EXPECT_EQ(dst[len / 2], 'A');
  auto before = p.a->registrationStats();
  // Fresh pages at the same address: the cached registration is stale.
  ASSERT_EQ(::munmap(buf, len), 0);
  void* again =
      ::mmap(buf, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ASSERT_EQ(again, buf);
  std::memset(buf, 'B', len);
  ASSERT_TRUE(sendAndWait(p, {2, 0, ""}, buf, dst.data(), len).isOk());
  EXPECT_EQ(dst[0], 'B');
  EXPECT_EQ(dst[len - 1], 'B');
  EXPECT_EQ(checksum(buf, len), checksum(dst.data(), len));
  auto after = p.a->registrationStats();
  EXPECT_GE(after.invalidations, before.invalidations + 1);
  EXPECT_EQ(after.misses, before.misses + 1);  // registered anew
  ::munmap(buf, len);
}

TEST_P(ChannelMoreTest, SeveralThreadsSendWithProgressThread) {
  Pair p = makePair(GetParam(), true);
  constexpr int kThreads = 4, kPer = 25;
  const size_t len = 50000;
  std::vector<std::vector<char>> src(kThreads * kPer), dst(kThreads * kPer);
  std::vector<OpHandle> expects;
  for (int i = 0; i < kThreads * kPer; ++i) {
    src[i].resize(len);
    dst[i].resize(len);
    fillPattern(src[i].data(), len, i);
    auto e = p.ba->expect({uint64_t(i), 7, ""}, dst[i].data(), len);
    ASSERT_TRUE(e);
    expects.push_back(e.value());
  }
  std::atomic<int> ok{0};
  inThreads(kThreads, kPer, [&](int i, int k) {
    auto s = p.ab->send({uint64_t(i), 7, ""}, src[i].data(), len, Priority(k % 4));
    if (s && s.value()->wait(30s).isOk()) ok++;
  });
  EXPECT_EQ(ok.load(), kThreads * kPer);
  for (int i = 0; i < kThreads * kPer; ++i) {
    ASSERT_TRUE(expects[i]->wait(30s).isOk()) << i;
    EXPECT_EQ(checksum(src[i].data(), len), checksum(dst[i].data(), len)) << i;
  }
}

// Threads of this process whose CPU affinity is exactly `cpus` (/proc).
int threadsBoundTo(const std::string& cpus) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line == "Cpus_allowed_list:\t" + cpus) ++n;
    }
  }
  return n;
}

// progress_cpus: a CPU list binds the progress thread there (the kernel's
// view of the thread agrees) and tensors still flow; "none" and "auto" on a
// device hwloc cannot place (rxe, UCX) leave it unbound; a bad value fails
// create() naming it.
TEST_P(ChannelMoreTest, ProgressThreadRunsOnProgressCpus) {
  const std::vector<int> allowed = allowedCpus();
  ASSERT_FALSE(allowed.empty());
  const std::string cpu = std::to_string(allowed.back());
  const int before = threadsBoundTo(cpu);
  {
    Pair p = makePair(GetParam(), true, [&](ContextOptions& o) { o.progress_cpus = cpu; });
    EXPECT_EQ(p.a->progressCpus(), std::vector<int>{allowed.back()});
    EXPECT_EQ(p.b->progressCpus(), std::vector<int>{allowed.back()});
    if (allowed.size() > 1) {
      EXPECT_EQ(threadsBoundTo(cpu), before + 2);  // a's and b's
    }
    std::vector<char> src(300000), dst(src.size());
    fillPattern(src.data(), src.size(), 5);
    ASSERT_TRUE(sendAndWait(p, {1, 1, ""}, src.data(), dst.data(), src.size()));
    EXPECT_EQ(checksum(src.data(), src.size()), checksum(dst.data(), dst.size()));
  }
  for (const char* spec : {"none", "auto"}) {
    ContextOptions o = backendHelper(GetParam()).options();
    o.progress_thread = true;
    o.progress_cpus = spec;
    auto c = Context::create(o);
    ASSERT_TRUE(c) << spec << ": " << c.status().toString();
    for (int x : c.value()->progressCpus()) {  // auto: the device's CPUs, if hwloc knows them
      EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), x) != allowed.end()) << spec << x;
    }
    if (std::string(spec) == "none") {
      EXPECT_TRUE(c.value()->progressCpus().empty());
    }
  }
  {  // the environment overrides the option, and an error says where the value came from
    ContextOptions o = backendHelper(GetParam()).options();
    o.progress_thread = true;
    o.progress_cpus = cpu;
    ::setenv("TICTAC_PROGRESS_CPUS", "none", 1);
    auto none = Context::create(o);
    ::setenv("TICTAC_PROGRESS_CPUS", "x", 1);
    auto bad = Context::create(o);
    ::unsetenv("TICTAC_PROGRESS_CPUS");
    ASSERT_TRUE(none) << none.status().toString();
    EXPECT_TRUE(none.value()->progressCpus().empty());
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.status().message().find("TICTAC_PROGRESS_CPUS: progress_cpus \"x\""),
              std::string::npos)
        << bad.status().message();
  }
  for (const char* spec : {"3-1", "fast", "4095"}) {
    ContextOptions o = backendHelper(GetParam()).options();
    o.progress_thread = true;
    o.progress_cpus = spec;
    auto c = Context::create(o);
    ASSERT_FALSE(c) << spec;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(c.status().message().find("progress_cpus"), std::string::npos)
        << c.status().message();
  }
}

// Without a progress thread a send or expect enters the core in the calling
// thread when the core is free, else through the submission queue: several
// threads posting and driving both contexts at once keep every tensor intact
// and every completion single.
TEST_P(ChannelMoreTest, SeveralThreadsPostAndDriveWithoutProgressThread) {
  Pair p = makePair(GetParam(), false);
  constexpr int kThreads = 4, kPer = 25;
  std::vector<std::vector<char>> src(kThreads * kPer), dst(kThreads * kPer);
  std::vector<std::atomic<int>> fired(2 * kThreads * kPer);
  std::atomic<int> ok{0};
  inThreads(kThreads, kPer, [&](int i, int k) {
    size_t len = k % 3 == 0 ? 100000 : 64 + k;
    src[i].resize(len);
    dst[i].resize(len);
    fillPattern(src[i].data(), len, i);
    auto on = [&fired](int slot) { return [&fired, slot](const Status&) { fired[slot]++; }; };
    auto e = p.ba->expect({uint64_t(i), 8, ""}, dst[i].data(), len, on(2 * i));
    auto s = p.ab->send({uint64_t(i), 8, ""}, src[i].data(), len, Priority(k % 4), on(2 * i + 1));
    if (!e || !s) return;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!(e.value()->done() && s.value()->done()) &&
           std::chrono::steady_clock::now() < deadline) {
      p.a->progress();
      p.b->progress();
    }
    if (e.value()->status().isOk() && s.value()->status().isOk()) ok++;
  });
  EXPECT_EQ(ok.load(), kThreads * kPer);
  spin(p, 100);
  for (int i = 0; i < kThreads * kPer; ++i) {
    EXPECT_EQ(checksum(src[i].data(), src[i].size()), checksum(dst[i].data(), dst[i].size())) << i;
    EXPECT_EQ(fired[2 * i].load(), 1) << i;
    EXPECT_EQ(fired[2 * i + 1].load(), 1) << i;
  }
}

TEST_P(ChannelMoreTest, WaitDrivesProgressWithoutThread) {
  Pair p = makePair(GetParam(), false);
  std::vector<char> src(3 << 20, 9), dst(3 << 20);
  Transfer t = post(p, {4, 0, ""}, src.data(), dst.data(), src.size());
  ASSERT_TRUE(t);
  const OpHandle& e = t.expect.value();
  const OpHandle& s = t.send.value();
  // Each wait pumps only its own context: alternate short waits.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!(e->done() && s->done()) && std::chrono::steady_clock::now() < deadline) {
    (void)s->wait(1ms);
    (void)e->wait(1ms);
  }
  EXPECT_TRUE(e->status().isOk());
  EXPECT_TRUE(s->status().isOk());
  EXPECT_EQ(s->wait(0ms).code(), StatusCode::kOk);
}

TEST_P(ChannelMoreTest, HintProviderOrdersUnprioritisedSends) {
  auto hints = parseTsvHints("bulk\t900\nurgent\t3\n", "inline");
  ASSERT_TRUE(hints);
  Pair p = makePair(GetParam(), false, [&](ContextOptions& o) {
    o.hints = hints.value();
    o.chunk_bytes = 64 << 10;
    o.window_bytes = 64 << 10;
  });
  std::vector<std::string> order;  // no priority given: the hints decide
  ASSERT_NO_FATAL_FAILURE(raceUrgentPastBulk(p, {{1, 0, "bulk"}, size_t{8} << 20, std::nullopt},
                                             {{2, 0, "urgent"}, 1000, std::nullopt}, 10, order));
  EXPECT_EQ(order[0], "urgent");
  auto stats = p.a->priorityStats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].priority, 3u);
  EXPECT_EQ(stats[1].priority, 900u);
}

TICTAC_INSTANTIATE_BACKENDS(ChannelMoreTest);

}  // namespace
}  // namespace tictac::transport::test
