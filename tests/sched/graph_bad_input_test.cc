// Every rejection of the JSON interchange format: each input must throw
// InputError (tools exit 2) whose message names the op or field and the
// problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "tictac/sched/graph.h"
#include "tictac/sched/sim.h"

namespace tictac::sched {
namespace {

using ::testing::HasSubstr;

// A valid graph around one op under test: `extra_ops` is spliced into the op
// list after a recv "w" and a compute "c" reading it.
std::string withOps(const std::string& extra_ops, const std::string& tail = "") {
  return R"({"name": "g", "ops": [{"name": "w", "kind": "recv", "bytes": 8},
    {"name": "c", "kind": "compute", "time_us": 1, "inputs": ["w"]})" +
         (extra_ops.empty() ? "" : ", " + extra_ops) + "]" + tail + "}";
}

void expectRejected(const std::string& text, std::initializer_list<std::string_view> needles) {
  try {
    parseGraphJson(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    for (std::string_view n : needles) EXPECT_THAT(e.what(), HasSubstr(std::string(n)));
  }
}

TEST(GraphBadInput, BaselineIsAccepted) {
  EXPECT_NO_THROW(parseGraphJson(withOps("")));
}

TEST(GraphBadInput, NotJson) {
  expectRejected("this is not json", {"not JSON"});
  expectRejected("", {"not JSON", "empty"});
  expectRejected(withOps("") + " trailing", {"not JSON"});
}

TEST(GraphBadInput, Truncated) {
  const std::string full = withOps("");
  expectRejected(full.substr(0, full.size() / 2), {"truncated"});
  expectRejected(full.substr(0, full.size() - 1), {"truncated"});
}

TEST(GraphBadInput, UnknownKind) {
  expectRejected(withOps(R"({"name": "s", "kind": "send", "inputs": ["c"]})"),
                 {"\"s\"", "unknown kind", "\"send\""});
}

TEST(GraphBadInput, Cycle) {
  expectRejected(withOps(R"({"name": "a", "kind": "compute", "inputs": ["b", "c"]},
                            {"name": "b", "kind": "compute", "inputs": ["a"]})"),
                 {"cycle", "\"a\" -> \"b\" -> \"a\""});
  expectRejected(withOps(R"({"name": "self", "kind": "compute", "inputs": ["self"]})"),
                 {"cycle", "\"self\" -> \"self\""});
}

TEST(GraphBadInput, CycleWithoutAnySink) {
  // Every op is on or behind the cycle, so there is no sink to default to.
  expectRejected(R"({"ops": [{"name": "w", "kind": "recv", "bytes": 1},
    {"name": "a", "kind": "compute", "inputs": ["w", "b"]},
    {"name": "b", "kind": "compute", "inputs": ["a"]}]})",
                 {"cycle", "\"a\"", "\"b\""});
}

TEST(GraphBadInput, LongCycleIsFoundWithoutRecursion) {
  // c0 reads c99999, every other ci reads c(i-1): one 100k-op cycle.
  std::string ops;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    ops += R"(, {"name": "c)" + std::to_string(i) + R"(", "kind": "compute", "inputs": ["c)" +
           std::to_string(i == 0 ? kN - 1 : i - 1) + "\"]}";
  }
  expectRejected(withOps(ops.substr(2)), {"cycle", "\"c0\" -> \"c1\"", "(99980 more)"});
}

TEST(GraphBadInput, UnknownInput) {
  expectRejected(withOps(R"({"name": "d", "kind": "compute", "inputs": ["c", "ghost"]})"),
                 {"\"d\"", "unknown input", "\"ghost\""});
}

TEST(GraphBadInput, UnknownOutput) {
  expectRejected(withOps("", R"(, "outputs": ["c", "ghost"])"), {"output", "\"ghost\""});
}

TEST(GraphBadInput, DuplicateName) {
  expectRejected(withOps(R"({"name": "c", "kind": "compute", "inputs": ["w"]})"),
                 {"duplicate", "\"c\"", "#1", "#2"});
}

