// Helpers of the quantized-operator tests (cpu_simd_int8_test.cpp,
// cpu_simd_int8_chain_test.cpp): tensors of any dtype as bytes with their
// plugin and reference-kernel views, random quantized operands, and a
// QLinearConv's attributes in both forms.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
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

// A zeroed tensor of `dtype` and `shape` (an output to fill).
inline QTensor blank(loom_dtype_t dtype, const Dims& shape) {
  return QTensor{shape, dtype, std::vector<uint8_t>(count_of(shape) * dtype_size(dtype), 0)};
}

// Runs the reference kernel `kernel` on `ins` into `out`: "ok" or its error.
inline std::string run_reference(const char* kernel, const std::vector<QTensor*>& ins, QTensor* out,
                                 const std::vector<AttributeDef>& attrs) {
  std::vector<kernels::TensorRef> refs;
  for (QTensor* t : ins) refs.push_back(t->ref());
  std::vector<kernels::TensorRef> outs = {out->ref()};
  const auto registry = kernels::KernelRegistry::reference();
  const Status s = registry.find(kernel)->run(refs, outs, kernels::Attributes(attrs));
  return s.ok() ? "ok" : std::string(kernel) + ": " + s.to_string();
}

// Adds a tensor of `dtype` and `shape` to `g`, a constant holding
// `constant`'s bytes (f32: its values) when one is given; its index.
inline uint32_t add_tensor(BlobGraph* g, loom_dtype_t dtype, const Dims& shape, const QTensor* constant = nullptr) {
  BlobTensor bt;
  bt.dtype = dtype;
  bt.shape = shape;
  if (constant != nullptr) {
    bt.constant = true;
    if (dtype == LOOM_DTYPE_F32) {
      bt.data.resize(constant->bytes.size() / 4);
      std::memcpy(bt.data.data(), constant->bytes.data(), constant->bytes.size());
    } else {
      bt.bytes = constant->bytes;
    }
  }
  g->tensors.push_back(bt);
  return static_cast<uint32_t>(g->tensors.size() - 1);
}

// The schedule lines (`executable: schedule: ...`) among `logs`, one a line.
inline std::string schedule_lines(const std::vector<std::string>& logs) {
  std::string all;
  for (const std::string& l : logs) {
    if (l.rfind("executable: schedule:", 0) == 0) all += l + "\n";
  }
  return all;
}

}  // namespace loom::cpu_simd::int8_testing
