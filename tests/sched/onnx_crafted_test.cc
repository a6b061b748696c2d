// ONNX loader cases that no exporter writes on purpose, built with the
// protobuf API: element sizes of every kind of data type, sparse
// initializers, op naming, pruning, and the rejections.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A model with one data input "x"; tests add initializers and nodes.
onnx::ModelProto baseModel() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  m.mutable_graph()->set_name("crafted");
  m.mutable_graph()->add_input()->set_name("x");
  return m;
}

onnx::TensorProto* addInit(onnx::ModelProto& m, const std::string& name, int type,
                           std::initializer_list<int64_t> dims) {
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

onnx::NodeProto* addNode(onnx::ModelProto& m, const std::string& name, const std::string& type,
                         std::initializer_list<std::string> in,
                         std::initializer_list<std::string> out) {
  onnx::NodeProto* n = m.mutable_graph()->add_node();
  n->set_name(name);
  n->set_op_type(type);
  for (const std::string& s : in) n->add_input(s);
  for (const std::string& s : out) n->add_output(s);
  return n;
}

Graph load(const onnx::ModelProto& m, std::vector<std::string>* warnings = nullptr) {
  const std::string path = ::testing::TempDir() + "tictac_crafted.onnx";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << m.SerializeAsString();
  return loadGraph(path, warnings);
}

// `m` plus one node "use" reading `inputs` and producing the graph output.
Graph loadUsing(onnx::ModelProto m, std::initializer_list<std::string> inputs) {
  onnx::NodeProto* n = addNode(m, "use", "Sum", inputs, {"y"});
  n->add_input("x");
  m.mutable_graph()->add_output()->set_name("y");
  return load(m);
}

std::string loadError(onnx::ModelProto m) {
  m.mutable_graph()->add_output()->set_name("y");
  try {
    load(m);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(loaded)";
}

uint64_t bytesOf(const Graph& g, const std::string& name) {
  const int64_t i = g.find(name);
  EXPECT_GE(i, 0) << name;
  return i < 0 ? 0 : g.ops[static_cast<size_t>(i)].bytes;
}

TEST(OnnxCrafted, ElementSizes) {
  onnx::ModelProto m = baseModel();
  addInit(m, "f32_scalar", onnx::TensorProto::FLOAT, {});  // 1 x 4
  addInit(m, "i64", onnx::TensorProto::INT64, {3});        // 3 x 8
  addInit(m, "f16", onnx::TensorProto::FLOAT16, {5});      // 5 x 2
  addInit(m, "bool", onnx::TensorProto::BOOL, {7});        // 7 x 1
  addInit(m, "f64", onnx::TensorProto::DOUBLE, {2, 2});    // 4 x 8
  addInit(m, "c128", onnx::TensorProto::COMPLEX128, {3});  // 3 x 16
  addInit(m, "int4", 22, {3});                             // 3 x 4 bits -> 2
  addInit(m, "f8", 17, {6});                               // 6 x 1
  addInit(m, "empty", onnx::TensorProto::FLOAT, {0, 5});   // 0
  onnx::TensorProto* s = addInit(m, "str", onnx::TensorProto::STRING, {2});
  s->add_string_data("ab");
  s->add_string_data("cde");  // 2 + 3
  addInit(m, "raw", onnx::TensorProto::INT32, {2})->set_raw_data(std::string(8, '\1'));
  const Graph g = loadUsing(
      m, {"f32_scalar", "i64", "f16", "bool", "f64", "c128", "int4", "f8", "empty", "str", "raw"});
  EXPECT_EQ(bytesOf(g, "f32_scalar"), 4u);
  EXPECT_EQ(bytesOf(g, "i64"), 24u);
  EXPECT_EQ(bytesOf(g, "f16"), 10u);
  EXPECT_EQ(bytesOf(g, "bool"), 7u);
  EXPECT_EQ(bytesOf(g, "f64"), 32u);
  EXPECT_EQ(bytesOf(g, "c128"), 48u);
  EXPECT_EQ(bytesOf(g, "int4"), 2u);
  EXPECT_EQ(bytesOf(g, "f8"), 6u);
  EXPECT_EQ(bytesOf(g, "empty"), 0u);
  EXPECT_EQ(bytesOf(g, "str"), 5u);
  EXPECT_EQ(bytesOf(g, "raw"), 8u);
  EXPECT_EQ(g.recvs().size(), 11u);
}

TEST(OnnxCrafted, SparseInitializerCountsValuesAndIndices) {
  onnx::ModelProto m = baseModel();
  onnx::SparseTensorProto* sp = m.mutable_graph()->add_sparse_initializer();
  sp->add_dims(100);
  sp->mutable_values()->set_name("emb");
  sp->mutable_values()->set_data_type(onnx::TensorProto::FLOAT);
  sp->mutable_values()->add_dims(4);  // 4 x 4
  sp->mutable_indices()->set_data_type(onnx::TensorProto::INT64);
  sp->mutable_indices()->add_dims(4);  // 4 x 8
  EXPECT_EQ(bytesOf(loadUsing(m, {"emb"}), "emb"), 48u);
}

TEST(OnnxCrafted, NamesFallBackToOpTypeAndIndex) {
  onnx::ModelProto m = baseModel();
  addInit(m, "w", onnx::TensorProto::FLOAT, {2});
  addNode(m, "", "Mul", {"x", "w"}, {"a"});       // node 0: empty name
  addNode(m, "dup", "Relu", {"a"}, {"b"});        // node 1
  addNode(m, "dup", "Relu", {"b"}, {"c"});        // node 2: repeated name
  addNode(m, "w", "Neg", {"c"}, {"d"});           // node 3: taken by the initializer
  addNode(m, "", "Add", {"d", "w", "w"}, {"y"});  // node 4: reads w twice
  m.mutable_graph()->add_output()->set_name("y");
  const Graph g = load(m);
  std::vector<std::string> compute;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::kCompute) compute.push_back(op.name);
  }
  EXPECT_THAT(compute, ElementsAre("x", "Mul_0", "dup", "Relu_2", "Neg_3", "Add_4"));
  const Op& add = g.ops[static_cast<size_t>(g.find("Add_4"))];
  ASSERT_EQ(add.inputs.size(), 2u);  // an input read twice is one dependency
  EXPECT_EQ(g.ops[add.inputs[1]].name, "w");
}

