// tests/ps/schedule_hints_test.cc: the in-process hint provider built from an
// analyzer's schedule (bridge/schedule_hints.cc), on its own and inside a
// transport context: sends without a priority must carry the schedule's.
#include "tictac/schedule_hints.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "tictac/transport/context.h"

namespace {

using tictac::makeScheduleHints;
using tictac::ScheduleHintProvider;
using namespace tictac::sched;
using tictac::transport::TensorKey;

// Two parameters: a (1 MB) feeds the first op, b (8 bytes) the last one.
// fifo gives a=0, b=1 (first consumers in list order); reverse gives b=0, a=1.
Graph twoParamGraph() {
  return parseGraphJson(R"({"name":"two","ops":[
    {"name":"a","kind":"recv","bytes":1000000},
    {"name":"b","kind":"recv","bytes":8},
    {"name":"c1","kind":"compute","time_us":10,"inputs":["a"]},
    {"name":"c2","kind":"compute","time_us":10,"inputs":["c1","b"]}],
    "outputs":["c2"]})");
}

TEST(ScheduleHints, MatchesByNameThenById) {
  Graph g = twoParamGraph();
  auto hints = makeScheduleHints(g, "reverse");
  EXPECT_EQ(hints->algo(), "reverse");
  EXPECT_EQ(hints->size(), 2u);
  EXPECT_EQ(hints->priorityOf(TensorKey{0, 0, "b"}), 0u);
  EXPECT_EQ(hints->priorityOf(TensorKey{0, 0, "a"}), 1u);
  // Empty name: the id is the recv's op index (a = 0, b = 1).
  EXPECT_EQ(hints->priorityOf(TensorKey{static_cast<uint64_t>(g.find("a")), 3, ""}), 1u);
  EXPECT_EQ(hints->priorityOf(TensorKey{static_cast<uint64_t>(g.find("b")), 3, ""}), 0u);
  // Unknown tensors get no hint.
  EXPECT_FALSE(hints->priorityOf(TensorKey{0, 0, "c1"}).has_value());
  EXPECT_FALSE(hints->priorityOf(TensorKey{99, 0, ""}).has_value());
}

TEST(ScheduleHints, FollowsTheAnalyzer) {
  Graph g = twoParamGraph();
  auto fifo = makeScheduleHints(g, "fifo");
  EXPECT_EQ(fifo->priorityOf(TensorKey{0, 0, "a"}), 0u);
  EXPECT_EQ(fifo->priorityOf(TensorKey{0, 0, "b"}), 1u);
  // Same as the schedule object itself.
  auto tac = AnalyzerRegistry::withBuiltins().create("tac")->analyze(g, {});
  ScheduleHintProvider direct(tac);
  for (const auto& e : tac.entries) {
    EXPECT_EQ(direct.priorityOf(TensorKey{0, 0, e.name}), e.priority) << e.name;
  }
}

TEST(ScheduleHints, UnknownAlgorithmThrows) {
  Graph g = twoParamGraph();
  EXPECT_THROW(makeScheduleHints(g, "no-such-algo"), InputError);
}

// End to end: a context whose hint provider is the schedule; sends carry no
// priority, and the scheduler's per-priority counters show the schedule's.
TEST(ScheduleHints, PrioritiesReachTheScheduler) {
  using namespace tictac::transport;
  Graph g = twoParamGraph();
  ContextOptions o;
  o.backend_config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  o.progress_thread = true;
  o.job_token = 6;
  ContextOptions so = o;
  so.hints = makeScheduleHints(g, "reverse");
  auto server = Context::create(so);
  auto client = Context::create(o);
  ASSERT_TRUE(server.isOk()) << server.status().message();
  ASSERT_TRUE(client.isOk()) << client.status().message();
  auto listener = server.value()->listen(0, "127.0.0.1");
  ASSERT_TRUE(listener.isOk()) << listener.status().message();
  uint16_t port = listener.value()->port();
  std::shared_ptr<Channel> to_client;
  std::thread acceptor([&] {
    auto ch = listener.value()->accept();
    if (ch.isOk()) to_client = ch.value();
  });
  auto to_server = client.value()->connect("127.0.0.1", port);
  acceptor.join();
  ASSERT_TRUE(to_server.isOk()) << to_server.status().message();
  ASSERT_TRUE(to_client);

  std::vector<char> a_src(1000000, 'a'), b_src(8, 'b'), a_dst(a_src.size()), b_dst(8);
  auto ea = to_server.value()->expect(TensorKey{1, 0, "a"}, a_dst.data(), a_dst.size());
  auto eb = to_server.value()->expect(TensorKey{2, 0, "b"}, b_dst.data(), b_dst.size());
  ASSERT_TRUE(ea.isOk() && eb.isOk());
  auto sa = to_client->send(TensorKey{1, 0, "a"}, a_src.data(), a_src.size());
  auto sb = to_client->send(TensorKey{2, 0, "b"}, b_src.data(), b_src.size());
  ASSERT_TRUE(sa.isOk() && sb.isOk());
  for (const auto& op : {sa.value(), sb.value(), ea.value(), eb.value()}) {
    EXPECT_TRUE(op->wait(std::chrono::seconds(20)).isOk());
  }
  EXPECT_EQ(a_dst, a_src);
  EXPECT_EQ(b_dst, b_src);
  std::map<Priority, uint64_t> bytes;
  for (const auto& s : server.value()->priorityStats()) bytes[s.priority] += s.bytes_sent;
  EXPECT_EQ(bytes[0], 8u);               // b: reverse's priority 0
  EXPECT_EQ(bytes[1], 1000000u);         // a: priority 1
  EXPECT_EQ(bytes.count(1u << 31), 0u);  // nothing fell back to the default
}

}  // namespace
