// sched/graph/load.cc: loadGraph() dispatches on the file extension; file
// reading shared with the timing-trace loader.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "sched/graph/graph_internal.h"
#include "sched/onnx/onnx_loader.h"
#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace detail {

std::string readFile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error(path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
    throw InputError(path + ": is a device, not a file");
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, f.get());
    if (text.size() + n > kMaxInputFileBytes) {
      throw InputError(path + ": larger than " + std::to_string(kMaxInputFileBytes >> 20) +
                       " MiB, the most an input file may hold");
    }
    text.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) {
    const int err = errno;
    throw std::runtime_error(path + ": read failed: " + std::strerror(err != 0 ? err : EIO));
  }
  return text;
}

}  // namespace detail

namespace {

std::string lowerExtension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return ext;
}

}  // namespace

Graph loadGraph(const std::string& path, std::vector<std::string>* warnings) {
  const std::string ext = lowerExtension(path);
  Graph g;
  if (ext == ".onnx") {
    g = loadOnnxGraph(path, warnings);
  } else if (ext == ".json") {
    const std::string text = detail::readFile(path);
    try {
      g = parseGraphJson(text, warnings);
    } catch (const InputError& e) {
      throw InputError(path + ": " + e.what());
    }
  } else {
    throw InputError(path + ": unknown graph file extension " +
                     (ext.empty() ? std::string("(none)") : detail::quoted(ext)) +
                     " (expected .json or .onnx)");
  }
  if (g.name.empty()) {
    std::string stem = std::filesystem::path(path).stem().string();
    if (stem.find_first_of(detail::kBadNameBytes) == std::string::npos) g.name = std::move(stem);
  }
  return g;
}

}  // namespace tictac::sched
