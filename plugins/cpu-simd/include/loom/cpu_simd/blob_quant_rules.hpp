// The shape and dtype rules of format 6's quantized operators
// (QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul,
// ConvInteger, MatMulInteger). Included at the end of blob_shape_rules.hpp,
// whose infer_output_shape dispatches here, as blob_dtype_rules.hpp's
// check_dtypes does.
//
// What the blob accepts is what cpu-simd runs: a scale or zero point is a
// one-element tensor ([] or [1]) for the whole tensor, or, where ONNX allows
// one per channel, a 1-D tensor with one entry per output channel (QLinearConv
// and ConvInteger weights: M; QLinearMatMul and MatMulInteger B: N;
// QuantizeLinear / DequantizeLinear: the extent of `axis`). A zero point has
// its scale's shape and its data operand's dtype. Per-row zero points and
// scales of A (ONNX allows [M] for the MatMul forms) are not blob operands:
// the compiler leaves such nodes to the reference kernels.
//
// Format 7 (the fused steps compile writes for QDQ groups): QLinearConv and
// QLinearMatMul may carry `floats = [lo, hi]`, whole numbers within the
// output type's range with lo <= hi: the requantized output is clamped to
// [lo, hi] (a Relu or Clip that stood before the QuantizeLinear). QLinearMatMul
// may take a 9th input, an i32 bias of N entries added to the accumulator as
// QLinearConv's, and trans_b 1: B is then 2-D and given as [N, K] (a Gemm's
// transB), per-column scales and zero points still having N entries.
//
// Format 10: QLinearConv and QLinearMatMul may carry trans_a 1, "requantize
// as a QuantizeLinear does": the scaled accumulator is rounded half to even
// first and the output zero point added after (ONNX's QuantizeLinear, and
// ONNX Runtime's requantization), where trans_a 0 keeps the QOperator
// form's arithmetic (the zero point added before rounding, as ONNX's
// reference implementation of QLinearConv does). The two differ only when
// the scaled value is exactly halfway and the zero point odd. compile
// writes trans_a 1 on the steps it fuses from QDQ groups, whose last node
// is a QuantizeLinear.
//
// Format 12: QLinearConvTranspose, QLinearConv's operands around an ONNX
// ConvTranspose (ints as ConvTranspose's, 2-D only: x is [N, C, H, W], the
// weight [C, M / group, kH, kW]), u8 x, i8 weights, the weight's scale and
// zero point one element or one per entry of the weight's axis 1 (M /
// group), trans_a 1 (it always requantizes as a QuantizeLinear does) and
// the optional output clamp. compile writes it for a DequantizeLinear ->
// ConvTranspose -> QuantizeLinear group; its weight zero points must be 0,
// and its scales and zero points constants, which the plugin checks when it
// loads the blob.
#pragma once

#include <string>
#include <vector>

#include "loom/cpu_simd/blob_shape_rules.hpp"

