// The include rule of docs/architecture.md: sched/ and transport/ (with their
// public headers) never include each other; only bridge/, tools/, tests/ and
// bench/ may see both.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Violation {
  std::string file;
  int line;
  std::string text;
};

// True when include path `path` names the part `part` ("sched" or "transport"):
// "sched/...", "tictac/sched/...", "../sched/..." -- but not "send_scheduler.h".
bool refersTo(const std::string& path, const std::string& part) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) return false;  // the last component is a file name
    if (path.compare(start, end - start, part) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Every #include in the C/C++ files under `dirs` whose path names part `forbidden`.
std::vector<Violation> scan(const std::vector<std::string>& dirs, const std::string& forbidden,
                            int* files_seen) {
  static const std::regex include_re(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::vector<Violation> out;
  for (const auto& d : dirs) {
    fs::path root = fs::path(TICTAC_SOURCE_ROOT) / d;
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      const auto ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc" && ext != ".c" && ext != ".hpp"))
        continue;
      ++*files_seen;
      std::ifstream in(e.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        std::smatch m;
        if (std::regex_search(line, m, include_re) && refersTo(m[1].str(), forbidden))
          out.push_back({e.path().string(), n, line});
      }
    }
  }
  return out;
}

std::string describe(const std::vector<Violation>& v) {
  std::string s;
  for (const auto& x : v) s += x.file + ":" + std::to_string(x.line) + ": " + x.text + "\n";
  return s;
}

}  // namespace

TEST(Layering, SchedNeverIncludesTransport) {
  int files = 0;
  auto v = scan({"sched", "include/tictac/sched"}, "transport", &files);
  EXPECT_GT(files, 0) << "no sched sources found under " << TICTAC_SOURCE_ROOT;
  EXPECT_TRUE(v.empty()) << describe(v);
}

TEST(Layering, TransportNeverIncludesSched) {
  int files = 0;
  auto v = scan({"transport", "include/tictac/transport"}, "sched", &files);
  EXPECT_GT(files, 0) << "no transport sources found under " << TICTAC_SOURCE_ROOT;
  EXPECT_TRUE(v.empty()) << describe(v);
}

TEST(Layering, ScannerSeesIncludes) {
  // The scanner itself must detect a forbidden include, or the tests above prove nothing.
  int files = 0;
  auto v = scan({"tests/common"}, "gtest", &files);
  EXPECT_FALSE(v.empty());
  EXPECT_TRUE(refersTo("tictac/sched/graph.h", "sched"));
  EXPECT_TRUE(refersTo("sched/graph/json.h", "sched"));
  EXPECT_FALSE(refersTo("transport/core/send_scheduler.h", "sched"));
  EXPECT_FALSE(refersTo("sched.h", "sched"));
}
