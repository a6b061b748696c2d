// sched/analyzers/builtins.h: factories of the built-in analyzers (internal;
// users go through AnalyzerRegistry::withBuiltins()).
#pragma once

#include <memory>

#include "tictac/sched/analyzer.h"

namespace tictac::sched::analyzers {

std::unique_ptr<Analyzer> makeTic();
std::unique_ptr<Analyzer> makeTac();
std::unique_ptr<Analyzer> makeFifo();
std::unique_ptr<Analyzer> makeReverse();
std::unique_ptr<Analyzer> makeRandom();

}  // namespace tictac::sched::analyzers
