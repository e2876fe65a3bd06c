// The cpu-simd operators. Each node's geometry is planned once at load time
// from the validated blob, so running a node only loops over memory: no
// shape work, no allocation.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"
#include "thread_pool.hpp"

namespace loom::cpu_simd {

// Numpy broadcast of two operands into an output of rank <= kMaxRank, with
// element strides (0 along broadcast dimensions).
struct BroadcastGeometry {
  size_t rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> a_strides{};
  std::array<int64_t, kMaxRank> b_strides{};
};

struct NodePlan {
  Op op = Op::kRelu;
  std::vector<uint32_t> inputs;
  size_t input_count = 0;
  uint32_t output = 0;
  int64_t count = 0;  // output elements

  // MatMul: per output matrix, the element offsets of its A and B matrices.
  // Gemm: m, k, n, transposition, scales and C's strides over (M, N).
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> a_offsets, b_offsets;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
  int64_t c_row_stride = 0, c_col_stride = 0;

  BroadcastGeometry add;  // Add

  // Softmax / LogSoftmax: outer x n x inner, along n. Concat: outer copies
  // of each input's chunk. GlobalAveragePool, BatchNorm: outer = N,
  // n = channels, inner = spatial size.
  int64_t outer = 0, inner = 0;
  std::vector<int64_t> chunks;  // Concat: elements per outer step, per input

  // Transpose: output dims and, per output dim, the input's stride.
  BroadcastGeometry transpose;

  // Conv / pooling, with the spatial dims padded to 3 (extent 1, kernel 1).
  Window window;
  int64_t batch = 0, in_channels = 0, out_channels = 0;
  int64_t in_sp[kMaxSpatial] = {}, out_sp[kMaxSpatial] = {};

  // Resize: linear or nearest, per-axis tap offsets (b_offsets into
  // a_offsets) and weights (w_offsets into weights), and which axes change.
  bool linear = false;
  std::vector<float> weights;
  std::vector<int64_t> w_offsets;
  std::array<bool, kMaxRank> resized{};

