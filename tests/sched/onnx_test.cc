// Loading ONNX files exported by tools/export-torch-dag (tests/data/onnx/):
// the mapping of initializers, Identity copies, Constants and graph inputs,
// and rejection of corrupt or truncated files.
//
// tiny.onnx is `tools/export-torch-dag tiny --onnx tiny.onnx` (torch 1.13,
// opset 13): conv(3->4, 3x3)+BatchNorm (folded into the Conv), ReLU, x 2.0 (a
// Constant), mean, then fc1 and fc2 (4->8, equal weights, so the exporter
// keeps fc1's initializers and re-creates fc2's with two Identity nodes),
// add, head (8->2). tiny_inputs.onnx is the same with
// --keep-initializers-as-inputs (initializers also listed as graph inputs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

const std::string kOnnxDir = std::string(TICTAC_SOURCE_ROOT) + "/tests/data/onnx/";

#ifdef TICTAC_TEST_ONNX

std::map<std::string, uint64_t> recvBytes(const Graph& g) {
  std::map<std::string, uint64_t> out;
  for (OpIndex r : g.recvs()) out[g.ops[r].name] = g.ops[r].bytes;
  return out;
}

std::vector<std::string> inputNames(const Graph& g, const std::string& op) {
  const int64_t i = g.find(op);
  EXPECT_GE(i, 0) << op;
  std::vector<std::string> out;
  if (i < 0) return out;
  for (OpIndex in : g.ops[static_cast<size_t>(i)].inputs) out.push_back(g.ops[in].name);
  return out;
}

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string writeTemp(const std::string& name, const std::string& bytes) {
  std::string path = ::testing::TempDir() + "tictac_onnx_" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

// Element counts x 4 bytes (float32): conv 4x3x3x3 = 108, conv bias 4,
// fc1 8x4 = 32 and 8, head 2x8 = 16 and 2; fc2's pair repeats fc1's sizes.
// BatchNorm's weight and bias are folded into the Conv's initializers.
const std::map<std::string, uint64_t> kTinyRecvs = {
    {"onnx::Conv_25", 432}, {"onnx::Conv_26", 16}, {"fc1.weight", 128}, {"fc1.bias", 32},
    {"fc2.weight", 128},    {"fc2.bias", 32},      {"head.weight", 64}, {"head.bias", 8}};

void expectTinyGraph(const Graph& g) {
  EXPECT_EQ(recvBytes(g), kTinyRecvs);
  std::vector<std::string> compute;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::kCompute) compute.push_back(op.name);
  }
  // Node names as exported; the Constant is folded away and `input` (the
  // data) is a source of time 0.
  EXPECT_THAT(compute, UnorderedElementsAre("input", "/conv/Conv", "/Relu", "/Mul", "/ReduceMean",
                                            "/fc1/Gemm", "/fc2/Gemm", "/Add", "/head/Gemm"));
  EXPECT_THAT(inputNames(g, "input"), ElementsAre());
  EXPECT_THAT(inputNames(g, "/conv/Conv"), ElementsAre("input", "onnx::Conv_25", "onnx::Conv_26"));
  EXPECT_THAT(inputNames(g, "/Mul"), ElementsAre("/Relu"));
  // The Identity copies behave as their own parameters: fc2 reads them.
  EXPECT_THAT(inputNames(g, "/fc2/Gemm"), ElementsAre("/ReduceMean", "fc2.weight", "fc2.bias"));
  EXPECT_THAT(inputNames(g, "/fc1/Gemm"), ElementsAre("/ReduceMean", "fc1.weight", "fc1.bias"));
  EXPECT_LT(g.find("/Constant"), 0);
  EXPECT_LT(g.find("Identity_0"), 0);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.ops[g.outputs[0]].name, "/head/Gemm");
  for (const Op& op : g.ops) EXPECT_FALSE(op.has_time) << op.name;
}

TEST(OnnxLoader, TinyModel) {
  std::vector<std::string> warnings;
  const Graph g = loadGraph(kOnnxDir + "tiny.onnx", &warnings);
  expectTinyGraph(g);
  EXPECT_THAT(warnings, ElementsAre());
  EXPECT_EQ(g.name, "tiny");
}

TEST(OnnxLoader, InitializersListedAsInputsAreNotInputs) {
  std::vector<std::string> warnings;
  const Graph g = loadGraph(kOnnxDir + "tiny_inputs.onnx", &warnings);
  expectTinyGraph(g);
  EXPECT_EQ(g.ops.size(), loadGraph(kOnnxDir + "tiny.onnx").ops.size());
  EXPECT_THAT(warnings, ElementsAre());
}

TEST(OnnxLoader, EveryStrictPrefixIsRejected) {
  const std::string bytes = readBytes(kOnnxDir + "tiny.onnx");
  ASSERT_GT(bytes.size(), 1000u);
  // Cutting inside a nested message fails to parse; cutting at a top-level
  // field boundary leaves the model without its graph or opset_import. Every
  // length near both ends (the header fields and opset_import), and every
  // 16th in between.
  for (size_t n = 0; n < bytes.size(); n += (n < 64 || n + 64 >= bytes.size()) ? 1 : 16) {
    const std::string path = writeTemp("prefix.onnx", bytes.substr(0, n));
    try {
      loadGraph(path);
      ADD_FAILURE() << "a " << n << "-byte prefix loaded";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(path)) << n;
    }
  }
}

TEST(OnnxLoader, CorruptFilesAreRejected) {
  std::string bad_tag = readBytes(kOnnxDir + "tiny.onnx");
  bad_tag[0] = static_cast<char>(0xff);  // wire type 7 does not exist
  std::string noise(4096, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (char& c : noise) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"text.onnx", "this is not an ONNX model\n"},
      {"json.onnx", R"({"name": "tiny", "ops": []})"},
      {"badtag.onnx", bad_tag},
      {"noise.onnx", noise},
      {"empty.onnx", ""}};
  for (const auto& [name, bytes] : cases) {
    const std::string path = writeTemp(name, bytes);
    try {
      loadGraph(path);
      ADD_FAILURE() << name << " loaded";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(path)) << name;
    }
  }
}

TEST(OnnxLoader, MissingFileIsAnIoError) {
  const std::string path = kOnnxDir + "no-such-model.onnx";
  try {
    loadGraph(path);
    ADD_FAILURE() << "loaded a missing file";
  } catch (const InputError&) {
    ADD_FAILURE() << "a missing file is an I/O error (exit 1), not bad input";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
}

#else  // !TICTAC_TEST_ONNX

TEST(OnnxLoader, DisabledBuildSaysSo) {
  try {
    loadGraph(kOnnxDir + "tiny.onnx");
    ADD_FAILURE() << "loaded an ONNX model without ONNX support";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no ONNX support"));
    EXPECT_THAT(e.what(), HasSubstr("tiny.onnx"));
  }
}

#endif  // TICTAC_TEST_ONNX

}  // namespace
}  // namespace tictac::sched
