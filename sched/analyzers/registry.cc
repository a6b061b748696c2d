// AnalyzerRegistry: name -> factory (loadPlugin lives in plugin_loader.cc).
#include <stdexcept>

#include "sched/analyzers/builtins.h"
#include "tictac/sched/analyzer.h"

namespace tictac::sched {

AnalyzerRegistry AnalyzerRegistry::withBuiltins() {
  AnalyzerRegistry reg;
  reg.add("tic", analyzers::makeTic);
  reg.add("tac", analyzers::makeTac);
  reg.add("fifo", analyzers::makeFifo);
  reg.add("reverse", analyzers::makeReverse);
  reg.add("random", analyzers::makeRandom);
  return reg;
}

void AnalyzerRegistry::add(const std::string& name, AnalyzerFactory f) {
  if (name.empty()) throw std::invalid_argument("analyzer name must not be empty");
  if (!f) throw std::invalid_argument("analyzer '" + name + "': empty factory");
  factories_[name] = std::move(f);
}

std::unique_ptr<Analyzer> AnalyzerRegistry::create(const std::string& name) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) return nullptr;
  return it->second();
}

std::vector<std::string> AnalyzerRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(factories_.size());
  for (const auto& [name, f] : factories_) out.push_back(name);
  return out;
}

}  // namespace tictac::sched
