// tools/ps/launch.h: the launcher (one process per PS and per worker) and the
// report it builds from their JSON lines.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/ps/job.h"

namespace tictac::ps {

struct RunOutput {
  std::vector<nlohmann::json> lines;        // every JSON line of every role
  std::vector<std::string> ucx_transports;  // "tcp/lo", ... from UCX's ep_cfg info lines
  std::string error;                        // empty when every role exited 0
};

// Spawns config.ps PS and config.workers worker processes of `self` (this
// executable) and waits for them (at most timeout_s, then kills them). With
// TICTAC_NETNS="ns:ip:dev,..." in the environment (tools/netns-cluster sets
// it), role i runs inside namespace i with UCX_TLS=tcp UCX_NET_DEVICES=dev;
// otherwise all run on loopback. Called from the main thread.
RunOutput launch(const std::string& self, const Config& config, double timeout_s);

// The report object of a run (see docs/ps.md for the fields); adds the
// simulator's prediction for the same settings. `trace` receives the Chrome
// trace of config.trace_iteration when non-null.
nlohmann::json buildReport(const Job& job, const RunOutput& run, nlohmann::json* trace);

// One human-readable line per report for stderr.
std::string tableHeader();
std::string tableRow(const nlohmann::json& report);

}  // namespace tictac::ps
