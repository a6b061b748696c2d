#include "tictac/transport/status.h"

namespace tictac::transport {

const char* statusName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInProgress:
      return "in_progress";
    case StatusCode::kNoResource:
      return "no_resource";
    case StatusCode::kCanceled:
      return "canceled";
    case StatusCode::kPeerLost:
      return "peer_lost";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kSizeMismatch:
      return "size_mismatch";
    case StatusCode::kNoDevice:
      return "no_device";
    case StatusCode::kIoError:
      return "io_error";
    case StatusCode::kProtocolError:
      return "protocol_error";
    case StatusCode::kUnsupported:
      return "unsupported";
  }
  return "unknown";
}

std::string Status::toString() const {
  if (message_.empty()) return statusName(code_);
  return std::string(statusName(code_)) + ": " + message_;
}

}  // namespace tictac::transport
