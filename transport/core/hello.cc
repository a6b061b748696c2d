// Hello encoding and the handshake of the bootstrap link (see bootstrap.h).
// Hello payload: u64 job_token | u32 assigned_id | u16 backend name length |
// u32 address length | backend name | address blob (little-endian).
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "transport/core/bootstrap.h"

namespace tictac::transport::bootstrap {
namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <class T>
bool get(std::span<const uint8_t>& in, T* v) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(v, in.data(), sizeof(T));
  in = in.subspan(sizeof(T));
  return true;
}

// Text a peer sent, fit for a message on the user's terminal: printable ASCII
// kept but for the backslash, any other byte as \xNN (so a peer's literal
// "\x1b" cannot pass for an escaped ESC), at most 200 bytes of it (a hostile peer's
// refusal reason or backend name must not write control sequences or fill
// the log).
std::string printable(std::string_view peer_text) {
  constexpr size_t kMax = 200;
  std::string out;
  for (size_t i = 0; i < std::min(peer_text.size(), kMax); ++i) {
    const auto c = static_cast<unsigned char>(peer_text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    }
  }
  if (peer_text.size() > kMax) out += "... (" + std::to_string(peer_text.size()) + " bytes)";
  return out;
}

// Reads the next frame, which must be of type `want` (a kRefuse carries the
// peer's reason).
Result<Frame> expectFrame(int fd, FrameType want, const char* what, Deadline deadline) {
  auto frame = recvFrame(fd, deadline);
  if (!frame) return frame.status();
  if (frame.value().type == FrameType::kRefuse) {
    const auto& p = frame.value().payload;
    return Status(StatusCode::kProtocolError,
                  "peer refused the connection: " +
                      printable({reinterpret_cast<const char*>(p.data()), p.size()}));
  }
  if (frame.value().type != want) {
    return Status(StatusCode::kProtocolError, std::string("bootstrap: expected a ") + what);
  }
  return frame;
}

void refuse(int fd, const std::string& why) {
  (void)sendFrame(fd, FrameType::kRefuse, std::vector<uint8_t>(why.begin(), why.end()));
}

// Refuses after the Hellos, when the peer may already have sent its Ready:
// closing with unread data would reset the connection and could destroy the
// refusal before the peer reads it. So: refuse, half-close, and read what the
// peer still sends until it closes (at most 200 ms).
void refuseAndLinger(int fd, const std::string& why) {
  refuse(fd, why);
  ::shutdown(fd, SHUT_WR);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (recvFrame(fd, until)) {
  }
}

}  // namespace

std::vector<uint8_t> encodeHello(const Hello& hello) {
  std::vector<uint8_t> out;
  put<uint64_t>(out, hello.job_token);
  put<uint32_t>(out, hello.assigned_id);
  put<uint16_t>(out, static_cast<uint16_t>(hello.backend.size()));
  put<uint32_t>(out, static_cast<uint32_t>(hello.address.size()));
  size_t at = out.size();
  out.resize(at + hello.backend.size() + hello.address.size());
  std::copy(hello.backend.begin(), hello.backend.end(), out.begin() + static_cast<long>(at));
  std::copy(hello.address.begin(), hello.address.end(),
            out.begin() + static_cast<long>(at + hello.backend.size()));
  return out;
}

Result<Hello> decodeHello(std::span<const uint8_t> in) {
  Hello h;
  uint16_t name_len = 0;
  uint32_t addr_len = 0;
  if (!get(in, &h.job_token) || !get(in, &h.assigned_id) || !get(in, &name_len) ||
      !get(in, &addr_len) || in.size() != size_t{name_len} + addr_len) {
    return Status(StatusCode::kProtocolError, "bootstrap: malformed hello");
  }
  h.backend.assign(reinterpret_cast<const char*>(in.data()), name_len);
  h.address.assign(in.begin() + name_len, in.end());
  return h;
}

Result<Hello> handshake(int fd, bool initiator, const Hello& mine, Deadline deadline,
                        const std::function<Status(const Hello&)>& admit) {
  const auto budget = deadline - std::chrono::steady_clock::now();
  auto sendMine = [&] { return sendFrame(fd, FrameType::kHello, encodeHello(mine)); };
  if (initiator) {
    if (Status s = sendMine(); !s) return s;
  }
  auto frame = expectFrame(fd, FrameType::kHello, "hello frame", deadline);
  if (!frame) return frame.status();
  auto theirs = decodeHello(frame.value().payload);
  if (!theirs) return theirs.status();
  std::string why;
  if (theirs.value().job_token != mine.job_token) {
    why = "job token mismatch (" + std::to_string(theirs.value().job_token) + " vs " +
          std::to_string(mine.job_token) + ")";
  } else if (theirs.value().backend != mine.backend) {
    why =
        "backend mismatch ('" + printable(theirs.value().backend) + "' vs '" + mine.backend + "')";
  }
  if (!why.empty()) {
    refuse(fd, why);
    return Status(StatusCode::kProtocolError, "refused peer: " + why);
  }
  if (!initiator) {
    if (Status s = sendMine(); !s) return s;
  }
  if (admit) {
    if (Status s = admit(theirs.value()); !s) {
      refuseAndLinger(fd, "cannot add the peer: " + s.message());
      return s;
    }
  }
  // The peer's Ready waits on its own admit, which may take long (a verbs
  // rdma_cm connection): it gets the whole budget again from here.
  Deadline ready_by = std::max(deadline, std::chrono::steady_clock::now() + budget);
  if (Status s = sendFrame(fd, FrameType::kReady, {}); !s) {
    // Most likely the peer refused and closed: its reason beats "broken pipe".
    auto refusal = expectFrame(fd, FrameType::kReady, "ready frame",
                               std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    return !refusal && refusal.status().code() == StatusCode::kProtocolError ? refusal.status() : s;
  }
  auto ready = expectFrame(fd, FrameType::kReady, "ready frame", ready_by);
  if (!ready) return ready.status();
  return theirs;
}

}  // namespace tictac::transport::bootstrap
