// cpu-simd against its peers, in one run on one machine (issue 8's goals):
//  - GEMM (square 128-2048, and the skinny M x K x N of real models) against
//    oneDNN's matmul primitive with its weights reordered once;
//  - Conv2d shapes of MobileNetV3, ResNet-18 and an FPN detector head against
//    oneDNN's convolution primitive, used as a caller holding NCHW tensors
//    uses it: the source reordered into the layout the primitive chose, the
//    convolution, the result reordered back (weights reordered once). The
//    convolution alone is reported too ("Conv_OneDnnKernelOnly");
//  - QLinearConv and QLinearMatMul (u8 x s8 -> u8) on the same shapes against
//    oneDNN's int8 convolution and matmul primitives (issue 27);
//  - memory-bound operators on tensors larger than the caches against a
//    STREAM-style triad (a = b + s * c) in this binary.
// Each Loom case is a one-node graph compiled by cpu-simd's compile entry
// (weights as program parameters) and executed through the C ABI; after
// timing, sampled outputs are checked in double precision. The second
// argument of every case is the thread count (cpu-simd's loom.threads; the
// OpenMP thread count for oneDNN and the triad).
#include <omp.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "bench_support.hpp"

namespace {

using namespace loom::bench;
using dnnl::memory;
using Tag = memory::format_tag;
namespace gfb = ::loom::graph::fb;
using DType = memory::data_type;

Backend& cpu_simd(int64_t threads) {
  const char* path = plugin_path("LOOM_BENCH_CPU_SIMD_PLUGIN", LOOM_CPU_SIMD_PLUGIN_PATH);
  static Backend one(path, {{"loom.threads", "1"}});
  static Backend two(path, {{"loom.threads", "2"}});
  return threads == 1 ? one : two;
}

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

memory filled(const memory::desc& md, uint32_t seed) {
  memory m(md, engine());
  std::vector<float> v(md.get_size() / sizeof(float));
  fill(v, seed);
  std::memcpy(m.get_data_handle(), v.data(), md.get_size());
  return m;
}

// ------------------------------------------------------------------ GEMM

std::string check_matmul(const std::vector<std::vector<float>>& t, int64_t m, int64_t k, int64_t n) {
  for (int64_t s = 0; s < 64; ++s) {
    const int64_t i = (s * 7919) % m, j = (s * 104729 + 13) % n;
    double want = 0, scale = 0;
    for (int64_t p = 0; p < k; ++p) {
      const double v = static_cast<double>(t[0][i * k + p]) * t[1][p * n + j];
      want += v;
      scale += std::fabs(v);
    }
    std::string e = compare("Y", static_cast<size_t>(i * n + j), t[2][i * n + j], want, scale);
    if (!e.empty()) return e;
  }
  return "";
}

void set_gemm_counters(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * k * n * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// Args: M, K, N, threads.
void BM_MatMul_CpuSimd(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  run_case(state, cpu_simd(state.range(3)), one_node("MatMul", {{m, k}, {k, n}}, {m, n}, {}, {false, true}),
           {{m, k}, {k, n}, {m, n}}, [=](const auto& t) { return check_matmul(t, m, k, n); });
  set_gemm_counters(state, m, k, n);
}

void BM_MatMul_OneDnn(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  omp_set_num_threads(static_cast<int>(state.range(3)));
  const memory::desc a({m, k}, DType::f32, Tag::ab), b({k, n}, DType::f32, Tag::ab);
  const memory::desc c({m, n}, DType::f32, Tag::ab), b_any({k, n}, DType::f32, Tag::any);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b_any, c), engine());
  dnnl::stream stream(engine());
  memory ma = filled(a, 1), mb_user = filled(b, 2), mc(c, engine());
  memory mb(pd.weights_desc(), engine());
  dnnl::reorder(mb_user, mb).execute(stream, mb_user, mb);  // once, as a model's weights
  dnnl::matmul mm(pd);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  for (auto _ : state) {
    mm.execute(stream, args);
    stream.wait();
  }
  state.SetLabel(pd.impl_info_str());
  set_gemm_counters(state, m, k, n);
}

void gemm_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2}) {
    for (int64_t s : {128, 256, 512, 1024, 2048}) b->Args({s, s, s, threads});
    for (int64_t m : {1, 8, 64}) {
      b->Args({m, 768, 3072, threads});   // transformer MLP up-projection
      b->Args({m, 4096, 1024, threads});  // a wide-to-narrow layer
      b->Args({m, 512, 1000, threads});   // a ResNet classifier
    }
  }
}

// ------------------------------------------------------------------ Conv

struct ConvShape {
  int64_t c, hw, o, k, stride, group;
};

// Args index into kConvShapes, then threads.
constexpr ConvShape kConvShapes[] = {
    {64, 56, 64, 3, 1, 1},     // ResNet-18 layer1 3x3
    {64, 56, 128, 3, 2, 1},    // ResNet-18 layer2 entry 3x3 s2
    {64, 56, 128, 1, 2, 1},    // ResNet-18 downsample 1x1 s2
    {256, 14, 256, 3, 1, 1},   // ResNet-18 layer3 3x3
    {3, 224, 16, 3, 2, 1},     // MobileNetV3 stem 3x3 s2
    {16, 112, 16, 3, 2, 16},   // MobileNetV3 depthwise 3x3 s2
    {96, 14, 96, 5, 1, 96},    // MobileNetV3 depthwise 5x5
    {24, 28, 96, 1, 1, 1},     // MobileNetV3 expansion 1x1
    {128, 40, 128, 1, 1, 1},   // FPN lateral 1x1 (320 input, stride 8)
    {128, 40, 128, 3, 1, 1},   // FPN head 3x3
};

