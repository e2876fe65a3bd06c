// The recurrent operators of blob format 9: the LSTM, GRU and RNN nodes'
// operands, attributes, output shapes and dtypes. Included by
// blob_shape_rules.hpp.
//
// kGru and kRnn read X, W, R and the optional B, sequence_lens and
// initial_h that are present (mask bits 0 to 2 as kLstm's); ints =
// [direction, layout, hidden_size, linear_before_reset (GRU: 0 or 1; RNN:
// 0)]; floats as kLstm's; ONNX's default activations (GRU Sigmoid, Tanh;
// RNN Tanh). W is [D, G H, I], R [D, G H, H], B [D, 2 G H] with G = 3
// (GRU: z, r, h) or 1 (RNN); the one output packs Y and Y_h: [T + 1, D, B,
// H] (layout 0) or [B, T + 1, D, H].
//
// kLstm reads X, W, R and the optional B, sequence_lens, initial_h,
// initial_c and P that are present (trans_a is the mask of those: bit 0 B,
// bit 1 sequence_lens, bit 2 initial_h, bit 3 initial_c, bit 4 P; the inputs
// follow in that order). ints = [direction (0 forward, 1 reverse, 2
// bidirectional), layout (0 or 1, ONNX's attribute), hidden_size,
// input_forget (0 or 1)]; floats = [] or [clip] (positive, finite). ONNX's
// default activations (Sigmoid, Tanh, Tanh). One output packs ONNX's three:
// layout 0 [T + 2, D, B, H] (rows 0 to T - 1 are Y, row T Y_h, row T + 1
// Y_c), layout 1 [B, T + 2, D, H] (the same along axis 1); compile reads
// the ONNX outputs out of it with Slice and Copy nodes.
#pragma once

#include <string>
#include <vector>

#include "loom/cpu_simd/blob_ops.hpp"

