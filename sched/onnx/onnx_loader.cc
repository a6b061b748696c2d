// Builds a Graph from an ONNX ModelProto; the mapping is described in
// onnx_loader.h and docs/sched.md.
#include "sched/onnx/onnx_loader.h"

#include <filesystem>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "sched/graph/graph_internal.h"
#include "sched/onnx/onnx_tensor.h"

namespace tictac::sched {
namespace {

constexpr OpIndex kFolded = std::numeric_limits<OpIndex>::max();  // a Constant's output

std::string q(const std::string& s) {
  return detail::quoted(s);
}

onnx::ModelProto parseModel(const std::string& path) {
  // readFile names the path in its errors (an ifstream read of a directory
  // threw libstdc++'s "basic_filebuf::underflow error", without it).
  const std::string bytes = detail::readFile(path);
  if (bytes.empty()) throw InputError(path + ": empty file, not an ONNX model");
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw InputError(path + ": larger than 2 GiB; models with external data are not supported");
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    throw InputError(path +
                     ": not a valid ONNX model (protobuf parse failed: corrupt or truncated file)");
  }
  if (model.ir_version() <= 0 || !model.has_graph()) {
    throw InputError(path + ": not an ONNX model (" +
                     (model.ir_version() <= 0 ? "no ir_version" : "no graph") + ")");
  }
  if (model.opset_import_size() == 0) {
    throw InputError(path + ": no opset_import (truncated or not an ONNX model)");
  }
  return model;
}

// Accumulates ops and the value-name -> producing-op map while walking a model.
class Builder {
 public:
  explicit Builder(const std::string& path) : path_(path) {}

  OpIndex addOp(Op op) {
    names_.insert(op.name);
    g_.ops.push_back(std::move(op));
    return static_cast<OpIndex>(g_.ops.size() - 1);
  }
  bool taken(const std::string& name) const { return names_.count(name) != 0; }

  // `preferred` if it is non-empty and free, else `<op_type>_<index>` (with a
  // numeric suffix in the unlikely case that is taken as well).
  std::string nodeName(const std::string& preferred, const std::string& op_type, int index) {
    if (!preferred.empty() && !taken(preferred)) return preferred;
    std::string base = op_type + "_" + std::to_string(index);
    std::string name = base;
    for (int k = 2; taken(name); ++k) name = base + "_" + std::to_string(k);
    return name;
  }

  void produce(const std::string& value, OpIndex op, const std::string& by) {
    if (value.empty()) return;  // an omitted optional output
    if (!values_.emplace(value, op).second) {
      throw InputError(path_ + ": value " + q(value) + " is produced twice (again by " + by + ")");
    }
  }
  bool produced(const std::string& value) const { return values_.count(value) != 0; }
  // kFolded for a Constant's output; throws for an unknown value.
  OpIndex producer(const std::string& value, const std::string& reader) const {
    auto it = values_.find(value);
    if (it == values_.end()) {
      throw InputError(path_ + ": " + reader + " reads " + q(value) +
                       ", which no initializer, graph input or node produces");
    }
    return it->second;
  }

  Graph& graph() { return g_; }

 private:
  const std::string& path_;
  Graph g_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, OpIndex> values_;
};

// The default operator set is named "" or "ai.onnx".
bool isDefaultDomain(const onnx::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx";
}

bool isInitializerCopy(const onnx::NodeProto& n,
                       const std::unordered_map<std::string, uint64_t>& init) {
  return n.op_type() == "Identity" && isDefaultDomain(n) && n.input_size() == 1 &&
         n.output_size() == 1 && init.count(n.input(0)) != 0;
}

}  // namespace