int64_t conv_out(const ConvShape& s) { return (s.hw + 2 * (s.k / 2) - s.k) / s.stride + 1; }

std::string label_conv(benchmark::State& state, const ConvShape& s) {
  const std::string label = ("c" + std::to_string(s.c) + " " + std::to_string(s.hw) + "x" + std::to_string(s.hw) +
                 " o" + std::to_string(s.o) + " k" + std::to_string(s.k) + " s" + std::to_string(s.stride) +
                 (s.group > 1 ? " depthwise" : ""));
  state.SetLabel(label);
  const double oh = static_cast<double>(conv_out(s));
  const double flops = 2.0 * oh * oh * s.o * (s.c / s.group) * s.k * s.k;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  return label;
}

void BM_Conv_CpuSimd(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  const int64_t oh = conv_out(s), p = s.k / 2, cg = s.c / s.group;
  const Dims x = {1, s.c, s.hw, s.hw}, w = {s.o, cg, s.k, s.k}, y = {1, s.o, oh, oh};
  run_case(state, cpu_simd(state.range(1)),
           one_node("Conv", {x, w}, y,
                    {attr_i("group", s.group), attr_ints("pads", {p, p, p, p}),
                     attr_ints("strides", {s.stride, s.stride})},
                    {false, true}, 11),
           {x, w, y}, [=](const auto& t) {
             for (int64_t q = 0; q < 64; ++q) {
               const int64_t oc = (q * 37) % s.o, oy = (q * 13) % oh, ox = (q * 29 + 5) % oh;
               const int64_t g = oc / (s.o / s.group);
               double want = 0, scale = 0;
               for (int64_t ic = 0; ic < cg; ++ic) {
                 for (int64_t ky = 0; ky < s.k; ++ky) {
                   for (int64_t kx = 0; kx < s.k; ++kx) {
                     const int64_t iy = oy * s.stride + ky - p, ix = ox * s.stride + kx - p;
                     if (iy < 0 || iy >= s.hw || ix < 0 || ix >= s.hw) continue;
                     const double v = static_cast<double>(t[0][((g * cg + ic) * s.hw + iy) * s.hw + ix]) *
                                      t[1][((oc * cg + ic) * s.k + ky) * s.k + kx];
                     want += v;
                     scale += std::fabs(v);
                   }
                 }
               }
               const size_t at = static_cast<size_t>((oc * oh + oy) * oh + ox);
               std::string e = compare("Y", at, t[2][at], want, scale);
               if (!e.empty()) return e;
             }
             return std::string();
           });
  label_conv(state, s);
}

// oneDNN's convolution on NCHW tensors (reorders in and out timed) or, with
// `kernel_only`, on tensors already in its layout.
void onednn_conv(benchmark::State& state, bool kernel_only) {
  const ConvShape& s = kConvShapes[state.range(0)];
  omp_set_num_threads(static_cast<int>(state.range(1)));
  const int64_t oh = conv_out(s), p = s.k / 2;
  const memory::dims wd = s.group == 1 ? memory::dims{s.o, s.c, s.k, s.k}
                                       : memory::dims{s.group, s.o / s.group, s.c / s.group, s.k, s.k};
  const memory::desc x_user({1, s.c, s.hw, s.hw}, DType::f32, Tag::nchw);
  const memory::desc y_user({1, s.o, oh, oh}, DType::f32, Tag::nchw);
  const memory::desc w_user(wd, DType::f32, s.group == 1 ? Tag::oihw : Tag::goihw);
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      memory::desc({1, s.c, s.hw, s.hw}, DType::f32, Tag::any), memory::desc(wd, DType::f32, Tag::any),
      memory::desc({1, s.o, oh, oh}, DType::f32, Tag::any), {s.stride, s.stride}, {p, p}, {p, p});
  dnnl::convolution_forward::primitive_desc pd(d, engine());
  dnnl::stream stream(engine());
  memory xu = filled(x_user, 1), wu = filled(w_user, 2), yu(y_user, engine());
  memory x(pd.src_desc(), engine()), w(pd.weights_desc(), engine()), y(pd.dst_desc(), engine());
  dnnl::reorder(wu, w).execute(stream, wu, w);
  dnnl::reorder(xu, x).execute(stream, xu, x);
  dnnl::reorder to_x(xu, x), to_y(y, yu);
  dnnl::convolution_forward conv(pd);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
  for (auto _ : state) {
    if (!kernel_only) to_x.execute(stream, xu, x);
    conv.execute(stream, args);
    if (!kernel_only) to_y.execute(stream, y, yu);
    stream.wait();
  }
  state.SetLabel(label_conv(state, s) + " " + pd.impl_info_str());
}
void BM_Conv_OneDnn(benchmark::State& state) { onednn_conv(state, false); }
void BM_Conv_OneDnnKernelOnly(benchmark::State& state) { onednn_conv(state, true); }

void conv_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2}) {
    for (int64_t i = 0; i < static_cast<int64_t>(std::size(kConvShapes)); ++i) b->Args({i, threads});
  }
}

// ------------------------------------------------------------------ memory-bound

