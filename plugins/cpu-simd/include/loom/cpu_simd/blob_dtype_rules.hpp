// The dtypes each cpu-simd operator accepts (check_dtypes): format 4's
// rules, and format 6's quantized operators' (blob_quant_rules.hpp).
// Header-only, beside blob_shape_rules.hpp; blob_format.hpp's decoder and
// the compiler's lowering apply them.
#pragma once

#include <string>
#include <vector>

#include "loom/cpu_simd/blob_ops.hpp"
#include "loom/cpu_simd/blob_shape_rules.hpp"

namespace loom::cpu_simd {

// Copy, Concat, Transpose, Slice and Gather only move elements: from format
// 11 they run any blob dtype (every operand and the output of one dtype).
inline bool moves_any_dtype(Op op) {
  return op == Op::kCopy || op == Op::kConcat || op == Op::kTranspose || op == Op::kSlice || op == Op::kGather;
}

// Whether `node`, with output dtype `out`, needs format 11: one of those
// operators on other than f32, or a MaxPool of u8 or i8.
inline bool uses_format11(const BlobNode& node, loom_dtype_t out) {
  return (moves_any_dtype(node.op) || node.op == Op::kMaxPool) && out != LOOM_DTYPE_F32;
}

// The dtype rules of format 4, given the operand and output dtypes of
// `node`: Equal reads two operands of one dtype and writes bool; Where reads
// a bool condition and f32 X and Y and writes f32; Cast writes the dtype
// `ints[0]` names from any blob dtype; Copy, Concat, Transpose, Slice and
// Gather read and write one dtype, any (format 11), MaxPool one of f32, u8
// and i8; every other operator reads and writes f32 only. False with `*error` naming the operand.
inline bool check_dtypes(const BlobNode& node, const std::vector<loom_dtype_t>& in,
                         loom_dtype_t out, std::string* error) {
  const std::string op = op_name(node.op);
  auto bad = [&](const std::string& what, loom_dtype_t got, const char* want) {
    *error = op + ": " + what + " is " + dtype_name(got) + " (" +
             std::to_string(static_cast<int>(got)) + "), expected " + want;
    return false;
  };
  auto operand = [](size_t i) { return "input " + std::to_string(i); };
  if (is_quant(node.op)) return check_quant_dtypes(node, in, out, error);
  if (is_recurrent(node.op)) return check_rnn_dtypes(node, in, out, error);
  if (is_dynamic_quant(node.op)) return check_dynamic_quant_dtypes(node, in, out, error);
  switch (node.op) {
    case Op::kEqual:
      if (in[1] != in[0]) return bad(operand(1), in[1], dtype_name(in[0]));
      if (out != LOOM_DTYPE_BOOL) return bad("the output", out, "bool");
      return true;
    case Op::kWhere:
      if (in[0] != LOOM_DTYPE_BOOL) return bad("the condition", in[0], "bool");
      for (size_t i = 1; i < 3; ++i) {
        if (in[i] != LOOM_DTYPE_F32) return bad(operand(i), in[i], "f32");
      }
      if (out != LOOM_DTYPE_F32) return bad("the output", out, "f32");
      return true;
    case Op::kCast:
      // Checked here too: an open Cast reaches this rule before (or without)
      // infer_output_shape, which also checks `to`.
      if (node.ints.size() != 1 || !cast_to_ok(node.ints[0])) {
        *error = op + ": ints must be [to] with to a dtype of f32 (1), i32 (7), i64 (8), "
                 "bool (13), u8 (9) or i8 (5), got " + detail::shape_string(node.ints);
        return false;
      }
      if (static_cast<int64_t>(out) != node.ints[0]) {
        return bad("the output", out, dtype_name(static_cast<loom_dtype_t>(node.ints[0])));
      }
      return true;
    case Op::kMaxPool:
      if (out != LOOM_DTYPE_F32 && out != LOOM_DTYPE_U8 && out != LOOM_DTYPE_I8) {
        return bad("the output", out, "f32, u8 or i8");
      }
      if (in[0] != out) return bad(operand(0), in[0], dtype_name(out));
      return true;
    default:
      if (moves_any_dtype(node.op)) {
        for (size_t i = 0; i < in.size(); ++i) {
          if (in[i] != out) return bad(operand(i), in[i], dtype_name(out));
        }
        return true;
      }
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != LOOM_DTYPE_F32) return bad(operand(i), in[i], "f32");
      }
      if (out != LOOM_DTYPE_F32) return bad("the output", out, "f32");
      return true;
  }
}

}  // namespace loom::cpu_simd