TEST(GraphBadInput, DuplicateKey) {
  // Readers disagree on which of two equal keys wins: refused, by key.
  expectRejected(withOps(R"({"name": "d", "kind": "compute", "kind": "recv", "bytes": 1})"),
                 {"duplicate key", "\"kind\""});
  expectRejected(withOps("", R"(, "ops": [])"), {"duplicate key", "\"ops\""});
}

TEST(GraphBadInput, RecvWithInputs) {
  expectRejected(withOps(R"({"name": "w2", "kind": "recv", "bytes": 1, "inputs": ["c"]})"),
                 {"\"w2\"", "recv", "inputs"});
}

TEST(GraphBadInput, BadBytes) {
  const char* kCases[][2] = {
      {R"("bytes": -1)", ">= 0"},
      {R"("bytes": -1.0)", ">= 0"},
      {R"("bytes": 1.5)", "integer"},
      {R"("bytes": "12")", "integer"},
      {R"("bytes": true)", "integer"},
      {R"("bytes": null)", "integer"},
      {R"("bytes": 9007199254740993)", "2^53"},
      {R"("bytes": 18446744073709551615)", "2^53"},
      {R"("bytes": 1e30)", "2^53"},
      {R"("time_us": 1)", "needs \"bytes\""},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c[0]);
    expectRejected(withOps(std::string(R"({"name": "w2", "kind": "recv", )") + c[0] + "}"),
                   {"\"w2\"", "bytes", c[1]});
  }
}

TEST(GraphBadInput, BadTime) {
  const char* kCases[][2] = {
      {R"("time_us": -0.5)", ">= 0"},
      {R"("time_us": "NaN")", "must be a number"},
      {R"("time_us": "1.0")", "must be a number"},
      {R"("time_us": null)", "must be a number"},
      {R"("time_us": [1])", "must be a number"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c[0]);
    expectRejected(withOps(std::string(R"({"name": "t", "kind": "compute", )") + c[0] + "}"),
                   {"\"t\"", "time_us", c[1]});
    expectRejected(
        withOps(std::string(R"({"name": "t", "kind": "recv", "bytes": 1, )") + c[0] + "}"),
        {"\"t\"", "time_us", c[1]});
  }
  // A number beyond double range cannot be read at all.
  expectRejected(withOps(R"({"name": "t", "kind": "compute", "time_us": 1e400})"),
                 {"not JSON", "1e400"});
  // JSON has no NaN literal: a bare NaN is not JSON at all.
  expectRejected(withOps(R"({"name": "t", "kind": "compute", "time_us": NaN})"), {"not JSON"});
}

TEST(GraphBadInput, EmptyOutputs) {
  expectRejected(withOps("", R"(, "outputs": [])"), {"\"outputs\"", "empty"});
}

TEST(GraphBadInput, NoOps) {
  expectRejected(R"({"name": "g", "ops": []})", {"no ops"});
  expectRejected(R"({"name": "g"})", {"missing \"ops\""});
}

TEST(GraphBadInput, NoRecvs) {
  expectRejected(R"({"ops": [{"name": "a", "kind": "compute"},
    {"name": "b", "kind": "compute", "inputs": ["a"]}]})",
                 {"no recv"});
}

TEST(GraphBadInput, NoRecvsAfterPruning) {
  expectRejected(withOps(R"({"name": "x", "kind": "compute"})", R"(, "outputs": ["x"])"),
                 {"no recv op that an output depends on"});
}

