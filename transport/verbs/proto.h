// transport/verbs/proto.h: what the verbs backend puts on the wire (internal).
//
// The address blob (localAddress, exchanged by the core's bootstrap; one
// ClassQp after it per extra priority class, see class_bounds) and the
// backend's message header, which precedes the core's header in every SEND:
//
//   SEND [MsgHdr][core header (hdr_len bytes)][payload (kEager only)]
//     kEager: the payload travels in the message (len bytes). Its MsgHdr
//             is the 8-byte EagerHdr (kind, flags, hdr_len, len): small
//             messages are latency-bound, and rxe copies and checksums
//             every byte in software.
//     The first byte of every MsgHdr form is its kind.
//     kRts:   "ready to send" len payload bytes; send_id names the transfer.
//     kCts:   "clear to send" from the receiver of kRts send_id: RDMA WRITE
//             the payload to (addr, rkey), with immediate = recv_id; or, with
//             kFlagDrop, the payload is not wanted (the send completes).
//   SEND WITH IMMEDIATE [payload]: a compact eager message; the immediate
//             and the QP's previous data header rebuild its core header
//             (compact.h). No MsgHdr, no core header: a 4 KiB tensor is one
//             packet at a 4096-byte MTU.
//   RDMA WRITE WITH IMMEDIATE recv_id: the payload of one rendezvous transfer
//             (the receiver's receive() completes on its arrival).
//   Receiver-advertised rendezvous (advert.cc), one class only:
//     kAdv:   from a receiver with an expect whose tensor nothing has arrived
//             of: tensor send_id, iteration `reserved`, len bytes at (addr,
//             rkey), finished by immediate recv_id; then an 8-byte AdvBody.
//             The sender writes every chunk it posts of that tensor there
//             (plain RDMA WRITEs; the one that completes the tensor WITH
//             IMMEDIATE recv_id), or declines it with kAdvEnd len 0 when a
//             data record of the tensor left after the receiver's `seen`-th
//             record (the receiver may be landing it the usual way).
//     kAdvEnd: the sender ends advert recv_id having written len bytes
//             (0: declined; else its send was canceled, or kAdvRevoke came),
//             queued behind those WRITEs.
//     kAdvRevoke: the receiver withdraws advert recv_id of tensor send_id,
//             iteration `reserved` (a failed or canceled expect, or data
//             that came the usual way); the sender answers with kAdvEnd
//             unless its end is on the way. Withdrawn after some bytes were
//             written, the rest of that send fails (kCanceled).
//     Each advert ends once: the last WRITE WITH IMMEDIATE or a kAdvEnd.
// A SEND may carry several records back to back, each padded to 8 bytes
// (recordBytes): the sender batches the kRts of chunks posted together.
// Fields are in the sender's byte order; both peers are little-endian x86 or
// arm64 (the core's magic check rejects other pairs at the first message).
#pragma once

#include <cstdint>

namespace tictac::transport::verbs {

inline constexpr uint32_t kBlobMagic = 0x56425854;  // "TXBV"
// 2: several records per SEND; 3: EagerHdr; 4: compact eager messages (compact.h);
// 5: adverts
inline constexpr uint16_t kBlobVersion = 5;

struct AddressBlob {
  uint32_t magic = kBlobMagic;
  uint16_t version = kBlobVersion;
  uint8_t roce = 1;  // link layer Ethernet (GRH addressing)
  uint8_t mtu = 0;   // ibv_mtu of the port
  uint32_t qpn = 0;  // the QP created for this peer
  uint32_t psn = 0;  // its initial send PSN
  uint16_t lid = 0;
  uint16_t classes = 0;     // QPs per peer (class_bounds); 0 or 1: one
  uint32_t recv_bytes = 0;  // size of each receive buffer (largest SEND)
  uint8_t gid[16] = {};
};
static_assert(sizeof(AddressBlob) == 40, "address blob layout");
// After the blob (cm=tcp): the QP of each class after the first, in order.
struct ClassQp {
  uint32_t qpn = 0;
  uint32_t psn = 0;
};

enum class MsgKind : uint8_t {
  kEager = 1,
  kRts = 2,
  kCts = 3,
  kAdv = 4,
  kAdvEnd = 5,
  kAdvRevoke = 6
};
inline constexpr uint8_t kFlagDrop = 1;

struct MsgHdr {
  uint8_t kind = 0;      // MsgKind
  uint8_t flags = 0;     // kFlagDrop (kCts)
  uint16_t hdr_len = 0;  // core header bytes that follow
  uint32_t recv_id = 0;  // kCts: the immediate to write with
  uint64_t len = 0;      // payload bytes
  uint64_t send_id = 0;  // kRts/kCts: the sender's transfer
  uint64_t addr = 0;     // kCts: destination
  uint32_t rkey = 0;     // kCts
  uint32_t reserved = 0;
};
static_assert(sizeof(MsgHdr) == 40, "message header layout");

struct AdvBody {      // follows a kAdv's MsgHdr (its hdr_len)
  uint64_t seen = 0;  // records (eager, compact, handshake) the receiver had taken
};
static_assert(sizeof(AdvBody) == 8, "advert body layout");

struct EagerHdr {  // the MsgHdr of a kEager message
  uint8_t kind = static_cast<uint8_t>(MsgKind::kEager);
  uint8_t flags = 0;     // none defined
  uint16_t hdr_len = 0;  // core header bytes that follow
  uint32_t len = 0;      // payload bytes (an eager message fits a receive buffer)
};
static_assert(sizeof(EagerHdr) == 8, "eager header layout");

// Bytes of the MsgHdr form a message of this kind starts with.
constexpr size_t msgHdrBytes(uint8_t kind) {
  return kind == static_cast<uint8_t>(MsgKind::kEager) ? sizeof(EagerHdr) : sizeof(MsgHdr);
}

// Largest core header the backend carries.
inline constexpr size_t kMaxCoreHeader = 128;
// Smallest receive buffer (AddressBlob::recv_bytes) a peer may advertise:
// the largest handshake record plus the largest core header plus the
// transport's kInlineMax (4096, transport/backend.h), so that small messages
// and acks always travel eager. addPeer() refuses a blob below it.
inline constexpr uint32_t kMinRecvBytes = sizeof(MsgHdr) + kMaxCoreHeader + 4096;
// Local, not on the wire: the wr_id bit of receive work requests, and the
// largest inline SEND built on the stack.
inline constexpr uint64_t kRecvBit = uint64_t{1} << 63;
inline constexpr size_t kInlineBuf = 512;

// Bytes a record of n bytes takes in a SEND that carries several.
constexpr size_t recordBytes(size_t n) {
  return (n + 7) & ~size_t{7};
}

}  // namespace tictac::transport::verbs
