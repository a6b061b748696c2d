// tools/ps/roles.h: the two process roles of tictac-ps and the launcher.
//
// A role runs in its own process with its own transport Context (progress
// thread on); its results go to stdout as JSON lines (see docs/ps.md), read by
// the launcher. Each returns the process exit status (0 ok, 1 runtime failure
// such as a lost peer or corrupt data, 2 bad input).
#pragma once

#include <string>

#include "tictac/transport/context.h"
#include "tools/ps/job.h"

namespace tictac::ps {

// PS `rank`: listens on config.port + rank, serves its shard to every worker.
int runServer(const Job& job, uint32_t rank);
// Worker `rank`: connects to every PS in config.peers, runs the iterations.
int runWorker(const Job& job, uint32_t rank);

// Context options of a role: backend, chunk/window, pacing (unless shaped).
transport::ContextOptions contextOptions(const Config& c);
// Splits "host:port"; false when malformed.
bool splitPeer(const std::string& peer, std::string& host, uint16_t& port);

}  // namespace tictac::ps
