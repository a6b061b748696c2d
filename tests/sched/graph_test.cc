// Unit tests of the Graph model and the JSON interchange format (good input).
#include "tictac/sched/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace tictac::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kDataDir = std::string(TICTAC_SOURCE_ROOT) + "/tests/data/graphs/";

Op makeOp(std::string name, OpKind kind, uint64_t bytes = 0, double time_us = 0,
          std::vector<OpIndex> inputs = {}) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.bytes = bytes;
  op.time_us = time_us;
  op.has_time = time_us != 0;
  op.inputs = std::move(inputs);
  return op;
}

std::vector<std::string> names(const Graph& g, const std::vector<OpIndex>& idx) {
  std::vector<std::string> out;
  for (OpIndex i : idx) out.push_back(g.ops.at(i).name);
  return out;
}

TEST(GraphJson, LoadsTheIssueExample) {
  std::vector<std::string> warnings;
  Graph g = loadGraph(kDataDir + "tiny.json", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(g.name, "tiny");
  ASSERT_EQ(g.ops.size(), 4u);
  EXPECT_EQ(g.ops[0].kind, OpKind::kRecv);
  EXPECT_EQ(g.ops[0].bytes, 37632u);
  EXPECT_FALSE(g.ops[0].has_time);
  EXPECT_EQ(g.ops[2].name, "conv1");
  EXPECT_DOUBLE_EQ(g.ops[2].time_us, 812.5);
  EXPECT_TRUE(g.ops[2].has_time);
  EXPECT_THAT(g.ops[2].inputs, ElementsAre(1u, 0u));
  EXPECT_THAT(names(g, g.outputs), ElementsAre("fc"));
  EXPECT_EQ(g.find("fc"), 3);
  EXPECT_EQ(g.find("nope"), -1);
  EXPECT_THAT(g.recvs(), ElementsAre(0u));
  EXPECT_TRUE(g.isRecv(0));
  EXPECT_FALSE(g.isRecv(1));
}

TEST(GraphJson, RoundTripKeepsEverything) {
  const std::string text = R"({"name": "rt", "ops": [
    {"name": "c", "kind": "compute", "inputs": ["a", "b", "w2"]},
    {"name": "w2", "kind": "recv", "bytes": 9007199254740992, "time_us": 3.25},
    {"name": "a", "kind": "compute", "time_us": 0.1, "inputs": ["w1"]},
    {"name": "w1", "kind": "recv", "bytes": 0},
    {"name": "b", "kind": "compute", "time_us": 1e-3, "inputs": ["a", "a"]}],
    "outputs": ["c"], "extra": {"ignored": true}})";
  Graph g = parseGraphJson(text);
  Graph h = parseGraphJson(toJson(g));
  EXPECT_EQ(toJson(h), toJson(g));
  ASSERT_EQ(h.ops.size(), g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) {
    EXPECT_EQ(h.ops[i].name, g.ops[i].name);
    EXPECT_EQ(h.ops[i].kind, g.ops[i].kind);
    EXPECT_EQ(h.ops[i].bytes, g.ops[i].bytes);
    EXPECT_EQ(h.ops[i].time_us, g.ops[i].time_us);  // exact: shortest round-trip doubles
    EXPECT_EQ(h.ops[i].has_time, g.ops[i].has_time);
    EXPECT_EQ(h.ops[i].inputs, g.ops[i].inputs);
  }
  EXPECT_EQ(h.outputs, g.outputs);
  EXPECT_EQ(h.name, "rt");
  EXPECT_EQ(g.ops[1].bytes, uint64_t{1} << 53);
  EXPECT_THAT(g.ops[4].inputs, ElementsAre(2u, 2u));  // a repeated input stays repeated
}

TEST(GraphJson, InputsMayNameLaterOps) {
  Graph g = parseGraphJson(R"({"ops": [
    {"name": "out", "kind": "compute", "time_us": 1, "inputs": ["mid"]},
    {"name": "mid", "kind": "compute", "time_us": 2, "inputs": ["w"]},
    {"name": "w", "kind": "recv", "bytes": 8}]})");
  EXPECT_THAT(g.ops[0].inputs, ElementsAre(1u));
  EXPECT_THAT(g.ops[1].inputs, ElementsAre(2u));
  EXPECT_THAT(names(g, g.topoOrder()), ElementsAre("w", "mid", "out"));
}

