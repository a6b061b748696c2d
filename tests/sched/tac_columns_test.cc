// tests/sched/tac_columns_test.cc: the column layout TAC reads its dependency
// sets in (dep_sets.h ColumnSets): every word of every group survives the
// in-place move to column blocks, across full blocks and a short last one,
// and TAC's answer on such a graph does not depend on where the bits lie;
// past its recv limit TAC refuses a graph.
// (Its speed past ~256 MB of sets, the reason for the layout, is a wall-time
// matter: docs/perf.md "Analyzer (TAC) and simulator".)
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sched/analyzers/dep_sets.h"
#include "tests/sched/analyzer_test_util.h"

namespace tictac::sched::testing {
namespace {

using analyzers::ColumnSets;
using analyzers::DepSets;
using analyzers::Word;

// `n` compute ops; op i reads a new recv and one earlier op (the previous one
// or a random one), so almost every op has its own dependency set and the
// sets are unions of random histories.
Graph randomHistories(uint32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  GraphBuilder b("histories");
  std::vector<OpIndex> computes;
  for (uint32_t i = 0; i < n; ++i) {
    OpIndex r = b.recv("p" + std::to_string(i), 1 + rng() % 5);
    if (computes.empty()) {
      computes.push_back(b.compute("c0", 1, {r}));
      continue;
    }
    OpIndex prev = rng() % 2 ? computes.back() : computes[rng() % computes.size()];
    computes.push_back(b.compute("c" + std::to_string(i), rng() % 3, {prev, r}));
  }
  // Every op an output, so that nothing is pruned.
  for (OpIndex c : computes) b.output(c);
  return b.graph();
}

TEST(TacColumns, EveryWordSurvivesTheMoveToColumnBlocks) {
  const uint32_t n = 2 * ColumnSets::kBlock + 277;  // two full blocks and a short one
  const Graph g = randomHistories(n, 7);
  const analyzers::LiveDag d = analyzers::buildLiveDag(g);
  DepSets sets(g, d, /*with_times=*/true);
  const std::vector<uint32_t>& groups = sets.computeGroups();
  ASSERT_GT(groups.size(), 2 * ColumnSets::kBlock);
  std::vector<std::vector<Word>> rows;
  for (uint32_t id = 0; id <= groups.back(); ++id)
    rows.emplace_back(sets.bits(id), sets.bits(id) + sets.numWords());
  const ColumnSets cols = sets.takeColumns();
  for (uint32_t id = 0; id < rows.size(); ++id) {
    for (size_t w = 0; w < rows[id].size(); ++w)
      ASSERT_EQ(cols.word(id, w), rows[id][w]) << "group " << id << " word " << w;
  }
  // contains() agrees with the rows bit by bit on a few groups at block edges.
  for (uint32_t id : {0u, 511u, 512u, 1023u, 1024u, static_cast<uint32_t>(rows.size() - 1)}) {
    for (uint32_t r = 0; r < sets.numRecvs(); ++r)
      ASSERT_EQ(cols.contains(id, r), ((rows[id][r / 64] >> (r % 64)) & 1u) != 0) << id << " " << r;
  }
}

// The same graph with its recvs listed first, in reverse: every recv id (bit
// position) and so every column word changes, while TAC's answer is defined
// by deps, times and names only.
Graph recvsFirstReversed(const Graph& g) {
  std::vector<OpIndex> order;
  for (OpIndex i = static_cast<OpIndex>(g.ops.size()); i-- > 0;)
    if (g.isRecv(i)) order.push_back(i);
  for (OpIndex i = 0; i < g.ops.size(); ++i)
    if (!g.isRecv(i)) order.push_back(i);
  std::vector<OpIndex> where(g.ops.size());
  for (OpIndex k = 0; k < order.size(); ++k) where[order[k]] = k;
  Graph h;
  h.name = g.name;
  for (OpIndex i : order) {
    Op op = g.ops[i];
    for (OpIndex& in : op.inputs) in = where[in];
    h.ops.push_back(std::move(op));
  }
  for (OpIndex o : g.outputs) h.outputs.push_back(where[o]);
  return h;
}

TEST(TacColumns, AnswerDoesNotDependOnWhereTheBitsLie) {
  const Graph g = randomHistories(ColumnSets::kBlock + 300, 11);
  auto tac = AnalyzerRegistry::withBuiltins().create("tac");
  const Prios want = byName(tac->analyze(g, bytesAreMicros()));
  ASSERT_EQ(want.size(), ColumnSets::kBlock + 300);
  EXPECT_EQ(byName(tac->analyze(recvsFirstReversed(g), bytesAreMicros())), want);
  std::vector<Priority> seen;  // priorities 0..R-1, each once
  for (const auto& [name, p] : want) seen.push_back(p);
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], i);
}

// TAC's time grows as the number of recvs squared: past its limit it refuses
// the graph at once, naming the count and the way out, instead of running
// for minutes (a million recvs into one op ran for over a minute before).
TEST(TacColumns, RefusesMoreRecvsThanItsLimit) {
  GraphBuilder b("fan-in");
  Graph& g = b.graph();
  Op sink;
  sink.name = "sink";
  sink.has_time = true;
  sink.time_us = 1;
  for (uint32_t i = 0; i < 100001; ++i) sink.inputs.push_back(b.recv("p" + std::to_string(i), 4));
  b.output(static_cast<OpIndex>(g.ops.size()));
  g.ops.push_back(std::move(sink));
  auto tac = AnalyzerRegistry::withBuiltins().create("tac");
  try {
    tac->analyze(g, bytesAreMicros());
    FAIL() << "tac analyzed 100001 recvs";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("100001 recvs, more than 100000"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("use tic"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tictac::sched::testing
