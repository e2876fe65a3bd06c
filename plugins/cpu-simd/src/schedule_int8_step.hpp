// The state of one quantized step (schedule_int8.hpp has the arithmetic),
// shared by schedule_int8.cpp (planning, running, requantizing) and
// schedule_int8_pack.cpp (the weights shifted, split and packed once).
// Private to the plugin.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "schedule_int8.hpp"
#include "schedule_plan.hpp"

namespace loom::cpu_simd {

// PackedInt8 and Int8Scratch are members' types of Int8Step, so outside
// the anonymous namespace (GCC's -Wsubobject-linkage in unity builds).

// Weights shifted into s8 and reordered into the primitive's layout, with
// the per-position weight sums Tw (conv: [M, O]; matmul: [batches, N]).
struct PackedInt8 {
  const void* from = nullptr;
  memory mem;
  memory low;  // split weights: ws = 2 * mem + low (see Int8Step::split)
  // Split only when the weights can saturate oneDNN's 16-bit pairs
  // (pairs_cannot_saturate below): otherwise one pass, exactly. Two passes
  // give P = (first << low_shift) + second: the 7 + 1 bit split (shift 1,
  // `low` the 1-bit part, the same primitive), or the even-channel split
  // (shift 0, `low` the residual, Int8Step::half_prim; see split_even).
  bool two_pass = false;
  bool half = false;
  int low_shift = 1;
  std::vector<int64_t> tw;
  // conv with nhwc: Tw as [O, M], wrapped to 32 bits (the result is wrapped
  // to i32 in the end, so its low 32 bits are all that matter); matmul: tw
  // wrapped to 32 bits, in its order.
  std::vector<int32_t> tw_t;
  // The weights are in Int8Step::fused_wei_md and the step runs
  // Int8Step::fused_prim (see there); mem holds them, nothing else is set.
  bool fused = false;
};

// A run's buffers (the s32 accumulators, the split's second product, the
// channels-last x), kept by the step for the next run so that a steady
// state allocates nothing here.
struct Int8Scratch {
  std::vector<int32_t> acc, low;
  std::vector<uint8_t> x, y, x_half;
  // The primitive's call when x needs no reorder: a stream and the
  // arguments' memory objects, made at this set's first run of that kind
  // (`kept`: kFused for fused_prim, kProduct for prim, whose arguments
  // differ); each run points them at its tensors (set_data_handle), so a
  // small step (a classifier's one-row QLinearMatMul) pays no allocation
  // there.
  static constexpr int kNone = 0, kFused = 1, kProduct = 2;
  int kept = kNone;
  dnnl::stream stream;
  memory src, dst, bias;
  std::unordered_map<int, memory> args;
  // The bias as requantize_row_avx2 reads it, for the bias at `bias_from`
  // (kept while a fixed bias stays at that address).
  std::vector<double> bias_wide;
  std::vector<int32_t> bias_wide32;
  const void* bias_from = nullptr;
  // The zero-point terms' sums (a convolution's R per position, a matmul's
  // row sums), per-channel corrections and the bias as i64: sized by the
  // first run, reused by the next.
  std::vector<int64_t> sums, corr, bias_row;
};


// QLinearConvTranspose (format 12, schedule_int8_deconv.cpp): the weights
// of one address packed for the call the step takes with them. `fused`:
// oneDNN's deconvolution requantizes (output scales, x's zero point, round
// and clip post-ops, y's zero point) where that is exact: one pass cannot
// saturate (VNNI, or every output channel's two largest |w| sum to at most
// 128) and 255 * sum |w| + |bias| < 2^24 per output channel (float(acc) +
// float(bias) is then float(acc + bias)). Otherwise s32 products, two of
// them (ws = 2 * hi + lo) where one could saturate, requantized by the
// plugin's loop.
struct DeconvPack {
  const void* from = nullptr;
  bool fused = false, two_pass = false;
  memory wei, low;
};

// The geometry, primitives and constant operands of a QLinearConvTranspose
// step; x and y are channels-last.
struct DeconvInt8 {
  int64_t n = 0, c = 0, m = 0, group = 1, positions = 0;  // positions: N x OH x OW
  memory::desc src_md, y_md, acc_md, user_wei_md, bias_md;
  dnnl::primitive fused_prim, acc_prim;
  memory::desc fused_wei_md, acc_wei_md;
  std::vector<float> mult;     // x_scale * w_scale[m] / y_scale, per output channel
  std::vector<int32_t> bias;   // per output channel (zeros without a bias)
  std::vector<int32_t> zeros;  // requantize_row_avx2's Tw: none here (oneDNN subtracts x's zero point)
  bool has_bias = false;
  int32_t y_zero = 0;
  double lo = 0, hi = 255;  // the output range, the clamp included
  std::shared_ptr<const DeconvPack> pack;  // under Int8Step::mutex
};

struct Int8Step {
  Op op = Op::kQuantizeLinear;
  std::string where;  // "node 3 (QLinearConv)"
  quant::QuantOperands q;
  std::vector<std::vector<int64_t>> in_shapes;
  std::vector<loom_dtype_t> in_dtypes;
  std::vector<int64_t> out_shape;
  loom_dtype_t out_dtype = LOOM_DTYPE_F32;
  int64_t out_count = 0;

