// The cpu-simd cost model (estimate.hpp).
#include "estimate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_work.hpp"
#include "objects.hpp"

namespace loom::cpu_simd {
namespace {

using Clock = std::chrono::steady_clock;

// Each micro-benchmark runs at least kMinRuns times and stops after
// kMaxRuns or once it has taken kBudgetNs (after one warm-up run, which also
// packs weights).
constexpr int kMinRuns = 3;
constexpr int kMaxRuns = 30;
constexpr double kBudgetNs = 25e6;

BlobTensor tensor(std::vector<int64_t> shape, bool parameter = false) {
  BlobTensor t;
  t.shape = std::move(shape);
  t.parameter = parameter;
  return t;
}

BlobNode node(Op op, std::vector<uint32_t> inputs, uint32_t output) {
  BlobNode n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  return n;
}

// Y = A B, 256 x 256 x 256, B a parameter (packed once, as weights are).
BlobGraph matmul_graph() {
  BlobGraph g;
  g.tensors = {tensor({256, 256}), tensor({256, 256}, true), tensor({256, 256})};
  g.inputs = {0, 1};
  g.outputs = {2};
  g.nodes = {node(Op::kMatMul, {0, 1}, 2)};
  return g;
}

// A 3x3 convolution, 64 -> 64 channels on 28 x 28, padded to keep the size.
BlobGraph conv_graph() {
  BlobGraph g;
  g.tensors = {tensor({1, 64, 28, 28}), tensor({64, 64, 3, 3}, true), tensor({1, 64, 28, 28})};
  g.inputs = {0, 1};
  g.outputs = {2};
  BlobNode n = node(Op::kConv, {0, 1}, 2);
  n.ints = {2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  g.nodes = {n};
  return g;
}

// Two 4 MiB tensors added: 12 MiB moved.
BlobGraph add_graph() {
  BlobGraph g;
  g.tensors = {tensor({1 << 20}), tensor({1 << 20}), tensor({1 << 20})};
  g.inputs = {0, 1};
  g.outputs = {2};
  g.nodes = {node(Op::kAdd, {0, 1}, 2)};
  return g;
}

// One element through Relu: the fixed cost of an execute and a step.
BlobGraph step_graph() {
  BlobGraph g;
  g.tensors = {tensor({1}), tensor({1})};
  g.inputs = {0};
  g.outputs = {1};
  g.nodes = {node(Op::kRelu, {0}, 1)};
  return g;
}

// The median time of one execute of `graph` on `pool`, in nanoseconds.
sdk::Status time_graph(const BlobGraph& graph, ThreadPool* pool, bool onednn, Kernels kernels,
                       double* out_ns) {
  std::string error;
  if (!validate(graph, &error)) return sdk::internal_error("estimate: benchmark graph: " + error);
  std::unique_ptr<Executable> exe;
  LOOM_SDK_RETURN_IF_ERROR(Executable::create(graph, pool, onednn, kernels, &exe));
  std::vector<std::vector<float>> data(graph.tensors.size());
  std::vector<loom_tensor_t> descs(graph.tensors.size());
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    uint64_t n = 0;
    element_count(graph.tensors[t].shape, &n);
    data[t].assign(static_cast<size_t>(n), 0.5f);
    loom_tensor_t& d = descs[t];
    d.struct_size = LOOM_TENSOR_STRUCT_SIZE;
    d.dtype = LOOM_DTYPE_F32;
    d.rank = static_cast<uint32_t>(graph.tensors[t].shape.size());
    d.shape = graph.tensors[t].shape.data();
    d.host_data = data[t].data();
    d.byte_size = n * sizeof(float);
  }
  std::vector<const loom_tensor_t*> ins, outs;
  for (uint32_t t : graph.inputs) ins.push_back(&descs[t]);
  for (uint32_t t : graph.outputs) outs.push_back(&descs[t]);
  sdk::ExecuteCallT<Fence> call;
  call.inputs = ins.data();
  call.input_count = ins.size();
  call.outputs = outs.data();
  call.output_count = outs.size();
  LOOM_SDK_RETURN_IF_ERROR(exe->execute(call));  // warm-up: packs the weights
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < kMaxRuns &&
         (static_cast<int>(times.size()) < kMinRuns || total < kBudgetNs)) {
    const auto start = Clock::now();
    LOOM_SDK_RETURN_IF_ERROR(exe->execute(call));
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    times.push_back(ns);
    total += ns;
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  *out_ns = std::max(1.0, times[times.size() / 2]);
  return sdk::Status();
}

double flops_of(const BlobGraph& g) {
  std::vector<NodeWork> work;
  graph_work(g, &work);
  double flops = 0;
  for (const NodeWork& w : work) flops += w.flops;
  return flops;
}

// The thread counts measured: 1 and the plugin's N.
std::vector<size_t> thread_counts(size_t n) {
  if (n <= 1) return {1};
  return {1, n};
}

double get(const sdk::DeviceModelValues& v, const std::string& name) {
  auto it = v.find(name);
  return it == v.end() ? 0.0 : it->second;
}

}  // namespace

CostModel::CostModel(ThreadPool* pool, bool onednn, Kernels kernels, std::string device_key,
                     std::string identity)
    : pool_(pool), onednn_(onednn), kernels_(kernels), device_key_(std::move(device_key)),
      identity_(std::move(identity)) {}

sdk::Status CostModel::measure(sdk::DeviceModelValues* out) {
  const auto start = Clock::now();
  const BlobGraph mm = matmul_graph(), conv = conv_graph(), add = add_graph(), step = step_graph();
  const double add_bytes = 3.0 * (1 << 20) * sizeof(float);
  ThreadPool one(1);
  const size_t n = pool_->parallelism();
  for (size_t t : thread_counts(n)) {
    ThreadPool* pool = t == 1 ? &one : pool_;
    const std::string suffix = "_t" + std::to_string(t);
    double ns = 0;
    LOOM_SDK_RETURN_IF_ERROR(time_graph(step, pool, onednn_, kernels_, &ns));
    const double step_ns = ns;
    (*out)["step_ns" + suffix] = step_ns;
    LOOM_SDK_RETURN_IF_ERROR(time_graph(mm, pool, onednn_, kernels_, &ns));
    (*out)["matmul_flops" + suffix] = flops_of(mm) / (std::max(ns - step_ns, 1.0) * 1e-9);
    LOOM_SDK_RETURN_IF_ERROR(time_graph(conv, pool, onednn_, kernels_, &ns));
    (*out)["conv_flops" + suffix] = flops_of(conv) / (std::max(ns - step_ns, 1.0) * 1e-9);
    LOOM_SDK_RETURN_IF_ERROR(time_graph(add, pool, onednn_, kernels_, &ns));
    (*out)["bandwidth" + suffix] = add_bytes / (std::max(ns - step_ns, 1.0) * 1e-9);
  }
  (*out)["threads"] = static_cast<double>(n);
  (*out)["calibration_ms"] =
      std::max(1e-3, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  return sdk::Status();
}

sdk::Status CostModel::ensure_model() {
  if (ready_) return sdk::Status();
  const std::string path =
      sdk::device_model_path(sdk::device_model_folder(), "cpu-simd", device_key_);
  sdk::DeviceModelValues v;
  const size_t n = pool_->parallelism();
  const std::string top = "_t" + std::to_string(n);
  const bool cached = sdk::read_device_model(path, identity_, &v) && v.count("step_ns_t1") &&
                      v.count("matmul_flops_t1") && v.count("conv_flops_t1") &&
                      v.count("bandwidth_t1") && v.count("step_ns" + top) &&
                      v.count("matmul_flops" + top) && v.count("conv_flops" + top) &&
                      v.count("bandwidth" + top);
  if (!cached) {
    v.clear();
    LOOM_SDK_RETURN_IF_ERROR(measure(&v));
    (void)sdk::write_device_model(path, identity_, v);  // a failed write: measured again next time
  }
  values_ = std::move(v);
  ready_ = true;
  return sdk::Status();
}

sdk::Status CostModel::values(sdk::DeviceModelValues* out) {
  std::lock_guard<std::mutex> lock(mu_);
  LOOM_SDK_RETURN_IF_ERROR(ensure_model());
  *out = values_;
  return sdk::Status();
}

sdk::Status CostModel::estimate(const BlobGraph& graph, uint64_t* out_ns) {
  *out_ns = 0;
  std::vector<NodeWork> work;
  if (!graph_work(graph, &work)) return sdk::Status();  // open shapes: no estimate
  sdk::DeviceModelValues v;
  LOOM_SDK_RETURN_IF_ERROR(values(&v));
  const size_t n = pool_->parallelism();
  double total = 0;
  for (const NodeWork& w : work) {
    double best = -1;
    for (size_t t : thread_counts(n)) {
      const std::string s = "_t" + std::to_string(t);
      double rate = 0;  // 0: bound by memory only
      if (w.kind == WorkKind::kMatMul) rate = get(v, "matmul_flops" + s);
      if (w.kind == WorkKind::kConv) rate = get(v, "conv_flops" + s);
      const double ns =
          sdk::roofline_ns(w.flops, rate, w.bytes, get(v, "bandwidth" + s)) + get(v, "step_ns" + s);
      if (best < 0 || ns < best) best = ns;
    }
    total += best;
  }
  if (work.empty()) total = get(v, "step_ns_t1");
  *out_ns = total < 1 ? 1 : static_cast<uint64_t>(std::llround(total));
  return sdk::Status();
}

}  // namespace loom::cpu_simd
