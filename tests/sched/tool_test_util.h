// tests/sched/tool_test_util.h: running a built tool end to end from a test
// (analyze_tool_test.cc, sim_tool_test.cc), with its files in a scratch
// directory of the test's own.
//
// A ScratchDir belongs to one test on the test's thread. Its name holds the
// process id and the running test's name, so parallel test binaries and
// repeated cases never share one; the destructor removes it with its files.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tictac::sched::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (0 when none): for a
// tool's server started next (it may be taken in between; rare enough).
inline uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// What one run of a tool left: its exit status (-1 when it did not exit
// normally) and everything it printed.
struct ToolRun {
  int code = -1;
  std::string out, err;
};

class ScratchDir {
 public:
  // Creates <temp>/<prefix>-<pid>-<test name>. Call inside a test (SetUp).
  explicit ScratchDir(const std::string& prefix)
      : dir_(std::filesystem::temp_directory_path() /
             (prefix + "-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes text to the file `name` here; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }

  // The whole file at p ("" when it cannot be read).
  static std::string slurp(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  // Runs `bin args` through the shell and waits for it; stdout and stderr
  // pass through files here ("stdout", "stderr", replaced on every run).
  ToolRun run(const std::string& bin, const std::string& args) const {
    ToolRun r;
    const std::string cmd = bin + " " + args + " >" + path("stdout") + " 2>" + path("stderr");
    const int status = std::system(cmd.c_str());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(path("stdout"));
    r.err = slurp(path("stderr"));
    return r;
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace tictac::sched::testing