  // Quantize / Dequantize: channels along the axis (1: per tensor) and the
  // elements per step along it.
  int64_t channels = 1, inner = 1;

  // Conv and MatMul.
  bool conv = false;
  bool weight_fixed = false;
  bool bias_fixed = false;  // the bias is a constant or parameter (Int8Scratch::bias_wide)
  int32_t shift = 0;  // c: 128 for u8 weights, 0 for s8
  // Without VNNI, oneDNN multiplies u8 by s8 with vpmaddubsw, whose pairwise
  // sums saturate at 16 bits (2 x 255 x 128 does not fit): the weights are
  // then split into ws = 2 * hi + lo, hi in [-64, 63] and lo in {0, 1}, and
  // P = 2 * (x * hi) + x * lo, each product within range. Two passes, exact;
  // one where the weights cannot saturate (pairs_cannot_saturate).
  bool split = false;
  dnnl::primitive prim;
  memory::desc src_md, wei_md, dst_md, user_wei_md;
  // Conv: oneDNN's optimized int8 convolutions read and write channels-last
  // (its plain-layout int8 convolution is the reference loop, 100x slower),
  // so with `nhwc` (u8 x) x is reordered from plain into src_md and the s32
  // result is channels-last.
  memory::desc user_src_md;
  dnnl::primitive src_reorder;
  // QLinearConv with nhwc: the requantized u8 / s8 result is written
  // channels-last (contiguous rows) and reordered into the plain output.
  memory::desc y_nhwc_md, y_plain_md;
  dnnl::primitive y_reorder;
  bool nhwc = false;
  // QLinearConv with nhwc whose x and y the schedule keeps channels-last
  // (make_int8_step's `nhwc`): neither is reordered here.
  bool io_nhwc = false;
  // Conv, u8 x, group 1, an even C, without VNNI, where oneDNN's weight
  // layout pairs adjacent input channels (its innermost block is along C,
  // of even size): the even-channel split. The weights become a main part
  // whose channel pairs (2j, 2j + 1) cannot saturate and a residual on the
  // even channels only, multiplied with x's even channels by a convolution
  // of C / 2 input channels (half the second pass of the 7 + 1 bit split).
  bool half_possible = false;
  memory::desc half_view_md, half_src_md, half_wei_md, half_user_wei_md;
  dnnl::primitive half_prim, half_reorder;
  // Conv: N, C, M, group, Cg, Mg, output positions O, taps K, and per output
  // position its taps' input offsets within one channel (-1: in the pad).
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0, o = 0, k = 0, in_sp = 0;
  std::vector<int64_t> taps;  // O x K
  // MatMul: rows (per batch), K, N, batches of A and B (B's 1 when 2-D);
  // trans_b: B is given as [N, K] (format 7), transposed when packed.
  int64_t rows = 0, inner_k = 0, cols = 0, batches = 1, b_batches = 1;
  bool trans_b = false;
  // Format 7's output clamp (a fused Relu or Clip), in output units.
  bool clamp = false;
  int32_t clamp_lo = 0, clamp_hi = 0;
  // Format 10's trans_a 1: round half to even, then add the output zero
  // point (a QuantizeLinear's order); else the zero point is added first.
  bool round_first = false;

