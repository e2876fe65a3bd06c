// The cpu-simd operator set: operator codes, dtypes and the blob's tensor,
// node and graph types. Header-only (plugin.h and the standard library);
// blob_shape_rules.hpp holds each operator's arity, shape and dtype rules,
// and blob_format.hpp builds the codec on both.
//
// Attributes travel in the node's fixed fields (axis, alpha, beta, trans_a,
// trans_b) and, from format 2, in two lists `ints` and `floats` whose layout
// is per operator (see the README).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/plugin.h"

namespace loom::cpu_simd {

inline constexpr uint32_t kMaxRank = LOOM_MAX_RANK;
// Conv and pooling handle 1 to 3 spatial dimensions.
inline constexpr int64_t kMaxSpatial = 3;
// Every integer attribute must lie in [-kMaxAttr, kMaxAttr]: later products
// of a few of them then stay far from overflow.
inline constexpr int64_t kMaxAttr = int64_t{1} << 31;

enum class Op : uint32_t {
  // Format 1.
  kMatMul = 1, kGemm = 2, kAdd = 3, kRelu = 4, kSoftmax = 5,
  // Format 2: binary elementwise with numpy broadcasting.
  kSub = 6, kMul = 7, kDiv = 8, kMax = 9, kMin = 10, kPow = 11,
  kPRelu = 12,  // slope broadcast to X (unidirectional)
  // Unary; alpha/beta carry LeakyRelu alpha, Elu alpha, Selu alpha/gamma,
  // HardSigmoid alpha/beta, Clip min/max.
  kLeakyRelu = 13, kElu = 14, kSelu = 15, kSigmoid = 16, kHardSigmoid = 17, kHardSwish = 18,
  kTanh = 19, kSoftplus = 20, kClip = 21, kErf = 22, kExp = 23, kLog = 24, kSqrt = 25,
  kNeg = 26, kAbs = 27, kReciprocal = 28, kFloor = 29, kCeil = 30,
  kCopy = 31,  // Identity, Dropout, Reshape, Flatten, Squeeze, Unsqueeze: same elements, new shape;
               // [v5] ints = per output dim: >= 0 that extent, -1 the inferred one,
               // -2 - j input dim j (empty: the declared shape)
  kLogSoftmax = 32,
  kConcat = 33,     // axis; 1 or more inputs
  kTranspose = 34,  // ints = perm
  kConv = 35,       // ints = [k, group, kernel[k], strides[k], dilations[k], pads[2k]]
  kMaxPool = 36,    // ints = [k, ceil_mode, count_include_pad, kernel[k], strides[k],
  kAveragePool = 37,  //       dilations[k], pads[2k]]
  kGlobalAveragePool = 38,
  kBatchNorm = 39,  // inputs X, scale, B, mean, var; alpha = epsilon
  // Format 3.
  kReduceMean = 40,  // ints = [keepdims, axes...]: axes ascending, at least one
  kReduceSum = 41,
  kReduceMax = 42,
  kReduceMin = 43,
  kGather = 44,  // axis (normalized); ints = [r, index shape[r], index values (in range)]
  kResize = 45,  // ints = [linear, output dims[rank], per axis and output position:
                 //   i0, i1]; floats = linear: per axis and output position, the
                 //   weight of i1 (0 to 1); nearest: empty (i0 == i1)
  kConvTranspose = 46,  // ints = [k, group, kernel[k], strides[k], dilations[k],
                        //   pads_begin[k], pads_end[k], output_padding[k]]
  kLayerNormalization = 47,  // inputs X, Scale[, B]; axis (normalized); alpha = epsilon
  kSlice = 48,  // ints = [starts[rank], steps[rank], output dims[rank]], all in range
  // Format 4: the first operators whose tensors may be other than f32.
  kPad = 49,    // X[, value (one element)]; ints = [mode, pads_begin[rank], pads_end[rank]];
                //   alpha = the constant when there is no value input
  kWhere = 50,  // condition (bool), X, Y (f32); broadcast
  kEqual = 51,  // A, B of one dtype (f32, bool, i32, i64); bool output; broadcast
  kCast = 52,   // ints = [to]: the output's dtype (f32, bool, i32, i64; [v10] u8, i8, and u8 / i8 inputs)
  // Format 6: u8 / i8 tensors and the quantized operators (blob_quant_rules.hpp).
  // Scales are f32 tensors and zero points u8 / i8 tensors read at run time
  // (inline constants or graph inputs), as ONNX passes them.
  kQuantizeLinear = 53,    // x (f32), scale[, zero point]; axis (normalized) for a 1-D scale
  kDequantizeLinear = 54,  // x (u8, i8, i32), scale[, zero point]; axis as above
  kQLinearConv = 55,       // x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B (i32)];
                           //   ints as kConv
  kQLinearMatMul = 56,     // a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp[, B (i32), format 7];
                           //   format 7: trans_b 1 (B 2-D, as [N, K]); both QLinear forms
                           //   may carry floats = [lo, hi], an output clamp
  kConvInteger = 57,       // x, w[, x_zp][, w_zp]; ints as kConv; trans_a = present mask
                           //   (bit 0: x_zp, bit 1: w_zp); i32 output
  kMatMulInteger = 58,     // a, b[, a_zp][, b_zp]; trans_a = present mask as above
  // Format 9: recurrent layers (blob_rnn_rules.hpp).
  kLstm = 59,  // X, W, R[, B][, sequence_lens (i32)][, initial_h][, initial_c][, P]; trans_a =
               //   present mask (bit 0 B ... bit 4 P); ints = [direction, layout, hidden_size,
               //   input_forget]; floats = [] or [clip]; one output packing Y, Y_h and Y_c
  kGru = 60,   // X, W, R[, B][, sequence_lens][, initial_h]; mask bits 0 to 2 as above; ints =
               //   [direction, layout, hidden_size, linear_before_reset]; output packs Y, Y_h
  kRnn = 61,   // as kGru, ints[3] 0 (Tanh)
  // Format 10: ONNX's DynamicQuantizeLinear as three single-output nodes
  // (blob_dql_rules.hpp), and Round.
  kRound = 62,                      // f32, round half to even
  kDynamicQuantizeScale = 63,       // x (f32) -> y_scale (f32, shape [])
  kDynamicQuantizeZeroPoint = 64,   // x (f32) -> y_zero_point (u8, shape [])
  kDynamicQuantize = 65,            // x (f32), y_scale, y_zero_point -> y (u8, x's shape)
  // Format 12: the int8 ConvTranspose compile fuses from a QDQ group
  // (blob_quant_rules.hpp).
  kQLinearConvTranspose = 66,  // x (u8), x_scale, x_zp, w (i8), w_scale, w_zp, y_scale, y_zp[, B (i32)];
                               //   ints as kConvTranspose (2-D); trans_a 1; floats as kQLinearConv
};
inline constexpr uint32_t kLastOpV1 = 5;
inline constexpr uint32_t kLastOpV2 = 39;
inline constexpr uint32_t kLastOpV3 = 48;
inline constexpr uint32_t kLastOpV5 = 52;
inline constexpr uint32_t kLastOpV8 = 58;
inline constexpr uint32_t kLastOpV9 = 61;
inline constexpr uint32_t kLastOpV11 = 65;
inline constexpr uint32_t kLastOp = 66;

// The last operator code that blob format `version` may use.
inline uint32_t last_op(uint32_t version) {
  return version <= 1   ? kLastOpV1
         : version == 2 ? kLastOpV2
         : version == 3 ? kLastOpV3
         : version <= 5 ? kLastOpV5
         : version <= 8 ? kLastOpV8
         : version == 9 ? kLastOpV9
         : version <= 11 ? kLastOpV11
                         : kLastOp;
}

// The quantized operators of format 6, and format 12's QLinearConvTranspose.
inline bool is_quant(Op op) {
  return (op >= Op::kQuantizeLinear && op <= Op::kMatMulInteger) || op == Op::kQLinearConvTranspose;
}

// Pad's modes (ints[0]).
enum class PadMode : int64_t { kConstant = 0, kReflect = 1, kEdge = 2, kWrap = 3 };

// Bytes per element of a dtype a blob tensor may have (format 6: f32, bool,
// i32, i64, u8, i8; format 4 and 5 without u8 and i8; formats 1 to 3: f32
// only); 0 for any other dtype.
inline uint32_t dtype_size(loom_dtype_t dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32:
    case LOOM_DTYPE_I32: return 4;
    case LOOM_DTYPE_I64: return 8;
    case LOOM_DTYPE_BOOL:
    case LOOM_DTYPE_U8:
    case LOOM_DTYPE_I8: return 1;
    default: return 0;
  }
}

