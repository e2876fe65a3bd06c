// Every fpga-stub operator against the reference kernels (loom_kernels):
// int8 results bit-exact, f32 within cpu-simd's tolerance. Each case is a
// one-node bitstream run through DMA and a kernel launch.
#include <cmath>
#include <random>

#include "harness.hpp"
#include "kernels/kernel.hpp"

namespace loom::fpga_stub::testing {
namespace {

struct Host {
  loom_dtype_t dtype = LOOM_DTYPE_INVALID;  // INVALID: an absent optional operand
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

std::mt19937& rng() {
  static thread_local std::mt19937 gen(1234);
  return gen;
}

template <typename T>
Host make(loom_dtype_t dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  Host h{dtype, std::move(shape), {}};
  const auto* p = reinterpret_cast<const std::byte*>(values.data());
  h.bytes.assign(p, p + values.size() * sizeof(T));
  return h;
}

Host random(loom_dtype_t dtype, std::vector<int64_t> shape, int lo = -128, int hi = 127) {
  const uint64_t n = element_count(shape);
  Host h{dtype, std::move(shape), std::vector<std::byte>(n * dtype_size(dtype))};
  if (dtype == LOOM_DTYPE_F32) {
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    for (uint64_t i = 0; i < n; ++i) reinterpret_cast<float*>(h.bytes.data())[i] = d(rng());
  } else if (dtype == LOOM_DTYPE_I32) {
    std::uniform_int_distribution<int32_t> d(-1000, 1000);
    for (uint64_t i = 0; i < n; ++i) reinterpret_cast<int32_t*>(h.bytes.data())[i] = d(rng());
  } else {
    const int l = dtype == LOOM_DTYPE_U8 ? std::max(lo, 0) : lo;
    const int u = dtype == LOOM_DTYPE_U8 ? std::min(std::max(hi, 0) + (hi < 0 ? 0 : 128), 255) : hi;
    std::uniform_int_distribution<int> d(l, u);
    for (uint64_t i = 0; i < n; ++i) h.bytes[i] = static_cast<std::byte>(d(rng()));
  }
  return h;
}

Host scalar_f(float v) { return make<float>(LOOM_DTYPE_F32, {}, {v}); }
Host scalar_q(loom_dtype_t dtype, int v) {
  return make<uint8_t>(dtype, {}, {static_cast<uint8_t>(static_cast<int8_t>(v))});
}

AttributeDef ints_attr(const char* name, std::vector<int64_t> v) {
  AttributeDef a;
  a.name = name;
  a.kind = AttributeKind::kInts;
  a.ints = std::move(v);
  return a;
}
AttributeDef int_attr(const char* name, int64_t v) {
  AttributeDef a;
  a.name = name;
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}
AttributeDef float_attr(const char* name, float v) {
  AttributeDef a;
  a.name = name;
  a.kind = AttributeKind::kFloat;
  a.f = v;
  return a;
}

class FpgaStubOps : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(h_.api(), nullptr);
    ASSERT_EQ(h_.create(), "ok");
    device_ = h_.device(0);
  }

  // Runs `op` on the device with `inputs` as I/O tensors (the ones in
  // `constants` as weights instead) and returns the output's bytes.
  std::vector<std::byte> device_run(Op op, const std::vector<Host>& inputs, loom_dtype_t out_dtype,
                                    const std::vector<int64_t>& out_shape, std::vector<int64_t> params,
                                    std::initializer_list<size_t> constants = {}) {
    ProgramBuilder b;
    std::vector<int32_t> ids;
    std::vector<size_t> io;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Host& in = inputs[i];
      bool is_const = false;
      for (size_t c : constants) is_const = is_const || c == i;
      if (in.dtype == LOOM_DTYPE_INVALID) {
        ids.push_back(-1);
      } else if (is_const) {
        ids.push_back(static_cast<int32_t>(b.constant(in.dtype, in.shape, in.bytes)));
      } else {
        ids.push_back(static_cast<int32_t>(b.input(in.dtype, in.shape)));
        io.push_back(i);
      }
    }
    const uint32_t out = b.output(out_dtype, out_shape);
    b.node(op, ids, out, std::move(params));
    loom_executable_t* exe = nullptr;
    std::vector<std::byte> result(b.bs.tensors[out].bytes);
    const std::string loaded = h_.load(device_, encode(b.bs), &exe);
    EXPECT_EQ(loaded, "ok");
    if (loaded != "ok") return result;
    std::vector<DeviceTensor> tensors;
    std::vector<const loom_tensor_t*> in_descs;
    for (size_t i : io) {
      tensors.push_back(make_tensor(h_, device_, inputs[i].dtype, inputs[i].shape));
      EXPECT_EQ(h_.upload(tensors.back().buffer, inputs[i].bytes.data(), inputs[i].bytes.size()), "ok");
    }
    for (auto& t : tensors) {
      t.desc.shape = t.shape.data();
      in_descs.push_back(&t.desc);
    }
    DeviceTensor y = make_tensor(h_, device_, out_dtype, out_shape);
    y.desc.shape = y.shape.data();
    EXPECT_EQ(h_.execute(exe, in_descs, {&y.desc}), "ok");
    EXPECT_EQ(h_.download(y.buffer, result.data(), result.size()), "ok");
    h_.api()->executable_destroy(exe);
    for (auto& t : tensors) h_.api()->buffer_free(t.buffer);
    h_.api()->buffer_free(y.buffer);
    return result;
  }

