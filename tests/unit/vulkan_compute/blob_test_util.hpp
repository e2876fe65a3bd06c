// Helpers for tests that build vulkan-compute blob programs by hand.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "loom/vulkan_compute/blob_format.hpp"

namespace loom::vulkan::test_util {

// Appends a tensor to `p`; returns its index.
inline uint32_t add_tensor(BlobProgram* p, TensorKind kind, std::vector<int64_t> shape) {
  BlobTensor t;
  t.kind = kind;
  t.shape = std::move(shape);
  p->tensors.push_back(t);
  return static_cast<uint32_t>(p->tensors.size() - 1);
}

}  // namespace loom::vulkan::test_util
