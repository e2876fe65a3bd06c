// cpu-simd's LSTM step (src/schedule_rnn.cpp: one sgemm for the input
// projection over all time steps, a small sgemm per step, vectorized gates)
// against oneDNN's lstm_forward primitive on the same weights (ONNX's gate
// order i, o, f, c reordered once into oneDNN's i, f, c, o and its blocked
// layout, outside the timing), one thread, batch 1: which one cpu-simd should
// run (issue 26). Prints the median of each and their largest difference.
//
// Not part of the CMake build (one measurement, one file); from the
// repository root, after a build:
//   g++ -O3 -std=c++20 -fopenmp -Iplugins/cpu-simd/include -Iplugins/cpu-simd/src -Isdk/include
//     -Ibuild/generated benchmarks/lstm_onednn_bench.cpp plugins/cpu-simd/src/schedule_rnn.cpp
//     -ldnnl -o /tmp/lstm_onednn_bench && OMP_NUM_THREADS=1 /tmp/lstm_onednn_bench [hidden] [input]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "schedule_rnn.hpp"

// The plugin's engine accessor (schedule_plan.cpp), for schedule_rnn.cpp.
namespace loom::cpu_simd::plan {
dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}
}  // namespace loom::cpu_simd::plan

namespace {

using loom::cpu_simd::RnnStep;

double median_us(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void bench(int64_t seq, int64_t hidden, int64_t input, int reps) {
  std::mt19937 rng(26);
  std::uniform_real_distribution<float> u(-0.06f, 0.06f), ux(-1.0f, 1.0f);
  const int64_t g = 4 * hidden;
  std::vector<float> x(static_cast<size_t>(seq * input)), w(static_cast<size_t>(g * input)),
      r(static_cast<size_t>(g * hidden)), b(static_cast<size_t>(2 * g)), h0(static_cast<size_t>(hidden)),
      c0(static_cast<size_t>(hidden));
  for (auto* v : {&w, &r, &b}) {
    for (float& e : *v) e = u(rng);
  }
  for (auto* v : {&x, &h0, &c0}) {
    for (float& e : *v) e = ux(rng);
  }

  // cpu-simd's step.
  RnnStep step;
  step.where = "bench";
  step.form.hidden = hidden;
  step.form.seq = seq;
  step.form.batch = 1;
  step.form.input = input;
  step.form.mask = 1 | 4 | 8;
  step.form.at[0] = 3;
  step.form.at[2] = 4;
  step.form.at[3] = 5;
  step.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");  // as for a model's initializers: transposed once
  std::vector<float> packed(static_cast<size_t>((seq + 2) * hidden));
  const std::vector<const void*> ins = {x.data(), w.data(), r.data(), b.data(), h0.data(), c0.data()};
  std::vector<double> ours;
  for (int i = 0; i < reps + 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!loom::cpu_simd::run_rnn_step(step, ins, packed.data()).ok()) std::abort();
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 20) ours.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }

