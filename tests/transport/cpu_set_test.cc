// CPU lists and the progress thread's placement (transport/core/cpu_set.h):
// parsing and printing Linux's cpuset notation, resolving progress_cpus
// (auto/none/list) against the allowed set, and binding a real thread.
#include "transport/core/cpu_set.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <thread>

namespace tictac::transport {
namespace {

TEST(CpuSetTest, ParsesAndPrintsCpuLists) {
  EXPECT_EQ(parseCpuList("0"), (std::vector<int>{0}));
  EXPECT_EQ(parseCpuList("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parseCpuList("5,1-2,2"), (std::vector<int>{1, 2, 5}));  // sorted, no repeats
  EXPECT_EQ(parseCpuList("4095"), (std::vector<int>{4095}));
  for (const char* bad : {"", ",", "1,", ",1", "1-", "-1", "3-1", "a", "1 ", " 1", "1-2-3", "4096",
                          "99999999999", "0x1", "+1"}) {
    EXPECT_FALSE(parseCpuList(bad).has_value()) << '"' << bad << '"';
  }
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({}), "");
  for (const char* text : {"0", "1,3,5", "0-7", "2-3,9-12,40"}) {
    EXPECT_EQ(formatCpuList(*parseCpuList(text)), text);
  }
}

TEST(CpuSetTest, ResolvesAutoNoneAndLists) {
  const std::vector<int> allowed{0, 1, 2, 3};
  int local_calls = 0;
  auto local = [&] {
    ++local_calls;
    return std::vector<int>{3, 2, 7};  // 7 is not allowed here
  };
  EXPECT_EQ(resolveProgressCpus("auto", local, allowed).value(), (std::vector<int>{2, 3}));
  EXPECT_EQ(resolveProgressCpus("", local, allowed).value(), (std::vector<int>{2, 3}));
  EXPECT_EQ(local_calls, 2);
  EXPECT_TRUE(resolveProgressCpus("none", local, allowed).value().empty());
  EXPECT_EQ(resolveProgressCpus("1-2", local, allowed).value(), (std::vector<int>{1, 2}));
  EXPECT_EQ(local_calls, 2);  // only "auto" asks the backend
  // Unknown placement (rxe, UCX): auto leaves the thread unbound.
  EXPECT_TRUE(resolveProgressCpus(
                  "auto", [] { return std::vector<int>{}; }, allowed)
                  .value()
                  .empty());
  auto outside = resolveProgressCpus("2,9", local, allowed);
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("CPU 9 is not in this process's CPU set 0-3"),
            std::string::npos)
      << outside.status().message();
  auto bad = resolveProgressCpus("fast", local, allowed);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("progress_cpus \"fast\""), std::string::npos);
}

TEST(CpuSetTest, BindsAThreadToAllowedCpus) {
  const std::vector<int> allowed = allowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int target = allowed.back();
  std::atomic<bool> go{false};
  std::atomic<int> seen{-2};
  std::thread t([&] {
    while (!go.load()) std::this_thread::yield();
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    seen = CPU_COUNT(&set) == 1 && CPU_ISSET(target, &set) ? target : -1;
  });
  Status s = bindThread(t.native_handle(), {target});
  go = true;
  t.join();
  ASSERT_TRUE(s) << s.toString();
  EXPECT_EQ(seen.load(), target);
  // Beyond CPU_SETSIZE: an empty set, which the kernel refuses (EINVAL).
  Status none = bindThread(pthread_self(), {kMaxCpu - 1});
  EXPECT_FALSE(none);
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("binding the progress thread"), std::string::npos);
}

}  // namespace
}  // namespace tictac::transport
