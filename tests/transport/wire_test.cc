// Wire header validation, bootstrap Hello encoding, TSV hint parsing.
#include "transport/core/wire.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <fstream>

#include "tictac/transport/hints.h"
#include "transport/backend.h"
#include "transport/core/bootstrap.h"

namespace tictac::transport {
namespace {

wire::Header dataHeader() {
  wire::Header h;
  h.type = static_cast<uint8_t>(wire::MsgType::kData);
  h.src_peer = 3;
  h.tensor_id = 42;
  h.op_id = 7;
  h.total_len = 1000;
  h.offset = 500;
  h.length = 500;
  h.flags = wire::kFlagLast;
  return h;
}

TEST(WireHeader, ValidDataHeaderDecodes) {
  wire::Header h = dataHeader(), out;
  ASSERT_TRUE(wire::decodeHeader(wire::asBytes(h), 500, &out).isOk());
  EXPECT_EQ(out.tensor_id, 42u);
  EXPECT_EQ(out.offset, 500u);
}

TEST(WireHeader, NoAckFlagAndAckEntriesDecode) {
  wire::Header h = dataHeader(), out;
  h.flags = wire::kFlagLast | wire::kFlagNoAck;
  ASSERT_TRUE(wire::decodeHeader(wire::asBytes(h), 500, &out).isOk());
  EXPECT_EQ(out.flags, wire::kFlagLast | wire::kFlagNoAck);
  h = dataHeader();
  h.type = static_cast<uint8_t>(wire::MsgType::kAck);
  h.total_len = 0;
  h.offset = 0;
  h.flags = 0;
  h.length = wire::kMaxAckEntries * sizeof(wire::AckEntry);
  ASSERT_TRUE(wire::decodeHeader(wire::asBytes(h), h.length, &out).isOk());
  // An ack message always fits the backends' in-place (eager) limit.
  EXPECT_LE(wire::kMaxAckEntries * sizeof(wire::AckEntry), kInlineMax);
  EXPECT_EQ(sizeof(wire::AckEntry), 24u);
  EXPECT_EQ(offsetof(wire::AckEntry, offset), 8u);
}

TEST(WireHeader, RejectsEveryMalformedField) {
  wire::Header out;
  auto expectBad = [&](wire::Header h, size_t payload, const char* what) {
    Status s = wire::decodeHeader(wire::asBytes(h), payload, &out);
    EXPECT_EQ(s.code(), StatusCode::kProtocolError) << what;
  };
  wire::Header h = dataHeader();
  h.magic = 0x12345678;
  expectBad(h, 500, "magic");
  h = dataHeader();
  h.version = wire::kVersion + 1;
  expectBad(h, 500, "version");
  h = dataHeader();
  h.version = 1;  // before kFlagNoAck and AckEntry.offset
  expectBad(h, 500, "old version");
  h = dataHeader();
  h.type = 99;
  expectBad(h, 500, "type");
  h = dataHeader();
  h.flags = 0x80;
  expectBad(h, 500, "flags");
  expectBad(dataHeader(), 499, "length vs payload");
  h = dataHeader();
  h.offset = 600;
  expectBad(h, 500, "chunk beyond tensor");
  h = dataHeader();
  h.offset = 0;
  expectBad(h, 500, "last chunk not at the end");
  h = dataHeader();
  h.type = static_cast<uint8_t>(wire::MsgType::kAck);
  h.length = 17;
  expectBad(h, 17, "ack payload not whole entries");
  h = dataHeader();
  h.type = static_cast<uint8_t>(wire::MsgType::kAck);
  h.length = 16;  // a version-1 entry
  expectBad(h, 16, "ack payload of old 16-byte entries");
  h.length = (wire::kMaxAckEntries + 1) * sizeof(wire::AckEntry);
  expectBad(h, h.length, "too many ack entries");
  h = dataHeader();
  h.type = static_cast<uint8_t>(wire::MsgType::kAck);
  h.length = 0;
  h.flags = wire::kFlagNoAck;
  expectBad(h, 0, "no-ack flag on an ack");
  h = dataHeader();
  h.type = static_cast<uint8_t>(wire::MsgType::kNack);
  h.length = 0;
  h.status = 0;
  expectBad(h, 0, "nack without status");
  h.type = static_cast<uint8_t>(wire::MsgType::kAbort);
  h.status = static_cast<int32_t>(StatusCode::kInProgress);
  expectBad(h, 0, "abort 'in progress' (a poller would wait forever)");
  h.status = static_cast<int32_t>(StatusCode::kTimeout);
  expectBad(h, 0, "abort 'timeout'");
  h.status = static_cast<int32_t>(StatusCode::kCanceled);
  EXPECT_TRUE(wire::decodeHeader(wire::asBytes(h), 0, &out).isOk());
  std::byte shortRaw[10] = {};
  EXPECT_EQ(wire::decodeHeader({shortRaw, 10}, 0, &out).code(), StatusCode::kProtocolError);
}

TEST(Bootstrap, HelloRoundTripsAndRejectsTruncation) {
  bootstrap::Hello h;
  h.job_token = 99;
  h.assigned_id = 5;
  h.backend = "ucx";
  h.address = {1, 2, 3, 4, 5};
  auto bytes = bootstrap::encodeHello(h);
  auto back = bootstrap::decodeHello(bytes);
  ASSERT_TRUE(back);
  EXPECT_EQ(back.value().job_token, 99u);
  EXPECT_EQ(back.value().assigned_id, 5u);
  EXPECT_EQ(back.value().backend, "ucx");
  EXPECT_EQ(back.value().address, h.address);
  bytes.pop_back();
  EXPECT_EQ(bootstrap::decodeHello(bytes).status().code(), StatusCode::kProtocolError);
}

TEST(Hints, ParsesTsvAndNamesBadLines) {
  auto ok = parseTsvHints("# schedule\nconv1.w\t0\n\nfc.w\t4294967295\n", "s.tsv");
  ASSERT_TRUE(ok) << ok.status().toString();
  EXPECT_EQ(ok.value()->size(), 2u);
  EXPECT_EQ(ok.value()->priorityOf({1, 0, "fc.w"}), 4294967295u);
  EXPECT_FALSE(ok.value()->priorityOf({1, 0, "other"}).has_value());
  EXPECT_FALSE(ok.value()->priorityOf({1, 0, ""}).has_value());
  auto bad = parseTsvHints("a\t1\nb 2\n", "s.tsv");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("s.tsv:2"), std::string::npos) << bad.status().toString();
  EXPECT_FALSE(parseTsvHints("a\t-1\n", "x"));
  EXPECT_FALSE(parseTsvHints("a\t4294967296\n", "x"));
  EXPECT_FALSE(parseTsvHints("a\t1\na\t2\n", "x"));
}

TEST(Hints, LoadsAFileAndReportsAMissingOne) {
  std::string path = testing::TempDir() + "tictac_hints.tsv";
  {
    std::ofstream f(path);
    f << "layer1\t3\nlayer2\t1\n";
  }
  auto h = loadTsvHints(path);
  ASSERT_TRUE(h) << h.status().toString();
  EXPECT_EQ(h.value()->priorityOf({0, 0, "layer2"}), 1u);
  std::remove(path.c_str());
  EXPECT_EQ(loadTsvHints(path).status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace tictac::transport
