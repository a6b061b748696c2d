#include "transport/core/wire.h"

#include <cstring>
#include <string>

namespace tictac::transport::wire {

namespace {
Status bad(const std::string& why) {
  return {StatusCode::kProtocolError, "bad wire header: " + why};
}
}  // namespace

Status decodeHeader(std::span<const std::byte> raw, size_t payload_len, Header* out) {
  if (raw.size() != sizeof(Header)) {
    return bad("size " + std::to_string(raw.size()) + ", expected " +
               std::to_string(sizeof(Header)));
  }
  Header h;
  std::memcpy(&h, raw.data(), sizeof(h));
  if (h.magic != kMagic) return bad("magic mismatch (not a tictac peer, or byte order)");
  if (h.version != kVersion) {
    return bad("version " + std::to_string(h.version) + ", this side speaks " +
               std::to_string(kVersion));
  }
  uint8_t known =
      h.type == static_cast<uint8_t>(MsgType::kData) ? (kFlagLast | kFlagNoAck) : kFlagLast;
  if ((h.flags & ~known) != 0) return bad("unknown flags " + std::to_string(h.flags));
  if (h.length != payload_len) {
    return bad("length field " + std::to_string(h.length) + " but payload of " +
               std::to_string(payload_len) + " bytes");
  }
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::kData:
      if (h.offset > h.total_len || h.length > h.total_len - h.offset) {
        return bad("chunk [" + std::to_string(h.offset) + ", +" + std::to_string(h.length) +
                   ") outside tensor of " + std::to_string(h.total_len) + " bytes");
      }
      if ((h.flags & kFlagLast) != 0 && h.offset + h.length != h.total_len) {
        return bad("last chunk does not end the tensor");
      }
      break;
    case MsgType::kAck:
      if (h.length % sizeof(AckEntry) != 0 || h.length / sizeof(AckEntry) > kMaxAckEntries) {
        return bad("ack payload of " + std::to_string(h.length) + " bytes");
      }
      break;
    case MsgType::kNack:
    case MsgType::kAbort:
      if (h.length != 0) return bad("nack/abort with payload");
      // A final failure only: in_progress or timeout would read as "not done
      // yet" to a caller polling wait() and keep it waiting forever.
      if (h.status <= 0 || h.status > static_cast<int32_t>(StatusCode::kUnsupported) ||
          h.status == static_cast<int32_t>(StatusCode::kInProgress) ||
          h.status == static_cast<int32_t>(StatusCode::kTimeout)) {
        return bad("nack/abort status " + std::to_string(h.status));
      }
      break;
    default:
      return bad("unknown type " + std::to_string(h.type));
  }
  *out = h;
  return Status::ok();
}

}  // namespace tictac::transport::wire
