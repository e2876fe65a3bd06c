// Helpers of the quantized-operator tests (cpu_simd_int8_test.cpp,
// cpu_simd_qdq_test.cpp, cpu_simd_int8_chain_test.cpp): tensors of any dtype as bytes with their
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

// A tensor of `dtype` holding exactly `values` (as bytes of that dtype).
inline QTensor exact(Dims shape, loom_dtype_t dtype, const std::vector<float>& values) {
  QTensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  for (float v : values) {
    if (dtype == LOOM_DTYPE_F32) {
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      t.bytes.insert(t.bytes.end(), b, b + 4);
    } else {
      // u8 and s8 alike: the value's low byte (two's complement for s8).
      t.bytes.push_back(static_cast<uint8_t>(static_cast<int>(v) & 0xff));
    }
  }
  return t;
}

}  // namespace loom::cpu_simd::int8_testing

namespace loom::cpu_simd {
namespace {

// Runs one quantized node on the plugin and on the reference kernel
// (cpu_simd_int8_test.cpp, cpu_simd_qdq_test.cpp).
class CpuSimdInt8 : public CpuSimdPlugin {
 protected:
  using QTensor = int8_testing::QTensor;
  // Runs one node on the plugin (twice; inputs listed in `parameters` are
  // parameters, the second run binds them at a new address) and on the
  // reference kernel; the output bytes must be equal.
  void compare(Op op, const BlobNode& attrs, std::vector<QTensor> ins, const Dims& out_shape, loom_dtype_t out_dtype,
               const char* kernel, const std::vector<AttributeDef>& kernel_attrs, std::vector<int> blob_inputs = {},
               std::vector<int> parameters = {}) {
    if (blob_inputs.empty()) {
      for (size_t i = 0; i < ins.size(); ++i) blob_inputs.push_back(static_cast<int>(i));
    }
    BlobGraph g;
    for (int i : blob_inputs) {
      BlobTensor t;
      t.dtype = ins[static_cast<size_t>(i)].dtype;
      t.shape = ins[static_cast<size_t>(i)].shape;
      t.parameter = std::find(parameters.begin(), parameters.end(), i) != parameters.end();
      g.tensors.push_back(t);
      g.inputs.push_back(static_cast<uint32_t>(g.tensors.size() - 1));
    }
    BlobTensor o;
    o.dtype = out_dtype;
    o.shape = out_shape;
    g.tensors.push_back(o);
    const uint32_t y = static_cast<uint32_t>(g.tensors.size() - 1);
    g.outputs = {y};
    BlobNode node = attrs;
    node.op = op;
    node.inputs = g.inputs;
    node.outputs = {y};
    g.nodes = {node};
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    ASSERT_EQ(format_version_for(g), 6u);
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;

    const size_t out_bytes = count_of(out_shape) * dtype_size(out_dtype);
    QTensor want{out_shape, out_dtype, std::vector<uint8_t>(out_bytes, 0x5a)};
    want.refresh();
    std::vector<kernels::TensorRef> refs;
    for (QTensor& t : ins) refs.push_back(t.ref());
    std::vector<kernels::TensorRef> outs = {want.ref()};
    const auto registry = kernels::KernelRegistry::reference();
    Status s = registry.find(kernel)->run(refs, outs, kernels::Attributes(kernel_attrs));
    ASSERT_TRUE(s.ok()) << s.to_string();

    for (int round = 0; round < 2; ++round) {
      // Round 1: fresh copies, so every input (parameters too) moves.
      std::vector<QTensor> run_ins;
      for (int i : blob_inputs) run_ins.push_back(ins[static_cast<size_t>(i)]);
      std::vector<const loom_tensor_t*> descs;
      for (QTensor& t : run_ins) {
        t.refresh();
        descs.push_back(&t.desc);
      }
      QTensor got{out_shape, out_dtype, std::vector<uint8_t>(out_bytes, 0xa5)};
      got.refresh();
      ASSERT_EQ(execute(exe, descs, {&got.desc}), "ok");
      ASSERT_EQ(got.bytes.size(), want.bytes.size());
      size_t differ = 0;
      for (size_t i = 0; i < got.bytes.size(); ++i) differ += got.bytes[i] != want.bytes[i];
      EXPECT_EQ(differ, 0u) << kernel << ": " << differ << " of " << got.bytes.size() << " bytes differ";
    }
    api_->executable_destroy(exe);
  }
};

}  // namespace
}  // namespace loom::cpu_simd