namespace loom::cpu_simd {

// The optional inputs, in mask-bit order (GRU and RNN: the first three).
inline constexpr int kRnnOptionalCount = 5;
inline constexpr const char* kRnnOptionalNames[kRnnOptionalCount] = {"B", "sequence_lens", "initial_h",
                                                                     "initial_c", "P"};

// The decoded attributes and dimensions of a kLstm node.
struct RnnForm {
  Op op = Op::kLstm;
  int64_t gates = 4;  // 4 LSTM, 3 GRU, 1 RNN
  // ints[3]: LSTM input_forget, GRU linear_before_reset, RNN 0.
  int64_t direction = 0, layout = 0, hidden = 0, input_forget = 0;
  bool has_clip = false;
  float clip = 0;
  int mask = 0;
  // Position of each optional input in node.inputs, or -1.
  int at[kRnnOptionalCount] = {-1, -1, -1, -1, -1};
  int64_t seq = 0, batch = 0, input = 0, dirs = 1;
};

inline bool uses_format9(const BlobNode& node) { return is_recurrent(node.op); }

// Checks the attributes and operand shapes of a kLstm node and fills
// `form` and the packed output shape; false with `*error` naming the field.
inline bool rnn_form(const BlobNode& node, const std::vector<const std::vector<int64_t>*>& in, RnnForm* form,
                     std::vector<int64_t>* out, std::string* error) {
  using detail::shape_string;
  const std::string op = op_name(node.op);
  RnnForm f;
  f.op = node.op;
  const bool lstm = node.op == Op::kLstm;
  f.gates = lstm ? 4 : node.op == Op::kGru ? 3 : 1;
  const char* flag = lstm ? "input_forget" : node.op == Op::kGru ? "linear_before_reset" : "ints[3]";
  if (node.ints.size() != 4) {
    *error = op + ": ints must be [direction, layout, hidden_size, " + flag + "], got " +
             std::to_string(node.ints.size()) + " values";
    return false;
  }
  f.direction = node.ints[0];
  f.layout = node.ints[1];
  f.hidden = node.ints[2];
  f.input_forget = node.ints[3];
  if (f.direction < 0 || f.direction > 2) {
    *error = op + ": direction " + std::to_string(f.direction) + " is not 0 (forward), 1 (reverse) or 2 (bidirectional)";
    return false;
  }
  if (f.layout != 0 && f.layout != 1) {
    *error = op + ": layout " + std::to_string(f.layout) + " is not 0 or 1";
    return false;
  }
  if (f.hidden < 1 || f.hidden > (int64_t{1} << 20)) {
    *error = op + ": hidden_size " + std::to_string(f.hidden) + " is not in [1, 2^20]";
    return false;
  }
  if (f.input_forget != 0 && (f.input_forget != 1 || node.op == Op::kRnn)) {
    *error = op + ": " + flag + " " + std::to_string(f.input_forget) + " is not " +
             (node.op == Op::kRnn ? "0" : "0 or 1");
    return false;
  }
  if (node.floats.size() > 1) {
    *error = op + ": floats must be [] or [clip], got " + std::to_string(node.floats.size()) + " values";
    return false;
  }
  if (node.floats.size() == 1) {
    f.has_clip = true;
    f.clip = node.floats[0];
    if (!(f.clip > 0) || !(f.clip <= 3.4e38f)) {
      *error = op + ": clip " + std::to_string(f.clip) + " is not positive and finite";
      return false;
    }
  }
  const int optional = lstm ? kRnnOptionalCount : 3;
  if (node.trans_a < 0 || node.trans_a >= (1 << optional) || node.trans_b != 0) {
    *error = op + ": present mask (trans_a) " + std::to_string(node.trans_a) + " is not in [0, " +
             std::to_string((1 << optional) - 1) + "] or trans_b " + std::to_string(node.trans_b) + " is not 0";
    return false;
  }
  f.mask = node.trans_a;
  size_t want = 3;
  for (int i = 0; i < kRnnOptionalCount; ++i) {
    if (f.mask & (1 << i)) f.at[i] = static_cast<int>(want++);
  }
  if (in.size() != want) {
    *error = op + ": present mask " + std::to_string(f.mask) + " names " + std::to_string(want) +
             " inputs, the node has " + std::to_string(in.size());
    return false;
  }
  f.dirs = f.direction == 2 ? 2 : 1;
  const std::vector<int64_t>& x = *in[0];
  if (x.size() != 3) {
    *error = op + ": X " + shape_string(x) + " must have rank 3";
    return false;
  }
  f.seq = f.layout == 0 ? x[0] : x[1];
  f.batch = f.layout == 0 ? x[1] : x[0];
  f.input = x[2];
  if (f.seq < 0 || f.batch < 0 || f.input < 0) {
    *error = op + ": X " + shape_string(x) + " has an open dimension; LSTM needs static shapes";
    return false;
  }
  const int64_t h = f.hidden, d = f.dirs, g = f.gates;
  auto want_shape = [&](size_t i, const char* name, const std::vector<int64_t>& s) {
    if (*in[i] == s) return true;
    *error = op + ": " + name + " is " + shape_string(*in[i]) + ", expected " + shape_string(s);
    return false;
  };
  if (!want_shape(1, "W", {d, g * h, f.input}) || !want_shape(2, "R", {d, g * h, h})) return false;
  const std::vector<int64_t> state =
      f.layout == 0 ? std::vector<int64_t>{d, f.batch, h} : std::vector<int64_t>{f.batch, d, h};
  if (f.at[0] >= 0 && !want_shape(static_cast<size_t>(f.at[0]), "B", {d, 2 * g * h})) return false;
  if (f.at[1] >= 0 && !want_shape(static_cast<size_t>(f.at[1]), "sequence_lens", {f.batch})) return false;
  if (f.at[2] >= 0 && !want_shape(static_cast<size_t>(f.at[2]), "initial_h", state)) return false;
  if (f.at[3] >= 0 && !want_shape(static_cast<size_t>(f.at[3]), "initial_c", state)) return false;
  if (f.at[4] >= 0 && !want_shape(static_cast<size_t>(f.at[4]), "P", {d, 3 * h})) return false;
  const int64_t rows = f.seq + (lstm ? 2 : 1);
  *out = f.layout == 0 ? std::vector<int64_t>{rows, d, f.batch, h} : std::vector<int64_t>{f.batch, rows, d, h};
  if (form != nullptr) *form = f;
  return true;
}

// The recurrent operators' dtypes: sequence_lens i32, everything else f32.
inline bool check_rnn_dtypes(const BlobNode& node, const std::vector<loom_dtype_t>& in, loom_dtype_t out,
                             std::string* error) {
  const std::string op = op_name(node.op);
  const int mask = node.trans_a;
  size_t seq_at = SIZE_MAX;
  if (mask >= 0 && (mask & 2)) seq_at = (mask & 1) ? 4 : 3;
  for (size_t i = 0; i < in.size(); ++i) {
    const loom_dtype_t want = i == seq_at ? LOOM_DTYPE_I32 : LOOM_DTYPE_F32;
    if (in[i] != want) {
      *error = op + ": input " + std::to_string(i) + " is " + dtype_name(in[i]) + ", expected " + dtype_name(want);
      return false;
    }
  }
  if (out != LOOM_DTYPE_F32) {
    *error = op + ": the output is " + dtype_name(out) + ", expected f32";
    return false;
  }
  return true;
}

}  // namespace loom::cpu_simd