constexpr int64_t kBig = int64_t{1} << 24;  // 16 M floats, 64 MB per tensor

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> a(kBig), b(kBig), c(kBig);
  fill(b, 1);
  fill(c, 2);
  const float s = 1.5f;
  float* __restrict pa = a.data();
  const float* __restrict pb = b.data();
  const float* __restrict pc = c.data();
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < kBig; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::DoNotOptimize(pa);
  }
  state.SetBytesProcessed(state.iterations() * kBig * 12);
}

// One memory-bound operator on [rows, cols] data; `bytes` per run.
void memory_case(benchmark::State& state, const char* op, const std::vector<Dims>& ins, const Dims& out,
                 std::vector<Attr> attrs, int64_t bytes,
                 std::function<double(const std::vector<std::vector<float>>&, size_t)> want,
                 int64_t opset = 13) {
  std::vector<Dims> shapes = ins;
  shapes.push_back(out);
  const std::vector<uint8_t> graph = one_node(op, ins, out, std::move(attrs), {}, opset);
  run_case(state, cpu_simd(state.range(0)), graph, shapes, [&](const auto& t) {
    for (size_t q = 0; q < 256; ++q) {
      const size_t i = (q * 2654435761u) % t.back().size();
      std::string e = compare("Y", i, t.back()[i], want(t, i), 1.0);
      if (!e.empty()) return e;
    }
    return std::string();
  });
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_Add(benchmark::State& state) {
  memory_case(state, "Add", {{kBig}, {kBig}}, {kBig}, {}, kBig * 12,
              [](const auto& t, size_t i) { return static_cast<double>(t[0][i]) + t[1][i]; });
}
void BM_Relu(benchmark::State& state) {
  memory_case(state, "Relu", {{kBig}}, {kBig}, {}, kBig * 8,
              [](const auto& t, size_t i) { return std::max(0.0, static_cast<double>(t[0][i])); });
}
void BM_Sigmoid(benchmark::State& state) {
  memory_case(state, "Sigmoid", {{kBig}}, {kBig}, {}, kBig * 8,
              [](const auto& t, size_t i) { return 1.0 / (1.0 + std::exp(-static_cast<double>(t[0][i]))); });
}
// The same operator on 32K floats (128 KB in, 128 KB out: inside L2). Its
// rate here is what the arithmetic allows; when the large case runs no
// faster than this, the operator is bound by its arithmetic, not by memory.
void BM_Sigmoid_InCache(benchmark::State& state) {
  constexpr int64_t n = int64_t{1} << 15;
  memory_case(state, "Sigmoid", {{n}}, {n}, {}, n * 8,
              [](const auto& t, size_t i) { return 1.0 / (1.0 + std::exp(-static_cast<double>(t[0][i]))); });
}
void BM_Softmax_InCache(benchmark::State& state) {
  const int64_t cols = 1024, rows = 32;
  memory_case(state, "Softmax", {{rows, cols}}, {rows, cols}, {}, rows * cols * 8, [=](const auto& t, size_t i) {
    const size_t r = i / cols;
    double mx = -1e30, sum = 0;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, static_cast<double>(t[0][r * cols + j]));
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(t[0][r * cols + j] - mx);
    return std::exp(t[0][i] - mx) / sum;
  });
}
void BM_Softmax(benchmark::State& state) {
  const int64_t cols = 1024, rows = kBig / cols;
  memory_case(state, "Softmax", {{rows, cols}}, {rows, cols}, {}, kBig * 8, [=](const auto& t, size_t i) {
    const size_t r = i / cols;
    double mx = -1e30, sum = 0;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, static_cast<double>(t[0][r * cols + j]));
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(t[0][r * cols + j] - mx);
    return std::exp(t[0][i] - mx) / sum;
  });
}
void BM_Transpose(benchmark::State& state) {
  const int64_t n = 4096;
  memory_case(state, "Transpose", {{n, n}}, {n, n}, {attr_ints("perm", {1, 0})}, n * n * 8,
              [=](const auto& t, size_t i) { return t[0][(i % n) * n + i / n]; });
}
// The peer of BM_Transpose: oneDNN's reorder from a strided view of the
// input, which cpu-simd's schedule used for transposes before its own tiled
// kernel measured faster.
void BM_Transpose_OneDnnReorder(benchmark::State& state) {
  const int64_t n = 4096;
  omp_set_num_threads(static_cast<int>(state.range(0)));
  const memory::desc src({n, n}, DType::f32, memory::dims{1, n});
  const memory::desc dst({n, n}, DType::f32, Tag::ab);
  memory x = filled(src, 3), y(dst, engine());
  dnnl::reorder r(x, y);
  dnnl::stream stream(engine());
  for (auto _ : state) {
    r.execute(stream, x, y);
    stream.wait();
  }
  state.SetBytesProcessed(state.iterations() * n * n * 8);
}
void BM_Concat(benchmark::State& state) {
  const int64_t half = kBig / 2;
  memory_case(state, "Concat", {{1, 64, half / 64}, {1, 64, half / 64}}, {1, 128, half / 64},
              {attr_i("axis", 1)}, kBig * 8, [=](const auto& t, size_t i) {
                const size_t chunk = static_cast<size_t>(half);
                return i < chunk ? t[0][i] : t[1][i - chunk];
              });
}
void BM_MaxPool(benchmark::State& state) {
  const int64_t c = 64, hw = 512;  // 64 MB in, 16 MB out
  memory_case(state, "MaxPool", {{1, c, hw, hw}}, {1, c, hw / 2, hw / 2},
              {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})}, c * hw * hw * 5,
              [=](const auto& t, size_t i) {
                const size_t ow = hw / 2, plane = ow * ow;
                const size_t ch = i / plane, oy = (i % plane) / ow, ox = i % ow;
                double m = -1e30;
                for (size_t dy = 0; dy < 2; ++dy) {
                  for (size_t dx = 0; dx < 2; ++dx) {
                    m = std::max(m, static_cast<double>(t[0][(ch * hw + 2 * oy + dy) * hw + 2 * ox + dx]));
                  }
                }
                return m;
              });
}
void BM_LayerNormalization(benchmark::State& state) {
  const int64_t cols = 768, rows = kBig / cols;
  memory_case(state, "LayerNormalization", {{rows, cols}, {cols}, {cols}}, {rows, cols},
              {attr_i("axis", -1)}, rows * cols * 8, [=](const auto& t, size_t i) {
                const size_t r = i / cols, j = i % cols;
                double mean = 0, var = 0;
                for (int64_t q = 0; q < cols; ++q) mean += t[0][r * cols + q];
                mean /= cols;
                for (int64_t q = 0; q < cols; ++q) var += (t[0][r * cols + q] - mean) * (t[0][r * cols + q] - mean);
                var /= cols;
                return (t[0][i] - mean) / std::sqrt(var + 1e-5) * t[1][j] + t[2][j];
              }, 17);
}