  // The requantization inside oneDNN's convolution (QLinearConv with
  // round_first, or the QOperator form with an even y zero point, where the
  // two orders agree; u8 x, s8 weights with zero point 0, every scale and
  // zero point a blob constant): output scales x_scale * w_scale[m] / y_scale,
  // x's zero point, a round-half-to-even post-op, the clamp as a clip
  // post-op and y's zero point, writing y's bytes directly. It computes
  // round(float(acc + bias) * mult) + y_zero exactly as the loop below
  // where float(acc) + float(bias) is float(acc + bias): for every output
  // channel 255 * sum |w| + |bias| < 2^24 (checked when the weights are
  // packed, with whether one pass is exact: PackedInt8::fused).
  // QLinearMatMul with a 2-D B likewise, on plain [rows, K] x and
  // [rows, N] y (fused_y_md: y as fused_prim writes it).
  bool fused_possible = false;
  dnnl::primitive fused_prim;
  memory::desc fused_wei_md, bias_md, fused_y_md;
  std::vector<int64_t> bias_abs;  // |bias[m]| (zeros without a bias)

  // Conv: per output position, the count of its taps inside the input
  // times the group's input channels (Cnt).
  std::vector<int64_t> cnt;
  // The requantization of channels-last QLinearConv results and per-tensor
  // QuantizeLinear / DequantizeLinear of 8-bit values on AVX2 (the plain
  // kernels' ISA, CPUID capped by cpu.isa, is AVX2 or wider).
  bool avx2 = false;

  // x_scale, w_scale, y_scale and w's zero point all constants or
  // parameters: their check, the multipliers and whether the R term is
  // needed are worked out once per set of addresses (RequantParams).
  bool params_fixed = false;

  // An open-shape executable's store of packs shared by its bindings'
  // schedules (PackedWeights::int8); null: this step packs its own.
  struct Int8PackStore* store = nullptr;

  // QLinearConvTranspose: everything it needs (the fields above from
  // `conv` on are unused).
  std::shared_ptr<DeconvInt8> deconv;

  std::mutex mutex;
  std::shared_ptr<const PackedInt8> packed;
  std::shared_ptr<const struct RequantParams> params;  // under mutex
  std::vector<std::unique_ptr<Int8Scratch>> scratch;  // free buffers, under mutex
};

// What a run derives from the scales and the weight zero point (checked):
// per channel x_scale * w_scale / y_scale, and whether any channel's weight
// zero point differs from the shift (the R term); `from` the addresses they
// were read from.
struct RequantParams {
  std::array<const void*, 4> from{};
  std::vector<float> mult;
  bool need_r = false;
};

// Shared by schedule_int8.cpp (making and running steps) and
// schedule_int8_plan.cpp (their oneDNN primitives): the element count of a
// shape; a one-element or per-channel integer parameter's entry i; whether
// oneDNN's int8 kernels lack VNNI (see Int8Step::split); the primitives of a
// convolution step and of a matmul step.
int64_t int8_elements(const std::vector<int64_t>& s);
int64_t int8_zp_at(const void* p, loom_dtype_t d, int64_t i);
bool lacks_vnni();
sdk::Status plan_conv(const BlobGraph& g, const BlobNode& node, Int8Step* s);
sdk::Status plan_matmul(const BlobGraph& g, const BlobNode& node, Int8Step* s);

// QLinearConvTranspose (schedule_int8_deconv.cpp): its plan (constant
// scales, zero points and bias read and checked; oneDNN's primitives) and
// its run.
sdk::Status plan_deconv(const BlobGraph& g, const BlobNode& node, const std::vector<bool>& fixed, Int8Step* s);
sdk::Status run_deconv(Int8Step& s, const std::vector<const void*>& ins, void* out, ThreadPool& pool);

// One run's buffer set of step `s`: a free one of the step's, or a new one;
// given back to the step when the run ends (kept for the next run).
class HeldScratch {
 public:
  explicit HeldScratch(Int8Step& s);
  ~HeldScratch();
  HeldScratch(const HeldScratch&) = delete;
  HeldScratch& operator=(const HeldScratch&) = delete;
  Int8Scratch& operator*() { return *held_; }
  Int8Scratch* operator->() { return held_.get(); }
  Int8Scratch* get() { return held_.get(); }

