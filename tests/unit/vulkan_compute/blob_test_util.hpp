// Helpers for tests (and fuzz_make_seeds) that build vulkan-compute blob
// programs by hand.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "loom/vulkan_compute/blob_format.hpp"
#include "loom/vulkan_compute/int8_kernels.hpp"

namespace loom::vulkan::test_util {

// Appends a tensor to `p`; returns its index.
inline uint32_t add_tensor(BlobProgram* p, TensorKind kind, std::vector<int64_t> shape) {
  BlobTensor t;
  t.kind = kind;
  t.shape = std::move(shape);
  p->tensors.push_back(t);
  return static_cast<uint32_t>(p->tensors.size() - 1);
}

// Format 4's dtypes and int8 kernels (quantize, dequantize, qconv): an
// int8 program: f32 x quantized to u8, a u8 x i8 convolution
// writing i8, and the i8 result dequantized to f32.
inline BlobProgram int8_program() {
  BlobProgram p;
  auto add = [&](TensorKind kind, std::vector<int64_t> shape, DType dtype) {
    const uint32_t t = add_tensor(&p, kind, std::move(shape));
    p.tensors[t].dtype = dtype;
    return t;
  };
  const uint32_t x = add(TensorKind::kInput, {1, 2, 4, 4}, DType::kF32);
  const uint32_t qtable = add(TensorKind::kConstant, {2}, DType::kF32);
  const uint32_t xq = add(TensorKind::kIntermediate, {1, 2, 4, 4}, DType::kU8);
  const uint32_t w = add(TensorKind::kConstant, {3, 2, 3, 3}, DType::kI8);
  const uint32_t ctable = add(TensorKind::kConstant, {9}, DType::kI32);
  const uint32_t yq = add(TensorKind::kIntermediate, {1, 3, 2, 2}, DType::kI8);
  const uint32_t dtable = add(TensorKind::kConstant, {2}, DType::kF32);
  const uint32_t y = add(TensorKind::kOutput, {1, 3, 2, 2}, DType::kF32);
  p.tensors[qtable].data_offset = 0;
  p.tensors[w].data_offset = 8;
  p.tensors[ctable].data_offset = 64;
  p.tensors[dtable].data_offset = 100;
  p.data.assign(108, 0);
  p.inputs = {x};
  p.outputs = {y};
  p.dispatches.push_back(make_quantize(x, qtable, xq, 32, 1, 1, false));
  ConvParams c;
  c.n = 1; c.c = 2; c.h = 4; c.w = 4; c.m = 3; c.oh = 2; c.ow = 2; c.kh = 3; c.kw = 3;
  p.dispatches.push_back(make_qconv(c, xq, w, ctable, yq, 128, -3, DType::kU8, DType::kI8, DType::kI8));
  p.dispatches.push_back(make_dequantize(yq, dtable, y, 12, 1, 1, DType::kI8));
  return p;
}

}  // namespace loom::vulkan::test_util