// ------------------------------------------------------------------ int8 (issue 27)
// QLinearConv and QLinearMatMul on cpu-simd (u8 activations with a zero
// point, s8 weights with a scale per output channel as a program parameter,
// i32 bias, u8 output) against oneDNN's int8 convolution and matmul
// primitives with the same operands, requantization fused (output scales
// per channel, source and destination zero points). `bits` 7 draws weights
// in [-64, 64] (quantizers' reduce_range), 8 in [-127, 127]: on AVX2 without
// VNNI oneDNN adds pairs of u8 x s8 products in 16 bits, which may saturate
// with 8-bit weights (its label then counts sampled outputs off by more than
// one unit), while cpu-simd stays exact by taking a second pass
// (plugins/cpu-simd/README.md, "Quantized operators").

struct Int8Operands {
  std::vector<uint8_t> x;
  std::vector<int8_t> w;  // [out channels, rest], or [k, n] for a matmul
  std::vector<int32_t> bias;
  std::vector<float> w_scale;  // per output channel
  float x_scale = 0.02f, y_scale = 1.0f;
  uint8_t x_zero = 113, y_zero = 128;
};

Int8Operands int8_operands(size_t x_count, size_t w_count, int64_t channels, int64_t reduction, int bits) {
  Int8Operands o;
  std::vector<float> r(x_count + w_count + static_cast<size_t>(channels));
  fill(r, 7);
  const float wmax = bits == 7 ? 64.0f : 127.0f;
  for (size_t i = 0; i < x_count; ++i) o.x.push_back(static_cast<uint8_t>((r[i] + 1.0f) * 127.99f));
  for (size_t i = 0; i < w_count; ++i) o.w.push_back(static_cast<int8_t>(std::lround(r[x_count + i] * wmax)));
  for (int64_t m = 0; m < channels; ++m) {
    o.bias.push_back(static_cast<int32_t>(r[x_count + w_count + static_cast<size_t>(m)] * 2000.0f));
    o.w_scale.push_back(0.002f + 0.0001f * static_cast<float>(m % 7));
  }
  // Outputs of about +-40 units around the zero point: few saturate.
  const double spread = std::sqrt(static_cast<double>(reduction)) * 74.0 * wmax / 1.7;
  o.y_scale = static_cast<float>(o.x_scale * 0.0023 * spread / 40.0);
  return o;
}

// The QLinear requantization of one accumulator, as the reference kernels do it.
int int8_requantize(int64_t acc, const Int8Operands& o, int64_t m) {
  const float k = o.x_scale * o.w_scale[static_cast<size_t>(m)] / o.y_scale;
  const double v = std::nearbyint(static_cast<double>(static_cast<float>(acc) * k)) + o.y_zero;
  return static_cast<int>(std::clamp(v, 0.0, 255.0));
}

