// Helpers of the quantized-operator tests (cpu_simd_int8_test.cpp,
// cpu_simd_int8_chain_test.cpp): tensors of any dtype as bytes with their
// plugin and reference-kernel views, random quantized operands, and a
// QLinearConv's attributes in both forms.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd::int8_testing {

// A tensor of any dtype, as bytes, with its plugin and kernel views.
struct QTensor {
  Dims shape;
  loom_dtype_t dtype = LOOM_DTYPE_U8;
  std::vector<uint8_t> bytes;
  loom_tensor_t desc{};

  void refresh() {
    desc = ::loom::testing::host_tensor(dtype, shape, bytes.data(), bytes.size());
  }
  kernels::TensorRef ref() {
    return kernels::TensorRef{static_cast<DType>(dtype), shape, bytes.data(), bytes.size()};
  }
};

inline QTensor make(Dims shape, loom_dtype_t dtype, std::mt19937& rng, int lo = -1000, int hi = 1000) {
  QTensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  const size_t n = count_of(t.shape);
  t.bytes.resize(n * dtype_size(dtype));
  std::uniform_int_distribution<int> any(0, 255);
  std::uniform_int_distribution<int> wide(lo, hi);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::uniform_real_distribution<float> real(-3.0f, 3.0f);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == LOOM_DTYPE_U8 || dtype == LOOM_DTYPE_I8) {
      t.bytes[i] = static_cast<uint8_t>(any(rng));
    } else if (dtype == LOOM_DTYPE_I32) {
      const int32_t v = wide(rng);
      std::memcpy(&t.bytes[i * 4], &v, 4);
    } else {
      const float v = lo == 1 ? scale(rng) : real(rng);
      std::memcpy(&t.bytes[i * 4], &v, 4);
    }
  }
  return t;
}

inline QTensor scales(Dims shape, std::mt19937& rng) { return make(std::move(shape), LOOM_DTYPE_F32, rng, 1, 1); }

inline BlobNode conv_attrs(int64_t group, Dims kernel, Dims strides, Dims dilations, Dims pads, int mask = 0) {
  BlobNode n;
  n.ints = {static_cast<int64_t>(kernel.size()), group};
  for (const Dims* v : {&kernel, &strides, &dilations, &pads}) n.ints.insert(n.ints.end(), v->begin(), v->end());
  n.trans_a = mask;
  return n;
}

inline std::vector<AttributeDef> conv_kernel_attrs(int64_t group, Dims strides, Dims dilations, Dims pads) {
  std::vector<AttributeDef> a = {int_attr("group", group)};
  auto ints = [](const char* name, Dims v) {
    AttributeDef d;
    d.name = name;
    d.kind = AttributeKind::kInts;
    d.ints = std::move(v);
    return d;
  };
  a.push_back(ints("strides", std::move(strides)));
  a.push_back(ints("dilations", std::move(dilations)));
  a.push_back(ints("pads", std::move(pads)));
  return a;
}

}  // namespace loom::cpu_simd::int8_testing
