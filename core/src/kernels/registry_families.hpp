// Each family of reference kernels registers its operators in one function;
// KernelRegistry::reference() calls them all. One folder per family (each with its
// registry.cpp) so that families grow without touching each other.
#pragma once

#include "kernels/kernel.hpp"

namespace loom::kernels {

// Unary math and activations, binary and variadic arithmetic, comparisons,
// logic, Where, Cast, Identity, Dropout, QuantizeLinear, DequantizeLinear.
void register_elementwise_kernels(KernelRegistry& registry);
// Conv, ConvTranspose, MatMul, Gemm, the normalizations, LRN, the pools and the
// quantized/integer matrix products.
void register_nn_kernels(KernelRegistry& registry);
// Shape and data movement: Reshape, Transpose, Concat, Slice, Gather, Pad,
// Resize, Shape, Range, EyeLike, the window functions, ... .
void register_shape_kernels(KernelRegistry& registry);
// Reductions, ArgMax/ArgMin, TopK, CumSum, Einsum, Softmax, LogSoftmax, the
// losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
void register_reduce_kernels(KernelRegistry& registry);

}  // namespace loom::kernels
