// tictac/transport/status.h: status values of the transport.
//
// Runtime failures (peer lost, I/O, size mismatch, cancel) travel as a Status
// value to the completion of the operation they affect; they are never thrown
// from the progress context. kInProgress and kNoResource are flow control, not
// failures: kNoResource means a queue limit was reached and the caller should
// retry after completions have drained (back-pressure).
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace tictac::transport {

enum class StatusCode : int {
  kOk = 0,
  kInProgress = 1,       // posted; the completion will report the outcome
  kNoResource = 2,       // queue limit reached (back-pressure), nothing was queued
  kCanceled = 3,         // cancel() was called before the operation finished
  kPeerLost = 4,         // EOF, reset or missed heartbeat on the peer's bootstrap link
  kTimeout = 5,          // a deadline passed (connect, handshake)
  kInvalidArgument = 6,  // bad call (null buffer with non-zero size, unknown id, ...)
  kSizeMismatch = 7,     // an incoming tensor's size differs from its expect()
  kNoDevice = 8,         // the backend found no usable device
  kIoError = 9,          // system call or backend failure (message has the detail)
  kProtocolError = 10,   // a peer sent a malformed or unexpected message
  kUnsupported = 11,     // the backend was not compiled in or cannot do this
};

// Short stable name of a code ("ok", "peer_lost", ...).
const char* statusName(StatusCode c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "peer_lost: connection to 10.0.0.2:18515 closed"
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none (absl::StatusOr-like).
// value() on an error Result is a programming error (asserts in debug builds).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit
    if (status_.isOk()) status_ = Status(StatusCode::kInvalidArgument, "Result without value");
  }
  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tictac::transport
