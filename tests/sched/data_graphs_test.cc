// The bundled graphs in data/graphs/ and the timing trace in data/traces/
// load, and carry the parameter counts and sizes of the models they came from.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tictac/sched/graph.h"
#include "tictac/sched/timing.h"

namespace tictac::sched {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

const std::string kDataDir = std::string(TICTAC_SOURCE_ROOT) + "/data/";

struct Expected {
  size_t recvs;
  uint64_t bytes;  // float32 parameters x 4
  size_t compute;  // compute ops, the input placeholder included
  const char* output;
};

// Parameter tensors and element counts as torchvision 0.14 builds the models
// (sum of p.numel() over model.parameters(); BatchNorm weight and bias count,
// running statistics are buffers and do not):
// resnet50 53 conv + 53 x 2 BN + fc weight and bias = 161 tensors,
// 25,557,032 parameters; vgg16 13 conv + 3 fc, each with a bias = 32,
// 138,357,544; alexnet 5 conv + 3 fc = 16, 61,100,840. The transformer has
// 6 layers x 12 tensors (in_proj weight/bias, out_proj weight/bias, linear1,
// linear2, norm1, norm2 weight/bias) = 72 and 6 x 3,152,384 = 18,914,304
// (d_model 512, ff 2048). tiny.json is the example of the format's spec.
const std::map<std::string, Expected> kGraphs = {
    {"resnet50", {161, 25557032ULL * 4, 176, "fc"}},
    {"vgg16", {32, 138357544ULL * 4, 41, "classifier_6"}},
    {"alexnet", {16, 61100840ULL * 4, 23, "classifier_6"}},
    {"transformer", {72, 18914304ULL * 4, 157, "layers_5_norm2"}},
    {"tiny", {1, 37632, 3, "fc"}},
};

TEST(DataGraphs, EveryBundledGraphLoadsWithItsModelsParameters) {
  std::set<std::string> seen;
  for (const fs::directory_entry& e : fs::directory_iterator(kDataDir + "graphs")) {
    if (e.path().extension() != ".json") continue;
    const std::string stem = e.path().stem().string();
    SCOPED_TRACE(stem);
    auto it = kGraphs.find(stem);
    ASSERT_NE(it, kGraphs.end()) << "add " << stem << " to kGraphs";
    seen.insert(stem);
    std::vector<std::string> warnings;
    const Graph g = loadGraph(e.path().string(), &warnings);
    EXPECT_THAT(warnings, ElementsAre());  // nothing pruned
    EXPECT_EQ(g.name, stem);
    const std::vector<OpIndex> recvs = g.recvs();
    uint64_t bytes = 0;
    for (OpIndex r : recvs) bytes += g.ops[r].bytes;
    EXPECT_EQ(recvs.size(), it->second.recvs);
    EXPECT_EQ(bytes, it->second.bytes);
    EXPECT_EQ(g.ops.size() - recvs.size(), it->second.compute);
    ASSERT_EQ(g.outputs.size(), 1u);
    EXPECT_EQ(g.ops[g.outputs[0]].name, it->second.output);
    double total_us = 0;
    for (const Op& op : g.ops) {
      if (op.kind == OpKind::kCompute) total_us += op.time_us;
    }
    EXPECT_GT(total_us, 0.0);
  }
  EXPECT_EQ(seen.size(), kGraphs.size()) << "a graph listed in kGraphs is missing";
}

TEST(DataGraphs, ExportedGraphsSurviveARoundTrip) {
  for (const char* name : {"resnet50", "transformer"}) {
    const Graph g = loadGraph(kDataDir + "graphs/" + name + ".json");
    const Graph again = parseGraphJson(toJson(g));
    ASSERT_EQ(again.ops.size(), g.ops.size()) << name;
    for (size_t i = 0; i < g.ops.size(); ++i) {
      EXPECT_EQ(again.ops[i].name, g.ops[i].name);
      EXPECT_EQ(again.ops[i].bytes, g.ops[i].bytes);
      EXPECT_EQ(again.ops[i].inputs, g.ops[i].inputs);
    }
  }
}

TEST(DataTraces, Resnet50TraceNamesEveryExportedNode) {
  Graph g = loadGraph(kDataDir + "graphs/resnet50.json");
  const TimingStats stats = loadTimingTrace(g, kDataDir + "traces/resnet50.trace.json");
  // Every compute op but the input placeholder ran under
  // record_function(<op name>); the aten ops inside are unmatched names.
  EXPECT_EQ(stats.matched_ops, 175u);
  EXPECT_GT(stats.unmatched_names, 0u);
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::kCompute && op.name != "x") {
      EXPECT_TRUE(op.has_time) << op.name;
      EXPECT_GT(op.time_us, 0.0) << op.name;
    }
  }
}

}  // namespace
}  // namespace tictac::sched
