// Hand-worked graphs for tic and tac, the baselines and the registry.
// Options: bytesAreMicros(), so a recv of B bytes has M = B us; compute times
// are given in us. "S{..}" = sum of M over a group's outstanding recvs.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/sched/analyzer_test_util.h"

namespace tictac::sched::testing {
namespace {

// TIC: groups of M+ (= smallest |deps(c)| > 1 containing r).
//   g1 = (a, b)        deps {a,b}        |.| = 2
//   g2 = (g1, c)       deps {a,b,c}      |.| = 3
//   g3 = (g2, d, e)    deps {a,b,c,d,e}  |.| = 5
//   h  = (f)           deps {f}          |.| = 1, does not count
// M+: a 2, b 2, c 3, d 5, e 5, f inf -> sorted a b | c | d e | f
// priorities: 0 0 | 2 | 3 3 | 5.
// A recv "z" read only by an op no output needs is not scheduled at all.
TEST(Tic, SharedNumbersAndInfinityLast) {
  GraphBuilder b;
  auto f = b.recv("f", 1), e = b.recv("e", 1), d = b.recv("d", 1);
  auto c = b.recv("c", 1), bb = b.recv("b", 1), a = b.recv("a", 1), z = b.recv("z", 1);
  auto g1 = b.compute("g1", 0, {a, bb});
  auto g2 = b.compute("g2", 0, {g1, c});
  auto g3 = b.compute("g3", 0, {g2, d, e});
  auto h = b.compute("h", 0, {f});
  b.compute("dead", 0, {z, g3});
  b.output(g3).output(h);
  EXPECT_EQ(run("tic", b.graph()),
            (Prios{{"a", 0}, {"b", 0}, {"c", 2}, {"d", 3}, {"e", 3}, {"f", 5}}));
}

// TIC ignores sizes and times: two disjoint pairs and a join.
//   x = (p, q) {p,q} 2;  y = (r, s, t) {r,s,t} 3;  j = (x, y) {p..t} 5
// M+: p 2, q 2, r 3, s 3, t 3 -> 0 0 2 2 2, whatever the bytes.
TEST(Tic, IgnoresSizes) {
  GraphBuilder b;
  auto p = b.recv("p", 1000), q = b.recv("q", 1), r = b.recv("r", 1), s = b.recv("s", 7);
  auto t = b.recv("t", 1);
  auto x = b.compute("x", 100, {p, q});
  auto y = b.compute("y", 0, {r, s, t});
  b.output(b.compute("j", 0, {x, y}));
  EXPECT_EQ(run("tic", b.graph()), (Prios{{"p", 0}, {"q", 0}, {"r", 2}, {"s", 2}, {"t", 2}}));
}

// TAC, M < P against M >= P.
//   a M=2, b M=5, c M=3; ca=(a) 10us, cb=(b) 1us, cc=(c) 3us, out=(ca,cb,cc) 0us
// step 1, O={a,b,c}: P a=10 b=1 c=3.
//   a: 2<10 -> (0,2);  b: 5>=1 -> (1,-1);  c: 3>=3 -> (1,-3)   => a (class 0 first)
// step 2, O={b,c}: b (1,-1), c (1,-3)                          => c (larger P first)
// step 3: b.
TEST(Tac, JohnsonClasses) {
  GraphBuilder b;
  auto a = b.recv("a", 2), bb = b.recv("b", 5), c = b.recv("c", 3);
  auto ca = b.compute("ca", 10, {a}), cb = b.compute("cb", 1, {bb}), cc = b.compute("cc", 3, {c});
  b.output(b.compute("out", 0, {ca, cb, cc}));
  EXPECT_EQ(run("tac", b.graph()), (Prios{{"a", 0}, {"c", 1}, {"b", 2}}));
}

// TAC, class 0 goes by ascending M.
//   a M=3, b M=1, c M=2; ca=(a) 10, cb=(b) 10, cc=(c) 1, j=(ca,cb,cc) 0
// step 1: a (0,3), b (0,1), c 2>=1 (1,-1)  => b
// step 2: a (0,3), c (1,-1)                => a;  step 3: c.
TEST(Tac, ShortTransfersFirstWhenComputeIsLonger) {
  GraphBuilder b;
  auto a = b.recv("a", 3), bb = b.recv("b", 1), c = b.recv("c", 2);
  auto ca = b.compute("ca", 10, {a}), cb = b.compute("cb", 10, {bb}), cc = b.compute("cc", 1, {c});
  b.output(b.compute("j", 0, {ca, cb, cc}));
  EXPECT_EQ(run("tac", b.graph()), (Prios{{"b", 0}, {"a", 1}, {"c", 2}}));
}

// TAC, ties on the first key go by M+, then name; M+ = infinity comes last.
//   p, q, r M=4, s M=1, a M=1; every compute op 0 us, so every P = 0 and every
//   key is (1, 0).  u=(p,q) {p,q};  v=(r,s) {r,s};  w=(u,v) {p,q,r,s};  x=(a) {a}
// step 1: M+ p=min(S{p,q}=8, S{pqrs}=13)=8, q=8, r=min(S{r,s}=5,13)=5, s=5,
//         a=inf (its only group has 1 recv)                  => r (5; r < s by name)
// step 2: {r,s} now has 1 outstanding (no longer counts); S{pqrs}=9.
//         M+ p=8, q=8, s=9, a=inf                           => p (8; p < q)
// step 3: {p,q} has 1; S{pqrs}=5. M+ q=5, s=5, a=inf        => q (q < s)
// step 4: {pqrs} has 1 (s): nothing with count > 1 left: s=inf, a=inf => a (name)
// step 5: s.
TEST(Tac, TiesByMplusThenName) {
  GraphBuilder b;
  auto p = b.recv("p", 4), q = b.recv("q", 4), r = b.recv("r", 4), s = b.recv("s", 1);
  auto a = b.recv("a", 1);
  auto u = b.compute("u", 0, {p, q}), v = b.compute("v", 0, {r, s});
  b.output(b.compute("w", 0, {u, v})).output(b.compute("x", 0, {a}));
  EXPECT_EQ(run("tac", b.graph()), (Prios{{"r", 0}, {"p", 1}, {"q", 2}, {"a", 3}, {"s", 4}}));
}

// TAC, P grows when a group falls to one outstanding recv.
//   z M=5, y M=1, a M=4;  x=(z,y) 10us {z,y};  o=(x,a) 2us {z,y,a}
// step 1: all P=0, keys (1,0). M+ z=min(6,10)=6, y=6, a=10   => y (6; y < z)
// step 2: {z,y} has 1 left (z): P(z)=10. S{zya}=9.
//         z: 5<10 -> (0,5); a: (1,0)                         => z
// step 3: {z,y,a} has 1 left: P(a)=2                          => a.
TEST(Tac, GroupFallingToOneAddsToP) {
  GraphBuilder b;
  auto z = b.recv("z", 5), y = b.recv("y", 1), a = b.recv("a", 4);
  auto x = b.compute("x", 10, {z, y});
  b.output(b.compute("o", 2, {x, a}));
  EXPECT_EQ(run("tac", b.graph()), (Prios{{"y", 0}, {"z", 1}, {"a", 2}}));
}

// The same graph through the options: with bandwidth 10 Gbit/s and 1 ms
// latency every M is ~1000 us > P, and use_recv_times switches to time_us.
TEST(Tac, OptionsChangeTheAnswer) {
  GraphBuilder b;
  auto a = b.recv("a", 2), bb = b.recv("b", 5), c = b.recv("c", 3);
  auto ca = b.compute("ca", 10, {a}), cb = b.compute("cb", 1, {bb}), cc = b.compute("cc", 3, {c});
  b.output(b.compute("out", 0, {ca, cb, cc}));
  AnalyzerOptions o;
  o.latency_us = 1000;  // all class 1: larger P first -> a (10), c (3), b (1)
  EXPECT_EQ(run("tac", b.graph(), o), (Prios{{"a", 0}, {"c", 1}, {"b", 2}}));
  b.graph().ops[a].time_us = 50;  // a: M=50 >= P=10 -> (1,-10) still first
  b.graph().ops[a].has_time = true;
  b.graph().ops[c].time_us = 1;  // c: M=1 < 3 -> (0,1) now first
  b.graph().ops[c].has_time = true;
  o = bytesAreMicros();
  o.use_recv_times = true;
  EXPECT_EQ(run("tac", b.graph(), o), (Prios{{"c", 0}, {"a", 1}, {"b", 2}}));
  o.bandwidth_gbps = 0;
  auto tac = AnalyzerRegistry::withBuiltins().create("tac");
  EXPECT_THROW(tac->analyze(b.graph(), o), InputError);
}

// fifo: first consumers in list order are c1 (reads w2 then w0), c2 (w1),
// c3 (w0 again: already placed); w3 is only an output; w9 is dead.
//   w2 0, w0 1, w1 2, w3 3.  reverse: w2 3, w0 2, w1 1, w3 0.
TEST(Baselines, FifoAndReverse) {
  GraphBuilder b;
  auto w0 = b.recv("w0", 1), w1 = b.recv("w1", 1), w2 = b.recv("w2", 1), w3 = b.recv("w3", 1);
  auto w9 = b.recv("w9", 1);
  b.compute("dead", 0, {w9});
  auto c1 = b.compute("c1", 0, {w2, w0});
  auto c2 = b.compute("c2", 0, {c1, w1});
  auto c3 = b.compute("c3", 0, {c2, w0});
  b.output(c3).output(w3);
  EXPECT_EQ(run("fifo", b.graph()), (Prios{{"w2", 0}, {"w0", 1}, {"w1", 2}, {"w3", 3}}));
  EXPECT_EQ(run("reverse", b.graph()), (Prios{{"w2", 3}, {"w0", 2}, {"w1", 1}, {"w3", 0}}));
}

// random, seed 0, names a b c d. splitmix64 from state 0 yields (published
// test vector) 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f.
// Fisher-Yates over [a b c d]: i=4: x%4 = 3 -> swap(3,3); i=3: 2^64 mod 3 = 1
// <= x, x%3 = 0 -> swap(2,0) -> [c b a d]; i=2: x%2 = 1 -> swap(1,1).
TEST(Baselines, RandomSeedZeroAndProperties) {
  GraphBuilder b;
  auto d = b.recv("d", 1), c = b.recv("c", 1), a = b.recv("a", 1), bb = b.recv("b", 1);
  b.output(b.compute("o", 0, {a, bb, c, d}));
  EXPECT_EQ(run("random", b.graph()), (Prios{{"c", 0}, {"b", 1}, {"a", 2}, {"d", 3}}));

  GraphBuilder big;
  std::vector<OpIndex> rs;
  for (int i = 0; i < 20; ++i) rs.push_back(big.recv("r" + std::to_string(i), 1));
  OpIndex prev = big.compute("c0", 0, {rs[0]});
  for (int i = 1; i < 20; ++i) prev = big.compute("c" + std::to_string(i), 0, {prev, rs[i]});
  big.output(prev);
  std::set<std::vector<Priority>> seen;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    AnalyzerOptions o;
    o.seed = seed;
    auto first = run("random", big.graph(), o);
    EXPECT_EQ(first, run("random", big.graph(), o)) << "seed " << seed;
    std::vector<Priority> v;
    for (auto& [n, p] : first) v.push_back(p);
    std::vector<Priority> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (Priority k = 0; k < 20; ++k) EXPECT_EQ(sorted[k], k) << "not a permutation";
    seen.insert(v);
  }
  EXPECT_GE(seen.size(), 7u) << "seeds should give different orders";
}

TEST(Registry, BuiltinsAddCreate) {
  auto reg = AnalyzerRegistry::withBuiltins();
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"fifo", "random", "reverse", "tac", "tic"}));
  EXPECT_EQ(reg.create("nope"), nullptr);
  for (const auto& n : reg.names()) EXPECT_EQ(reg.create(n)->name(), n);
  reg.add("fifo2", [] { return AnalyzerRegistry::withBuiltins().create("fifo"); });
  EXPECT_NE(reg.create("fifo2"), nullptr);
  EXPECT_THROW(reg.add("", [] { return nullptr; }), std::invalid_argument);
}

// Schedules list every live recv once, sorted by (priority, name), as TSV.
TEST(Schedule, SortedTsvAndTransferTime) {
  GraphBuilder b;
  auto x = b.recv("x", 1), y = b.recv("y", 1), w = b.recv("w", 1);
  b.output(b.compute("o", 0, {x, y, w}));
  auto s = AnalyzerRegistry::withBuiltins().create("tic")->analyze(b.graph(), AnalyzerOptions{});
  EXPECT_EQ(s.algo, "tic");
  EXPECT_EQ(s.toTsv(), "w\t0\nx\t0\ny\t0\n");
  Op r;
  r.bytes = 1250;  // 10^4 bits at 10 Gbit/s = 1 us
  AnalyzerOptions o;
  o.latency_us = 2;
  EXPECT_DOUBLE_EQ(transferTimeUs(r, o), 3.0);
  r.has_time = true;
  r.time_us = 7;
  EXPECT_DOUBLE_EQ(transferTimeUs(r, o), 3.0);
  o.use_recv_times = true;
  EXPECT_DOUBLE_EQ(transferTimeUs(r, o), 7.0);
}

}  // namespace
}  // namespace tictac::sched::testing
