// Open-shape executables of cpu-simd (blob format 5, ABI 1.2) against fixed
// ones, through the plugin's C ABI: a ResNet-18 graph (ONNX operators, weights
// as program parameters, BatchNormalization folded by the schedule) is
// compiled by the plugin's compile entry once with open dimensions and once
// per binding, and each binding is timed as
//   - first: the first run of the open executable at a binding it has not
//     seen (bind shapes, plan, oneDNN primitives; weight packs reused from
//     earlier bindings when oneDNN keeps their layout), and the first run of
//     a freshly loaded fixed executable (plan at load, packing on this run);
//   - steady: the median of later runs, for each.
// Two cases: batch 1 -> 2 -> 4 -> 8 at 224x224 (batch open), and batch 1 at
// image sizes 224, 256, 320, 192, 288 (height and width open: a CNN detector's
// backbone at several image sizes).
//
//   build/bin/cpu_simd_open_bench [threads (default 2)] [steady repeats (default 10)] [debug]
// ("debug" echoes the plugin's DEBUG lines: each binding prepared, with the
// weight packs made and reused so far).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "graph_builder.hpp"
#include "plugin_harness.hpp"

namespace {

using ::loom::testing::attr_i;
using ::loom::testing::attr_ints;
using ::loom::testing::Dims;
using ::loom::testing::GraphBuilder;

struct Param {
  Dims shape;
  std::vector<float> data;
};

// ResNet-18 on x [n, 3, h, w] (each < 0: open); `params` gets every weight
// in graph-input order after x.
class ResNet {
 public:
  ResNet(int64_t n, int64_t h, int64_t w, std::vector<Param>* params) : params_(params), n_(n) {
    int x = b_.input({n, 3, h, w});
    int64_t hh = h, ww = w;
    x = conv_bn(x, 3, 64, 7, 2, 3, &hh, &ww, true);
    const int pooled = act({n_, 64, down(hh, 3, 2, 1), down(ww, 3, 2, 1)});
    b_.node("MaxPool", {x}, {pooled},
            {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}, 11);
    hh = down(hh, 3, 2, 1);
    ww = down(ww, 3, 2, 1);
    x = pooled;
    int64_t c = 64;
    for (int64_t out : {64, 128, 256, 512}) {
      for (int block = 0; block < 2; ++block) {
        const int64_t stride = out != 64 && block == 0 ? 2 : 1;
        int64_t h1 = hh, w1 = ww;
        int y = conv_bn(x, c, out, 3, stride, 1, &h1, &w1, true);
        int64_t h2 = h1, w2 = w1;
        y = conv_bn(y, out, out, 3, 1, 1, &h2, &w2, false);
        int skip = x;
        if (stride != 1 || c != out) {
          int64_t hs = hh, ws = ww;
          skip = conv_bn(x, c, out, 1, stride, 0, &hs, &ws, false);
        }
        const int sum = act({n_, out, h2, w2}), relu = act({n_, out, h2, w2});
        b_.node("Add", {y, skip}, {sum}, {}, 14);
        b_.node("Relu", {sum}, {relu}, {}, 14);
        x = relu;
        hh = h2;
        ww = w2;
        c = out;
      }
    }
    const int gap = act({n_, 512, 1, 1}), flat = act({n_, 512}), logits = act({n_, 1000});
    b_.node("GlobalAveragePool", {x}, {gap}, {}, 11);
    b_.node("Flatten", {gap}, {flat}, {attr_i("axis", 1)}, 11);
    const int fc_w = param({1000, 512}), fc_b = param({1000});
    b_.node("Gemm", {flat, fc_w, fc_b}, {logits}, {attr_i("transB", 1)}, 11);
    b_.output(logits);
  }
  std::vector<uint8_t> bytes() const { return b_.finish(); }

 private:
  static int64_t down(int64_t x, int64_t k, int64_t s, int64_t p) { return x < 0 ? -1 : (x + 2 * p - k) / s + 1; }
  int act(Dims s) { return b_.tensor(std::move(s)); }
  int param(Dims s) {
    const int t = b_.parameter(s, "p" + std::to_string(params_->size()));
    size_t count = 1;
    for (int64_t d : s) count *= static_cast<size_t>(d);
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    Param p{s, std::vector<float>(count)};
    for (float& v : p.data) v = u(rng_);
    params_->push_back(std::move(p));
    return t;
  }
  int bn_param(int64_t c, float lo, float hi) {
    const int t = param({c});
    std::uniform_real_distribution<float> u(lo, hi);
    for (float& v : params_->back().data) v = u(rng_);
    return t;
  }
  int conv_bn(int x, int64_t cin, int64_t cout, int64_t k, int64_t s, int64_t p, int64_t* h, int64_t* w,
              bool relu) {
    *h = down(*h, k, s, p);
    *w = down(*w, k, s, p);
    const int wt = param({cout, cin, k, k});
    const int conv = act({n_, cout, *h, *w});
    b_.node("Conv", {x, wt}, {conv},
            {attr_ints("kernel_shape", {k, k}), attr_ints("strides", {s, s}), attr_ints("pads", {p, p, p, p})}, 11);
    const int scale = bn_param(cout, 0.5f, 1.5f), bias = bn_param(cout, -0.1f, 0.1f);
    const int mean = bn_param(cout, -0.1f, 0.1f), var = bn_param(cout, 0.5f, 1.5f);
    const int bn = act({n_, cout, *h, *w});
    b_.node("BatchNormalization", {conv, scale, bias, mean, var}, {bn}, {}, 15);
    if (!relu) return bn;
    const int r = act({n_, cout, *h, *w});
    b_.node("Relu", {bn}, {r}, {}, 14);
    return r;
  }

