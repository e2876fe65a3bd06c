// The arguments of executable_check / executable_load / execute as a plugin's
// Device and Executable members receive them, already checked.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp).
#ifndef LOOM_SDK_CALLS_HPP_
#define LOOM_SDK_CALLS_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

#include "loom/plugin.h"
#include "loom/sdk/status.hpp"

namespace loom::sdk {

// A blob handed to executable_check / executable_estimate / executable_load.
// For executable_load the bytes stay valid and unchanged until the
// executable is destroyed (the plugin may point into them); for the others
// only during the call. Validate them before trusting anything in them: the
// host hands over whatever the program file holds (see loom/sdk/blob.hpp).
struct Blob {
  const char* loader_key = nullptr;  // never NULL
  uint32_t format_version = 0;       // 0 when the program did not record it
  const void* data = nullptr;
  size_t size = 0;
};

// One execute call, its structs already checked (non-NULL, 1.0 size, rank
// within LOOM_MAX_RANK, shape set when rank > 0). Everything is borrowed for
// the execution: until execute returns, or, when `signal_fence` is set and
// the plugin completes later, until it signals that fence.
template <typename FenceT>
struct ExecuteCallT {
  const loom_tensor_t* const* inputs = nullptr;
  size_t input_count = 0;
  const loom_tensor_t* const* outputs = nullptr;
  size_t output_count = 0;
  loom_fence_t* const* wait_fences = nullptr;
  size_t wait_fence_count = 0;
  FenceT* signal_fence = nullptr;  // may be NULL

  FenceT* wait_fence(size_t i) const { return reinterpret_cast<FenceT*>(wait_fences[i]); }
};

// The checks ExecuteCallT promises, for the tensors of one side of an
// execute call ("input" or "output"): the array present, each tensor non-NULL
// and of a known struct size, its rank within LOOM_MAX_RANK and its shape
// present. Allocates nothing when they hold.
inline Status check_execute_tensors(const loom_tensor_t* const* tensors, size_t count, const char* what) {
  if (count != 0 && tensors == nullptr) {
    return invalid_argument("execute: " + std::to_string(count) + " " + what + "s but no array");
  }
  // The happy path builds no strings: execute runs per inference and must
  // not allocate.
  auto where = [&](size_t i) { return std::string("execute: ") + what + " " + std::to_string(i); };
  for (size_t i = 0; i < count; ++i) {
    const loom_tensor_t* t = tensors[i];
    if (t == nullptr) return invalid_argument(where(i) + " is NULL");
    if (t->struct_size < LOOM_TENSOR_V1_0_SIZE) {
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size(where(i).c_str(), "loom_tensor_t", t->struct_size,
                                          LOOM_TENSOR_V1_0_SIZE));
    }
    if (t->rank > LOOM_MAX_RANK) {
      return invalid_argument(where(i) + " has rank " + std::to_string(t->rank) +
                              ", the ABI allows " + std::to_string(LOOM_MAX_RANK));
    }
    if (t->rank != 0 && t->shape == nullptr) return invalid_argument(where(i) + " has no shape");
  }
  return Status();
}

}  // namespace loom::sdk

#endif  // LOOM_SDK_CALLS_HPP_