// Runs a compiled int8 graph (inputs x, w; output y) in the benchmark loop
// through the C ABI on host pointers; `y` receives the last run's output.
void run_int8_case(benchmark::State& state, Backend& b, const std::vector<uint8_t>& graph, const Dims& xs,
                   void* x, const Dims& ws, void* w, const Dims& ys, std::vector<uint8_t>* y) {
  if (b.device == nullptr || !b.host_execute) {
    state.SkipWithError(("no device with host-pointer execute: " + b.error).c_str());
    return;
  }
  const ::loom::testing::PluginHarness& h = b.harness;
  ::loom::testing::CompiledBlob blob;
  loom_executable_t* executable = nullptr;
  std::string s = h.compile(b.plugin, graph, &blob);
  if (s == "ok") {
    s = h.load(b.device, blob.loader_key.c_str(), blob.format_version, blob.bytes.data(), blob.bytes.size(),
               &executable);
  }
  if (s != "ok") {
    state.SkipWithError(s.c_str());
    return;
  }
  size_t n = 1;
  for (int64_t d : ys) n *= static_cast<size_t>(d);
  y->assign(n, 0);
  size_t x_bytes = 1, w_bytes = 1;
  for (int64_t d : xs) x_bytes *= static_cast<size_t>(d);
  for (int64_t d : ws) w_bytes *= static_cast<size_t>(d);
  loom_tensor_t tx = ::loom::testing::host_tensor(LOOM_DTYPE_U8, xs, x, x_bytes);
  loom_tensor_t tw = ::loom::testing::host_tensor(LOOM_DTYPE_I8, ws, w, w_bytes);
  loom_tensor_t ty = ::loom::testing::host_tensor(LOOM_DTYPE_U8, ys, y->data(), n);
  const std::vector<const loom_tensor_t*> ins = {&tx, &tw}, outs = {&ty};  // execute_args keeps pointers
  loom_execute_args_t e = ::loom::testing::execute_args(executable, ins, outs);
  const loom_plugin_api_t* api = h.api();
  for (auto _ : state) {
    if (loom_status_t* failed = api->execute(&e); failed != nullptr) {
      s = ::loom::testing::take(api, failed);
      break;
    }
  }
  if (s != "ok") state.SkipWithError(s.c_str());
  api->executable_destroy(executable);
}

// Sampled outputs against the exact integer product: "" when every one is
// within a unit, else how many of 64 are not.
template <typename Acc>
std::string int8_check(const std::vector<uint8_t>& y, int64_t count, const Int8Operands& o, Acc&& accumulate) {
  int off = 0;
  for (int64_t q = 0; q < 64; ++q) {
    const int64_t at = (q * 7919 + 11) % count;
    int64_t channel = 0;
    const int64_t acc = accumulate(at, &channel);
    if (std::abs(static_cast<int>(y[static_cast<size_t>(at)]) - int8_requantize(acc, o, channel)) > 1) ++off;
  }
  return off == 0 ? "" : std::to_string(off) + " of 64 sampled outputs off by more than 1";
}

// The exact i32 accumulator (bias included) of output `at` of a QLinearConv
// of shape `s` on `o`, and its output channel.
int64_t qconv_accumulator(const ConvShape& s, const Int8Operands& o, int64_t at, int64_t* channel) {
  const int64_t oh = conv_out(s), p = s.k / 2, cg = s.c / s.group, og = s.o / s.group;
  const int64_t oc = at / (oh * oh), oy = at / oh % oh, ox = at % oh, gi = oc / og;
  *channel = oc;
  int64_t acc = o.bias[static_cast<size_t>(oc)];
  for (int64_t ic = 0; ic < cg; ++ic) {
    for (int64_t ky = 0; ky < s.k; ++ky) {
      for (int64_t kx = 0; kx < s.k; ++kx) {
        const int64_t iy = oy * s.stride + ky - p, ix = ox * s.stride + kx - p;
        if (iy < 0 || iy >= s.hw || ix < 0 || ix >= s.hw) continue;
        acc += (int64_t{o.x[static_cast<size_t>(((gi * cg + ic) * s.hw + iy) * s.hw + ix)]} - o.x_zero) *
               o.w[static_cast<size_t>(((oc * cg + ic) * s.k + ky) * s.k + kx)];
      }
    }
  }
  return acc;
}

// The same for output `at` of an [M, K] x [K, N] QLinearMatMul (no bias).
int64_t qmatmul_accumulator(int64_t k, int64_t n, const Int8Operands& o, int64_t at, int64_t* channel) {
  const int64_t i = at / n, j = at % n;
  *channel = j;
  int64_t acc = 0;
  for (int64_t q = 0; q < k; ++q) {
    acc += (int64_t{o.x[static_cast<size_t>(i * k + q)]} - o.x_zero) * o.w[static_cast<size_t>(q * n + j)];
  }
  return acc;
}

// Runs a convolution graph of shape `s` on `o` (inputs x, w; output y) on
// cpu-simd, checks sampled outputs and labels the case.
void run_qconv_case(benchmark::State& state, const ConvShape& s, Int8Operands& o, int bits,
                    const ::loom::testing::GraphBuilder& g) {
  const int64_t oh = conv_out(s), cg = s.c / s.group;
  const Dims xd = {1, s.c, s.hw, s.hw}, wd = {s.o, cg, s.k, s.k}, yd = {1, s.o, oh, oh};
  std::vector<uint8_t> out;
  run_int8_case(state, cpu_simd(state.range(1)), g.finish(), xd, o.x.data(), wd, o.w.data(), yd, &out);
  const std::string wrong =
      out.empty() ? "" : int8_check(out, s.o * oh * oh, o, [&](int64_t at, int64_t* channel) {
        return qconv_accumulator(s, o, at, channel);
      });
  if (!wrong.empty()) state.SkipWithError(("wrong result: " + wrong).c_str());
  state.SetLabel(label_conv(state, s) + " w" + std::to_string(bits));
}

