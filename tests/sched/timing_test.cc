// Unit tests of the Chrome trace-event timing loader (tictac/sched/timing.h).
#include "tictac/sched/timing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kDataDir = std::string(TICTAC_SOURCE_ROOT) + "/tests/data/graphs/";

Graph tiny() {
  return loadGraph(kDataDir + "tiny.json");
}

std::string x(const std::string& name, double ts, double dur, int tid = 1) {
  return R"({"name": ")" + name + R"(", "ph": "X", "pid": 7, "tid": )" + std::to_string(tid) +
         R"(, "ts": )" + std::to_string(ts) + R"(, "dur": )" + std::to_string(dur) + "}";
}

TEST(Timing, ArrayFormFromFile) {
  Graph g = tiny();
  TimingStats s = loadTimingTrace(g, kDataDir + "tiny_trace.json");
  // conv1 700 (its nested aten::conv2d is not added), fc 35.5; x untouched.
  EXPECT_DOUBLE_EQ(g.ops[2].time_us, 700.0);
  EXPECT_DOUBLE_EQ(g.ops[3].time_us, 35.5);
  EXPECT_TRUE(g.ops[3].has_time);
  EXPECT_EQ(g.ops[1].time_us, 0.0);
  EXPECT_FALSE(g.ops[0].has_time);
  EXPECT_EQ(s.matched_ops, 2u);
  EXPECT_EQ(s.unmatched_names, 2u);
  EXPECT_THAT(s.unmatched, ElementsAre("aten::conv2d", "aten::linear"));
  EXPECT_EQ(s.events_used, 4u);  // the instant event is skipped
  EXPECT_EQ(s.summary(), "timing: 2 ops matched, 2 event names unmatched");
}

TEST(Timing, ObjectFormAndRecvTimes) {
  Graph g = tiny();
  TimingStats s = applyTimingTrace(g, R"({"displayTimeUnit": "ms", "traceEvents": [)" +
                                          x("conv1.weight", 0, 12.5) + ", " + x("x", 20, 3) +
                                          R"(, {"name": "x", "ph": "B", "ts": 1}]})");
  EXPECT_DOUBLE_EQ(g.ops[0].time_us, 12.5);
  EXPECT_TRUE(g.ops[0].has_time);
  EXPECT_DOUBLE_EQ(g.ops[1].time_us, 3.0);
  EXPECT_DOUBLE_EQ(g.ops[2].time_us, 812.5);  // not in the trace: unchanged
  EXPECT_EQ(s.matched_ops, 2u);
  EXPECT_EQ(s.unmatched_names, 0u);
}

TEST(Timing, RepeatsAreSummed) {
  Graph g = tiny();
  TimingStats s = applyTimingTrace(
      g, "[" + x("fc", 0, 10) + "," + x("fc", 100, 12) + "," + x("fc", 50, 5, /*tid=*/2) + "]");
  EXPECT_DOUBLE_EQ(g.ops[3].time_us, 27.0);
  EXPECT_EQ(s.matched_ops, 1u);
  EXPECT_EQ(s.events_used, 3u);
}

TEST(Timing, NestedEventsAreNotAddedToParents) {
  Graph g = tiny();
  // conv1 [0, 100) holds fc [10, 30) and x [30, 40) on the same thread. Each
  // keeps its own dur: conv1 100 (not 100 + 20 + 10), fc 20, x 10.
  applyTimingTrace(g,
                   "[" + x("x", 30, 10) + "," + x("conv1", 0, 100) + "," + x("fc", 10, 20) + "]");
  EXPECT_DOUBLE_EQ(g.ops[2].time_us, 100.0);
  EXPECT_DOUBLE_EQ(g.ops[3].time_us, 20.0);
  EXPECT_DOUBLE_EQ(g.ops[1].time_us, 10.0);
}

