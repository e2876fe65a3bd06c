// The vulkan-compute cost model (estimate.hpp).
#include "estimate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "device.hpp"
#include "executable.hpp"
#include "loom/vulkan_compute/blob_work.hpp"
#include "loom/vulkan_compute/kernels.hpp"

#ifndef LOOM_VULKAN_COMPUTE_VERSION
#define LOOM_VULKAN_COMPUTE_VERSION "0.0.0"
#endif

namespace loom::vulkan {
namespace {

using Clock = std::chrono::steady_clock;

// Each micro-benchmark runs at least kTiming.min_runs times and stops after
// max_runs or once it has taken budget_ns (after one warm-up run, which also
// records the command buffer).
constexpr sdk::TimingBudget kTiming{2, 30, 10e6};

// A program run with no operands, its inputs intermediates as well (device
// memory the executable owns, not uploaded: what they hold does not change
// the time of these kernels): what execute then costs is the device's alone.
class BenchProgram {
 public:
  uint32_t tensor(std::vector<int64_t> shape) {
    BlobTensor t;
    t.kind = TensorKind::kIntermediate;
    t.shape = std::move(shape);
    program_.tensors.push_back(t);
    return static_cast<uint32_t>(program_.tensors.size() - 1);
  }
  void dispatch(BlobDispatch d) { program_.dispatches.push_back(std::move(d)); }
  BlobProgram& program() { return program_; }

