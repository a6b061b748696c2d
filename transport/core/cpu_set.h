// transport/core/cpu_set.h: CPU lists and where the progress thread runs.
//
// A CPU list is Linux's cpuset notation ("0-3,8,10-11": OS CPU indexes,
// ascending ranges), as in /proc/*/status, taskset -c and sysfs. The progress
// thread's placement (ContextOptions::progress_cpus, TICTAC_PROGRESS_CPUS) is
// one of:
//   "auto" (or "") - the CPUs local to the backend's device (Backend::
//                    localCpus(): the NIC's NUMA node, from hwloc) that this
//                    process may use; unbound when that is unknown (rxe, siw,
//                    UCX) or when none of them is allowed;
//   "none"         - never bound;
//   a CPU list     - exactly those CPUs; each must be in the process's set.
// Plain functions, no state; any thread.
#pragma once

#include <pthread.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tictac/transport/status.h"

namespace tictac::transport {

// "0-3,8,10-11" for {0,1,2,3,8,10,11}; "" for none. Input ascending.
std::string formatCpuList(const std::vector<int>& cpus);
// The CPUs of a list, ascending and without repeats; nullopt when malformed
// (empty items, reversed ranges, a CPU index >= kMaxCpu).
std::optional<std::vector<int>> parseCpuList(std::string_view text);
inline constexpr int kMaxCpu = 4096;

// The CPUs the calling thread may run on (sched_getaffinity), ascending.
std::vector<int> allowedCpus();

// Resolves a progress_cpus value (above) against `allowed`; `local` is called
// only for "auto". Empty result: leave the thread unbound. kInvalidArgument
// naming the value for a malformed list or a CPU outside `allowed`.
Result<std::vector<int>> resolveProgressCpus(std::string_view spec,
                                             const std::function<std::vector<int>()>& local,
                                             const std::vector<int>& allowed);

// Binds `thread` to `cpus` (non-empty); kInvalidArgument from the kernel's
// EINVAL (no allowed CPU among them), kIoError otherwise.
Status bindThread(pthread_t thread, const std::vector<int>& cpus);

}  // namespace tictac::transport