// Args: index into kConvShapes, threads, weight bits (7 or 8).
void BM_QLinearConv_CpuSimd(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  const int bits = static_cast<int>(state.range(2));
  const int64_t oh = conv_out(s), p = s.k / 2, cg = s.c / s.group;
  const Dims xd = {1, s.c, s.hw, s.hw}, wd = {s.o, cg, s.k, s.k}, yd = {1, s.o, oh, oh};
  Int8Operands o = int8_operands(static_cast<size_t>(s.c * s.hw * s.hw), static_cast<size_t>(s.o * cg * s.k * s.k),
                                 s.o, cg * s.k * s.k, bits);
  ::loom::testing::GraphBuilder g;
  const int x = g.input(xd, gfb::DType::u8);
  const int w = g.parameter(wd, "w");
  g.tensors[static_cast<size_t>(w)].dtype = gfb::DType::i8;
  const int8_t wz0 = 0;
  const std::vector<int8_t> wz(static_cast<size_t>(s.o), wz0);
  const int y = g.tensor(yd, gfb::DType::u8);
  g.node("QLinearConv",
         {x, g.constant_f32({}, {o.x_scale}), g.constant({}, gfb::DType::u8, &o.x_zero, 1), w,
          g.constant_f32({s.o}, o.w_scale), g.constant({s.o}, gfb::DType::i8, wz.data(), wz.size()),
          g.constant_f32({}, {o.y_scale}), g.constant({}, gfb::DType::u8, &o.y_zero, 1),
          g.constant({s.o}, gfb::DType::i32, o.bias.data(), o.bias.size() * 4)},
         {y},
         {attr_i("group", s.group), attr_ints("pads", {p, p, p, p}), attr_ints("strides", {s.stride, s.stride})},
         10);
  g.output(y);
  run_qconv_case(state, s, o, bits, g);
}

// The same convolution as a QDQ group (DequantizeLinear of x, of the weight
// parameter per output channel and of the i32 bias at x_scale * w_scale[m],
// Conv, QuantizeLinear), which compile fuses into one step of blob format
// 10: with these constant scales and zero points the step requantizes
// inside oneDNN's convolution where the weights allow (7-bit weights
// without VNNI), else it takes the exact path as the QOperator form does.
void BM_QLinearConv_CpuSimdQdq(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  const int bits = static_cast<int>(state.range(2));
  const int64_t oh = conv_out(s), p = s.k / 2, cg = s.c / s.group;
  const Dims xd = {1, s.c, s.hw, s.hw}, wd = {s.o, cg, s.k, s.k}, yd = {1, s.o, oh, oh};
  Int8Operands o = int8_operands(static_cast<size_t>(s.c * s.hw * s.hw), static_cast<size_t>(s.o * cg * s.k * s.k),
                                 s.o, cg * s.k * s.k, bits);
  ::loom::testing::GraphBuilder g;
  const int x = g.input(xd, gfb::DType::u8);
  const int w = g.parameter(wd, "w");
  g.tensors[static_cast<size_t>(w)].dtype = gfb::DType::i8;
  const std::vector<int8_t> wz(static_cast<size_t>(s.o), 0);
  const std::vector<int32_t> bz(static_cast<size_t>(s.o), 0);
  std::vector<float> bias_scale(static_cast<size_t>(s.o));
  for (int64_t m = 0; m < s.o; ++m) bias_scale[static_cast<size_t>(m)] = o.x_scale * o.w_scale[static_cast<size_t>(m)];
  const int xf = g.tensor(xd), wf = g.tensor(wd), bf = g.tensor({s.o}), yf = g.tensor(yd);
  const int y = g.tensor(yd, gfb::DType::u8);
  g.node("DequantizeLinear", {x, g.constant_f32({}, {o.x_scale}), g.constant({}, gfb::DType::u8, &o.x_zero, 1)}, {xf},
         {}, 13);
  g.node("DequantizeLinear",
         {w, g.constant_f32({s.o}, o.w_scale), g.constant({s.o}, gfb::DType::i8, wz.data(), wz.size())}, {wf},
         {attr_i("axis", 0)}, 13);
  g.node("DequantizeLinear",
         {g.constant({s.o}, gfb::DType::i32, o.bias.data(), o.bias.size() * 4), g.constant_f32({s.o}, bias_scale),
          g.constant({s.o}, gfb::DType::i32, bz.data(), bz.size() * 4)},
         {bf}, {attr_i("axis", 0)}, 13);
  g.node("Conv", {xf, wf, bf}, {yf},
         {attr_i("group", s.group), attr_ints("pads", {p, p, p, p}), attr_ints("strides", {s.stride, s.stride})});
  g.node("QuantizeLinear", {yf, g.constant_f32({}, {o.y_scale}), g.constant({}, gfb::DType::u8, &o.y_zero, 1)}, {y},
         {}, 13);
  g.output(y);
  run_qconv_case(state, s, o, bits, g);
}

