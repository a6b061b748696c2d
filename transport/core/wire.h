// transport/core/wire.h: the data-path wire header (every backend message).
//
// Every message the core posts through a backend starts with this 56-byte
// header; docs/transport.md documents each field. Fields are in the sender's
// byte order, which must be little-endian (checked through the magic). A
// receiver validates every header (decodeHeader) before acting on it and
// treats a bad one as a protocol error of that peer.
//
//   kData: one chunk of a tensor; payload = bytes [offset, offset+length).
//   kAck:  payload = `length / 24` AckEntry records (op_id, offset, bytes):
//          chunks of the ack receiver's own sends that the ack sender now
//          holds (or dropped after a nack). They return window credit. A chunk
//          flagged kFlagNoAck is acked only when the receiver could not land it
//          at once (kept until its expect, or dropped); otherwise the sender's
//          backend completion is its confirmation (Backend::confirmsDelivery).
//   kNack: the op `op_id` was rejected; `status` says why (size mismatch,
//          canceled expect); its chunks are still acked normally.
//   kAbort: the sender canceled op `op_id` (tensor_id, iteration): the
//          receiver fails the matching expect with `status` (kCanceled).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tictac/transport/status.h"

namespace tictac::transport::wire {

inline constexpr uint32_t kMagic = 0x57544354;  // "TCTW" in memory order
inline constexpr uint16_t kVersion = 2;         // 2: kFlagNoAck, AckEntry.offset

enum class MsgType : uint8_t { kData = 1, kAck = 2, kNack = 3, kAbort = 4 };
inline constexpr uint8_t kFlagLast = 1;   // the op's final chunk
inline constexpr uint8_t kFlagNoAck = 2;  // data: the sender's completion confirms it (no ack)

struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint8_t type = 0;        // MsgType
  uint8_t flags = 0;       // kFlagLast, kFlagNoAck (data)
  uint32_t src_peer = 0;   // the sender's id as assigned by the receiver at handshake
  uint32_t iteration = 0;  // tensor iteration (data, nack)
  uint64_t tensor_id = 0;  // tensor id (data, nack)
  uint64_t op_id = 0;      // the sender's op id (data); the acked/rejected op (nack)
  uint64_t total_len = 0;  // tensor size in bytes (data)
  uint64_t offset = 0;     // chunk offset in the tensor (data)
  uint32_t length = 0;     // payload bytes (data: chunk bytes; ack: 24 x entries)
  int32_t status = 0;      // nack: a StatusCode
};
static_assert(sizeof(Header) == 56, "wire header layout");

struct AckEntry {
  uint64_t op_id;   // the acked chunk's op (the ack receiver's op id)
  uint64_t offset;  // the chunk's offset in the tensor (identifies the chunk)
  uint64_t bytes;   // the chunk's length
};
static_assert(sizeof(AckEntry) == 24, "ack entry layout");

// Largest chunk a header can describe.
inline constexpr size_t kMaxChunk = 0xFFFFFFFFu;
// Largest ack payload accepted (entries per message).
inline constexpr size_t kMaxAckEntries = 170;  // 4080 bytes <= kInlineMax: always eager

inline std::span<const std::byte> asBytes(const Header& h) {
  return {reinterpret_cast<const std::byte*>(&h), sizeof(h)};
}

// Validates a received header: size, magic, version, type, flags, length
// against the payload actually received, offset + length <= total_len, ack
// payload a whole number of entries. kProtocolError with the reason otherwise.
Status decodeHeader(std::span<const std::byte> raw, size_t payload_len, Header* out);

}  // namespace tictac::transport::wire
