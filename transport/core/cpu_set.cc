// transport/core/cpu_set.cc: CPU lists and the progress thread's placement.
#include "transport/core/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace tictac::transport {

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

namespace {

bool parseCpu(std::string_view t, int* cpu) {
  if (t.empty()) return false;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), *cpu);
  return ec == std::errc() && end == t.data() + t.size() && *cpu >= 0 && *cpu < kMaxCpu;
}

}  // namespace

std::optional<std::vector<int>> parseCpuList(std::string_view text) {
  std::vector<bool> in(kMaxCpu);
  if (text.empty()) return std::nullopt;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const size_t dash = item.find('-');
    int lo = 0, hi = 0;
    if (!parseCpu(item.substr(0, dash), &lo)) return std::nullopt;
    hi = lo;
    if (dash != std::string_view::npos && (!parseCpu(item.substr(dash + 1), &hi) || hi < lo)) {
      return std::nullopt;
    }
    for (int c = lo; c <= hi; ++c) in[c] = true;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  std::vector<int> cpus;
  for (int c = 0; c < kMaxCpu; ++c) {
    if (in[c]) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

Result<std::vector<int>> resolveProgressCpus(std::string_view spec,
                                             const std::function<std::vector<int>()>& local,
                                             const std::vector<int>& allowed) {
  auto isAllowed = [&](int c) { return std::binary_search(allowed.begin(), allowed.end(), c); };
  if (spec == "none") return std::vector<int>{};
  if (spec.empty() || spec == "auto") {
    std::vector<int> near = local ? local() : std::vector<int>{};
    std::sort(near.begin(), near.end());
    near.erase(std::remove_if(near.begin(), near.end(), [&](int c) { return !isAllowed(c); }),
               near.end());
    return near;
  }
  auto cpus = parseCpuList(spec);
  const std::string what = "progress_cpus \"" + std::string(spec) + "\"";
  if (!cpus) {
    return Status(StatusCode::kInvalidArgument,
                  what + ": expected auto, none or a CPU list such as 0-3,8");
  }
  for (int c : *cpus) {
    if (!isAllowed(c)) {
      return Status(StatusCode::kInvalidArgument, what + ": CPU " + std::to_string(c) +
                                                      " is not in this process's CPU set " +
                                                      formatCpuList(allowed));
    }
  }
  return std::move(*cpus);
}

Status bindThread(pthread_t thread, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  const int rc = pthread_setaffinity_np(thread, sizeof(set), &set);
  if (rc == 0) return Status::ok();
  return Status(
      rc == EINVAL ? StatusCode::kInvalidArgument : StatusCode::kIoError,
      "binding the progress thread to CPUs " + formatCpuList(cpus) + ": " + std::strerror(rc));
}

}  // namespace tictac::transport