// oneDNN's int8 convolution: u8 source with a zero point, s8 weights (reordered
// once), s32 bias, u8 destination with per-channel output scales and a zero
// point. NCHW tensors reordered in and out, or with `kernel_only` the
// convolution alone on tensors in its layout.
void onednn_qconv(benchmark::State& state, bool kernel_only) {
  const ConvShape& s = kConvShapes[state.range(0)];
  const int bits = static_cast<int>(state.range(2));
  omp_set_num_threads(static_cast<int>(state.range(1)));
  const int64_t oh = conv_out(s), p = s.k / 2, cg = s.c / s.group;
  Int8Operands o = int8_operands(static_cast<size_t>(s.c * s.hw * s.hw), static_cast<size_t>(s.o * cg * s.k * s.k),
                                 s.o, cg * s.k * s.k, bits);
  const memory::dims wd = s.group == 1 ? memory::dims{s.o, s.c, s.k, s.k}
                                       : memory::dims{s.group, s.o / s.group, cg, s.k, s.k};
  try {
    const memory::desc x_user({1, s.c, s.hw, s.hw}, DType::u8, Tag::nchw);
    const memory::desc y_user({1, s.o, oh, oh}, DType::u8, Tag::nchw);
    const memory::desc w_user(wd, DType::s8, s.group == 1 ? Tag::oihw : Tag::goihw);
    const memory::desc b_user({s.o}, DType::s32, Tag::x);
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        memory::desc({1, s.c, s.hw, s.hw}, DType::u8, Tag::any), memory::desc(wd, DType::s8, Tag::any), b_user,
        memory::desc({1, s.o, oh, oh}, DType::u8, Tag::any), {s.stride, s.stride}, {p, p}, {p, p});
    dnnl::primitive_attr attr;
    std::vector<float> scales(static_cast<size_t>(s.o));
    for (int64_t m = 0; m < s.o; ++m) scales[static_cast<size_t>(m)] = o.x_scale * o.w_scale[static_cast<size_t>(m)] / o.y_scale;
    attr.set_output_scales(1 << 1, scales);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {o.x_zero});
    attr.set_zero_points(DNNL_ARG_DST, 0, {o.y_zero});
    dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
    dnnl::stream stream(engine());
    memory xu(x_user, engine(), o.x.data()), wu(w_user, engine(), o.w.data()), bu(b_user, engine(), o.bias.data());
    std::vector<uint8_t> out(static_cast<size_t>(s.o * oh * oh));
    memory yu(y_user, engine(), out.data());
    memory x(pd.src_desc(), engine()), w(pd.weights_desc(), engine()), y(pd.dst_desc(), engine());
    dnnl::reorder(wu, w).execute(stream, wu, w);
    dnnl::reorder(xu, x).execute(stream, xu, x);
    dnnl::reorder to_x(xu, x), to_y(y, yu);
    dnnl::convolution_forward conv(pd);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, bu}, {DNNL_ARG_DST, y}};
    for (auto _ : state) {
      if (!kernel_only) to_x.execute(stream, xu, x);
      conv.execute(stream, args);
      if (!kernel_only) to_y.execute(stream, y, yu);
      stream.wait();
    }
    to_y.execute(stream, y, yu);
    stream.wait();
    const std::string wrong = int8_check(out, s.o * oh * oh, o, [&](int64_t at, int64_t* channel) {
      return qconv_accumulator(s, o, at, channel);
    });
    state.SetLabel(label_conv(state, s) + " w" + std::to_string(bits) + " " + pd.impl_info_str() +
                   (wrong.empty() ? "" : " (" + wrong + ")"));
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}
void BM_QLinearConv_OneDnn(benchmark::State& state) { onednn_qconv(state, false); }
void BM_QLinearConv_OneDnnKernelOnly(benchmark::State& state) { onednn_qconv(state, true); }

void qconv_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t bits : {7, 8}) {
    for (int64_t threads : {1, 2}) {
      for (int64_t i = 0; i < static_cast<int64_t>(std::size(kConvShapes)); ++i) b->Args({i, threads, bits});
    }
  }
}

// Runs a matmul graph of [m, k] x [k, n] on `o` (inputs A, B; output Y) on
// cpu-simd, checks sampled outputs and labels the case.
void run_qmatmul_case(benchmark::State& state, int64_t m, int64_t k, int64_t n, Int8Operands& o, int bits,
                      const ::loom::testing::GraphBuilder& g) {
  std::vector<uint8_t> out;
  run_int8_case(state, cpu_simd(state.range(3)), g.finish(), {m, k}, o.x.data(), {k, n}, o.w.data(), {m, n}, &out);
  const std::string wrong = out.empty() ? "" : int8_check(out, m * n, o, [&](int64_t at, int64_t* channel) {
    return qmatmul_accumulator(k, n, o, at, channel);
  });
  if (!wrong.empty()) state.SkipWithError(("wrong result: " + wrong).c_str());
  set_gemm_counters(state, m, k, n);
  state.SetLabel("w" + std::to_string(bits));
}

// Args: M, K, N, threads, weight bits.
void BM_QLinearMatMul_CpuSimd(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int bits = static_cast<int>(state.range(4));
  Int8Operands o = int8_operands(static_cast<size_t>(m * k), static_cast<size_t>(k * n), n, k, bits);
  ::loom::testing::GraphBuilder g;
  const int a = g.input({m, k}, gfb::DType::u8);
  const int b = g.parameter({k, n}, "b");
  g.tensors[static_cast<size_t>(b)].dtype = gfb::DType::i8;
  const std::vector<int8_t> bz(static_cast<size_t>(n), 0);
  const int y = g.tensor({m, n}, gfb::DType::u8);
  // QLinearMatMul has no bias: the benchmark's operands leave it out.
  std::fill(o.bias.begin(), o.bias.end(), 0);
  g.node("QLinearMatMul",
         {a, g.constant_f32({}, {o.x_scale}), g.constant({}, gfb::DType::u8, &o.x_zero, 1), b,
          g.constant_f32({n}, o.w_scale), g.constant({n}, gfb::DType::i8, bz.data(), bz.size()),
          g.constant_f32({}, {o.y_scale}), g.constant({}, gfb::DType::u8, &o.y_zero, 1)},
         {y}, {}, 10);
  g.output(y);
  run_qmatmul_case(state, m, k, n, o, bits, g);
}

