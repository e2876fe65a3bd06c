#include "loom/status.hpp"

namespace loom {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kIncompatible: return "incompatible";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kDeviceLost: return "device_lost";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kDataLoss: return "data_loss";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kAlreadyExists: return "already_exists";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out(status_code_name(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return Status(code_, std::move(message));
}

Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
Status incompatible(std::string m) { return {StatusCode::kIncompatible, std::move(m)}; }
Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
Status device_lost(std::string m) { return {StatusCode::kDeviceLost, std::move(m)}; }
Status deadline_exceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }

}  // namespace loom
