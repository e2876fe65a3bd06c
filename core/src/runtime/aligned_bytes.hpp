// Zero-filled heap memory with a chosen alignment, for session arenas and the
// parameter bytes a program owns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::runtime {

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedFree>;

// `size` bytes (at least one) aligned to `alignment`, a power of two; zeroed.
inline Result<AlignedBytes> allocate_aligned(uint64_t size, uint64_t alignment) {
  if (size > UINT64_MAX - alignment) {
    return resource_exhausted("cannot allocate " + std::to_string(size) + " bytes");
  }
  LOOM_RETURN_IF_ERROR(check_allocation(size, "a buffer"));
  uint64_t rounded = (std::max<uint64_t>(size, 1) + alignment - 1) / alignment * alignment;
  void* p = rounded > SIZE_MAX ? nullptr : std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    return resource_exhausted("cannot allocate " + std::to_string(size) + " bytes");
  }
  std::memset(p, 0, rounded);
  return AlignedBytes(static_cast<std::byte*>(p));
}

}  // namespace loom::runtime