// The same matmul as a QDQ group (DequantizeLinear of A and of the B
// parameter per column, MatMul, QuantizeLinear), which compile fuses into
// one step of blob format 10: with these constant scales and zero points it
// requantizes inside oneDNN's matmul where the weights allow.
void BM_QLinearMatMul_CpuSimdQdq(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int bits = static_cast<int>(state.range(4));
  Int8Operands o = int8_operands(static_cast<size_t>(m * k), static_cast<size_t>(k * n), n, k, bits);
  std::fill(o.bias.begin(), o.bias.end(), 0);
  ::loom::testing::GraphBuilder g;
  const int a = g.input({m, k}, gfb::DType::u8);
  const int b = g.parameter({k, n}, "b");
  g.tensors[static_cast<size_t>(b)].dtype = gfb::DType::i8;
  const std::vector<int8_t> bz(static_cast<size_t>(n), 0);
  const int af = g.tensor({m, k}), bf = g.tensor({k, n}), yf = g.tensor({m, n});
  const int y = g.tensor({m, n}, gfb::DType::u8);
  g.node("DequantizeLinear", {a, g.constant_f32({}, {o.x_scale}), g.constant({}, gfb::DType::u8, &o.x_zero, 1)}, {af},
         {}, 13);
  g.node("DequantizeLinear", {b, g.constant_f32({n}, o.w_scale), g.constant({n}, gfb::DType::i8, bz.data(), bz.size())},
         {bf}, {attr_i("axis", 1)}, 13);
  g.node("MatMul", {af, bf}, {yf});
  g.node("QuantizeLinear", {yf, g.constant_f32({}, {o.y_scale}), g.constant({}, gfb::DType::u8, &o.y_zero, 1)}, {y},
         {}, 13);
  g.output(y);
  run_qmatmul_case(state, m, k, n, o, bits, g);
}

// oneDNN's int8 matmul: u8 A with a zero point, s8 B reordered once, u8 C
// with per-column output scales and a zero point.
void BM_QLinearMatMul_OneDnn(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int bits = static_cast<int>(state.range(4));
  omp_set_num_threads(static_cast<int>(state.range(3)));
  Int8Operands o = int8_operands(static_cast<size_t>(m * k), static_cast<size_t>(k * n), n, k, bits);
  try {
    const memory::desc a_md({m, k}, DType::u8, Tag::ab), c_md({m, n}, DType::u8, Tag::ab);
    const memory::desc b_user({k, n}, DType::s8, Tag::ab);
    dnnl::primitive_attr attr;
    std::vector<float> scales(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) scales[static_cast<size_t>(j)] = o.x_scale * o.w_scale[static_cast<size_t>(j)] / o.y_scale;
    attr.set_output_scales(1 << 1, scales);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {o.x_zero});
    attr.set_zero_points(DNNL_ARG_DST, 0, {o.y_zero});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, memory::desc({k, n}, DType::s8, Tag::any), c_md), attr,
                                    engine());
    dnnl::stream stream(engine());
    std::vector<uint8_t> out(static_cast<size_t>(m * n));
    memory a(a_md, engine(), o.x.data()), bu(b_user, engine(), o.w.data()), c(c_md, engine(), out.data());
    memory bm(pd.weights_desc(), engine());
    dnnl::reorder(bu, bm).execute(stream, bu, bm);
    dnnl::matmul mm(pd);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, c}};
    for (auto _ : state) {
      mm.execute(stream, args);
      stream.wait();
    }
    std::fill(o.bias.begin(), o.bias.end(), 0);
    const std::string wrong = int8_check(out, m * n, o, [&](int64_t at, int64_t* channel) {
      return qmatmul_accumulator(k, n, o, at, channel);
    });
    set_gemm_counters(state, m, k, n);
    state.SetLabel("w" + std::to_string(bits) + " " + pd.impl_info_str() + (wrong.empty() ? "" : " (" + wrong + ")"));
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}

void qmatmul_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t bits : {7, 8}) {
    for (int64_t threads : {1, 2}) {
      for (int64_t m : {1, 8, 64}) {
        b->Args({m, 768, 3072, threads, bits});  // transformer MLP up-projection
        b->Args({m, 512, 1000, threads, bits});  // a ResNet classifier
      }
    }
  }
}

BENCHMARK(BM_MatMul_CpuSimd)->Apply(gemm_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatMul_OneDnn)->Apply(gemm_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv_CpuSimd)->Apply(conv_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv_OneDnn)->Apply(conv_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv_OneDnnKernelOnly)->Apply(conv_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QLinearConv_CpuSimd)->Apply(qconv_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QLinearConv_CpuSimdQdq)->Apply(qconv_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QLinearConv_OneDnn)->Apply(qconv_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QLinearConv_OneDnnKernelOnly)->Apply(qconv_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QLinearMatMul_CpuSimd)->Apply(qmatmul_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QLinearMatMul_CpuSimdQdq)->Apply(qmatmul_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QLinearMatMul_OneDnn)->Apply(qmatmul_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Triad)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Relu)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sigmoid)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Softmax)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sigmoid_InCache)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Softmax_InCache)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_LayerNormalization)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Transpose)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Transpose_OneDnnReorder)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Concat)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MaxPool)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Backend& b = cpu_simd(1);
  benchmark::AddCustomContext("cpu-simd://0", b.device != nullptr ? b.name : "no device: " + b.error);
  const dnnl::version_t* v = dnnl::version();
  benchmark::AddCustomContext("oneDNN", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                            std::to_string(v->patch));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
