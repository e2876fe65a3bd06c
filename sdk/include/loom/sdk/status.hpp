// loom::sdk::Status and the C status object behind loom_status_t*.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp, which
// includes this). A plugin returns sdk::Status from its members; the thunks
// of loom/sdk/thunks.hpp turn it into the loom_status_t* the ABI returns.
// Nothing here is shared between threads: a Status is a plain value.
#ifndef LOOM_SDK_STATUS_HPP_
#define LOOM_SDK_STATUS_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "loom/plugin.h"

// The status object behind loom_status_t* for plugins built with this
// helper. Each plugin library has its own copy (hidden visibility); the host
// only ever sees the opaque pointer and the plugin's own accessors
// (status_code, status_message, status_destroy of its function table).
struct loom_status_t {
  loom_status_code_t code;
  std::string message;
};

namespace loom::sdk {

// A code plus a message; the default is OK. Cheap to move. The message
// should name what was wrong and where ("input 2 has rank 9, the ABI allows
// 8"): the host shows it to the user as is.
class Status {
 public:
  Status() = default;
  Status(loom_status_code_t code, std::string message)
      : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == LOOM_STATUS_OK; }
  loom_status_code_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // The C object to return across the ABI: NULL when OK, otherwise a new
  // loom_status_t the host releases with status_destroy. Never throws; on
  // allocation failure it returns a shared, never-freed out-of-memory status.
  loom_status_t* to_c() const noexcept;

 private:
  loom_status_code_t code_ = LOOM_STATUS_OK;
  std::string message_;
};

// Shorthands, one per code a plugin commonly returns.
inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) { return {LOOM_STATUS_INVALID_ARGUMENT, std::move(m)}; }
inline Status not_found(std::string m) { return {LOOM_STATUS_NOT_FOUND, std::move(m)}; }
inline Status unimplemented(std::string m) { return {LOOM_STATUS_UNIMPLEMENTED, std::move(m)}; }
inline Status incompatible(std::string m) { return {LOOM_STATUS_INCOMPATIBLE, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {LOOM_STATUS_RESOURCE_EXHAUSTED, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {LOOM_STATUS_DEADLINE_EXCEEDED, std::move(m)}; }
inline Status data_loss(std::string m) { return {LOOM_STATUS_DATA_LOSS, std::move(m)}; }
inline Status internal_error(std::string m) { return {LOOM_STATUS_INTERNAL, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {LOOM_STATUS_FAILED_PRECONDITION, std::move(m)}; }
inline Status unavailable(std::string m) { return {LOOM_STATUS_UNAVAILABLE, std::move(m)}; }
inline Status out_of_range(std::string m) { return {LOOM_STATUS_OUT_OF_RANGE, std::move(m)}; }

// Returns from the enclosing function when `expr` (a loom::sdk::Status) is
// not OK.
#define LOOM_SDK_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::loom::sdk::Status loom_sdk_s_ = (expr);   \
    if (!loom_sdk_s_.ok()) return loom_sdk_s_;  \
  } while (0)

namespace detail {

// Returned when even the error object cannot be allocated. It is immutable
// and status_destroy recognizes and keeps it.
inline loom_status_t* out_of_memory_status() noexcept {
  static const loom_status_t kStatus{LOOM_STATUS_RESOURCE_EXHAUSTED,
                                     "out of memory while reporting an error"};
  return const_cast<loom_status_t*>(&kStatus);
}

inline loom_status_t* make_c_status(loom_status_code_t code, const char* message) noexcept {
  try {
    return new loom_status_t{code, message};
  } catch (...) {
    return out_of_memory_status();
  }
}

inline std::string version_string(uint32_t v) {
  return std::to_string(LOOM_ABI_VERSION_MAJOR_OF(v)) + "." +
         std::to_string(LOOM_ABI_VERSION_MINOR_OF(v));
}

}  // namespace detail

// Helpers for a plugin that fills its own loom_plugin_api_t instead of
// using LOOM_SDK_DEFINE_ENTRY (fpga-stub does, to route every handle through a
// table of its own); the generated entries use the same ones.

// Checks an incoming struct_size against the size of the ABI version that
// introduced the struct (a LOOM_*_V1_0_SIZE constant, see plugin.h's rule):
// "input 2: loom_tensor_t.struct_size is 16, the 1.0 size is 56".
inline Status check_struct_size(const char* what, const char* type, size_t actual, size_t needed,
                                const char* version = "1.0") {
  if (actual >= needed) return Status();
  return invalid_argument(std::string(what) + ": " + type + ".struct_size is " +
                          std::to_string(actual) + ", the " + version + " size is " +
                          std::to_string(needed));
}

// The status_destroy entry for statuses made by Status::to_c(): frees
// them, except the immutable one returned when even an error could not be
// allocated. NULL is ignored.
inline void destroy_c_status(loom_status_t* status) noexcept {
  if (status != detail::out_of_memory_status()) delete status;
}

inline loom_status_t* Status::to_c() const noexcept {
  if (ok()) return nullptr;
  return detail::make_c_status(code_, message_.c_str());
}

}  // namespace loom::sdk

#endif  // LOOM_SDK_STATUS_HPP_
