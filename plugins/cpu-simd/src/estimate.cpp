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

// Each micro-benchmark runs at least kTiming.min_runs times and stops after
// max_runs or once it has taken budget_ns (after one warm-up run, which also
// packs weights).
constexpr sdk::TimingBudget kTiming{3, 30, 10e6};

// The plain kernels run a node on one thread below this many output
// elements (twice their grain, ops_nn.cpp's kElementGrain), on all above.
constexpr int64_t kParallelElements = int64_t{1} << 17;

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

// Y = A B, n x n x n, B a parameter (packed once, as weights are).
BlobGraph matmul_graph(int64_t n) {
  BlobGraph g;
  g.tensors = {tensor({n, n}), tensor({n, n}, true), tensor({n, n})};
  g.inputs = {0, 1};
  g.outputs = {2};
  g.nodes = {node(Op::kMatMul, {0, 1}, 2)};
  return g;
}

// A 3x3 convolution, c -> c channels on hw x hw, padded to keep the size.
BlobGraph conv_graph(int64_t c, int64_t hw) {
  BlobGraph g;
  g.tensors = {tensor({1, c, hw, hw}), tensor({c, c, 3, 3}, true), tensor({1, c, hw, hw})};
  g.inputs = {0, 1};
  g.outputs = {2};
  BlobNode n = node(Op::kConv, {0, 1}, 2);
  n.ints = {2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  g.nodes = {n};
  return g;
}

// Two tensors of n elements added.
BlobGraph add_graph(int64_t n) {
  BlobGraph g;
  g.tensors = {tensor({n}), tensor({n}), tensor({n})};
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

// The time of one execute of `graph` on `pool`, in nanoseconds.
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
  return sdk::time_fastest_run(kTiming, [&] { return exe->execute(call); }, out_ns);
}

// The FLOPs (or, with `bytes`, the bytes moved) of `g`.
double work_of(const BlobGraph& g, bool bytes = false) {
  std::vector<NodeWork> work;
  graph_work(g, &work);
  double sum = 0;
  for (const NodeWork& w : work) sum += bytes ? w.bytes : w.flops;
  return sum;
}

// The thread counts measured: the plugin's N, then 1. On a machine whose
// cores are busy, N-thread cases may wait a scheduler tick per step for a
// worker (seen in either order, some processes and not others); the
// estimate's minimum over both lines keeps that out of the ranking.
std::vector<size_t> thread_counts(size_t n) {
  if (n <= 1) return {1};
  return {n, 1};
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

// Fits time = overhead + work / rate through a small and a large case of
// one kind: `<name>_ns<suffix>` (the overhead) and `<name><suffix>` (the rate).
sdk::Status CostModel::fit(const BlobGraph& small, const BlobGraph& large, bool bytes,
                           ThreadPool* pool, const std::string& name, const std::string& suffix,
                           sdk::DeviceModelValues* out) {
  double t_small = 0, t_large = 0;
  LOOM_SDK_RETURN_IF_ERROR(time_graph(small, pool, onednn_, kernels_, &t_small));
  LOOM_SDK_RETURN_IF_ERROR(time_graph(large, pool, onednn_, kernels_, &t_large));
  const double w_small = work_of(small, bytes), w_large = work_of(large, bytes);
  // Noise can make the large case no slower than the small one: the rate
  // then comes from the large case alone.
  const double rate = t_large > t_small * 1.05 ? (w_large - w_small) / ((t_large - t_small) * 1e-9)
                                               : w_large / (t_large * 1e-9);
  (*out)[name + suffix] = rate;
  (*out)[name + "_ns" + suffix] = std::max(1.0, t_small - 1e9 * w_small / rate);
  return sdk::Status();
}

sdk::Status CostModel::measure(sdk::DeviceModelValues* out) {
  const auto start = Clock::now();
  ThreadPool one(1);
  const size_t n = pool_->parallelism();
  double ns = 0;
  LOOM_SDK_RETURN_IF_ERROR(time_graph(step_graph(), &one, onednn_, kernels_, &ns));
  (*out)["step_ns_t1"] = ns;
  for (size_t t : thread_counts(n)) {
    ThreadPool* pool = t == 1 ? &one : pool_;
    const std::string suffix = "_t" + std::to_string(t);
    LOOM_SDK_RETURN_IF_ERROR(
        fit(matmul_graph(32), matmul_graph(256), false, pool, "matmul_flops", suffix, out));
    LOOM_SDK_RETURN_IF_ERROR(
        fit(conv_graph(8, 8), conv_graph(64, 28), false, pool, "conv_flops", suffix, out));
    LOOM_SDK_RETURN_IF_ERROR(
        fit(add_graph(kParallelElements), add_graph(1 << 20), true, pool, "bandwidth", suffix, out));
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
  bool cached = sdk::read_device_model(path, identity_, &v) && v.count("step_ns_t1") != 0;
  for (const std::string& t : {std::string("_t1"), top}) {
    for (const char* name : {"matmul_flops", "conv_flops", "bandwidth"}) {
      cached = cached && v.count(name + t) != 0 && v.count(name + std::string("_ns") + t) != 0;
    }
  }
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
  const std::string top = "_t" + std::to_string(pool_->parallelism());
  // One node on the line of `suffix` ("_t1" or "_tN"): oneDNN's kinds on
  // their own rates, the plain kernels bound by bandwidth.
  auto line = [&](const NodeWork& w, const std::string& suffix) {
    const std::string bw = "bandwidth" + suffix;
    if (w.kind == WorkKind::kMatMul || w.kind == WorkKind::kConv) {
      const std::string name = w.kind == WorkKind::kMatMul ? "matmul_flops" : "conv_flops";
      return get(v, name + "_ns" + suffix) +
             sdk::roofline_ns(w.flops, get(v, name + suffix), w.bytes, get(v, bw));
    }
    return get(v, "bandwidth_ns" + suffix) + sdk::roofline_ns(0, 0, w.bytes, get(v, bw));
  };
  double total = 0;
  for (const NodeWork& w : work) {
    // The plain kernels run a node below kParallelElements on one thread.
    if (w.kind != WorkKind::kMatMul && w.kind != WorkKind::kConv && w.elements < kParallelElements) {
      total += get(v, "step_ns_t1") + sdk::roofline_ns(0, 0, w.bytes, get(v, "bandwidth_t1"));
      continue;
    }
    // Threads are taken never to make a node slower: the faster line.
    total += std::min(line(w, top), line(w, "_t1"));
  }
  if (work.empty()) total = get(v, "step_ns_t1");
  *out_ns = total < 1 ? 1 : static_cast<uint64_t>(std::llround(total));
  return sdk::Status();
}

}  // namespace loom::cpu_simd
