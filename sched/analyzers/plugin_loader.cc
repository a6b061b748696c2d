// Plugin analyzers: dlopen, ABI check, and the C++ <-> C bridge of analyze().
#include "sched/analyzers/plugin_loader.h"

#include <dlfcn.h>

#include <cstring>
#include <stdexcept>

#include "sched/analyzers/dag.h"

namespace tictac::sched::analyzers {

namespace {

class PluginAnalyzer final : public Analyzer {
 public:
  PluginAnalyzer(const tictac_analyzer_v1* fn, std::shared_ptr<void> library, std::string origin)
      : fn_(fn), library_(std::move(library)), origin_(std::move(origin)) {}

  std::string name() const override { return fn_->name; }

  Schedule analyze(const Graph& g, const AnalyzerOptions& o) const override {
    const LiveDag d = buildLiveDag(g);  // validates indices, finds the live recvs
    checkOptions(o);
    std::vector<tictac_op_v1> ops(g.ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = g.ops[i];
      ops[i] = {op.name.c_str(),
                op.kind == OpKind::kRecv ? uint32_t{TICTAC_OP_RECV} : uint32_t{TICTAC_OP_COMPUTE},
                static_cast<uint32_t>(op.inputs.size()),
                op.inputs.data(),
                op.bytes,
                op.time_us,
                op.has_time ? 1 : 0};
    }
    const tictac_graph_v1 cg{g.name.c_str(), static_cast<uint32_t>(ops.size()),
                             static_cast<uint32_t>(g.outputs.size()), ops.data(), g.outputs.data()};
    const tictac_analyzer_options_v1 co{o.bandwidth_gbps, o.latency_us, o.use_recv_times ? 1 : 0,
                                        o.seed};
    std::vector<uint32_t> prio(ops.size(), TICTAC_PRIORITY_UNSET);
    char error[512] = {0};
    const int rc = fn_->analyze(&cg, &co, prio.data(), error, sizeof error);
    error[sizeof error - 1] = '\0';
    if (rc != 0)
      throw InputError("analyzer '" + name() + "' of plugin " + origin_ + " failed (" +
                       std::to_string(rc) + "): " + (error[0] ? error : "no message"));
    std::vector<Priority> out(d.recvs.size());
    for (size_t r = 0; r < d.recvs.size(); ++r) {
      out[r] = prio[d.recvs[r]];
      if (out[r] == TICTAC_PRIORITY_UNSET)
        throw std::runtime_error("analyzer '" + name() + "' of plugin " + origin_ + " left recv '" +
                                 g.ops[d.recvs[r]].name + "' without a priority");
    }
    return makeSchedule(g, d, name(), out);
  }

 private:
  const tictac_analyzer_v1* fn_;
  std::shared_ptr<void> library_;
  std::string origin_;
};

}  // namespace

void registerPluginTable(AnalyzerRegistry& reg, const void* table,
                         const std::shared_ptr<void>& library, const std::string& origin) {
  const std::string where = "plugin " + origin + ": ";
  if (!table) throw std::runtime_error(where + "entry point returned no table");
  uint32_t version = 0;
  std::memcpy(&version, table, sizeof version);  // the first member of every version
  if (version != TICTAC_ANALYZER_ABI_VERSION)
    throw std::runtime_error(where + "ABI version " + std::to_string(version) +
                             ", but this build of tictac supports version " +
                             std::to_string(TICTAC_ANALYZER_ABI_VERSION));
  const auto* t = static_cast<const tictac_analyzer_plugin_v1*>(table);
  if (t->num_analyzers == 0 || !t->analyzers)
    throw std::runtime_error(where + "exports no analyzers");
  for (uint32_t i = 0; i < t->num_analyzers; ++i) {
    const tictac_analyzer_v1* a = &t->analyzers[i];
    if (!a->name || !*a->name || !a->analyze)
      throw std::runtime_error(where + "analyzer #" + std::to_string(i) +
                               " has no name or no analyze function");
  }
  for (uint32_t i = 0; i < t->num_analyzers; ++i) {
    const tictac_analyzer_v1* a = &t->analyzers[i];
    reg.add(a->name, [a, library, origin]() -> std::unique_ptr<Analyzer> {
      return std::make_unique<PluginAnalyzer>(a, library, origin);
    });
  }
}

}  // namespace tictac::sched::analyzers

namespace tictac::sched {

void AnalyzerRegistry::loadPlugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw std::runtime_error("plugin " + path + ": cannot load: " + (why ? why : "unknown error"));
  }
  std::shared_ptr<void> library(handle, [](void* h) { dlclose(h); });
  dlerror();
  void* sym = dlsym(handle, TICTAC_ANALYZER_ENTRY_POINT);
  if (!sym)
    throw std::runtime_error("plugin " + path +
                             ": no entry point " TICTAC_ANALYZER_ENTRY_POINT
                             " (is it a tictac analyzer plugin?)");
  auto entry = reinterpret_cast<tictac_analyzer_plugin_fn>(sym);
  analyzers::registerPluginTable(*this, entry(), library, path);
}

}  // namespace tictac::sched
