// transport/verbs/compact.h: compact eager messages (internal; blob version 4).
//
// A tensor that travels in one eager message pays for two headers on the wire:
// the EagerHdr and the core's 56-byte wire::Header. At 4 KiB that is one
// packet more than its payload needs (4096 + 64 bytes over a 4096-byte MTU),
// and rxe's cost is per packet. A compact message is a SEND WITH IMMEDIATE of
// the payload alone: the receiver rebuilds the core header from the previous
// one on the same QP (the base) and the 32-bit immediate, which holds the
// differences of the three fields that change from tensor to tensor.
//
// The base is the last *eligible* header a QP carried, full or compact: a
// single-chunk data message (kData, offset 0, total_len == length, flags
// exactly kFlagLast|kFlagNoAck, status 0). Sender and receiver both update it
// on every eligible eager message, in QP order (RC delivers each SEND once,
// in order; the sender updates only when ibv_post_send accepted it), so the
// two copies never differ. Nothing else (kRts, kCts, acks, WRITEs) touches it.
//
// Immediate (host order here; htonl on the wire):
//   bits 31..20  tensor_id - base.tensor_id   (signed, -2048..2047)
//   bits 19..16  iteration - base.iteration   (signed, -8..7)
//   bits 15..0   op_id - base.op_id           (0..65535)
// src_peer, magic, version, type and flags are the base's; length and
// total_len are the received byte count; offset and status are 0. The core
// validates the rebuilt header like any other (decodeHeader).
#pragma once

#include <cstdint>
#include <cstring>

#include "transport/core/wire.h"

namespace tictac::transport::verbs {

struct CompactBase {
  bool valid = false;
  wire::Header last;  // the last eligible header (length fields unused)
};

inline constexpr uint8_t kCompactFlags = wire::kFlagLast | wire::kFlagNoAck;

// The header form that sets the base (and the only one that may be compact).
inline bool compactEligible(const wire::Header& h) {
  return h.magic == wire::kMagic && h.version == wire::kVersion &&
         h.type == static_cast<uint8_t>(wire::MsgType::kData) && h.flags == kCompactFlags &&
         h.offset == 0 && h.total_len == h.length && h.status == 0;
}

// Reads a core header of exactly sizeof(wire::Header) bytes; false otherwise.
inline bool compactParse(const void* p, size_t n, wire::Header* out) {
  if (n != sizeof(wire::Header)) return false;
  std::memcpy(out, p, sizeof(*out));
  return true;
}

// Sender: the immediate that rebuilds h from base, or false (send it full).
inline bool compactEncode(const CompactBase& base, const wire::Header& h, uint32_t* imm) {
  if (!base.valid || !compactEligible(h) || h.src_peer != base.last.src_peer) return false;
  const auto dt = static_cast<int64_t>(h.tensor_id - base.last.tensor_id);
  const auto di = static_cast<int32_t>(h.iteration - base.last.iteration);
  const uint64_t dop = h.op_id - base.last.op_id;
  if (dt < -2048 || dt > 2047 || di < -8 || di > 7 || dop > 0xFFFF) return false;
  *imm = (static_cast<uint32_t>(dt) & 0xFFFu) << 20 | (static_cast<uint32_t>(di) & 0xFu) << 16 |
         static_cast<uint32_t>(dop);
  return true;
}

// Receiver: rebuilds the header of a compact message of len payload bytes;
// false when the QP has no base yet (a protocol error of the peer).
inline bool compactDecode(const CompactBase& base, uint32_t imm, uint32_t len, wire::Header* out) {
  if (!base.valid) return false;
  const int64_t dt = static_cast<int32_t>(imm) >> 20;  // arithmetic: sign-extends
  const int32_t di = static_cast<int32_t>(imm << 12) >> 28;
  *out = base.last;
  out->tensor_id = base.last.tensor_id + static_cast<uint64_t>(dt);
  out->iteration = base.last.iteration + static_cast<uint32_t>(di);
  out->op_id = base.last.op_id + (imm & 0xFFFFu);
  out->offset = 0;
  out->total_len = len;
  out->length = len;
  out->status = 0;
  return true;
}

// Both sides, after each eligible message (full or compact) of the QP.
inline void compactUpdate(CompactBase& base, const wire::Header& h) {
  base.valid = true;
  base.last = h;
}

// Sender, per eager message: its core header (hdr_len bytes at hdr) read
// once, whether it sets the base (eligible) and whether it travels compact
// (then with imm). After the post succeeded: if (eligible) compactUpdate(h).
struct CompactPlan {
  wire::Header h;
  bool eligible = false, compact = false;
  uint32_t imm = 0;
};
inline CompactPlan compactPlan(const CompactBase& base, const void* hdr, size_t hdr_len) {
  CompactPlan p;
  p.eligible = compactParse(hdr, hdr_len, &p.h) && compactEligible(p.h);
  p.compact = p.eligible && compactEncode(base, p.h, &p.imm);
  return p;
}

// Receiver, per full eager message: updates the base when its header is eligible.
inline void compactNote(CompactBase& base, const void* hdr, size_t hdr_len) {
  wire::Header h;
  if (compactParse(hdr, hdr_len, &h) && compactEligible(h)) compactUpdate(base, h);
}

}  // namespace tictac::transport::verbs
