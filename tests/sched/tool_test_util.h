// tests/sched/tool_test_util.h: running a built tool end to end from a test
// (analyze_tool_test.cc, sim_tool_test.cc), with its files in a scratch
// directory of the test's own.
//
// A ScratchDir belongs to one test on the test's thread. Its name holds the
// process id and the running test's name, so parallel test binaries and
// repeated cases never share one; the destructor removes it with its files.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tictac::sched::testing {

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
