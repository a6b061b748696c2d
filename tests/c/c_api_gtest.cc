// Runs the C program tests/c/c_api_test (C ABI only) so it counts as a GoogleTest case.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace {

int runC(const std::string& tls) {
  const char* exe = std::getenv("TICTAC_C_API_TEST");
  if (exe == nullptr) return -1;
  std::string cmd = std::string(exe) + " " + tls;
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

TEST(CApi, ProgramPassesOverTcp) {
  EXPECT_EQ(runC("tcp"), 0);
}
TEST(CApi, ProgramPassesOverShm) {
  EXPECT_EQ(runC("shm"), 0);
}

}  // namespace