  static std::vector<std::byte> reference_run(const char* kernel, const std::vector<Host>& inputs,
                                              loom_dtype_t out_dtype, const std::vector<int64_t>& out_shape,
                                              const std::vector<AttributeDef>& attrs) {
    std::vector<kernels::TensorRef> refs;
    for (const Host& in : inputs) {
      if (in.dtype == LOOM_DTYPE_INVALID) {
        refs.emplace_back();
        continue;
      }
      refs.push_back({static_cast<DType>(in.dtype), in.shape, const_cast<std::byte*>(in.bytes.data()),
                      in.bytes.size()});
    }
    std::vector<std::byte> out(element_count(out_shape) * dtype_size(out_dtype));
    std::vector<kernels::TensorRef> outs = {{static_cast<DType>(out_dtype), out_shape, out.data(), out.size()}};
    const auto registry = kernels::KernelRegistry::reference();
    loom::Status s = registry.find(kernel)->run(refs, outs, kernels::Attributes(attrs));
    EXPECT_TRUE(s.ok()) << s.to_string();
    return out;
  }

  void expect_same(Op op, const char* kernel, const std::vector<Host>& inputs, loom_dtype_t out_dtype,
                   const std::vector<int64_t>& out_shape, std::vector<int64_t> params,
                   const std::vector<AttributeDef>& attrs, std::initializer_list<size_t> constants = {}) {
    const auto got = device_run(op, inputs, out_dtype, out_shape, std::move(params), constants);
    const auto want = reference_run(kernel, inputs, out_dtype, out_shape, attrs);
    ASSERT_EQ(got.size(), want.size());
    if (out_dtype != LOOM_DTYPE_F32) {
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
      EXPECT_EQ(differ, 0u) << kernel << ": " << differ << " of " << got.size() << " bytes differ";
      return;
    }
    const auto* g = reinterpret_cast<const float*>(got.data());
    const auto* w = reinterpret_cast<const float*>(want.data());
    for (size_t i = 0; i < got.size() / 4; ++i) {
      ASSERT_NEAR(g[i], w[i], 1e-4f + 1e-4f * std::fabs(w[i])) << kernel << " element " << i;
    }
  }

  Harness h_;
  loom_device_t* device_ = nullptr;
};

// ------------------------------------------------------------------ int8

TEST_F(FpgaStubOps, QLinearConvIsBitExact) {
  for (loom_dtype_t t : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
    for (int64_t group : {1, 3}) {
      const int64_t m = 6;
      std::vector<float> ws(m);
      for (auto& s : ws) s = 0.01f + 0.001f * static_cast<float>(&s - ws.data());
      std::vector<uint8_t> wz(m, static_cast<uint8_t>(t == LOOM_DTYPE_U8 ? 3 : 0));
      const std::vector<Host> in = {random(t, {2, 3, 7, 7}), scalar_f(0.05f), scalar_q(t, t == LOOM_DTYPE_U8 ? 128 : -2),
                                    random(t, {m, 3 / group, 3, 3}), make<float>(LOOM_DTYPE_F32, {m}, ws),
                                    make<uint8_t>(t, {m}, wz), scalar_f(0.2f), scalar_q(t, t == LOOM_DTYPE_U8 ? 100 : 5),
                                    random(LOOM_DTYPE_I32, {m})};
      expect_same(Op::kQLinearConv, "QLinearConv", in, t, {2, m, 4, 4}, window(group, 3, 2, 1),
                  {ints_attr("pads", {1, 1, 1, 1}), ints_attr("strides", {2, 2}), int_attr("group", group)}, {3, 4, 5});
    }
  }
}

