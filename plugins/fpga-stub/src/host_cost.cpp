// The host cost of the simulator (host_cost.hpp).
#include "host_cost.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

#include "device.hpp"
#include "kernels.hpp"
#include "node_check.hpp"

#ifndef LOOM_FPGA_STUB_VERSION
#define LOOM_FPGA_STUB_VERSION "0.0.0"
#endif

namespace loom::fpga_stub {
namespace {

// Each calibration node runs at least 3 times, then until 5 ms are spent.
constexpr sdk::TimingBudget kHostTiming{3, 20, 5e6};

// How the simulator's kernels spend host time on a node: multiply-adds in
// f32 (Conv, MatMul, Gemm), in integers (the int8 products), or one pass
// over the output (everything else). node_cost's units are the counts.
enum class HostKind { kConvF32, kMatMulF32, kMacInt8, kElementwise };

HostKind host_kind(Op op) {
  switch (op) {
    case Op::kConv: return HostKind::kConvF32;
    case Op::kMatMul:
    case Op::kGemm: return HostKind::kMatMulF32;
    case Op::kConvInteger:
    case Op::kQLinearConv:
    case Op::kMatMulInteger:
    case Op::kQLinearMatMul: return HostKind::kMacInt8;
    default: return HostKind::kElementwise;
  }
}

const char* rate_name(HostKind k) {
  switch (k) {
    case HostKind::kConvF32: return "conv_f32_ops_per_s";
    case HostKind::kMatMulF32: return "matmul_f32_ops_per_s";
    case HostKind::kMacInt8: return "int8_macs_per_s";
    case HostKind::kElementwise: return "elements_per_s";
  }
  return "";
}

BsTensor host_tensor(loom_dtype_t dtype, std::vector<int64_t> shape, Storage storage = Storage::kIo) {
  BsTensor t;
  t.dtype = dtype;
  t.storage = storage;
  t.shape = std::move(shape);
  t.bytes = element_count(t.shape) * dtype_size(dtype);
  return t;
}

// A one-node bitstream: tensors, then the node reading `inputs` into the last tensor.
Bitstream one_node(std::vector<BsTensor> tensors, Op op, std::vector<int32_t> inputs,
                   std::vector<int64_t> params = {}) {
  Bitstream bs;
  bs.tensors = std::move(tensors);
  BsNode n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.output = static_cast<int32_t>(bs.tensors.size() - 1);
  n.params = std::move(params);
  bs.nodes = {n};
  return bs;
}

// Host nanoseconds of the fastest run of `bs`'s node on zeroed memory, and
// its node_cost in *units (MACs or elements).
Status time_node(const Bitstream& bs, double* out_ns, double* units) {
  LOOM_SDK_RETURN_IF_ERROR(check_node(bs, 0));
  std::vector<std::vector<std::byte>> memory(bs.tensors.size());
  std::vector<std::byte*> data(bs.tensors.size());
  for (size_t t = 0; t < bs.tensors.size(); ++t) {
    memory[t].assign(std::max<uint64_t>(bs.tensors[t].bytes, 1), std::byte{0});
    data[t] = memory[t].data();
  }
  const NodeCost cost = node_cost(bs, bs.nodes[0]);
  *units = static_cast<double>(cost.int8_macs + cost.f32_ops);
  run_node(bs, bs.nodes[0], data.data());  // warm-up
  return sdk::time_fastest_run(kHostTiming, [&] {
    run_node(bs, bs.nodes[0], data.data());
    return Status();
  }, out_ns);
}

// A matmul of [n, n] by [n, n] in f32 or u8 x u8 -> i32.
Bitstream matmul_case(int64_t n, bool int8) {
  if (int8) {
    return one_node({host_tensor(LOOM_DTYPE_U8, {n, n}), host_tensor(LOOM_DTYPE_U8, {n, n}, Storage::kConst),
                     host_tensor(LOOM_DTYPE_I32, {n, n})},
                    Op::kMatMulInteger, {0, 1});
  }
  return one_node({host_tensor(LOOM_DTYPE_F32, {n, n}), host_tensor(LOOM_DTYPE_F32, {n, n}, Storage::kConst),
                   host_tensor(LOOM_DTYPE_F32, {n, n})},
                  Op::kMatMul, {0, 1});
}

// [4, 512] x [512, 512] in f32: a layer's matrix product, whose weights (1
// MiB) the kernel walks column by column out of the caches, as a model's do.
Bitstream wide_matmul_case() {
  return one_node({host_tensor(LOOM_DTYPE_F32, {4, 512}),
                   host_tensor(LOOM_DTYPE_F32, {512, 512}, Storage::kConst),
                   host_tensor(LOOM_DTYPE_F32, {4, 512})},
                  Op::kMatMul, {0, 1});
}

// A 3x3 convolution, c -> c channels on hw x hw, padded to keep the size.
Bitstream conv_case(int64_t c, int64_t hw) {
  return one_node({host_tensor(LOOM_DTYPE_F32, {1, c, hw, hw}),
                   host_tensor(LOOM_DTYPE_F32, {c, c, 3, 3}, Storage::kConst),
                   host_tensor(LOOM_DTYPE_F32, {1, c, hw, hw})},
                  Op::kConv, {0, 1}, {1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
}

// Two f32 vectors of n elements added.
Bitstream add_case(int64_t n) {
  return one_node({host_tensor(LOOM_DTYPE_F32, {n}), host_tensor(LOOM_DTYPE_F32, {n}),
                   host_tensor(LOOM_DTYPE_F32, {n})},
                  Op::kAdd, {0, 1});
}

// Fits time = fixed + units / rate through a small and a large case.
Status fit(const Bitstream& small, const Bitstream& large, const std::string& name,
           sdk::DeviceModelValues* out) {
  double t_small = 0, t_large = 0, u_small = 0, u_large = 0;
  LOOM_SDK_RETURN_IF_ERROR(time_node(small, &t_small, &u_small));
  LOOM_SDK_RETURN_IF_ERROR(time_node(large, &t_large, &u_large));
  // Noise can make the large case no slower than the small one: the rate
  // then comes from the large case alone.
  const double rate = t_large > t_small * 1.05 ? (u_large - u_small) / ((t_large - t_small) * 1e-9)
                                               : u_large / (t_large * 1e-9);
  (*out)[name] = rate;
  return Status();
}

// The host CPU's name ("model name" in /proc/cpuinfo), or "unknown cpu".
std::string host_cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown cpu";
}

double value_of(const sdk::DeviceModelValues& v, const char* name) {
  auto it = v.find(name);
  return it == v.end() ? 0.0 : it->second;
}

}  // namespace

HostCost::HostCost()
    : key_("host " + host_cpu_name()),
      identity_(key_ + " plugin fpga-stub " LOOM_FPGA_STUB_VERSION " host model " +
                std::to_string(kVersion)) {}

Status HostCost::ensure_model() {
  if (ready_) return Status();
  const std::string path = sdk::device_model_path(sdk::device_model_folder(), "fpga-stub", key_);
  sdk::DeviceModelValues v;
  bool cached = sdk::read_device_model(path, identity_, &v);
  for (const char* name : {"conv_f32_ops_per_s", "matmul_f32_ops_per_s", "int8_macs_per_s",
                           "elements_per_s", "node_ns", "copy_bytes_per_s", "checksum_bytes_per_s"}) {
    cached = cached && v.count(name) != 0;
  }
  if (!cached) {
    v.clear();
    const auto start = std::chrono::steady_clock::now();
    LOOM_SDK_RETURN_IF_ERROR(fit(matmul_case(16, false), wide_matmul_case(), "matmul_f32_ops_per_s", &v));
    LOOM_SDK_RETURN_IF_ERROR(fit(conv_case(4, 8), conv_case(16, 16), "conv_f32_ops_per_s", &v));
    LOOM_SDK_RETURN_IF_ERROR(fit(matmul_case(16, true), matmul_case(64, true), "int8_macs_per_s", &v));
    LOOM_SDK_RETURN_IF_ERROR(fit(add_case(1024), add_case(1 << 16), "elements_per_s", &v));
    double one = 0, units = 0;
    LOOM_SDK_RETURN_IF_ERROR(time_node(one_node({host_tensor(LOOM_DTYPE_F32, {1}), host_tensor(LOOM_DTYPE_F32, {1})},
                                                Op::kRelu, {0}),
                                       &one, &units));
    v["node_ns"] = one;
    // The DMA copies: memcpy into and out of the device's arena.
    std::vector<std::byte> a(size_t{4} << 20, std::byte{1}), b(a.size());
    double copy_ns = 0;
    LOOM_SDK_RETURN_IF_ERROR(sdk::time_fastest_run(kHostTiming, [&] {
      std::memcpy(b.data(), a.data(), a.size());
      return Status();
    }, &copy_ns));
    v["copy_bytes_per_s"] = static_cast<double>(a.size()) / (copy_ns * 1e-9);
    const size_t hashed = size_t{256} << 10;
    volatile uint64_t sink = 0;  // keeps the checksums from being optimized away
    double hash_ns = 0;
    LOOM_SDK_RETURN_IF_ERROR(sdk::time_fastest_run(kHostTiming, [&] {
      sink = sink ^ checksum_of(a.data(), hashed);
      return Status();
    }, &hash_ns));
    v["checksum_bytes_per_s"] = static_cast<double>(hashed) / (hash_ns * 1e-9);
    v["calibration_ms"] = std::max(
        1e-3, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    (void)sdk::write_device_model(path, identity_, v);  // a failed write: measured again next time
  }
  values_ = std::move(v);
  ready_ = true;
  return Status();
}

Status HostCost::values(sdk::DeviceModelValues* out) {
  std::lock_guard<std::mutex> lock(mu_);
  LOOM_SDK_RETURN_IF_ERROR(ensure_model());
  *out = values_;
  return Status();
}

Status HostCost::estimate(const Bitstream& bs, uint64_t* out_ns) {
  *out_ns = 0;
  sdk::DeviceModelValues v;
  LOOM_SDK_RETURN_IF_ERROR(values(&v));
  double ns = 0;
  uint64_t io_bytes = 0;
  for (const auto* list : {&bs.inputs, &bs.outputs}) {
    for (uint32_t t : *list) io_bytes += bs.tensors[t].bytes;
  }
  ns += 1e9 * static_cast<double>(io_bytes) / value_of(v, "copy_bytes_per_s");
  const uint64_t hashed = bs.weights.size() + 2 * io_bytes;
  ns += 1e9 * static_cast<double>(hashed) / value_of(v, "checksum_bytes_per_s");
  for (const BsNode& node : bs.nodes) {
    const NodeCost c = node_cost(bs, node);
    const double rate = value_of(v, rate_name(host_kind(node.op)));
    ns += value_of(v, "node_ns") + 1e9 * static_cast<double>(c.int8_macs + c.f32_ops) / rate;
  }
  *out_ns = ns < 1 ? 1 : static_cast<uint64_t>(std::llround(ns));
  return Status();
}

}  // namespace loom::fpga_stub