TEST(OnnxCrafted, IdentityOfAnInitializerIsARecvOfTheSameBytes) {
  onnx::ModelProto m = baseModel();
  addInit(m, "w", onnx::TensorProto::FLOAT, {10});
  addNode(m, "Identity_0", "Identity", {"w"}, {"w_copy"});
  addNode(m, "copy_of_x", "Identity", {"x"}, {"x2"});  // not of an initializer
  const Graph g = loadUsing(m, {"w", "w_copy", "x2"});
  EXPECT_EQ(bytesOf(g, "w_copy"), 40u);
  EXPECT_TRUE(g.isRecv(static_cast<OpIndex>(g.find("w_copy"))));
  EXPECT_FALSE(g.isRecv(static_cast<OpIndex>(g.find("copy_of_x"))));
  EXPECT_EQ(g.recvs().size(), 2u);
}

TEST(OnnxCrafted, UnusedOpsArePrunedWithAWarning) {
  onnx::ModelProto m = baseModel();
  addInit(m, "w", onnx::TensorProto::FLOAT, {1});
  addInit(m, "unused", onnx::TensorProto::FLOAT, {1});
  addNode(m, "dead", "Relu", {"x"}, {"z"});
  addNode(m, "use", "Mul", {"x", "w"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  std::vector<std::string> warnings;
  const Graph g = load(m, &warnings);
  EXPECT_EQ(g.ops.size(), 3u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("unused"));
  EXPECT_THAT(warnings[0], HasSubstr("dead"));
}

TEST(OnnxCrafted, Rejections) {
  struct Case {
    const char* what;
    onnx::ModelProto model;
    const char* message;
  };
  std::vector<Case> cases;
  auto with = [](auto edit) {
    onnx::ModelProto m = baseModel();
    edit(m);
    return m;
  };
  cases.push_back({"unknown type", with([](auto& m) {
                     addInit(m, "w", 99, {1});
                     addNode(m, "n", "Mul", {"x", "w"}, {"y"});
                   }),
                   "unknown data type 99"});
  cases.push_back({"undefined type", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::UNDEFINED, {1});
                     addNode(m, "n", "Mul", {"x", "w"}, {"y"});
                   }),
                   "undefined"});
  cases.push_back({"negative dim", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::FLOAT, {2, -3});
                     addNode(m, "n", "Mul", {"x", "w"}, {"y"});
                   }),
                   "negative dimension"});
  cases.push_back({"huge", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::DOUBLE, {1LL << 40, 1LL << 30});
                     addNode(m, "n", "Mul", {"x", "w"}, {"y"});
                   }),
                   "overflows"});
  cases.push_back({"raw_data", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::FLOAT, {4})->set_raw_data("abc");
                     addNode(m, "n", "Mul", {"x", "w"}, {"y"});
                   }),
                   "raw_data holds 3 bytes"});
  cases.push_back({"unknown value", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::FLOAT, {1});
                     addNode(m, "n", "Mul", {"x", "nowhere"}, {"y"});
                   }),
                   "\"nowhere\""});
  cases.push_back({"produced twice", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::FLOAT, {1});
                     addNode(m, "a", "Mul", {"x", "w"}, {"y"});
                     addNode(m, "b", "Relu", {"x"}, {"y"});
                   }),
                   "produced twice"});
  cases.push_back({"duplicate initializer", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::FLOAT, {1});
                     addInit(m, "w", onnx::TensorProto::FLOAT, {1});
                     addNode(m, "n", "Mul", {"x", "w"}, {"y"});
                   }),
                   "defined twice"});
  cases.push_back(
      {"no initializer", with([](auto& m) { addNode(m, "n", "Relu", {"x"}, {"y"}); }), "recv"});
  cases.push_back({"output is a Constant", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::FLOAT, {1});
                     addNode(m, "c", "Constant", {}, {"y"});
                   }),
                   "Constant"});
  cases.push_back({"cycle", with([](auto& m) {
                     addInit(m, "w", onnx::TensorProto::FLOAT, {1});
                     addNode(m, "a", "Mul", {"b_out", "w"}, {"y"});
                     addNode(m, "b", "Relu", {"y"}, {"b_out"});
                   }),
                   "cycle"});
  cases.push_back({"no opset", with([](auto& m) {
                     m.clear_opset_import();
                     addInit(m, "w", onnx::TensorProto::FLOAT, {1});
                     addNode(m, "n", "Mul", {"x", "w"}, {"y"});
                   }),
                   "opset_import"});
  for (Case& c : cases) {
    EXPECT_THAT(loadError(c.model), HasSubstr(c.message)) << c.what;
  }
}

}  // namespace
}  // namespace tictac::sched
