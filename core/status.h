// Errors as values: Status and StatusOr<T>, used across the C++ core.
// Exceptions are thrown only at the Python boundary (bindings/errors.cc).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace dolsot {

// What kind of failure a Status carries. Bindings map these to Python
// exception classes; the CLI maps them to exit codes.
enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // a malformed argument (caller mistake)
  kInvalidSession,   // a bad session id, or empty code (caller mistake)
  kInvalidToolbox,   // an inject value that is not a module / module name
  kConfig,           // a malformed configuration value (names the variable)
  kIo,               // a filesystem or pipe operation failed
  kPermission,       // a store refused an unsafe directory (symlink, owner, mode)
  kCorrupt,          // malformed data: a broken frame, a corrupted session file
  kBusy,             // the session is still running an earlier cell
  kUnavailable,      // a worker or peer is gone
  kTimeout,          // a deadline passed
  kUnimplemented,    // an optional operation this backend does not offer
  kWeakerWalls,      // a checkpoint written under a Sandbox, restored under weaker walls
  kInternal,         // a bug in dolsot
};

const char* ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message)
      : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", for logs and tests.
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
inline Status CorruptError(std::string m) { return {ErrorCode::kCorrupt, std::move(m)}; }
inline Status InternalError(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : data_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(data_).ok() && "StatusOr built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(data_); }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace dolsot

#define DOLSOT_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::dolsot::Status dolsot_status_ = (expr);     \
    if (!dolsot_status_.ok()) return dolsot_status_; \
  } while (0)
