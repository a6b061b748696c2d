// sched/analyzers/plugin_loader.h: turns a plugin's C table into analyzers
// (internal; AnalyzerRegistry::loadPlugin is the public way in).
#pragma once

#include <memory>
#include <string>

#include "tictac/sched/analyzer.h"
#include "tictac/sched/plugin.h"

namespace tictac::sched::analyzers {

// Checks the table returned by a plugin's entry point (`table` may be any
// version: only its first member, abi_version, is read before the check) and
// adds its analyzers to `reg`. `library` keeps the code loaded (may be null for
// a table that lives in this program); `origin` names the library in errors.
// Throws std::runtime_error naming `origin` and the problem (null table, ABI
// version mismatch, no analyzers, an analyzer without name or function).
void registerPluginTable(AnalyzerRegistry& reg, const void* table,
                         const std::shared_ptr<void>& library, const std::string& origin);

}  // namespace tictac::sched::analyzers
