// Status and Result: how every fallible call in Loom reports errors.
//
// Loom's core, SDK and plugins never throw. A call that can fail returns a
// loom::Status (a code plus a message naming what was wrong and where) or a
// loom::Result<T>, which holds either a value or a non-OK Status, in the shape
// of std::expected. Both are cheap to move and safe to copy.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace loom {

// The fixed set of error codes; the values equal loom_status_code_t.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kUnimplemented = 3,
  kIncompatible = 4,
  kResourceExhausted = 5,
  kDeviceLost = 6,
  kDeadlineExceeded = 7,
  kDataLoss = 8,
  kInternal = 9,
  kFailedPrecondition = 10,
  kUnavailable = 11,
  kOutOfRange = 12,
  kCancelled = 13,
  kAlreadyExists = 14,
};

// Lower-case name of a code, e.g. "invalid_argument".
std::string_view status_code_name(StatusCode code);

// A code plus a message. The default-constructed Status is OK.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: segment 3 ends at 9000, file has 8192 bytes", with
  // control characters in the message escaped (escape_control), so that a
  // name from a file or a plugin cannot break the line.
  std::string to_string() const;

  // Returns a copy whose message is "<context>: <message>".
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Shorthand constructors, one per code.
Status invalid_argument(std::string message);
Status not_found(std::string message);
Status unimplemented(std::string message);
Status incompatible(std::string message);
Status resource_exhausted(std::string message);
Status device_lost(std::string message);
Status deadline_exceeded(std::string message);
Status data_loss(std::string message);
Status internal_error(std::string message);
Status failed_precondition(std::string message);
Status unavailable(std::string message);
Status out_of_range(std::string message);

// Either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Status status) : state_(std::in_place_index<1>, std::move(status)) {
    assert(!std::get<1>(state_).ok() && "Result built from an OK status");
    if (std::get<1>(state_).ok()) {
      std::get<1>(state_) = Status(StatusCode::kInternal,
                                   "Result constructed from an OK status");
    }
  }

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // The error; OK when a value is held. On an lvalue this is a reference
  // into the Result, so `r.status().message()` stays valid as long as `r`.
  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(state_);
  }
  Status status() && { return ok() ? Status() : std::get<1>(std::move(state_)); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> state_;
};

// `text` with every control character (bytes below 0x20, 0x7f, and the C1
// controls U+0080-U+009F in UTF-8) written as \xNN, so that printing a name
// or message that came from a file or a plugin keeps to one line and cannot
// send escape sequences to a terminal. Other UTF-8 is kept.
std::string escape_control(std::string_view text);

}  // namespace loom

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define LOOM_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::loom::Status loom_status_tmp_ = (expr);      \
    if (!loom_status_tmp_.ok()) return loom_status_tmp_; \
  } while (0)

#define LOOM_CONCAT_INNER_(a, b) a##b
#define LOOM_CONCAT_(a, b) LOOM_CONCAT_INNER_(a, b)

// Declares `lhs` from a Result expression, or returns its Status.
//   LOOM_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  LOOM_ASSIGN_OR_RETURN_IMPL_(LOOM_CONCAT_(loom_result_, __LINE__), lhs, expr)
#define LOOM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