  GraphBuilder b_;
  std::vector<Param>* params_;
  std::mt19937 rng_{7};
  int64_t n_;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Runner {
  ::loom::testing::PluginHarness& h;
  loom_plugin_t* plugin;
  loom_device_t* device;
  std::vector<Param>& params;

  loom_executable_t* load(const std::vector<uint8_t>& graph) {
    ::loom::testing::CompiledBlob blob;
    std::string s = h.compile(plugin, graph, &blob);
    if (s != "ok") {
      std::fprintf(stderr, "compile: %s\n", s.c_str());
      return nullptr;
    }
    loom_executable_t* exe = nullptr;
    s = h.load(device, "cpu-simd", blob.format_version, blob.bytes.data(), blob.bytes.size(), &exe);
    if (s != "ok") std::fprintf(stderr, "load: %s\n", s.c_str());
    return exe;
  }
  // One run at input shape `x_shape`; its milliseconds, or -1.
  double run(loom_executable_t* exe, const Dims& x_shape, std::vector<float>* x, std::vector<float>* y) {
    std::vector<loom_tensor_t> in;
    in.push_back(::loom::testing::host_tensor(LOOM_DTYPE_F32, x_shape, x->data(), x->size() * 4));
    for (Param& p : params) {
      in.push_back(::loom::testing::host_tensor(LOOM_DTYPE_F32, p.shape, p.data.data(), p.data.size() * 4));
    }
    const Dims y_shape = {x_shape[0], 1000};
    loom_tensor_t out = ::loom::testing::host_tensor(LOOM_DTYPE_F32, y_shape, y->data(), y->size() * 4);
    std::vector<const loom_tensor_t*> ins;
    for (const loom_tensor_t& t : in) ins.push_back(&t);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string s = h.execute(exe, ins, {&out});
    const double ms = ms_since(t0);
    if (s != "ok") {
      std::fprintf(stderr, "execute: %s\n", s.c_str());
      return -1;
    }
    return ms;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run_case(Runner& r, const char* name, const std::vector<Dims>& shapes, bool open_batch, int repeats) {
  std::vector<Param> ignored;
  const int64_t on = open_batch ? -1 : 1, ohw = open_batch ? 224 : -1;
  r.params.clear();
  loom_executable_t* open = r.load(ResNet(on, ohw, ohw, &r.params).bytes());
  if (open == nullptr) return 1;
  std::printf("\n%s: one open executable (x = [%s, 3, %s, %s]) against a fixed one per binding\n", name,
              open_batch ? "?" : "1", open_batch ? "224" : "?", open_batch ? "224" : "?");
  std::printf("| input | open first (ms) | open steady (ms) | first / steady | fixed first (ms) | fixed steady (ms) | max |open - fixed| |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Dims& s : shapes) {
    std::vector<float> x(static_cast<size_t>(s[0] * s[1] * s[2] * s[3]));
    for (float& v : x) v = u(rng);
    std::vector<float> y_open(static_cast<size_t>(s[0] * 1000)), y_fixed(y_open.size());
    const double open_first = r.run(open, s, &x, &y_open);
    std::vector<double> steady;
    for (int i = 0; i < repeats; ++i) steady.push_back(r.run(open, s, &x, &y_open));
    std::vector<Param> same;
    loom_executable_t* fixed = r.load(ResNet(s[0], s[2], s[3], &same).bytes());
    if (fixed == nullptr || open_first < 0) return 1;
    const double fixed_first = r.run(fixed, s, &x, &y_fixed);
    std::vector<double> fixed_steady;
    for (int i = 0; i < repeats; ++i) fixed_steady.push_back(r.run(fixed, s, &x, &y_fixed));
    r.h.api()->executable_destroy(fixed);
    float diff = 0;
    for (size_t i = 0; i < y_open.size(); ++i) diff = std::max(diff, std::abs(y_open[i] - y_fixed[i]));
    const double os = median(steady);
    std::printf("| %lldx3x%lldx%lld | %.1f | %.1f | %.2f | %.1f | %.1f | %.1e |\n", static_cast<long long>(s[0]),
                static_cast<long long>(s[2]), static_cast<long long>(s[3]), open_first, os, open_first / os,
                fixed_first, median(fixed_steady), static_cast<double>(diff));
  }
  r.h.api()->executable_destroy(open);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string threads = argc > 1 ? argv[1] : "2";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
  const bool debug = argc > 3 && std::string(argv[3]) == "debug";
  ::loom::testing::PluginHarness h(
      LOOM_CPU_SIMD_PLUGIN_PATH,
      {.record_logs = false, .trace = false, .echo_from = debug ? LOOM_LOG_DEBUG : LOOM_LOG_WARNING});
  if (h.api() == nullptr) {
    std::fprintf(stderr, "%s\n", h.error().c_str());
    return 1;
  }
  std::string error;
  loom_plugin_t* plugin = h.create({{"loom.threads", threads}}, &error);
  loom_device_t* device = nullptr;
  if (plugin == nullptr || h.device(plugin, 0, &device) != "ok") {
    std::fprintf(stderr, "plugin: %s\n", error.c_str());
    return 1;
  }
  std::printf("cpu_simd_open_bench: loom.threads %s, %d steady runs (median)\n", threads.c_str(), repeats);
  std::vector<Param> params;
  Runner r{h, plugin, device, params};
  int rc = run_case(r, "resnet18, batch open", {{1, 3, 224, 224}, {2, 3, 224, 224}, {4, 3, 224, 224}, {8, 3, 224, 224}},
                    true, repeats);
  rc |= run_case(r, "resnet18 backbone, image size open",
                 {{1, 3, 224, 224}, {1, 3, 256, 256}, {1, 3, 320, 320}, {1, 3, 192, 192}, {1, 3, 288, 352}}, false,
                 repeats);
  return rc;
}
