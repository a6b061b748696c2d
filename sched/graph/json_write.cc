// sched/graph/json_write.cc: writes the JSON interchange format, one op per
// line. parseGraphJson(toJson(g)) gives back g (same ops, order, times,
// has_time flags and outputs).
#include <nlohmann/json.hpp>

#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace {

using nlohmann::json;

std::string dumpOne(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json opJson(const Graph& g, const Op& op) {
  json j = json::object();
  j["name"] = op.name;
  j["kind"] = op.kind == OpKind::kRecv ? "recv" : "compute";
  if (op.kind == OpKind::kRecv) j["bytes"] = op.bytes;
  if (op.has_time) j["time_us"] = op.time_us;
  if (op.kind == OpKind::kCompute) {
    json in = json::array();
    for (OpIndex i : op.inputs) in.push_back(g.ops.at(i).name);
    j["inputs"] = std::move(in);
  }
  return j;
}

}  // namespace

std::string toJson(const Graph& g) {
  // nlohmann::json objects sort their keys; write the top level by hand so
  // "name" comes first and each op gets its own line.
  std::string out = "{\"name\": " + dumpOne(json(g.name)) + ",\n \"ops\": [";
  for (size_t i = 0; i < g.ops.size(); ++i) {
    out += i == 0 ? "\n  " : ",\n  ";
    out += dumpOne(opJson(g, g.ops[i]));
  }
  json outputs = json::array();
  for (OpIndex o : g.outputs) outputs.push_back(g.ops.at(o).name);
  out += "],\n \"outputs\": " + dumpOne(outputs) + "}\n";
  return out;
}

}  // namespace tictac::sched
