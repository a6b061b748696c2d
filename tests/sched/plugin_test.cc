// Plugins: the example library "smallest-first" loaded through dlopen, and the
// loader's checks (bad path, missing entry point, ABI version, broken tables,
// a plugin that fails or leaves a recv without a priority).
#include "tictac/sched/plugin.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "sched/analyzers/plugin_loader.h"
#include "tests/sched/analyzer_test_util.h"

namespace tictac::sched::testing {
namespace {

// Three recvs of 300, 100 and 200 bytes, plus a dead one of 1 byte.
Graph threeRecvs() {
  GraphBuilder b;
  auto big = b.recv("big", 300), small = b.recv("small", 100), mid = b.recv("mid", 200);
  auto dead = b.recv("dead", 1);
  b.compute("unused", 0, {dead});
  b.output(b.compute("o", 1, {big, small, mid}));
  return b.graph();
}

template <class F>
std::string messageOf(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(Plugin, ExampleSmallestFirst) {
  auto reg = AnalyzerRegistry::withBuiltins();
  reg.loadPlugin(TICTAC_EXAMPLE_PLUGIN);
  auto a = reg.create("smallest-first");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name(), "smallest-first");
  // The plugin numbers every recv by bytes (dead 0, small 1, mid 2, big 3);
  // the schedule keeps only the live ones, with the plugin's numbers.
  Schedule s = a->analyze(threeRecvs(), AnalyzerOptions{});
  EXPECT_EQ(s.algo, "smallest-first");
  EXPECT_EQ(s.toTsv(), "small\t1\nmid\t2\nbig\t3\n");
  // The library stays loaded while the analyzer lives, even without the registry.
  reg = AnalyzerRegistry{};
  EXPECT_EQ(byName(a->analyze(threeRecvs(), AnalyzerOptions{})).at("big"), 3u);
}

TEST(Plugin, LoadErrorsNameTheLibrary) {
  AnalyzerRegistry reg;
  const std::string missing = "/nonexistent/libnothing.so";
  std::string msg = messageOf([&] { reg.loadPlugin(missing); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot load"), std::string::npos) << msg;
  // A real shared library that is not a plugin.
  msg = messageOf([&] { reg.loadPlugin("libm.so.6"); });
  EXPECT_NE(msg.find("libm.so.6"), std::string::npos) << msg;
  EXPECT_NE(msg.find(TICTAC_ANALYZER_ENTRY_POINT), std::string::npos) << msg;
  EXPECT_TRUE(reg.names().empty());
}

int writeReverseIndex(const tictac_graph_v1* g, const tictac_analyzer_options_v1*, uint32_t* prio,
                      char*, size_t) {
  for (uint32_t i = 0; i < g->num_ops; ++i) prio[i] = g->num_ops - i;
  return 0;
}
int fails(const tictac_graph_v1*, const tictac_analyzer_options_v1*, uint32_t*, char* err,
          size_t n) {
  std::snprintf(err, n, "cannot handle this graph");
  return 7;
}
int writesNothing(const tictac_graph_v1*, const tictac_analyzer_options_v1*, uint32_t*, char*,
                  size_t) {
  return 0;
}

TEST(Plugin, TableChecks) {
  AnalyzerRegistry reg;
  const tictac_analyzer_v1 fns[] = {
      {"rev-index", writeReverseIndex}, {"fails", fails}, {"silent", writesNothing}};
  tictac_analyzer_plugin_v1 table{TICTAC_ANALYZER_ABI_VERSION, 3, fns};
  using analyzers::registerPluginTable;

  table.abi_version = 2;
  std::string msg = messageOf([&] { registerPluginTable(reg, &table, nullptr, "libv2.so"); });
  EXPECT_NE(msg.find("libv2.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ABI version 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("supports version 1"), std::string::npos) << msg;
  EXPECT_NE(messageOf([&] { registerPluginTable(reg, nullptr, nullptr, "x"); }), "(no exception)");
  table.abi_version = TICTAC_ANALYZER_ABI_VERSION;
  table.num_analyzers = 0;
  EXPECT_NE(messageOf([&] { registerPluginTable(reg, &table, nullptr, "x"); }).find("no analyzers"),
            std::string::npos);
  const tictac_analyzer_v1 unnamed[] = {{"", writesNothing}};
  tictac_analyzer_plugin_v1 bad{TICTAC_ANALYZER_ABI_VERSION, 1, unnamed};
  EXPECT_NE(messageOf([&] { registerPluginTable(reg, &bad, nullptr, "x"); }).find("no name"),
            std::string::npos);
  EXPECT_TRUE(reg.names().empty());

  table.num_analyzers = 3;
  registerPluginTable(reg, &table, nullptr, "inline");
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"fails", "rev-index", "silent"}));
  // Ops: big 0, small 1, mid 2, dead 3, unused 4, o 5 -> priority = 6 - index.
  EXPECT_EQ(reg.create("rev-index")->analyze(threeRecvs(), {}).toTsv(),
            "mid\t4\nsmall\t5\nbig\t6\n");
  msg = messageOf([&] { reg.create("fails")->analyze(threeRecvs(), {}); });
  EXPECT_NE(msg.find("cannot handle this graph"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inline"), std::string::npos) << msg;
  EXPECT_THROW(reg.create("fails")->analyze(threeRecvs(), {}), InputError);
  msg = messageOf([&] { reg.create("silent")->analyze(threeRecvs(), {}); });
  EXPECT_NE(msg.find("without a priority"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tictac::sched::testing