TEST_F(FpgaStubOps, ConvIntegerIsBitExact) {
  const std::vector<Host> in = {random(LOOM_DTYPE_U8, {1, 2, 5, 5}), random(LOOM_DTYPE_U8, {4, 2, 2, 2}),
                                scalar_q(LOOM_DTYPE_U8, 7), scalar_q(LOOM_DTYPE_U8, 9)};
  expect_same(Op::kConvInteger, "ConvInteger", in, LOOM_DTYPE_I32, {1, 4, 4, 4}, window(1, 2, 1, 0),
              {});
  const std::vector<Host> no_zp = {random(LOOM_DTYPE_I8, {1, 2, 5, 5}), random(LOOM_DTYPE_I8, {4, 2, 3, 3})};
  expect_same(Op::kConvInteger, "ConvInteger", no_zp, LOOM_DTYPE_I32, {1, 4, 3, 3},
              {1, 3, 3, 1, 1, 2, 2, 1, 1, 1, 1, 0, 0}, {ints_attr("pads", {1, 1, 1, 1}), ints_attr("dilations", {2, 2})});
}

TEST_F(FpgaStubOps, QLinearMatMulIsBitExact) {
  for (loom_dtype_t t : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
    std::vector<float> bs(5, 0.03f);
    bs[2] = 0.07f;
    const std::vector<Host> in = {random(t, {2, 3, 4}), scalar_f(0.1f), scalar_q(t, 10), random(t, {4, 5}),
                                  make<float>(LOOM_DTYPE_F32, {5}, bs), make<uint8_t>(t, {5}, std::vector<uint8_t>(5, 2)),
                                  scalar_f(0.05f), scalar_q(t, t == LOOM_DTYPE_U8 ? 120 : -3)};
    expect_same(Op::kQLinearMatMul, "QLinearMatMul", in, t, {2, 3, 5}, {}, {}, {3});
  }
}

TEST_F(FpgaStubOps, MatMulIntegerIsBitExact) {
  const std::vector<Host> in = {random(LOOM_DTYPE_I8, {3, 4}), random(LOOM_DTYPE_U8, {2, 4, 5}),
                                scalar_q(LOOM_DTYPE_I8, -4), make<uint8_t>(LOOM_DTYPE_U8, {5}, {1, 2, 3, 4, 5})};
  expect_same(Op::kMatMulInteger, "MatMulInteger", in, LOOM_DTYPE_I32, {2, 3, 5}, {}, {});
}

TEST_F(FpgaStubOps, QuantizeAndDequantizeAreBitExact) {
  Host x = random(LOOM_DTYPE_F32, {2, 3, 4});
  // Values at exact .5 steps check round-half-to-even; large ones saturate.
  auto* xf = reinterpret_cast<float*>(x.bytes.data());
  xf[0] = 0.25f;
  xf[1] = 0.75f;
  xf[2] = 1000.0f;
  xf[3] = -1000.0f;
  expect_same(Op::kQuantizeLinear, "QuantizeLinear", {x, scalar_f(0.5f), scalar_q(LOOM_DTYPE_U8, 128)}, LOOM_DTYPE_U8,
              {2, 3, 4}, {1}, {});
  expect_same(Op::kQuantizeLinear, "QuantizeLinear", {x, scalar_f(0.02f)}, LOOM_DTYPE_U8, {2, 3, 4}, {1}, {});
  const Host scales = make<float>(LOOM_DTYPE_F32, {3}, std::vector<float>{0.1f, 0.2f, 0.5f});
  const Host zps = make<uint8_t>(LOOM_DTYPE_I8, {3}, std::vector<uint8_t>{0, 3, 0xfd});
  expect_same(Op::kQuantizeLinear, "QuantizeLinear", {x, scales, zps}, LOOM_DTYPE_I8, {2, 3, 4}, {1},
              {int_attr("axis", 1)});
  expect_same(Op::kDequantizeLinear, "DequantizeLinear", {random(LOOM_DTYPE_I8, {2, 3, 4}), scales, zps},
              LOOM_DTYPE_F32, {2, 3, 4}, {1}, {int_attr("axis", 1)});
  expect_same(Op::kDequantizeLinear, "DequantizeLinear", {random(LOOM_DTYPE_I32, {6}), scalar_f(0.25f)},
              LOOM_DTYPE_F32, {6}, {1}, {});
}

