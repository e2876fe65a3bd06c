// The reference operators, one run/infer pair each; registry.cpp lists them.
#pragma once

#include "kernels/kernel.hpp"

namespace loom::kernels::ops {

#define LOOM_KERNELS_DECLARE_OP(name)                                          \
  Status name##_run(std::span<const TensorRef> inputs,                         \
                    std::span<const TensorRef> outputs, const Attributes& attributes); \
  Result<std::vector<TensorType>> name##_infer(std::span<const TensorType> inputs, \
                                               const Attributes& attributes)

LOOM_KERNELS_DECLARE_OP(gemm);
LOOM_KERNELS_DECLARE_OP(matmul);
LOOM_KERNELS_DECLARE_OP(softmax);

#undef LOOM_KERNELS_DECLARE_OP

}  // namespace loom::kernels::ops
