// transport/core/bootstrap.h: the TCP bootstrap link (one per peer, every backend).
//
// Frames: a 16-byte FrameHeader {magic "TCTB", version, type, length,
// reserved} followed by `length` payload bytes (at most kMaxFrame). Types:
//   kHello     both sides, once: Hello payload (job token, the id the sender
//              assigned to the receiver, backend name, backend address blob)
//   kRefuse    instead of a Hello: UTF-8 reason; the link is then closed
//   kHeartbeat empty, every heartbeat_interval in both directions
//   kBye       empty, orderly close
//   kReady     empty, once, after the Hellos: the sender has registered the
//              peer (its data path accepts the peer's messages from now on)
// The connecting side sends its Hello first. All calls here are blocking with
// deadlines and are used from one thread at a time per fd.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tictac/transport/status.h"

namespace tictac::transport::bootstrap {

inline constexpr uint32_t kMagic = 0x42544354;  // "TCTB"
inline constexpr uint16_t kVersion = 3;         // 2: data-path wire version 2; 3: kReady
inline constexpr uint32_t kMaxFrame = 1 << 20;

enum class FrameType : uint16_t { kHello = 1, kRefuse = 2, kHeartbeat = 3, kBye = 4, kReady = 5 };

struct FrameHeader {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t type = 0;
  uint32_t length = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(FrameHeader) == 16, "bootstrap frame header layout");

struct Frame {
  FrameType type = FrameType::kBye;
  std::vector<uint8_t> payload;
};

struct Hello {
  uint64_t job_token = 0;
  uint32_t assigned_id = 0;  // the id the sender uses for the receiver (goes in wire src_peer)
  std::string backend;
  std::vector<uint8_t> address;
};

using Deadline = std::chrono::steady_clock::time_point;

// Listening socket with SO_REUSEADDR; *bound_port receives the actual port.
Result<int> listenTcp(const std::string& bind_address, uint16_t port, uint16_t* bound_port);
// Accepts one connection before the deadline (kTimeout otherwise).
Result<int> acceptTcp(int listen_fd, Deadline deadline, std::string* peer_name);
// Connects, retrying refused/unreachable attempts until the deadline.
Result<int> connectTcp(const std::string& host, uint16_t port, Deadline deadline);

Status sendFrame(int fd, FrameType type, std::span<const uint8_t> payload);
// Reads one whole frame and validates its header (magic, version, type, size).
Result<Frame> recvFrame(int fd, Deadline deadline);

std::vector<uint8_t> encodeHello(const Hello& hello);
Result<Hello> decodeHello(std::span<const uint8_t> payload);

// Exchanges Hellos (the connecting side sends first) and validates the peer's:
// same job token and backend, else kRefuse both ways and kProtocolError. Then
// `admit` (when set) registers the peer with the caller's data path; its error
// goes to the peer as kRefuse. Last, each side sends kReady and waits for the
// peer's. So when handshake() returns ok the peer has admitted this side: a
// message sent from now on is never dropped as coming from an unknown peer
// (its data path may deliver before its bootstrap thread gets to register).
Result<Hello> handshake(int fd, bool initiator, const Hello& mine, Deadline deadline,
                        const std::function<Status(const Hello&)>& admit = {});

}  // namespace tictac::transport::bootstrap