Graph loadOnnxGraph(const std::string& path, std::vector<std::string>* warnings) {
  const onnx::ModelProto model = parseModel(path);
  const onnx::GraphProto& gp = model.graph();
  Builder b(path);
  b.graph().name = std::filesystem::path(path).stem().string();

  // Initializers (dense and sparse) -> recv ops.
  std::unordered_map<std::string, uint64_t> init_bytes;
  auto addRecv = [&](const std::string& name, uint64_t bytes, const std::string& what) {
    if (name.empty()) throw InputError(path + ": " + what + " without a name");
    if (b.taken(name)) throw InputError(path + ": " + what + " " + q(name) + " is defined twice");
    Op op;
    op.name = name;
    op.kind = OpKind::kRecv;
    op.bytes = bytes;
    b.produce(name, b.addOp(std::move(op)), what);
    init_bytes[name] = bytes;
  };
  for (const onnx::TensorProto& t : gp.initializer()) {
    addRecv(t.name(), tensorBytes(t, path + ": initializer " + q(t.name())), "initializer");
  }
  for (const onnx::SparseTensorProto& t : gp.sparse_initializer()) {
    const std::string& name = t.values().name();
    addRecv(name, sparseTensorBytes(t, path + ": sparse initializer " + q(name)),
            "sparse initializer");
  }

  // Graph inputs that are not initializers (the data) -> sources of time 0.
  for (const onnx::ValueInfoProto& v : gp.input()) {
    if (init_bytes.count(v.name()) != 0) continue;
    if (v.name().empty()) throw InputError(path + ": graph input without a name");
    if (b.taken(v.name()))
      throw InputError(path + ": graph input " + q(v.name()) + " is listed twice");
    Op op;
    op.name = v.name();
    b.produce(v.name(), b.addOp(std::move(op)), "graph input");
  }

  // Nodes: first create ops and record what each produces, then wire inputs
  // (so a node may read a value produced by a later node).
  std::vector<int64_t> node_op(gp.node_size(), -1);
  for (int i = 0; i < gp.node_size(); ++i) {
    const onnx::NodeProto& n = gp.node(i);
    const std::string label = "node " + std::to_string(i) + " (" + n.op_type() + ")";
    if (n.op_type() == "Constant" && isDefaultDomain(n)) {
      for (const std::string& out : n.output()) b.produce(out, kFolded, label);
      continue;
    }
    Op op;
    if (isInitializerCopy(n, init_bytes)) {
      // A merged duplicate parameter: the worker receives it again.
      op.name = b.nodeName(n.output(0), n.op_type(), i);
      op.kind = OpKind::kRecv;
      op.bytes = init_bytes.at(n.input(0));
    } else {
      op.name = b.nodeName(n.name(), n.op_type().empty() ? "node" : n.op_type(), i);
    }
    const OpIndex idx = b.addOp(std::move(op));
    node_op[i] = idx;
    for (const std::string& out : n.output()) b.produce(out, idx, label);
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    if (node_op[i] < 0) continue;
    Op& op = b.graph().ops[static_cast<size_t>(node_op[i])];
    if (op.kind == OpKind::kRecv) continue;
    const std::string reader = "node " + q(op.name);
    for (const std::string& in : gp.node(i).input()) {
      if (in.empty()) continue;  // an omitted optional input
      const OpIndex p = b.producer(in, reader);
      if (p == kFolded) continue;
      bool seen = false;
      for (OpIndex q : op.inputs) seen = seen || q == p;
      if (!seen) op.inputs.push_back(p);
    }
  }

  // Outputs: the producers of the graph outputs.
  Graph& g = b.graph();
  for (const onnx::ValueInfoProto& v : gp.output()) {
    const OpIndex p = b.producer(v.name(), "graph output");
    if (p == kFolded) {
      if (warnings)
        warnings->push_back(path + ": graph output " + q(v.name()) + " is a Constant; ignored");
      continue;
    }
    bool seen = false;
    for (OpIndex q : g.outputs) seen = seen || q == p;
    if (!seen) g.outputs.push_back(p);
  }
  if (gp.output_size() == 0) throw InputError(path + ": the graph has no outputs");
  if (g.outputs.empty()) throw InputError(path + ": every graph output is a Constant");

  try {
    validate(g);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  std::vector<std::string> removed = prune(g);
  if (g.recvs().empty()) {
    throw InputError(path + ": no initializer that a graph output depends on");
  }
  if (warnings != nullptr && !removed.empty()) {
    warnings->push_back(path + ": " + detail::prunedWarning(removed));
  }
  return g;
}

}  // namespace tictac::sched