  // Pad, Where, Equal: the output dims in `transpose.dims` and, per operand
  // (Pad: the input), its element strides over them (0 where broadcast).
  // Pad: per axis, the input index of each output position or -1 for the
  // constant (a_offsets, axis a's entries from b_offsets[a]); alpha holds
  // the constant. Equal and Cast: the dtypes read and written.
  std::array<std::array<int64_t, kMaxRank>, 3> strides{};
  loom_dtype_t in_dtype = LOOM_DTYPE_F32, out_dtype = LOOM_DTYPE_F32;
  // Bytes per output element (plan_node): the operators that only move
  // elements (moves_elements) run 1- and 8-byte ones with run_moved_node;
  // 4-byte ones (f32, i32) take the f32 kernels, which copy bits.
  size_t elem = 4;
};

// The element walk of Transpose and Slice: `count` output elements of `g`'s
// output dims, the innermost axis read `g.a_strides[last]` apart, each
// outer axis `g.a_strides[d]` apart in x; elements of type T (floats, or
// 1- and 8-byte elements, run_moved_node). A contiguous innermost axis is
// copied a row at a time. Rank >= 1. Internal linkage: the per-ISA builds
// of the kernels each keep their own copy (one merged copy could be the
// AVX-512 build's, run on a CPU without it).
template <typename T>
static void walk_elements(const BroadcastGeometry& g, const T* x, T* y, int64_t count) {
  std::array<int64_t, kMaxRank> index{};
  const size_t last = g.rank - 1;
  const int64_t width = g.dims[last], stride = g.a_strides[last];
  int64_t xo = 0;
  for (int64_t o = 0; o < count; o += width) {
    if (stride == 1) {
      std::memcpy(y + o, x + xo, sizeof(T) * static_cast<size_t>(width));
    } else {
      for (int64_t j = 0; j < width; ++j) y[o + j] = x[xo + j * stride];
    }
    for (size_t d = last; d-- > 0;) {
      ++index[d];
      xo += g.a_strides[d];
      if (index[d] < g.dims[d]) break;
      xo -= g.a_strides[d] * index[d];
      index[d] = 0;
    }
  }
}

// The operators whose kernels only move or compare elements: those that
// run any blob dtype, and MaxPool (f32, u8, i8; blob_dtype_rules.hpp).
// Resize: nearest, of bytes only (the schedule's pass-through Resize).
inline bool moves_elements(Op op) { return moves_any_dtype(op) || op == Op::kMaxPool || op == Op::kResize; }

// A 2-D MaxPool 2 x 2, stride 2, without pads or dilation: the plain
// kernels have a vectorized loop for it on NCHW data, which the schedule
// uses when the input is not channels-last already.
inline bool is_plain_max_pool_2x2(const NodePlan& p) {
  const Window& w = p.window;
  return p.op == Op::kMaxPool && p.in_sp[0] == 1 && p.out_sp[0] == 1 && w.kernel[0] == 1 &&
         w.kernel[1] == 2 && w.kernel[2] == 2 && w.stride[1] == 2 && w.stride[2] == 2 &&
         w.dilation[1] == 1 && w.dilation[2] == 1 && w.pad_begin[1] == 0 && w.pad_begin[2] == 0 &&
         w.pad_end[1] == 0 && w.pad_end[2] == 0 && p.out_sp[1] == p.in_sp[1] / 2 &&
         p.out_sp[2] == p.in_sp[2] / 2;
}


// Conv, ConvTranspose and pooling geometry for one loop nest over 1-D to
// 3-D windows: unpacks the node's window (validate() accepted it) and pads
// the spatial dims in front to 3 (extent 1, kernel 1, stride 1, no pads).
inline void plan_window(const BlobNode& node, const std::vector<int64_t>& x,
                        const std::vector<int64_t>& out, NodePlan* p) {
  std::string ignored;
  unpack_window(node, &p->window, &ignored);
  p->batch = x[0];
  p->in_channels = x[1];
  p->out_channels = out[1];
  const int64_t shift = kMaxSpatial - p->window.k;
  const Window& from = p->window;
  Window w;
  w.group = from.group;
  w.ceil_mode = from.ceil_mode;
  w.count_include_pad = from.count_include_pad;
  for (int64_t i = kMaxSpatial - 1; i >= 0; --i) {
    const bool real = i >= shift;
    p->in_sp[i] = real ? x[2 + i - shift] : 1;
    p->out_sp[i] = real ? out[2 + i - shift] : 1;
    w.kernel[i] = real ? from.kernel[i - shift] : 1;
    w.stride[i] = real ? from.stride[i - shift] : 1;
    w.dilation[i] = real ? from.dilation[i - shift] : 1;
    w.pad_begin[i] = real ? from.pad_begin[i - shift] : 0;
    w.pad_end[i] = real ? from.pad_end[i - shift] : 0;
    w.output_padding[i] = real ? from.output_padding[i - shift] : 0;
  }
  w.k = kMaxSpatial;
  p->window = w;
}

// Merges neighbouring dimensions that both operands (and the output) walk
// as one: [1, C, H, W] + [1, C, H, W] becomes one run of C*H*W, NHWC data
// times a per-channel vector becomes rows of C. Defined in schedule.cpp.
void coalesce(BroadcastGeometry* g);

// Work below this many multiply-adds stays on the calling thread: waking
// workers costs more than it saves.
inline constexpr int64_t kParallelThreshold = 1 << 16;

// DequantizeLinear(a), DequantizeLinear(b) -> Add (or Mul: `multiply`) ->
// QuantizeLinear with per-tensor parameters, as one pass (a kQuantAdd step,
// plan::QuantAdd), with ONNX Runtime's QLinearAdd / QLinearMul arithmetic
// (finish_quant_add fills the derived fields):
//   Add: u is the operand that varies along the output's last dimension of
//   extent above 1 (a, unless only b does: then `swap`), w the other; with
//   r_u = u's scale / y's scale and r_w likewise,
//   fixed = y_zero - fma(r_u, u_zero, r_w * w_zero), and each output is
//   fma(u, r_u, fma(w, r_w, fixed)) on the raw 8-bit values u and w;
//   Mul: float((a - a_zero) * (b - b_zero)) * ratio + y_zero with
//   ratio = a_scale * b_scale / y_scale;
// each rounded half to even and saturated (NaN: 0), all in f32.
struct QuantAddParams {
  float a_scale = 1, b_scale = 1, y_scale = 1;
  int32_t a_zero = 0, b_zero = 0, y_zero = 0;
  bool a_unsigned = true, b_unsigned = true, y_unsigned = true;
  bool multiply = false;
  bool swap = false;  // Add: u is b (a is constant along the last dimension)
  float u_ratio = 1, w_ratio = 1, fixed = 0;  // Add
  float ratio = 1;                             // Mul
};
void finish_quant_add(QuantAddParams* q);

// ops.cpp and ops_nn.cpp are compiled once per instruction set, each build
// in its own namespace (LOOM_CPU_SIMD_ISA, set by CMakeLists.txt): plain
// x86-64, AVX2+FMA, and AVX-512 (F/BW/VL/DQ). The plugin picks one build
// when it starts (select_kernels); planning uses the baseline build.
#define LOOM_CPU_SIMD_DECLARE_KERNELS(ns)                                                        \
  namespace ns {                                                                                 \
  BroadcastGeometry broadcast_geometry(const std::vector<int64_t>& a,                           \
                                       const std::vector<int64_t>& b);                          \
  void plan_nn_node(const BlobGraph& graph, const BlobNode& node, NodePlan* plan);               \
  void run_nn_node(const NodePlan& plan, float* const* tensors, ThreadPool& pool);               \
  void plan_data_node(const BlobGraph& graph, const BlobNode& node, NodePlan* plan);             \
  void run_data_node(const NodePlan& plan, float* const* tensors, ThreadPool& pool);             \
  void plan_typed_node(const BlobGraph& graph, const BlobNode& node, NodePlan* plan);            \
  void run_typed_node(const NodePlan& plan, float* const* tensors, ThreadPool& pool);            \
  void run_moved_node(const NodePlan& plan, float* const* tensors);                              \
  void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,  \
                  int64_t n, float epsilon, ThreadPool& pool);                                   \
  void lookup_bytes(const uint8_t* x, uint8_t* y, size_t n, const uint8_t* table);               \
  void global_average_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t hw);          \
  void quant_add(const void* a, const void* b, void* y, const BroadcastGeometry& g, int64_t begin, \
                 int64_t end, const QuantAddParams& q);                                          \
  NodePlan plan_node(const BlobGraph& graph, size_t index);                                      \
  void run_node(const NodePlan& plan, float* const* tensors, ThreadPool& pool);                  \
  }