TEST(Timing, SameNameNestedInsideItselfCountsOnce) {
  Graph g = tiny();
  // fc [0, 50) contains another fc [5, 25) (a recursively labelled region),
  // then a separate fc [60, 70) afterwards: 50 + 10.
  TimingStats s = applyTimingTrace(
      g, "[" + x("fc", 0, 50) + "," + x("fc", 5, 20) + "," + x("fc", 60, 10) + "]");
  EXPECT_DOUBLE_EQ(g.ops[3].time_us, 60.0);
  EXPECT_EQ(s.events_used, 2u);
}

TEST(Timing, OtherThreadsAreNotNested) {
  Graph g = tiny();
  // fc on tid 2 overlaps fc on tid 1 in time but is a separate execution.
  applyTimingTrace(g, "[" + x("fc", 0, 50) + "," + x("fc", 5, 20, 2) + "]");
  EXPECT_DOUBLE_EQ(g.ops[3].time_us, 70.0);
}

TEST(Timing, AdjacentEventsAreNotNested) {
  Graph g = tiny();
  // fc [0, 10) ends where the next fc starts: two repeats, summed.
  applyTimingTrace(g, "[" + x("fc", 0, 10) + "," + x("fc", 10, 10) + "]");
  EXPECT_DOUBLE_EQ(g.ops[3].time_us, 20.0);
}

TEST(Timing, MissingClosingBracketIsTolerated) {
  Graph g = tiny();
  TimingStats s = applyTimingTrace(g, "[" + x("fc", 0, 4) + ",\n");
  EXPECT_DOUBLE_EQ(g.ops[3].time_us, 4.0);
  EXPECT_EQ(s.matched_ops, 1u);
}

void expectBadTrace(const std::string& text, std::initializer_list<std::string_view> needles) {
  Graph g = tiny();
  const std::string before = toJson(g);
  try {
    applyTimingTrace(g, text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    for (std::string_view n : needles) EXPECT_THAT(e.what(), HasSubstr(std::string(n)));
  }
  EXPECT_EQ(toJson(g), before) << "graph changed by a rejected trace";
}

TEST(Timing, MalformedTraces) {
  expectBadTrace("", {"empty"});
  expectBadTrace("not json", {"not JSON"});
  expectBadTrace(R"({"traceEvents": [)" + x("fc", 0, 1), {"truncated"});
  expectBadTrace("[" + x("fc", 0, 1).substr(0, 20), {"truncated"});
  expectBadTrace("42", {"top level"});
  expectBadTrace(R"({"events": []})", {"traceEvents"});
  expectBadTrace(R"({"traceEvents": {}})", {"traceEvents", "array"});
  expectBadTrace("[" + x("fc", 0, 1) + ", 3]", {"event #1", "not an object"});
  expectBadTrace(R"([{"name": "fc", "ph": "X", "ts": 0}])", {"event #0", "\"dur\""});
  expectBadTrace(R"([{"name": "fc", "ph": "X", "dur": 1}])", {"event #0", "\"ts\""});
  expectBadTrace(R"([{"name": "fc", "ph": "X", "ts": 0, "dur": "5"}])",
                 {"event #0", "\"dur\"", "number"});
  expectBadTrace(R"([{"name": "fc", "ph": "X", "ts": 0, "dur": -5}])",
                 {"event #0", "negative", "\"fc\""});
  expectBadTrace(R"([{"ph": "X", "ts": 0, "dur": 5}])", {"event #0", "\"name\""});
  expectBadTrace(R"([{"name": 3, "ph": "X", "ts": 0, "dur": 5}])", {"event #0", "\"name\""});
  // A valid event before the bad one must not leak into the graph.
  expectBadTrace("[" + x("fc", 0, 1) + R"(, {"name": "x", "ph": "X", "ts": 0}])", {"event #1"});
}

TEST(Timing, FileErrors) {
  Graph g = tiny();
  EXPECT_THROW(loadTimingTrace(g, kDataDir + "no-such-trace.json"), std::runtime_error);
  try {
    loadTimingTrace(g, kDataDir + "tiny.json");  // a graph, not a trace
    ADD_FAILURE() << "accepted a graph file as a trace";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("tiny.json: timing trace"));
  }
}

}  // namespace
}  // namespace tictac::sched
