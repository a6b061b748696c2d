// bench/guest_ops: one figure per kind of operation, as text or JSON, --help,
// and a named usage error (exit 2) for bad arguments.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/sched/tool_test_util.h"

namespace {

using tictac::sched::testing::ScratchDir;

const std::string kOps = std::string(TICTAC_BUILD_ROOT) + "/bench/guest_ops";
const char* const kKinds[] = {"alu", "call", "atomic", "lock", "malloc", "clock", "page"};

class GuestOps : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(kOps)) << kOps << " not built"; }
  ScratchDir dir_{"guest-ops"};
};

TEST_F(GuestOps, JsonHasEveryKindAsAPositiveCost) {
  auto r = dir_.run(kOps, "-n 1000 --thread --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), std::size(kKinds)) << r.out;
  for (const char* k : kKinds) {
    ASSERT_TRUE(j.contains(k)) << k << " missing: " << r.out;
    EXPECT_GT(j[k].get<double>(), 0.0) << k;
  }
}

TEST_F(GuestOps, TextIsNamePairsInOrder) {
  auto r = dir_.run(kOps, "-n 1000");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.out);
  for (const char* k : kKinds) {
    std::string name;
    double ns = 0;
    ASSERT_TRUE(in >> name >> ns) << r.out;
    EXPECT_EQ(name, k);
    EXPECT_GT(ns, 0.0) << k;
  }
  std::string rest;
  EXPECT_FALSE(in >> rest) << "unexpected: " << rest;
}

TEST_F(GuestOps, HelpExplainsEveryKindAndExitsZero) {
  for (const char* args : {"--help", "-h"}) {
    auto r = dir_.run(kOps, args);
    EXPECT_EQ(r.code, 0) << args;
    EXPECT_EQ(r.out.rfind("usage: guest_ops", 0), 0u) << r.out;
    for (const char* k : kKinds)
      EXPECT_NE(r.out.find(std::string("  ") + k + " "), std::string::npos) << k;
  }
}

TEST_F(GuestOps, BadUsageExitsTwoWithTheUsage) {
  for (const char* args : {"-n", "-n 5", "-n 1e9", "-n abc", "--bogus", "extra"}) {
    auto r = dir_.run(kOps, args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find("usage: guest_ops"), std::string::npos) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
}

}  // namespace