// Whether a raw dtype code is one of format 6's 8-bit quantized dtypes.
inline bool quant_dtype_code(int64_t code) { return code == LOOM_DTYPE_U8 || code == LOOM_DTYPE_I8; }

// dtype_size of a raw dtype code as read from a blob (a tensor's dtype,
// Cast's `to`) for the dtypes of format 4 (f32, bool, i32, i64; format 6
// adds u8 and i8, see quant_dtype_code); 0 for every other code. Check a code with
// this before converting it: a value outside loom_dtype_t's range must never
// be converted to it.
inline uint32_t dtype_code_size(int64_t code) {
  switch (code) {
    case LOOM_DTYPE_F32:
    case LOOM_DTYPE_I32: return 4;
    case LOOM_DTYPE_I64: return 8;
    case LOOM_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

// Whether Cast may write the dtype with raw code `to`: format 4's dtypes,
// and u8 and i8 from format 10 (uses_format10).
inline bool cast_to_ok(int64_t to) { return dtype_code_size(to) != 0 || quant_dtype_code(to); }

// The name of a blob dtype for messages.
inline const char* dtype_name(loom_dtype_t dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32: return "f32";
    case LOOM_DTYPE_I32: return "i32";
    case LOOM_DTYPE_I64: return "i64";
    case LOOM_DTYPE_BOOL: return "bool";
    case LOOM_DTYPE_U8: return "u8";
    case LOOM_DTYPE_I8: return "i8";
    default: return "unsupported";
  }
}

// The ONNX name of an operator, or "unknown".
inline const char* op_name(Op op) {
  static const char* const kNames[] = {
      "unknown", "MatMul", "Gemm", "Add", "Relu", "Softmax", "Sub", "Mul", "Div", "Max", "Min",
      "Pow", "PRelu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
      "Softplus", "Clip", "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs", "Reciprocal", "Floor",
      "Ceil", "Copy", "LogSoftmax", "Concat", "Transpose", "Conv", "MaxPool", "AveragePool",
      "GlobalAveragePool", "BatchNormalization", "ReduceMean", "ReduceSum", "ReduceMax",
      "ReduceMin", "Gather", "Resize", "ConvTranspose", "LayerNormalization", "Slice", "Pad",
      "Where", "Equal", "Cast", "QuantizeLinear", "DequantizeLinear", "QLinearConv",
      "QLinearMatMul", "ConvInteger", "MatMulInteger", "LSTM", "GRU", "RNN", "Round",
      "DynamicQuantizeLinear (scale)", "DynamicQuantizeLinear (zero point)", "DynamicQuantizeLinear (y)",
      "QLinearConvTranspose"};
  const uint32_t i = static_cast<uint32_t>(op);
  return i <= kLastOp ? kNames[i] : kNames[0];
}

inline bool is_binary(Op op) {
  return op == Op::kAdd || (op >= Op::kSub && op <= Op::kPRelu);
}
inline bool is_unary(Op op) {
  return op == Op::kRelu || (op >= Op::kLeakyRelu && op <= Op::kCeil) || op == Op::kRound;
}
// The DynamicQuantizeLinear parts of format 10.
inline bool is_dynamic_quant(Op op) { return op >= Op::kDynamicQuantizeScale && op <= Op::kDynamicQuantize; }
// The recurrent operators of format 9.
inline bool is_recurrent(Op op) { return op >= Op::kLstm && op <= Op::kRnn; }
inline bool is_reduce(Op op) { return op >= Op::kReduceMean && op <= Op::kReduceMin; }

struct BlobTensor {
  loom_dtype_t dtype = LOOM_DTYPE_F32;
  std::vector<int64_t> shape;
  // A constant embedded in the blob (format 2): element_count f32 values.
  bool constant = false;
  std::vector<float> data = {};
  // Format 6: a constant of dtype u8, i8 or i32 holds its elements here,
  // little-endian in the dtype's width (`data` stays empty).
  std::vector<uint8_t> bytes = {};
  // Format 3: a graph input that holds a program parameter (a weight), the
  // same bytes on every execute of an executable, so it may be packed once.
  bool parameter = false;
  // Compile only, never encoded: the graph tensor's name, for the compile
  // notes; empty for a tensor a rewrite added.
  std::string name = {};
};

struct BlobNode {
  Op op;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  int64_t axis = -1;                 // Softmax, LogSoftmax, Concat
  float alpha = 1, beta = 1;         // Gemm; unary parameters; BatchNorm epsilon
  int32_t trans_a = 0, trans_b = 0;  // Gemm
  std::vector<int64_t> ints;         // format 2, per operator
  std::vector<float> floats;         // format 2, reserved: must be empty
  // Compile only, never encoded: the graph node this one was lowered from
  // (a fused step keeps its core's), for the compile notes; -1 when none.
  int64_t origin = -1;
};

struct BlobGraph {
  std::vector<BlobTensor> tensors;
  std::vector<uint32_t> inputs, outputs;
  std::vector<BlobNode> nodes;
};

namespace detail {

inline std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace detail

}  // namespace loom::cpu_simd