 private:
  Int8Step& step_;
  std::unique_ptr<Int8Scratch> held_;
};

// Shared by the steps' runs: calls `prim` (src, weights, dst[, bias]) with
// the stream and memory objects `b` keeps for calls of `kind` (made at the
// first such call, pointed at this run's tensors); keeps in `b` the first
// `wide` biases in requantize_row_avx2's two forms.
void run_kept_call(Int8Scratch& b, int kind, const dnnl::primitive& prim, const memory::desc& src_md, const void* src,
                   const memory::desc& dst_md, void* dst, const memory& weights, const memory::desc* bias_md,
                   const void* bias);
void keep_wide_bias(const Int8Step& s, const int32_t* bias, int64_t wide, Int8Scratch* b);

// requantize_row_avx2's operands: per channel the multiplier and the bias
// (as double), the x zero point, the output zero point and range.
struct RequantRow {
  const float* mult;
  const double* bias;
  const int32_t* bias32;  // the same biases as i32, for the eight-wide part
  int32_t xz;
  int32_t low_shift;  // the two passes: (acc << low_shift) + low
  double y_zero, lo, hi;
  int64_t channels;  // a multiple of 4
  int32_t y_zero_i;  // y_zero as an integer
  bool round_first;  // round, then add the zero point (format 10)
};

// The AVX2 loops (schedule_int8_rows.cpp): one output position's channels
// of a channels-last QLinearConv without the R term (q.channels of them, a
// multiple of 4; `low` the two passes' second product or null) as bytes;
// per-tensor QuantizeLinear and DequantizeLinear of `count` values, a
// multiple of 8. Bit for bit the scalar loops in schedule_int8.cpp.
void requantize_row_avx2(const RequantRow& q, const int32_t* acc, const int32_t* low, const int32_t* tw,
                         bool y_unsigned, uint8_t* y);
void quantize_rows_avx2(const float* x, int64_t count, float scale, float zero, bool is_unsigned, uint8_t* y);
void dequantize_rows_avx2(const void* x, int64_t count, float scale, int32_t zero, bool is_unsigned, float* y);

// What a pack depends on: the weight's address, type and shape, and every
// field of the step that pack_int8_weights reads (layouts, the splits, the
// taps behind Tw). Two bindings' steps with equal keys share one pack.
struct Int8PackKey {
  const void* from = nullptr;
  loom_dtype_t x_dtype = LOOM_DTYPE_U8, w_dtype = LOOM_DTYPE_I8;
  std::vector<int64_t> w_shape;
  int32_t shift = 0;
  bool conv = false, nhwc = false, trans_b = false, split = false, fused_possible = false, half_possible = false;
  int64_t m = 0, c = 0, cg = 0, k = 0, o = 0, cols = 0, inner_k = 0, b_batches = 1;
  std::vector<int64_t> taps, bias_abs;
  memory::desc user_wei_md, wei_md, fused_wei_md, half_user_wei_md, half_wei_md;
  bool operator==(const Int8PackKey&) const = default;
};

// The packs of an open-shape executable, shared by its bindings: a batch
// size seen for the first time reuses the 8-bit weights packed for another.
struct Int8PackStore {
  std::mutex mutex;
  std::vector<std::pair<Int8PackKey, std::shared_ptr<const PackedInt8>>> entries;
  size_t packs = 0, reuses = 0;
};

// The pack of `w` for step `s`: the store's when it has one with the same
// key, else packed now (under the store's lock, so that another binding
// waits for it instead of packing it again) and recorded.
std::shared_ptr<const PackedInt8> shared_int8_pack(Int8PackStore& store, const Int8Step& s, const void* w);

// Shifts the weight `w` (the data of the step's weight input) into s8,
// splits it where oneDNN's 16-bit pairs could saturate (7 + 1 bits, or the
// even-channel split), reorders it into the primitive's layout and sums Tw.
std::shared_ptr<PackedInt8> pack_int8_weights(const Int8Step& s, const void* w);

}  // namespace loom::cpu_simd