TEST(GraphJson, Defaults) {
  // No "name", no "outputs" (every sink), compute without time_us or inputs.
  Graph g = parseGraphJson(R"({"ops": [
    {"name": "w", "kind": "recv", "bytes": 4},
    {"name": "s1", "kind": "compute", "inputs": ["w"]},
    {"name": "s2", "kind": "compute", "inputs": ["w"], "time_us": 5},
    {"name": "lonely", "kind": "compute"}]})");
  EXPECT_EQ(g.name, "");
  EXPECT_THAT(names(g, g.outputs), ElementsAre("s1", "s2", "lonely"));
  EXPECT_EQ(g.ops[1].time_us, 0.0);  // the reference implementation assumed 1 ms
  EXPECT_FALSE(g.ops[1].has_time);
  EXPECT_TRUE(g.ops[3].inputs.empty());
  EXPECT_FALSE(g.ops[0].has_time);
  EXPECT_EQ(g.ops[0].time_us, 0.0);
}

TEST(GraphJson, IntegralFloatBytesAccepted) {
  Graph g = parseGraphJson(R"({"ops": [{"name": "w", "kind": "recv", "bytes": 1024.0},
    {"name": "c", "kind": "compute", "inputs": ["w"]}]})");
  EXPECT_EQ(g.ops[0].bytes, 1024u);
}

TEST(GraphTopo, KahnBreaksTiesByListPosition) {
  Graph g = parseGraphJson(R"({"ops": [
    {"name": "d", "kind": "compute", "inputs": ["b", "c"]},
    {"name": "c", "kind": "compute", "inputs": ["w1"]},
    {"name": "w2", "kind": "recv", "bytes": 1},
    {"name": "b", "kind": "compute", "inputs": ["w2"]},
    {"name": "w1", "kind": "recv", "bytes": 1}]})");
  // Ready at start: w2 (#2), w1 (#4). Taking w2 frees b (#3), which precedes w1.
  EXPECT_THAT(names(g, g.topoOrder()), ElementsAre("w2", "b", "w1", "c", "d"));
}

TEST(GraphPrune, RemovesOpsNoOutputDependsOnAndWarnsOnce) {
  std::vector<std::string> warnings;
  Graph g = parseGraphJson(R"({"name": "p", "ops": [
    {"name": "w_dead", "kind": "recv", "bytes": 1},
    {"name": "w", "kind": "recv", "bytes": 2},
    {"name": "dead1", "kind": "compute", "inputs": ["w_dead", "w"]},
    {"name": "live", "kind": "compute", "inputs": ["w"]},
    {"name": "dead2", "kind": "compute", "inputs": ["dead1"]},
    {"name": "out", "kind": "compute", "inputs": ["live"]}], "outputs": ["out"]})",
                           &warnings);
  EXPECT_THAT(names(g, {0, 1, 2}), ElementsAre("w", "live", "out"));
  EXPECT_THAT(g.ops[1].inputs, ElementsAre(0u));
  EXPECT_THAT(g.ops[2].inputs, ElementsAre(1u));
  EXPECT_THAT(g.outputs, ElementsAre(2u));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "ignored 3 ops that no output depends on: w_dead, dead1, dead2");
}

TEST(GraphPrune, CodeBuiltGraph) {
  Graph g;
  g.ops.push_back(makeOp("w", OpKind::kRecv, 1));
  for (int i = 0; i < 15; ++i) g.ops.push_back(makeOp("d" + std::to_string(i), OpKind::kCompute));
  g.ops.push_back(makeOp("out", OpKind::kCompute, 0, 0, {0}));
  g.outputs = {16};
  validate(g);
  std::vector<std::string> removed = prune(g);
  EXPECT_EQ(removed.size(), 15u);
  EXPECT_EQ(g.ops.size(), 2u);
  EXPECT_THAT(g.outputs, ElementsAre(1u));
  std::vector<std::string> warnings;
  parseGraphJson(toJson(g), &warnings);  // pruned graph: nothing more to prune
  EXPECT_TRUE(warnings.empty());
}

TEST(GraphPrune, WarningListsAtMostTenNames) {
  std::string ops = R"({"name": "w", "kind": "recv", "bytes": 1},
                       {"name": "out", "kind": "compute", "inputs": ["w"]})";
  for (int i = 0; i < 12; ++i) {
    ops += R"(, {"name": "d)" + std::to_string(i) + R"(", "kind": "compute"})";
  }
  std::vector<std::string> warnings;
  parseGraphJson(R"({"ops": [)" + ops + R"(], "outputs": ["out"]})", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("ignored 12 ops that no output depends on: d0, d1,"));
  EXPECT_THAT(warnings[0], HasSubstr("d9 ... (2 more)"));
  EXPECT_THAT(warnings[0], ::testing::Not(HasSubstr("d10")));
}