 private:
  BlobProgram program_;
};

// The time of one execute of `bench` on `device`, in nanoseconds,
// and its work.
sdk::Status time_program(Device* device, BenchProgram& bench, double* out_ns, double* out_flops) {
  BlobProgram& program = bench.program();
  std::string error;
  for (size_t i = 0; i < program.dispatches.size(); ++i) {
    if (!validate_dispatch(program, i, &error)) {
      return sdk::internal_error("estimate: benchmark dispatch " + std::to_string(i) + ": " + error);
    }
  }
  *out_flops = 0;
  for (const DispatchWork& w : program_work(program)) *out_flops += w.executed_flops;
  std::unique_ptr<VulkanExecutable> exe;
  LOOM_SDK_RETURN_IF_ERROR(VulkanExecutable::load(device, program, &exe));
  sdk::ExecuteCallT<Fence> call;
  LOOM_SDK_RETURN_IF_ERROR(exe->execute(call));  // warm-up: records the command buffer
  return sdk::time_fastest_run(kTiming, [&] { return exe->execute(call); }, out_ns);
}

// `count` single-element Relu dispatches.
BenchProgram tiny_program(int count) {
  BenchProgram b;
  const uint32_t x = b.tensor({1}), y = b.tensor({1});
  for (int i = 0; i < count; ++i) b.dispatch(make_unary(UnaryOp::kRelu, x, y, 1));
  return b;
}

// A matmul of n^3 (scale s: n = 256 << s).
BenchProgram matmul_program(int scale) {
  BenchProgram b;
  const int64_t n = int64_t{256} << scale;
  const uint32_t a = b.tensor({n, n}), w = b.tensor({n, n});
  const uint32_t y = b.tensor({n, n});
  MatMulParams p;
  p.m = p.n = p.k = static_cast<uint32_t>(n);
  p.a_stride = p.b_stride = static_cast<uint32_t>(n * n);
  b.dispatch(make_matmul(p, a, w, a, y));
  return b;
}

// A 3x3 convolution of c to 2c channels on 28x28 (scale s: c = 32 << s).
BenchProgram conv_program(int scale) {
  BenchProgram b;
  const int64_t c = int64_t{32} << scale;
  const uint32_t x = b.tensor({1, c, 28, 28}), w = b.tensor({2 * c, c, 3, 3});
  const uint32_t y = b.tensor({1, 2 * c, 28, 28});
  ConvParams p;
  p.c = static_cast<uint32_t>(c);
  p.m = static_cast<uint32_t>(2 * c);
  p.h = p.w = p.oh = p.ow = 28;
  p.kh = p.kw = 3;
  p.pt = p.pl = 1;
  b.dispatch(make_conv(p, x, w, x, y));
  return b;
}

// The peak FLOP/s of one kind of kernel and the grid it takes to reach it.
// A GPU runs a dispatch of few workgroups on few of its cores: the model is
//   time = dispatch + executed flops / (peak * min(1, workgroups / saturation)).
// The scale-0 case first; on a device that runs it in under 1 ms (a GPU),
// larger ones, each 4 to 8 times the work, until one takes 1 ms or
// `max_scale`: the largest gives the peak (taken as saturated), the
// smallest then the saturation grid. On a device where the small case
// already takes 1 ms (lavapipe, whose workgroups queue on a few threads)
// the rate is that case's and the saturation 1 workgroup.
template <typename Make>
sdk::Status fit_kind(Device* device, Make make, int max_scale, double round_trip, double dispatch,
                     double* out_peak, double* out_saturation) {
  double ns = 0, flops = 0;
  BenchProgram first = make(0);
  LOOM_SDK_RETURN_IF_ERROR(time_program(device, first, &ns, &flops));
  const double small_t = std::max(ns - round_trip - dispatch, 1.0), small_f = flops;
  double small_g = 1;
  for (const BlobDispatch& d : first.program().dispatches) {
    small_g = static_cast<double>(d.groups[0]) * d.groups[1] * d.groups[2];
  }
  *out_peak = small_f / (small_t * 1e-9);
  *out_saturation = 1;
  double t = small_t;
  for (int scale = 1; scale <= max_scale && t < 1e6; ++scale) {
    BenchProgram next = make(scale);
    LOOM_SDK_RETURN_IF_ERROR(time_program(device, next, &ns, &flops));
    t = std::max(ns - round_trip - dispatch, 1.0);
    const double peak = flops / (t * 1e-9);
    if (peak > *out_peak) {
      *out_peak = peak;
      *out_saturation = std::max(1.0, small_g * peak / (small_f / (small_t * 1e-9)));
    }
  }
  return sdk::Status();
}

constexpr int64_t kAddElements = 1 << 20;

BenchProgram add_program() {
  BenchProgram b;
  const uint32_t x = b.tensor({kAddElements}), z = b.tensor({kAddElements});
  const uint32_t y = b.tensor({kAddElements});
  b.dispatch(make_binary(BinaryOp::kAdd, x, z, y, {kAddElements}, {1}, {1}));
  return b;
}

double get(const sdk::DeviceModelValues& v, const char* name) {
  auto it = v.find(name);
  return it == v.end() ? 0.0 : it->second;
}

constexpr const char* kNames[] = {"round_trip_ns", "dispatch_ns",     "matmul_flops",
                                  "matmul_workgroups", "conv_flops", "conv_workgroups",
                                  "bandwidth"};

}  // namespace

sdk::Status CostModel::measure(sdk::DeviceModelValues* out) {
  const auto start = Clock::now();
  double ns = 0, flops = 0;
  BenchProgram one = tiny_program(1), nine = tiny_program(9);
  LOOM_SDK_RETURN_IF_ERROR(time_program(device_, one, &ns, &flops));
  const double round_trip = ns;
  LOOM_SDK_RETURN_IF_ERROR(time_program(device_, nine, &ns, &flops));
  (*out)["round_trip_ns"] = round_trip;
  (*out)["dispatch_ns"] = std::max(1.0, (ns - round_trip) / 8);
  const double dispatch = (*out)["dispatch_ns"];
  double peak = 0, saturation = 1;
  LOOM_SDK_RETURN_IF_ERROR(
      fit_kind(device_, matmul_program, 3, round_trip, dispatch, &peak, &saturation));
  (*out)["matmul_flops"] = peak;
  (*out)["matmul_workgroups"] = saturation;
  LOOM_SDK_RETURN_IF_ERROR(
      fit_kind(device_, conv_program, 4, round_trip, dispatch, &peak, &saturation));
  (*out)["conv_flops"] = peak;
  (*out)["conv_workgroups"] = saturation;
  BenchProgram add = add_program();
  LOOM_SDK_RETURN_IF_ERROR(time_program(device_, add, &ns, &flops));
  (*out)["bandwidth"] = 3.0 * kAddElements * 4 / (std::max(ns - round_trip, 1.0) * 1e-9);
  (*out)["calibration_ms"] =
      std::max(1e-3, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  return sdk::Status();
}

sdk::Status CostModel::values(sdk::DeviceModelValues* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ready_) {
    const DeviceProperties& p = device_->props();
    const std::string key = p.device_name + " vendor " + std::to_string(p.vendor_id) + " device " +
                            std::to_string(p.device_id);
    const std::string identity = key + " driver " + std::to_string(p.driver_version) +
                                 " plugin vulkan-compute " LOOM_VULKAN_COMPUTE_VERSION " model " +
                                 std::to_string(kVersion);
    const std::string path =
        sdk::device_model_path(sdk::device_model_folder(), "vulkan-compute", key);
    sdk::DeviceModelValues v;
    bool cached = sdk::read_device_model(path, identity, &v);
    for (const char* name : kNames) cached = cached && v.count(name) != 0;
    if (!cached) {
      v.clear();
      LOOM_SDK_RETURN_IF_ERROR(measure(&v));
      (void)sdk::write_device_model(path, identity, v);  // a failed write: measured again next time
    }
    values_ = std::move(v);
    ready_ = true;
  }
  *out = values_;
  return sdk::Status();
}

sdk::Status CostModel::estimate(const BlobProgram& program, uint64_t* out_ns) {
  *out_ns = 0;
  sdk::DeviceModelValues v;
  LOOM_SDK_RETURN_IF_ERROR(values(&v));
  double total = get(v, "round_trip_ns");
  for (const DispatchWork& w : program_work(program)) {
    double rate = 0;  // 0: bound by memory only
    const char* saturation = nullptr;
    if (w.kind == WorkKind::kMatMul) {
      rate = get(v, "matmul_flops");
      saturation = "matmul_workgroups";
    }
    if (w.kind == WorkKind::kConv) {
      rate = get(v, "conv_flops");
      saturation = "conv_workgroups";
    }
    // A grid smaller than the device's saturation runs on a share of it.
    if (saturation != nullptr && w.workgroups > 0 && get(v, saturation) > w.workgroups) {
      rate *= w.workgroups / get(v, saturation);
    }
    total += sdk::roofline_ns(w.executed_flops, rate, w.bytes, get(v, "bandwidth")) +
             get(v, "dispatch_ns");
  }
  *out_ns = total < 1 ? 1 : static_cast<uint64_t>(std::llround(total));
  return sdk::Status();
}

Status Device::estimate_executable(const sdk::Blob& blob, uint64_t* out_time_ns) {
  BlobProgram program;
  std::unique_ptr<OpenGraph> open;
  LOOM_SDK_RETURN_IF_ERROR(check_blob(blob, props_, &program, &open));
  if (open) {  // an open graph: its work follows the binding, no estimate
    *out_time_ns = 0;
    return Status();
  }
  if (!cost_) return sdk::internal_error("executable_estimate: " + props_.uri + " has no cost model");
  return cost_->estimate(program, out_time_ns);
}

}  // namespace loom::vulkan