TEST(GraphBadInput, TabOrNewlineInNames) {
  expectRejected(withOps(R"({"name": "a\tb", "kind": "compute", "inputs": ["c"]})"),
                 {"\"a\\tb\"", "tab"});
  expectRejected(withOps(R"({"name": "a\nb", "kind": "compute", "inputs": ["c"]})"),
                 {"\"a\\nb\"", "newline"});
  expectRejected(withOps(R"({"name": "a\rb", "kind": "compute", "inputs": ["c"]})"),
                 {"\"a\\rb\"", "newline"});
  expectRejected(withOps(R"({"name": "d", "kind": "compute", "inputs": ["c\t"]})"),
                 {"\"d\"", "input", "\"c\\t\"", "tab"});
  expectRejected(withOps("", R"(, "outputs": ["c\n"])"), {"output", "\"c\\n\"", "newline"});
  expectRejected(R"({"name": "g\t1", "ops": [{"name": "w", "kind": "recv", "bytes": 8}]})",
                 {"graph name", "\"g\\t1\"", "tab"});
  // Any other control character too: a NUL was written raw into the TSV.
  expectRejected(withOps(R"({"name": "a\u0000b", "kind": "compute", "inputs": ["c"]})"),
                 {"control character"});
  expectRejected(withOps(R"({"name": "a\u001b[31m", "kind": "compute", "inputs": ["c"]})"),
                 {"control character"});
  expectRejected(R"({"name": "g\u007f", "ops": [{"name": "w", "kind": "recv", "bytes": 8}]})",
                 {"graph name", "control character"});
}

TEST(GraphBadInput, EmptyName) {
  expectRejected(withOps(R"({"name": "", "kind": "compute"})"), {"op #2", "empty name"});
}

TEST(GraphBadInput, WrongJsonTypes) {
  expectRejected(R"([{"name": "w", "kind": "recv", "bytes": 1}])", {"top level", "object"});
  expectRejected(R"({"ops": {"name": "w"}})", {"\"ops\"", "array"});
  expectRejected(R"({"name": 5, "ops": []})", {"graph name", "string"});
  expectRejected(withOps(R"(["d", "compute"])"), {"op #2", "not an object"});
  expectRejected(withOps(R"({"kind": "compute"})"), {"op #2", "no \"name\""});
  expectRejected(withOps(R"({"name": 7, "kind": "compute"})"), {"op #2", "name", "string"});
  expectRejected(withOps(R"({"name": "d", "kind": 1})"), {"\"d\"", "kind", "string"});
  expectRejected(withOps(R"({"name": "d"})"), {"\"d\"", "missing \"kind\""});
  expectRejected(withOps(R"({"name": "d", "kind": "compute", "inputs": "c"})"),
                 {"\"d\"", "inputs", "array"});
  expectRejected(withOps(R"({"name": "d", "kind": "compute", "inputs": ["c", 3]})"),
                 {"\"d\"", "inputs[1]", "string"});
  expectRejected(withOps("", R"(, "outputs": "c")"), {"\"outputs\"", "array"});
  expectRejected(withOps("", R"(, "outputs": [["c"]])"), {"outputs[0]", "string"});
}

TEST(GraphBadInput, DeeplyNestedJsonDoesNotCrash) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expectRejected(deep, {"top level"});
  expectRejected(R"({"ops": )" + deep + "}", {"op #0", "not an object"});
}

TEST(GraphBadInput, LoadGraphNamesTheFile) {
  const std::string path = std::string(TICTAC_BUILD_ROOT) + "/graph_bad_input_test.json";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(R"({"ops": [{"name": "w", "kind": "recv", "bytes": -3}]})", f);
  std::fclose(f);
  try {
    loadGraph(path);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("graph_bad_input_test.json: op \"w\""));
  }
  std::remove(path.c_str());
}

// A device never ends (/dev/zero, /dev/urandom): graph, timing and order
// files that are devices are refused by name before anything is read.
TEST(GraphBadInput, DevicesAreRefused) {
  const std::string link = std::string(TICTAC_BUILD_ROOT) + "/graph_bad_input_zero.json";
  std::remove(link.c_str());
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  try {
    loadGraph(link);
    ADD_FAILURE() << "accepted /dev/zero";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("graph_bad_input_zero.json: is a device, not a file"));
  }
  std::remove(link.c_str());
  const Graph g = parseGraphJson(withOps(""));
  try {
    loadOrderFile(g, "/dev/urandom");
    ADD_FAILURE() << "accepted /dev/urandom as an order file";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/dev/urandom: is a device"));
  }
}

}  // namespace
}  // namespace tictac::sched