// ------------------------------------------------------------------ f32

TEST_F(FpgaStubOps, ConvMatchesReference) {
  expect_same(Op::kConv, "Conv", {random(LOOM_DTYPE_F32, {1, 4, 6, 6}), random(LOOM_DTYPE_F32, {4, 2, 3, 3}),
                                  random(LOOM_DTYPE_F32, {4})},
              LOOM_DTYPE_F32, {1, 4, 3, 3}, {2, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0},
              {ints_attr("pads", {1, 1, 0, 0}), ints_attr("strides", {2, 2}), int_attr("group", 2)}, {1});
}

TEST_F(FpgaStubOps, GemmAndMatMulMatchReference) {
  auto bits = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return static_cast<int64_t>(b);
  };
  expect_same(Op::kGemm, "Gemm", {random(LOOM_DTYPE_F32, {4, 3}), random(LOOM_DTYPE_F32, {5, 4}), random(LOOM_DTYPE_F32, {5})},
              LOOM_DTYPE_F32, {3, 5}, {1, 1, bits(0.5f), bits(2.0f)},
              {int_attr("transA", 1), int_attr("transB", 1), float_attr("alpha", 0.5f), float_attr("beta", 2.0f)});
  expect_same(Op::kMatMul, "MatMul", {random(LOOM_DTYPE_F32, {2, 1, 3, 4}), random(LOOM_DTYPE_F32, {3, 4, 2})},
              LOOM_DTYPE_F32, {2, 3, 3, 2}, {}, {});
}

TEST_F(FpgaStubOps, ElementwiseMatchReference) {
  expect_same(Op::kAdd, "Add", {random(LOOM_DTYPE_F32, {2, 3, 4}), random(LOOM_DTYPE_F32, {3, 1})}, LOOM_DTYPE_F32,
              {2, 3, 4}, {}, {});
  expect_same(Op::kMul, "Mul", {random(LOOM_DTYPE_F32, {4}), random(LOOM_DTYPE_F32, {2, 3, 1})}, LOOM_DTYPE_F32,
              {2, 3, 4}, {}, {});
  expect_same(Op::kRelu, "Relu", {random(LOOM_DTYPE_F32, {7})}, LOOM_DTYPE_F32, {7}, {}, {});
  expect_same(Op::kConcat, "Concat", {random(LOOM_DTYPE_F32, {2, 1, 3}), random(LOOM_DTYPE_F32, {2, 2, 3})},
              LOOM_DTYPE_F32, {2, 3, 3}, {1}, {int_attr("axis", 1)});
}

TEST_F(FpgaStubOps, PoolsMatchReference) {
  const Host x = random(LOOM_DTYPE_F32, {1, 2, 5, 5});
  expect_same(Op::kMaxPool, "MaxPool", {x}, LOOM_DTYPE_F32, {1, 2, 3, 3}, window(1, 2, 2, 0, 0, 1),
              {ints_attr("kernel_shape", {2, 2}), ints_attr("strides", {2, 2}), int_attr("ceil_mode", 1)});
  expect_same(Op::kAveragePool, "AveragePool", {x}, LOOM_DTYPE_F32, {1, 2, 3, 3}, window(1, 3, 2, 1, 1),
              {ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {2, 2}), ints_attr("pads", {1, 1, 1, 1}),
               int_attr("count_include_pad", 1)});
  expect_same(Op::kAveragePool, "AveragePool", {x}, LOOM_DTYPE_F32, {1, 2, 3, 3}, window(1, 3, 2, 1, 0),
              {ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {2, 2}), ints_attr("pads", {1, 1, 1, 1})});
  expect_same(Op::kGlobalAveragePool, "GlobalAveragePool", {x}, LOOM_DTYPE_F32, {1, 2, 1, 1}, {}, {});
}

}  // namespace
}  // namespace loom::fpga_stub::testing
