// Hello encoding and the handshake of the bootstrap link (see bootstrap.h).
// Hello payload: u64 job_token | u32 assigned_id | u16 backend name length |
// u32 address length | backend name | address blob (little-endian).
#include <algorithm>
#include <cstring>

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

// Reads the next frame, which must be of type `want` (a kRefuse carries the
// peer's reason).
Result<Frame> expectFrame(int fd, FrameType want, const char* what, Deadline deadline) {
  auto frame = recvFrame(fd, deadline);
  if (!frame) return frame.status();
  if (frame.value().type == FrameType::kRefuse) {
    const auto& p = frame.value().payload;
    return Status(StatusCode::kProtocolError,
                  "peer refused the connection: " + std::string(p.begin(), p.end()));
  }
  if (frame.value().type != want) {
    return Status(StatusCode::kProtocolError, std::string("bootstrap: expected a ") + what);
  }
  return frame;
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
    why = "backend mismatch ('" + theirs.value().backend + "' vs '" + mine.backend + "')";
  }
  if (!why.empty()) {
    std::vector<uint8_t> reason(why.begin(), why.end());
    (void)sendFrame(fd, FrameType::kRefuse, reason);
    return Status(StatusCode::kProtocolError, "refused peer: " + why);
  }
  if (!initiator) {
    if (Status s = sendMine(); !s) return s;
  }
  if (admit) {
    if (Status s = admit(theirs.value()); !s) {
      why = "cannot add the peer: " + s.message();
      (void)sendFrame(fd, FrameType::kRefuse, std::vector<uint8_t>(why.begin(), why.end()));
      return s;
    }
  }
  if (Status s = sendFrame(fd, FrameType::kReady, {}); !s) return s;
  auto ready = expectFrame(fd, FrameType::kReady, "ready frame", deadline);
  if (!ready) return ready.status();
  return theirs;
}

}  // namespace tictac::transport::bootstrap