// A 100k-op chain: parse, validate, topo order, prune and write without
// recursion on depth (a recursive walk would overflow the stack).
TEST(GraphDeep, HundredThousandOpChain) {
  constexpr int kN = 100000;
  Graph g;
  g.ops.push_back(makeOp("w", OpKind::kRecv, 8));
  for (int i = 1; i <= kN; ++i) {
    g.ops.push_back(
        makeOp("c" + std::to_string(i), OpKind::kCompute, 0, 1.0, {static_cast<OpIndex>(i - 1)}));
  }
  g.ops.push_back(makeOp("dead", OpKind::kCompute, 0, 0, {0}));
  g.outputs = {static_cast<OpIndex>(kN)};
  std::vector<std::string> warnings;
  Graph h = parseGraphJson(toJson(g), &warnings);
  ASSERT_EQ(h.ops.size(), static_cast<size_t>(kN) + 1);
  EXPECT_THAT(warnings, ElementsAre("ignored 1 op that no output depends on: dead"));
  std::vector<OpIndex> order = h.topoOrder();
  ASSERT_EQ(order.size(), h.ops.size());
  size_t in_place = 0;
  for (size_t i = 0; i < order.size(); ++i) in_place += order[i] == i ? 1 : 0;
  EXPECT_EQ(in_place, order.size());  // a chain has exactly one order
}

TEST(GraphValidate, CodeBuiltGraphs) {
  Graph g;
  g.ops.push_back(makeOp("w", OpKind::kRecv, 1));
  g.ops.push_back(makeOp("c", OpKind::kCompute, 0, 1, {0}));
  g.outputs = {1};
  EXPECT_NO_THROW(validate(g));
  Graph bad_index = g;
  bad_index.ops[1].inputs = {7};
  EXPECT_THROW(validate(bad_index), InputError);
  EXPECT_THROW(bad_index.topoOrder(), InputError);
  Graph bad_output = g;
  bad_output.outputs = {2};
  EXPECT_THROW(validate(bad_output), InputError);
  Graph nan_time = g;
  nan_time.ops[1].time_us = std::numeric_limits<double>::quiet_NaN();
  try {
    validate(nan_time);
    FAIL() << "NaN time accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"c\""));
    EXPECT_THAT(e.what(), HasSubstr("time_us"));
  }
  Graph cyclic = g;
  cyclic.ops[1].inputs = {0, 1};
  EXPECT_THROW(cyclic.topoOrder(), InputError);
}

TEST(GraphLoad, FileErrors) {
  try {
    loadGraph(kDataDir + "does-not-exist.json");
    FAIL() << "missing file accepted";
  } catch (const InputError&) {
    FAIL() << "a missing file is an I/O failure (exit 1), not bad input";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("does-not-exist.json"));
    EXPECT_THAT(e.what(), HasSubstr("No such file"));
  }
  try {
    loadGraph(kDataDir + "tiny.txt");
    FAIL() << "unknown extension accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("tiny.txt"));
    EXPECT_THAT(e.what(), HasSubstr("extension"));
  }
}

void writeFile(const std::string& path, const char* text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fputs(text, f);
  std::fclose(f);
}

TEST(GraphLoad, DispatchesOnExtension) {
  // ".onnx" goes to the ONNX loader, which rejects text as bad input (in
  // builds with and without ONNX support); the extension is case-insensitive.
  const std::string onnx = std::string(TICTAC_BUILD_ROOT) + "/graph_test_not_a_model.onnx";
  writeFile(onnx, R"({"ops": []})");
  try {
    loadGraph(onnx);
    ADD_FAILURE() << "text accepted as an ONNX model";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(onnx));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("no ops")));  // not the JSON parser
  }
  std::remove(onnx.c_str());
  const std::string upper = std::string(TICTAC_BUILD_ROOT) + "/graph_test_upper.JSON";
  writeFile(upper, R"({"ops": [{"name": "w", "kind": "recv", "bytes": 1}]})");
  EXPECT_EQ(loadGraph(upper).ops.size(), 1u);
  std::remove(upper.c_str());
}

TEST(GraphLoad, NameDefaultsToFileStem) {
  const std::string path = std::string(TICTAC_BUILD_ROOT) + "/graph_test_unnamed.json";
  writeFile(path, R"({"ops": [{"name": "w", "kind": "recv", "bytes": 1}, {"name": "c",
    "kind": "compute", "inputs": ["w"]}]})");
  EXPECT_EQ(loadGraph(path).name, "graph_test_unnamed");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tictac::sched