namespace loom::cpu_simd {

namespace quant {

inline bool one_element(const std::vector<int64_t>& s) {
  return s.empty() || (s.size() == 1 && s[0] == 1);
}

// Input positions of each operand of a quantized node; -1 when absent.
struct QuantOperands {
  int data = 0, weight = -1, bias = -1;
  int x_scale = -1, x_zp = -1, w_scale = -1, w_zp = -1, y_scale = -1, y_zp = -1;
};

// Where each operand sits; false when the present mask or the input count
// does not fit the operator.
inline bool operands_of(const BlobNode& node, QuantOperands* q, std::string* error) {
  const std::string op = op_name(node.op);
  const size_t n = node.inputs.size();
  switch (node.op) {
    case Op::kQuantizeLinear:
    case Op::kDequantizeLinear:
      q->x_scale = 1;
      q->x_zp = n > 2 ? 2 : -1;
      return true;
    case Op::kQLinearConv:
    case Op::kQLinearMatMul:
    case Op::kQLinearConvTranspose:
      *q = QuantOperands{0, 3, n > 8 ? 8 : -1, 1, 2, 4, 5, 6, 7};
      return true;
    case Op::kConvInteger:
    case Op::kMatMulInteger: {
      if (node.trans_a < 0 || node.trans_a > 3) {
        *error = op + ": the present mask (trans_a) must be 0 to 3, got " + std::to_string(node.trans_a);
        return false;
      }
      const int mask = node.trans_a;
      const size_t want = 2 + (mask & 1) + ((mask >> 1) & 1);
      if (n != want) {
        *error = op + ": present mask " + std::to_string(mask) + " needs " + std::to_string(want) +
                 " inputs, the node has " + std::to_string(n);
        return false;
      }
      q->weight = 1;
      q->x_zp = (mask & 1) ? 2 : -1;
      q->w_zp = (mask & 2) ? 2 + (mask & 1) : -1;
      return true;
    }
    default:
      *error = op + ": not a quantized operator";
      return false;
  }
}

}  // namespace quant

// Whether `node` uses format 10's trans_a 1 (see the header comment; the
// rest of format 10 is blob_dql_rules.hpp's uses_format10).
inline bool requantizes_round_first(const BlobNode& node) {
  return (node.op == Op::kQLinearConv || node.op == Op::kQLinearMatMul) && node.trans_a == 1;
}

// Whether `node` uses what format 7 added (see the header comment).
inline bool uses_format7(const BlobNode& node) {
  if (node.op != Op::kQLinearConv && node.op != Op::kQLinearMatMul) return false;
  return !node.floats.empty() || (node.op == Op::kQLinearMatMul && (node.inputs.size() > 8 || node.trans_b != 0));
}

// The output shape of a quantized node (see infer_output_shape).
inline bool infer_quant_shape(const BlobNode& node, const std::vector<const std::vector<int64_t>*>& in,
                              std::vector<int64_t>* out, std::string* error) {
  using detail::shape_string;
  const std::string op = op_name(node.op);
  quant::QuantOperands q;
  if (!quant::operands_of(node, &q, error)) return false;
  const bool transposed = node.op == Op::kQLinearConvTranspose;
  const bool conv = node.op == Op::kQLinearConv || node.op == Op::kConvInteger || transposed;
  const bool matmul = node.op == Op::kQLinearMatMul || node.op == Op::kMatMulInteger;
  if (!conv && !node.ints.empty()) {
    *error = op + ": unexpected ints (" + std::to_string(node.ints.size()) + ")";
    return false;
  }
  const bool qlinear = node.op == Op::kQLinearConv || node.op == Op::kQLinearMatMul || transposed;
  if (!node.floats.empty() && !(qlinear && node.floats.size() == 2)) {
    *error = op + ": unexpected floats (" + std::to_string(node.floats.size()) + ")" +
             (qlinear ? ", expected none or an output clamp [lo, hi]" : "");
    return false;
  }
  if (transposed && node.trans_a != 1) {
    *error = op + ": trans_a must be 1 (round, then add the zero point), got " + std::to_string(node.trans_a);
    return false;
  }
  if (node.op != Op::kConvInteger && node.op != Op::kMatMulInteger && node.trans_a != 0 &&
      !(qlinear && node.trans_a == 1)) {
    *error = op + ": trans_a must be 0" + (qlinear ? " or 1 (round, then add the zero point)" : "") + ", got " +
             std::to_string(node.trans_a);
    return false;
  }
  const bool trans_b = node.op == Op::kQLinearMatMul && node.trans_b == 1;
  if (node.trans_b != 0 && !trans_b) {
    *error = op + ": trans_b must be 0" + (node.op == Op::kQLinearMatMul ? " or 1" : "") + ", got " +
             std::to_string(node.trans_b);
    return false;
  }
  auto shape = [&](int i) -> const std::vector<int64_t>& { return *in[static_cast<size_t>(i)]; };
  // `channels`: the per-channel length a scale or zero point may have (0: none).
  auto check_param = [&](int i, const char* what, int64_t channels) {
    if (i < 0) return true;
    const std::vector<int64_t>& s = shape(i);
    if (quant::one_element(s) || (channels > 0 && s.size() == 1 && s[0] == channels)) return true;
    *error = op + ": " + what + " " + shape_string(s) + " must have one element" +
             (channels > 0 ? " or " + std::to_string(channels) : std::string());
    return false;
  };
  auto same_shape = [&](int zp, int scale, const char* what) {
    if (zp < 0 || scale < 0) return true;
    if (shape(zp) == shape(scale) || (quant::one_element(shape(zp)) && quant::one_element(shape(scale)))) {
      return true;
    }
    *error = op + ": " + what + " " + shape_string(shape(zp)) + " must have the shape of its scale " +
             shape_string(shape(scale));
    return false;
  };
  if (node.op == Op::kQuantizeLinear || node.op == Op::kDequantizeLinear) {
    const std::vector<int64_t>& x = shape(0);
    int64_t channels = 0;
    if (!quant::one_element(shape(q.x_scale))) {
      if (node.axis < 0 || node.axis >= static_cast<int64_t>(x.size())) {
        *error = op + ": axis " + std::to_string(node.axis) + " is not an axis of input " + shape_string(x);
        return false;
      }
      channels = x[static_cast<size_t>(node.axis)];
    }
    if (!check_param(q.x_scale, "scale", channels) || !check_param(q.x_zp, "zero point", channels) ||
        !same_shape(q.x_zp, q.x_scale, "zero point")) {
      return false;
    }
    *out = x;
    return true;
  }
  if (transposed && shape(0).size() != 4) {
    *error = op + ": x " + shape_string(shape(0)) + " must be 4-D ([N, C, H, W])";
    return false;
  }
  BlobNode core;
  core.op = transposed ? Op::kConvTranspose : conv ? Op::kConv : Op::kMatMul;
  core.ints = node.ints;
  std::vector<int64_t> b_kn;  // B as [K, N] when given transposed
  if (trans_b) {
    const std::vector<int64_t>& b = shape(q.weight);
    if (b.size() != 2) {
      *error = op + ": B " + shape_string(b) + " with trans_b must be 2-D";
      return false;
    }
    b_kn = {b[1], b[0]};
  }
  std::vector<const std::vector<int64_t>*> core_in = {in[0], trans_b ? &b_kn : in[static_cast<size_t>(q.weight)]};
  if (q.bias >= 0 && conv) core_in.push_back(in[static_cast<size_t>(q.bias)]);
  std::string why;
  if (!infer_output_shape(core, core_in, out, &why)) {
    *error = op + ": " + why;
    return false;
  }
  const std::vector<int64_t>& w = trans_b ? b_kn : shape(q.weight);
  int64_t channels = 0;
  if (conv) channels = transposed ? w[1] : w[0];
  if (matmul) {
    if (shape(0).size() < 2 || w.size() < 2) {
      *error = op + ": A " + shape_string(shape(0)) + " and B " + shape_string(w) + " must have rank >= 2";
      return false;
    }
    channels = w.back();
    if (q.bias >= 0 && shape(q.bias) != std::vector<int64_t>{channels}) {
      *error = op + ": the bias " + shape_string(shape(q.bias)) + " must have shape [" + std::to_string(channels) +
               "]";
      return false;
    }
  }
  return check_param(q.x_scale, "x scale", 0) && check_param(q.x_zp, "x zero point", 0) &&
         check_param(q.w_scale, "w scale", channels) && check_param(q.w_zp, "w zero point", channels) &&
         check_param(q.y_scale, "y scale", 0) && check_param(q.y_zp, "y zero point", 0) &&
         same_shape(q.w_zp, q.w_scale, "w zero point");
}

// The dtype rules of a quantized node (see check_dtypes).
inline bool check_quant_dtypes(const BlobNode& node, const std::vector<loom_dtype_t>& in, loom_dtype_t out,
                               std::string* error) {
  const std::string op = op_name(node.op);
  quant::QuantOperands q;
  if (!quant::operands_of(node, &q, error)) return false;
  auto bad = [&](const std::string& what, loom_dtype_t got, const std::string& want) {
    *error = op + ": " + what + " is " + dtype_name(got) + " (" + std::to_string(static_cast<int>(got)) +
             "), expected " + want;
    return false;
  };
  auto is8 = [](loom_dtype_t d) { return d == LOOM_DTYPE_U8 || d == LOOM_DTYPE_I8; };
  auto at = [&](int i) { return in[static_cast<size_t>(i)]; };
  auto f32 = [&](int i, const char* what) { return i < 0 || at(i) == LOOM_DTYPE_F32 || bad(what, at(i), "f32"); };
  auto like = [&](int zp, loom_dtype_t want, const char* what) {
    return zp < 0 || at(zp) == want || bad(what, at(zp), dtype_name(want));
  };
  switch (node.op) {
    case Op::kQuantizeLinear: {
      if (at(0) != LOOM_DTYPE_F32) return bad("x", at(0), "f32");
      if (!f32(q.x_scale, "the scale")) return false;
      const loom_dtype_t y = q.x_zp >= 0 ? at(q.x_zp) : LOOM_DTYPE_U8;
      if (!is8(y)) return bad("the zero point", y, "u8 or i8");
      return out == y || bad("the output", out, dtype_name(y));
    }
    case Op::kDequantizeLinear:
      if (!is8(at(0)) && at(0) != LOOM_DTYPE_I32) return bad("x", at(0), "u8, i8 or i32");
      if (!f32(q.x_scale, "the scale") || !like(q.x_zp, at(0), "the zero point")) return false;
      return out == LOOM_DTYPE_F32 || bad("the output", out, "f32");
    default:
      break;
  }
  if (node.op == Op::kQLinearConvTranspose) {
    if (at(0) != LOOM_DTYPE_U8) return bad("x", at(0), "u8");
    if (at(q.weight) != LOOM_DTYPE_I8) return bad("the weight", at(q.weight), "i8");
  }
  if (!is8(at(0))) return bad("input 0", at(0), "u8 or i8");
  if (!is8(at(q.weight))) return bad("the weight (B)", at(q.weight), "u8 or i8");
  if (!like(q.x_zp, at(0), "the x zero point") || !like(q.w_zp, at(q.weight), "the w zero point") ||
      !f32(q.x_scale, "the x scale") || !f32(q.w_scale, "the w scale") || !f32(q.y_scale, "the y scale")) {
    return false;
  }
  if (q.bias >= 0 && at(q.bias) != LOOM_DTYPE_I32) return bad("the bias", at(q.bias), "i32");
  if (q.y_zp >= 0) {
    if (!is8(at(q.y_zp))) return bad("the y zero point", at(q.y_zp), "u8 or i8");
    if (out != at(q.y_zp)) return bad("the output", out, dtype_name(at(q.y_zp)));
    if (node.floats.size() == 2) {
      // The output clamp: whole numbers in the output type's range, lo <= hi.
      const float lo = out == LOOM_DTYPE_U8 ? 0.0f : -128.0f, hi = out == LOOM_DTYPE_U8 ? 255.0f : 127.0f;
      const float a = node.floats[0], b = node.floats[1];
      if (!(a >= lo && b <= hi && a <= b) || a != static_cast<float>(static_cast<int>(a)) ||
          b != static_cast<float>(static_cast<int>(b))) {
        *error = op + ": the output clamp [" + std::to_string(a) + ", " + std::to_string(b) +
                 "] must be whole numbers lo <= hi within " + dtype_name(out) + "'s range";
        return false;
      }
    }
    return true;
  }
  return out == LOOM_DTYPE_I32 || bad("the output", out, "i32");
}

}  // namespace loom::cpu_simd
