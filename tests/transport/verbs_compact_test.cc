// Unit tests of the verbs backend's compact eager messages (compact.h): the
// immediate rebuilds exactly the header that was sent, out-of-range changes
// fall back to a full header, and a sender and a receiver that apply the
// same updates in QP order never disagree about the base.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "transport/verbs/compact.h"

namespace tictac::transport::verbs {
namespace {

wire::Header data(uint64_t tensor, uint32_t iteration, uint64_t op, uint32_t len) {
  wire::Header h;
  h.type = static_cast<uint8_t>(wire::MsgType::kData);
  h.flags = kCompactFlags;
  h.src_peer = 3;
  h.tensor_id = tensor;
  h.iteration = iteration;
  h.op_id = op;
  h.total_len = len;
  h.length = len;
  return h;
}

bool same(const wire::Header& a, const wire::Header& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

TEST(VerbsCompact, RoundTripsEveryFieldAtTheEdgesOfItsRange) {
  CompactBase base;
  compactUpdate(base, data(5000, 100, 1000, 8));
  const int64_t dts[] = {-2048, -1, 0, 1, 2047};
  const int32_t dis[] = {-8, -1, 0, 1, 7};
  const uint64_t dops[] = {0, 1, 2, 65535};
  for (int64_t dt : dts) {
    for (int32_t di : dis) {
      for (uint64_t dop : dops) {
        wire::Header h = data(5000 + dt, 100 + di, 1000 + dop, 4096);
        uint32_t imm = 0;
        ASSERT_TRUE(compactEncode(base, h, &imm)) << dt << " " << di << " " << dop;
        wire::Header back;
        ASSERT_TRUE(compactDecode(base, imm, 4096, &back));
        EXPECT_TRUE(same(h, back)) << dt << " " << di << " " << dop;
      }
    }
  }
}

TEST(VerbsCompact, WrapsAroundZeroLikeTheSender) {
  CompactBase base;
  compactUpdate(base, data(1, 0, 7, 8));
  wire::Header h = data(uint64_t{0} - 3, uint32_t{0} - 2, 7, 0);  // ids below 0 wrap
  uint32_t imm = 0;
  ASSERT_TRUE(compactEncode(base, h, &imm));
  wire::Header back;
  ASSERT_TRUE(compactDecode(base, imm, 0, &back));
  EXPECT_TRUE(same(h, back));
}

TEST(VerbsCompact, OutOfRangeOrIneligibleHeadersTravelFull) {
  CompactBase base;
  uint32_t imm = 0;
  EXPECT_FALSE(compactEncode(base, data(1, 1, 1, 8), &imm)) << "no base yet";
  compactUpdate(base, data(5000, 100, 1000, 8));
  EXPECT_FALSE(compactEncode(base, data(5000 + 2048, 100, 1001, 8), &imm));
  EXPECT_FALSE(compactEncode(base, data(5000 - 2049, 100, 1001, 8), &imm));
  EXPECT_FALSE(compactEncode(base, data(5000, 108, 1001, 8), &imm));
  EXPECT_FALSE(compactEncode(base, data(5000, 91, 1001, 8), &imm));
  EXPECT_FALSE(compactEncode(base, data(5000, 100, 1000 + 65536, 8), &imm));
  EXPECT_FALSE(compactEncode(base, data(5000, 100, 999, 8), &imm)) << "op ids only grow";
  wire::Header h = data(5001, 100, 1001, 8);
  h.src_peer = 4;
  EXPECT_FALSE(compactEncode(base, h, &imm)) << "another sender id";
  h = data(5001, 100, 1001, 8);
  h.flags = wire::kFlagLast;  // acked: not the compact form
  EXPECT_FALSE(compactEligible(h));
  EXPECT_FALSE(compactEncode(base, h, &imm));
  h = data(5001, 100, 1001, 8);
  h.offset = 8;
  h.total_len = 16;  // a later chunk of a bigger tensor
  EXPECT_FALSE(compactEligible(h));
  h = data(5001, 100, 1001, 8);
  h.type = static_cast<uint8_t>(wire::MsgType::kAck);
  EXPECT_FALSE(compactEligible(h));
  h = data(5001, 100, 1001, 8);
  h.status = 1;
  EXPECT_FALSE(compactEligible(h));
  h = data(5001, 100, 1001, 8);
  h.version = wire::kVersion + 1;
  EXPECT_FALSE(compactEligible(h));
}

TEST(VerbsCompact, ParseTakesExactlyOneCoreHeader) {
  wire::Header h = data(1, 2, 3, 4), out;
  EXPECT_TRUE(compactParse(&h, sizeof(h), &out));
  EXPECT_TRUE(same(h, out));
  EXPECT_FALSE(compactParse(&h, sizeof(h) - 1, &out));
  EXPECT_FALSE(compactParse(&h, sizeof(h) + 8, &out));
}

TEST(VerbsCompact, DecodeWithoutBaseIsRefused) {
  CompactBase base;
  wire::Header out;
  EXPECT_FALSE(compactDecode(base, 0x00100001u, 8, &out));
}

// A stream of headers as a QP carries them: the receiver sees either the full
// header or the immediate, and must rebuild every eligible one exactly.
TEST(VerbsCompact, SenderAndReceiverBasesNeverDiverge) {
  std::mt19937_64 rng(19);
  CompactBase tx, rx;
  uint64_t op = 1;
  size_t compact = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t tensor = rng() % 4 == 0 ? rng() : rng() % 300;  // dense ids, sometimes hashed
    const uint32_t iteration = static_cast<uint32_t>(rng() % 20);
    op += 1 + (rng() % 10 == 0 ? rng() % 100000 : rng() % 4);
    const uint32_t len = static_cast<uint32_t>(rng() % 5000);
    wire::Header h = data(tensor, iteration, op, len);
    if (rng() % 8 == 0) h.flags = wire::kFlagLast;  // an acked one: full, base unchanged
    uint32_t imm = 0;
    wire::Header got;
    const bool eligible = compactEligible(h);
    if (compactEncode(tx, h, &imm)) {
      ++compact;
      ASSERT_TRUE(compactDecode(rx, imm, len, &got)) << i;
    } else {
      got = h;  // full: the header travels as is
    }
    ASSERT_TRUE(same(h, got)) << i;
    if (eligible) {
      compactUpdate(tx, h);
      compactUpdate(rx, got);
    }
    ASSERT_TRUE(same(tx.last, rx.last)) << i;
  }
  EXPECT_GT(compact, 5000u);
}

}  // namespace
}  // namespace tictac::transport::verbs