LOOM_CPU_SIMD_DECLARE_KERNELS(isa_baseline)
LOOM_CPU_SIMD_DECLARE_KERNELS(isa_avx2)
LOOM_CPU_SIMD_DECLARE_KERNELS(isa_avx512)
#undef LOOM_CPU_SIMD_DECLARE_KERNELS

// Numpy broadcast of `a` and `b` as strides over the broadcast shape.
using isa_baseline::broadcast_geometry;
// Plans node `index` of a graph that decode() accepted.
using isa_baseline::plan_node;

enum class KernelIsa : uint8_t { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// One build of the plain kernels.
struct Kernels {
  KernelIsa isa = KernelIsa::kBaseline;
  const char* name = "x86-64";
  // Runs one node; `tensors[i]` is the data of slot i.
  void (*run_node)(const NodePlan& plan, float* const* tensors, ThreadPool& pool) =
      isa_baseline::run_node;
  // y = (x - mean) / sqrt(var + epsilon) * gamma + beta over rows of n
  // (gamma, beta: n values or NULL), for the fused LayerNorm pattern.
  void (*layer_norm)(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
                     int64_t n, float epsilon, ThreadPool& pool) = isa_baseline::layer_norm;
  // y[e] = table[x[e]] for e < n (a kTable step's chunk). The AVX-512 build
  // needs VBMI as well; without it the AVX2 build's serves.
  void (*lookup_bytes)(const uint8_t* x, uint8_t* y, size_t n, const uint8_t* table) =
      isa_baseline::lookup_bytes;
  // The mean over the hw pixels of each of c channels of n NHWC images.
  void (*global_average_nhwc)(const float* x, float* y, int64_t n, int64_t c, int64_t hw) =
      isa_baseline::global_average_nhwc;
  // y[e] for e < n from a[e] and b[e] (a kQuantAdd step's chunk).
  void (*quant_add)(const void* a, const void* b, void* y, const BroadcastGeometry& g, int64_t begin,
                    int64_t end, const QuantAddParams& q) =
      isa_baseline::quant_add;
};

// The widest build this CPU runs (CPUID), but none wider than `cap`.
Kernels select_kernels(KernelIsa cap);

}  // namespace loom::cpu_simd