  // oneDNN: weights reordered once from ONNX's order (i, o, f, c) into
  // ldigo with oneDNN's gate order (i, f, c, o), then into the primitive's.
  using dnnl::memory;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const int onnx_gate[4] = {0, 2, 3, 1};  // oneDNN gate k reads ONNX gate onnx_gate[k]
  std::vector<float> wl(static_cast<size_t>(input * g)), wi(static_cast<size_t>(hidden * g)),
      bias(static_cast<size_t>(g));
  for (int k = 0; k < 4; ++k) {
    for (int64_t j = 0; j < hidden; ++j) {
      const int64_t row = onnx_gate[k] * hidden + j;
      for (int64_t i = 0; i < input; ++i) wl[static_cast<size_t>((i * 4 + k) * hidden + j)] = w[static_cast<size_t>(row * input + i)];
      for (int64_t i = 0; i < hidden; ++i) wi[static_cast<size_t>((i * 4 + k) * hidden + j)] = r[static_cast<size_t>(row * hidden + i)];
      bias[static_cast<size_t>(k * hidden + j)] = b[static_cast<size_t>(row)] + b[static_cast<size_t>(g + row)];
    }
  }
  const memory::dims src_dims = {seq, 1, input}, iter_dims = {1, 1, 1, hidden}, dst_dims = {seq, 1, hidden};
  const memory::dims wl_dims = {1, 1, input, 4, hidden}, wi_dims = {1, 1, hidden, 4, hidden}, b_dims = {1, 1, 4, hidden};
  auto md = [](const memory::dims& d, memory::format_tag t) { return memory::desc(d, memory::data_type::f32, t); };
  dnnl::lstm_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::rnn_direction::unidirectional_left2right,
                                md(src_dims, memory::format_tag::tnc), md(iter_dims, memory::format_tag::ldnc),
                                md(iter_dims, memory::format_tag::ldnc), md(wl_dims, memory::format_tag::any),
                                md(wi_dims, memory::format_tag::any), md(b_dims, memory::format_tag::ldgo),
                                md(dst_dims, memory::format_tag::tnc), md(iter_dims, memory::format_tag::ldnc),
                                md(iter_dims, memory::format_tag::ldnc));
  dnnl::lstm_forward::primitive_desc pd(desc, eng);
  memory wl_user(md(wl_dims, memory::format_tag::ldigo), eng, wl.data());
  memory wi_user(md(wi_dims, memory::format_tag::ldigo), eng, wi.data());
  memory wl_mem(pd.weights_layer_desc(), eng), wi_mem(pd.weights_iter_desc(), eng);
  dnnl::reorder(wl_user, wl_mem).execute(s, wl_user, wl_mem);
  dnnl::reorder(wi_user, wi_mem).execute(s, wi_user, wi_mem);
  std::vector<float> y(static_cast<size_t>(seq * hidden)), hn(static_cast<size_t>(hidden)), cn(static_cast<size_t>(hidden));
  memory src(pd.src_layer_desc(), eng, x.data()), hi(pd.src_iter_desc(), eng, h0.data()),
      ci(pd.src_iter_c_desc(), eng, c0.data()), bm(pd.bias_desc(), eng, bias.data()), dst(pd.dst_layer_desc(), eng, y.data()),
      ho(pd.dst_iter_desc(), eng, hn.data()), co(pd.dst_iter_c_desc(), eng, cn.data());
  memory scratch(pd.scratchpad_desc(), eng), work;
  dnnl::lstm_forward prim(pd);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC_LAYER, src}, {DNNL_ARG_SRC_ITER, hi}, {DNNL_ARG_SRC_ITER_C, ci},
                                          {DNNL_ARG_WEIGHTS_LAYER, wl_mem}, {DNNL_ARG_WEIGHTS_ITER, wi_mem},
                                          {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST_LAYER, dst}, {DNNL_ARG_DST_ITER, ho},
                                          {DNNL_ARG_DST_ITER_C, co}, {DNNL_ARG_SCRATCHPAD, scratch}};
  std::vector<double> theirs;
  for (int i = 0; i < reps + 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    prim.execute(s, args);
    s.wait();
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 20) theirs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  float worst = 0;
  for (int64_t i = 0; i < seq * hidden; ++i) worst = std::max(worst, std::fabs(y[static_cast<size_t>(i)] - packed[static_cast<size_t>(i)]));
  for (int64_t j = 0; j < hidden; ++j) {
    worst = std::max(worst, std::fabs(hn[static_cast<size_t>(j)] - packed[static_cast<size_t>(seq * hidden + j)]));
    worst = std::max(worst, std::fabs(cn[static_cast<size_t>(j)] - packed[static_cast<size_t>((seq + 1) * hidden + j)]));
  }
  std::printf("seq %3lld hidden %lld input %lld batch 1: cpu-simd step %8.1f us, oneDNN lstm_forward %8.1f us "
              "(largest difference %.1e)\n",
              static_cast<long long>(seq), static_cast<long long>(hidden), static_cast<long long>(input),
              median_us(ours), median_us(theirs), worst);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t hidden = argc > 1 ? std::atoll(argv[1]) : 256;
  const int64_t input = argc > 2 ? std::atoll(argv[2]) : 64;
  for (int64_t seq : {1, 16, 100}) bench(seq, hidden, input, 300);
  return 0;
}
