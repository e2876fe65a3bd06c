// The cpu-simd delegate blob: a small graph of operators, versioned, in
// its own byte format. Header-only so that tools can build blobs without
// linking the plugin; includes only plugin.h and the standard library.
//
// Byte layout, all integers little-endian (see plugins/cpu-simd/README.md):
//   header   "LCPU" u32 version u32 tensor_count u32 input_count
//            u32 output_count u32 node_count                     (24 bytes)
//   tensors  tensor_count x { u32 dtype (f32; [v4] also bool, i32, i64),
//                             u32 rank, rank x i64 dim,
//                             [v2] u32 flags (bit 0: constant; [v3]
//                             bit 1: parameter, an input whose bytes are
//                             the same on every execute),
//                             [v2, constant, f32 only] element_count x f32 }
//   inputs   input_count x u32 tensor index
//   outputs  output_count x u32 tensor index
//   nodes    node_count x { u32 op, u32 input_count, u32 output_count,
//                           i64 axis, f32 alpha, f32 beta, i32 trans_a,
//                           i32 trans_b, [v2] u32 int_count, u32 float_count,
//                           int_count x i64, float_count x f32,
//                           input_count x u32, output_count x u32 }
// Nothing may follow the last node. Version 1 (operators 1-5, no constants,
// no attribute lists), version 2 (no parameter flag, operators 1-39),
// version 3 (f32 tensors only, operators 1-48) and version 4 (static shapes
// only) are still decoded. Version 5 is version 4's layout plus open shapes:
// a dimension of a tensor that is neither a constant nor a parameter may be
// -1 (bound per execute, see bind_shapes), and a Copy may carry a shape spec
// in `ints` (one entry per output dimension: >= 0 that extent, -1 inferred
// from the element count, -2 - j the input's dimension j), which a Copy
// reading or writing an open shape must. Version 6 adds the u8 and i8
// dtypes, constants of dtype u8, i8 and i32 (their elements little-endian in
// the dtype's width instead of f32 values) and the quantized operators 53 to
// 58 (blob_quant_rules.hpp). Version 7 is version 6 plus the fused
// quantized steps that compile writes for QDQ groups (blob_quant_rules.hpp,
// uses_format7): QLinearConv and QLinearMatMul with an output clamp in
// `floats`, QLinearMatMul with an i32 bias (a 9th input) and with a
// transposed B (trans_b 1). Version 8 is version 7 plus the open form of
// Resize (ints [2 or 3, coordinate mode, rounding], floats the scales:
// blob_shape_rules.hpp), written for a Resize of an input with open
// dimensions; bind_shapes makes its taps per binding. Version 9 is version 8
// plus the recurrent operators LSTM, GRU and RNN (59 to 61,
// blob_rnn_rules.hpp: static shapes only, one output that packs Y, Y_h and,
// for LSTM, Y_c). Version 10 is version 9 plus Round (62) and ONNX's
// DynamicQuantizeLinear as three single-output nodes, scale (63), zero
// point (64) and the quantized y (65) (blob_dql_rules.hpp), Cast to and from
// u8 and i8, and QLinearConv and QLinearMatMul that requantize as a
// QuantizeLinear (trans_a 1: round, then add the zero point;
// blob_quant_rules.hpp, requantizes_round_first), which compile writes for
// the steps it fuses from QDQ groups. Version 11 is version 10 plus Copy,
// Concat, Transpose, Slice and Gather of any blob dtype (bool, i32, i64, u8,
// i8: every operand and the output of one dtype) and MaxPool of u8 and i8
// (blob_dtype_rules.hpp, uses_format11), which compile writes for the
// tensors a quantized model passes through unchanged. Version 12 is version
// 11 plus QLinearConvTranspose (66, blob_quant_rules.hpp), the int8
// ConvTranspose compile fuses from a QDQ group. encode() writes the oldest version
// that holds the graph (format_version_for: 5 only when it needs it) unless
// asked for another.
//
// decode() checks everything it reads with bounded work and never allocates
// more than the blob's size justifies: the version, every count against the
// bytes that remain, every index, every shape (rank <= 8, dims >= 0 or, in
// format 5, -1 outside constants and parameters; byte size fits in 62
// bits), each operator's arity and attributes, each node's declared output
// shapes against the operator's shape rule (for a node that reads or writes
// an open shape: only where its inputs are static, and a Copy's spec for
// form; bind_shapes applies every rule per binding), each node's
// operand and output dtypes against its dtype rule (check_dtypes), and that nodes
// come in topological order (a node reads only graph inputs, constants or
// outputs of earlier nodes, and every tensor is written once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_dtype_rules.hpp"
#include "loom/cpu_simd/blob_format_version.hpp"
#include "loom/cpu_simd/blob_ops.hpp"
#include "loom/cpu_simd/blob_shape_rules.hpp"
#include "loom/plugin.h"

namespace loom::cpu_simd {

inline constexpr char kMagic[4] = {'L', 'C', 'P', 'U'};
inline constexpr size_t kHeaderSize = 24;

namespace detail {
inline void put_u32(std::vector<std::byte>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}
inline void put_u64(std::vector<std::byte>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}
inline void put_f32(std::vector<std::byte>& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  put_u32(out, bits);
}

// A bounds-checked little-endian cursor; every failed read names the byte
// offset and the field.
class Reader {
 public:
  Reader(const void* data, size_t size) : p_(static_cast<const unsigned char*>(data)), size_(size) {}
  size_t offset() const { return pos_; }
  // Moves past `n` bytes the caller has already checked.
  void skip(size_t n) { pos_ += n; }
  size_t remaining() const { return size_ - pos_; }

  bool u32(const char* field, uint32_t* v, std::string* error) {
    if (!need(4, field, error)) return false;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>(p_[pos_ + i]) << (8 * i);
    pos_ += 4;
    *v = r;
    return true;
  }
  bool u64(const char* field, uint64_t* v, std::string* error) {
    if (!need(8, field, error)) return false;
    uint64_t r = 0;
    for (int i = 0; i < 8; ++i) r |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += 8;
    *v = r;
    return true;
  }
  bool i64(const char* field, int64_t* v, std::string* error) {
    uint64_t u;
    if (!u64(field, &u, error)) return false;
    std::memcpy(v, &u, sizeof u);
    return true;
  }
  bool i32(const char* field, int32_t* v, std::string* error) {
    uint32_t u;
    if (!u32(field, &u, error)) return false;
    std::memcpy(v, &u, sizeof u);
    return true;
  }
  bool f32(const char* field, float* v, std::string* error) {
    uint32_t u;
    if (!u32(field, &u, error)) return false;
    std::memcpy(v, &u, sizeof u);
    return true;
  }
  // Fails unless `count` records of at least `min_bytes` each can still fit.
  bool fits(uint64_t count, size_t min_bytes, const char* what, std::string* error) const {
    if (count > remaining() / min_bytes) {
      *error = "byte " + std::to_string(pos_) + ": " + what + " count " + std::to_string(count) +
               " needs at least " + std::to_string(min_bytes) + " bytes each, " +
               std::to_string(remaining()) + " bytes remain";
      return false;
    }
    return true;
  }

 private:
  bool need(size_t n, const char* field, std::string* error) {
    if (remaining() < n) {
      *error = "byte " + std::to_string(pos_) + ": blob truncated reading " + field + " (" +
               std::to_string(n) + " bytes needed, " + std::to_string(remaining()) + " remain)";
      return false;
    }
    return true;
  }

  const unsigned char* p_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace detail

// Element count of `shape` when every dimension is >= 0 and the count stays
// below 2^60 (so byte sizes fit in 62 bits); false otherwise.
inline bool element_count(const std::vector<int64_t>& shape, uint64_t* out) {
  uint64_t elements = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return false;
    const uint64_t limit = (uint64_t{1} << 60);
    if (dim != 0 && elements > limit / static_cast<uint64_t>(dim)) return false;
    elements *= static_cast<uint64_t>(dim);
  }
  *out = elements;
  return true;
}


// Whether a bound shape agrees with a declared one: same rank, and equal
// wherever the declared dimension is not open.
inline bool shape_fits(const std::vector<int64_t>& bound, const std::vector<int64_t>& declared) {
  if (bound.size() != declared.size()) return false;
  for (size_t d = 0; d < bound.size(); ++d) {
    if (declared[d] >= 0 && bound[d] != declared[d]) return false;
  }
  return true;
}


// Checks a decoded or hand-built graph (everything listed in the header
// comment after the byte-level checks); false with `*error` naming the
// tensor, node or field.
inline bool validate(const BlobGraph& g, std::string* error) {
  const size_t tensor_count = g.tensors.size();
  for (size_t t = 0; t < tensor_count; ++t) {
    const BlobTensor& bt = g.tensors[t];
    const std::string where = "tensor " + std::to_string(t);
    if (dtype_size(bt.dtype) == 0) {
      *error = where + ": dtype " + std::to_string(static_cast<int>(bt.dtype)) +
               " is not supported (cpu-simd blobs hold f32, bool, i32, i64, u8 and i8)";
      return false;
    }
    const bool int_constant = bt.dtype == LOOM_DTYPE_U8 || bt.dtype == LOOM_DTYPE_I8 || bt.dtype == LOOM_DTYPE_I32;
    if (bt.constant && bt.dtype != LOOM_DTYPE_F32 && !int_constant) {
      *error = where + ": a constant of dtype " + dtype_name(bt.dtype) +
               " (cpu-simd blobs embed f32, u8, i8 and i32 constants only)";
      return false;
    }
    if (!bt.bytes.empty() && (!bt.constant || bt.dtype == LOOM_DTYPE_F32)) {
      *error = where + ": holds " + std::to_string(bt.bytes.size()) +
               " raw bytes, which only a u8, i8 or i32 constant has";
      return false;
    }
    if (bt.shape.size() > kMaxRank) {
      *error = where + ": rank " + std::to_string(bt.shape.size()) + " exceeds " +
               std::to_string(kMaxRank);
      return false;
    }
    bool open = false;
    for (size_t d = 0; d < bt.shape.size(); ++d) {
      // Format 5: -1 is an open dimension, bound per execute; never in a
      // constant or a parameter, whose bytes are fixed.
      if (bt.shape[d] == -1 && !bt.constant && !bt.parameter) {
        open = true;
        continue;
      }
      if (bt.shape[d] < 0) {
        *error = where + ": dimension " + std::to_string(d) + " is " + std::to_string(bt.shape[d]) +
                 (bt.shape[d] == -1 ? std::string(" (open), but a ") +
                                          (bt.constant ? "constant" : "parameter") + " is static"
                                    : std::string());
        return false;
      }
    }
    uint64_t elements = 0;
    if (open) {
      std::vector<int64_t> known = bt.shape;
      for (int64_t& d : known) d = d < 0 ? 1 : d;
      if (!element_count(known, &elements)) {
        *error = where + ": shape " + detail::shape_string(bt.shape) + " is too large (2^60 elements or more)";
        return false;
      }
      if (!bt.data.empty()) {
        *error = where + ": holds " + std::to_string(bt.data.size()) + " values, but is not a constant";
        return false;
      }
      continue;
    }
    if (!element_count(bt.shape, &elements)) {
      *error = where + ": shape " + detail::shape_string(bt.shape) + " is too large (2^60 elements or more)";
      return false;
    }
    if (bt.constant && bt.dtype != LOOM_DTYPE_F32) {
      if (!bt.data.empty() || bt.bytes.size() != elements * dtype_size(bt.dtype)) {
        *error = where + ": a " + dtype_name(bt.dtype) + " constant holds " + std::to_string(bt.bytes.size()) +
                 " bytes and " + std::to_string(bt.data.size()) + " f32 values, its shape needs " +
                 std::to_string(elements * dtype_size(bt.dtype)) + " bytes";
        return false;
      }
      continue;
    }
    if (bt.constant ? bt.data.size() != elements : !bt.data.empty()) {
      *error = where + ": holds " + std::to_string(bt.data.size()) + " values, " +
               (bt.constant ? "its shape needs " + std::to_string(elements)
                            : std::string("but is not a constant"));
      return false;
    }
  }
  // 0: undefined, 1: graph input, 2: written by a node, 3: constant.
  std::vector<uint8_t> defined(tensor_count, 0);
  for (size_t t = 0; t < tensor_count; ++t) {
    if (g.tensors[t].constant) defined[t] = 3;
  }
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const uint32_t t = g.inputs[i];
    if (t >= tensor_count) {
      *error = "graph input " + std::to_string(i) + ": tensor index " + std::to_string(t) +
               " out of range (" + std::to_string(tensor_count) + " tensors)";
      return false;
    }
    if (defined[t]) {
      *error = "graph input " + std::to_string(i) + ": tensor " + std::to_string(t) +
               (defined[t] == 3 ? " is a constant" : " is listed twice");
      return false;
    }
    defined[t] = 1;
  }
  for (size_t t = 0; t < tensor_count; ++t) {
    if (g.tensors[t].parameter && (g.tensors[t].constant || defined[t] != 1)) {
      *error = "tensor " + std::to_string(t) + ": marked parameter but is " +
               (g.tensors[t].constant ? "a constant" : "not a graph input");
      return false;
    }
  }
  std::vector<const std::vector<int64_t>*> in_shapes;
  std::vector<loom_dtype_t> in_dtypes;
  std::vector<int64_t> inferred;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const BlobNode& node = g.nodes[n];
    std::string where = "node " + std::to_string(n);
    const uint32_t op_value = static_cast<uint32_t>(node.op);
    if (op_value < 1 || op_value > kLastOp) {
      *error = where + ": unknown operator " + std::to_string(op_value);
      return false;
    }
    size_t min_in = 0, max_in = 0;
    op_arity(node.op, &min_in, &max_in);
    where += " (" + std::string(op_name(node.op)) + ")";
    if (node.inputs.size() < min_in || (max_in != 0 && node.inputs.size() > max_in)) {
      *error = where + ": has " + std::to_string(node.inputs.size()) + " inputs, needs " +
               std::to_string(min_in) +
               (min_in == max_in ? "" : max_in == 0 ? " or more" : " to " + std::to_string(max_in));
      return false;
    }
    if (node.outputs.size() != 1) {
      *error = where + ": has " + std::to_string(node.outputs.size()) + " outputs, needs 1";
      return false;
    }
    if (node.op == Op::kGemm &&
        (node.trans_a < 0 || node.trans_a > 1 || node.trans_b < 0 || node.trans_b > 1)) {
      *error = where + ": trans_a and trans_b must be 0 or 1, got " +
               std::to_string(node.trans_a) + " and " + std::to_string(node.trans_b);
      return false;
    }
    in_shapes.clear();
    in_dtypes.clear();
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const uint32_t t = node.inputs[i];
      if (t >= tensor_count) {
        *error = where + ": input " + std::to_string(i) + " tensor index " + std::to_string(t) +
                 " out of range (" + std::to_string(tensor_count) + " tensors)";
        return false;
      }
      if (!defined[t]) {
        *error = where + ": input " + std::to_string(i) + " reads tensor " + std::to_string(t) +
                 ", which is neither a graph input nor written by an earlier node";
        return false;
      }
      in_shapes.push_back(&g.tensors[t].shape);
      in_dtypes.push_back(g.tensors[t].dtype);
    }
    const uint32_t o = node.outputs[0];
    if (o >= tensor_count) {
      *error = where + ": output tensor index " + std::to_string(o) + " out of range (" +
               std::to_string(tensor_count) + " tensors)";
      return false;
    }
    if (defined[o]) {
      *error = where + ": output tensor " + std::to_string(o) + " is already " +
               (defined[o] == 1   ? "a graph input"
                : defined[o] == 3 ? "a constant"
                                  : "written by an earlier node");
      return false;
    }
    std::string why;
    const std::vector<int64_t>& declared = g.tensors[o].shape;
    bool open_in = false;
    for (const std::vector<int64_t>* s : in_shapes) open_in = open_in || is_open(*s);
    if (is_recurrent(node.op) && (open_in || is_open(g.tensors[o].shape))) {
      *error = where + ": reads or writes a tensor with open dimensions; " + op_name(node.op) +
               " takes static shapes only";
      return false;
    }
    if (is_open_resize(node) && !is_open(*in_shapes[0])) {
      // The kernels run the static form only; bind_shapes makes it per
      // binding from the open one, which a static input never gets.
      *error = where + ": the open form (scales, taps made per binding) needs an input with open dimensions; "
               "input " + detail::shape_string(*in_shapes[0]) + " is static and takes the static form";
      return false;
    }
    if (is_open_resize(node) && !check_open_resize_form(node, *in_shapes[0], &why)) {
      *error = where + ": " + why;
      return false;
    }
    if (node.op == Op::kResize && !is_open_resize(node) && is_open(*in_shapes[0])) {
      *error = where + ": the static form (taps) needs a static input; input " +
               detail::shape_string(*in_shapes[0]) + " is open and takes the open form";
      return false;
    }
    // An operand known per binding only: the attribute lists' form now (the
    // shape rule is applied per binding by bind_shapes).
    if (open_in && !is_quant(node.op) && !attribute_lists_ok(node, &why)) {
      *error = where + ": " + why;
      return false;
    }
    if (open_in || is_open(declared)) {
      if (!check_dtypes(node, in_dtypes, g.tensors[o].dtype, &why)) {
        *error = where + ": " + why;
        return false;
      }
      // Format 5: an open operand's shape is known per binding only, where
      // bind_shapes applies the rule; here the shape spec of a Copy that
      // meets an open shape is checked for form.
      if (node.op == Op::kCopy && node.ints.empty()) {
        *error = where + ": output tensor " + std::to_string(o) + " " + detail::shape_string(declared) +
                 " or its input is open, which needs a shape spec (ints)";
        return false;
      }
      if (node.op == Op::kCopy && node.ints.size() != declared.size()) {
        *error = where + ": shape spec of " + std::to_string(node.ints.size()) +
                 " entries for output tensor " + std::to_string(o) + " of rank " +
                 std::to_string(declared.size());
        return false;
      }
      if (!open_in && !infer_output_shape(node, in_shapes, &inferred, &why)) {
        *error = where + ": " + why;
        return false;
      }
      if (!open_in && !shape_fits(inferred, declared)) {
        *error = where + ": output tensor " + std::to_string(o) + " is declared " +
                 detail::shape_string(declared) + " but the operator produces " +
                 detail::shape_string(inferred);
        return false;
      }
      defined[o] = 2;
      continue;
    }
    if (!infer_output_shape(node, in_shapes, &inferred, &why) ||
        !check_dtypes(node, in_dtypes, g.tensors[o].dtype, &why)) {
      *error = where + ": " + why;
      return false;
    }
    if (node.op == Op::kCopy && !node.ints.empty() && inferred != declared) {
      *error = where + ": output tensor " + std::to_string(o) + " is declared " +
               detail::shape_string(declared) + " but its shape spec gives " +
               detail::shape_string(inferred);
      return false;
    }
    if (node.op == Op::kCopy) {
      uint64_t a = 0, b = 0;
      element_count(*in_shapes[0], &a);
      element_count(g.tensors[o].shape, &b);
      if (a != b) {
        *error = where + ": output tensor " + std::to_string(o) + " is declared " +
                 detail::shape_string(g.tensors[o].shape) + ", which does not hold the " +
                 std::to_string(a) + " elements of the input";
        return false;
      }
    } else if (inferred != g.tensors[o].shape) {
      *error = where + ": output tensor " + std::to_string(o) + " is declared " +
               detail::shape_string(g.tensors[o].shape) + " but the operator produces " +
               detail::shape_string(inferred);
      return false;
    }
    defined[o] = 2;
  }
  std::vector<uint8_t> listed(tensor_count, 0);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const uint32_t t = g.outputs[i];
    if (t >= tensor_count) {
      *error = "graph output " + std::to_string(i) + ": tensor index " + std::to_string(t) +
               " out of range (" + std::to_string(tensor_count) + " tensors)";
      return false;
    }
    if (defined[t] != 2) {
      *error = "graph output " + std::to_string(i) + ": tensor " + std::to_string(t) +
               " is not written by any node";
      return false;
    }
    if (listed[t]) {
      *error = "graph output " + std::to_string(i) + ": tensor " + std::to_string(t) +
               " is listed twice";
      return false;
    }
    listed[t] = 1;
  }
  return true;
}

// Serializes `g` in format `version` (1 to 5; 1 drops constants and the
// attribute lists, so only graphs of format-1 operators survive it; 0, the
// default: format_version_for(g), so 5 only for open graphs). Does not
// validate: decode() does.
inline std::vector<std::byte> encode(const BlobGraph& g, uint32_t version = 0) {
  using detail::put_u32;
  if (version == 0) version = format_version_for(g);
  std::vector<std::byte> out;
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  put_u32(out, version);
  put_u32(out, static_cast<uint32_t>(g.tensors.size()));
  put_u32(out, static_cast<uint32_t>(g.inputs.size()));
  put_u32(out, static_cast<uint32_t>(g.outputs.size()));
  put_u32(out, static_cast<uint32_t>(g.nodes.size()));
  const bool v2 = version >= 2;
  for (const BlobTensor& t : g.tensors) {
    put_u32(out, static_cast<uint32_t>(t.dtype));
    put_u32(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) detail::put_u64(out, static_cast<uint64_t>(d));
    if (v2) {
      put_u32(out, (t.constant ? 1u : 0u) | (version >= 3 && t.parameter ? 2u : 0u));
      if (t.constant && t.dtype != LOOM_DTYPE_F32) {
        for (uint8_t b : t.bytes) out.push_back(static_cast<std::byte>(b));
      } else if (t.constant) {
        for (float f : t.data) detail::put_f32(out, f);
      }
    }
  }
  for (uint32_t i : g.inputs) put_u32(out, i);
  for (uint32_t o : g.outputs) put_u32(out, o);
  for (const BlobNode& n : g.nodes) {
    put_u32(out, static_cast<uint32_t>(n.op));
    put_u32(out, static_cast<uint32_t>(n.inputs.size()));
    put_u32(out, static_cast<uint32_t>(n.outputs.size()));
    detail::put_u64(out, static_cast<uint64_t>(n.axis));
    detail::put_f32(out, n.alpha);
    detail::put_f32(out, n.beta);
    put_u32(out, static_cast<uint32_t>(n.trans_a));
    put_u32(out, static_cast<uint32_t>(n.trans_b));
    if (v2) {
      put_u32(out, static_cast<uint32_t>(n.ints.size()));
      put_u32(out, static_cast<uint32_t>(n.floats.size()));
      for (int64_t v : n.ints) detail::put_u64(out, static_cast<uint64_t>(v));
      for (float f : n.floats) detail::put_f32(out, f);
    }
    for (uint32_t i : n.inputs) put_u32(out, i);
    for (uint32_t o : n.outputs) put_u32(out, o);
  }
  return out;
}

// Parses and validates a blob of format 1 to 8. Returns false and fills
// `*error` (naming the byte offset or the graph element) on bad input;
// bounded, never crashes.
inline bool decode(const void* data, size_t size, BlobGraph* out, std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  if (out == nullptr || (data == nullptr && size != 0)) {
    *error = "decode: null argument";
    return false;
  }
  if (size < kHeaderSize) {
    *error = "byte 0: blob of " + std::to_string(size) + " bytes is shorter than the " +
             std::to_string(kHeaderSize) + "-byte header";
    return false;
  }
  if (std::memcmp(data, kMagic, 4) != 0) {
    *error = "byte 0: bad magic, expected \"LCPU\"";
    return false;
  }
  detail::Reader r(data, size);
  r.skip(sizeof kMagic);
  auto at = [](size_t offset) { return "byte " + std::to_string(offset); };
  uint32_t version = 0, tensors = 0, inputs = 0, outputs = 0, nodes = 0;
  if (!r.u32("version", &version, error)) return false;
  if (version < kMinFormatVersion || version > kFormatVersion) {
    *error = "byte 4: format version " + std::to_string(version) + " is not supported (this "
             "reader handles " + std::to_string(kMinFormatVersion) + " to " +
             std::to_string(kFormatVersion) + ")";
    return false;
  }
  const bool v2 = version >= 2;
  if (!r.u32("tensor_count", &tensors, error) || !r.u32("input_count", &inputs, error) ||
      !r.u32("output_count", &outputs, error) || !r.u32("node_count", &nodes, error)) {
    return false;
  }
  BlobGraph g;
  if (!r.fits(tensors, v2 ? 12 : 8, "tensor", error)) return false;
  g.tensors.resize(tensors);
  for (uint32_t t = 0; t < tensors; ++t) {
    BlobTensor& bt = g.tensors[t];
    const size_t start = r.offset();
    uint32_t dtype = 0, rank = 0;
    if (!r.u32("tensor dtype", &dtype, error) || !r.u32("tensor rank", &rank, error)) return false;
    if (rank > kMaxRank) {
      *error = at(start) + ": tensor " + std::to_string(t) + ": rank " + std::to_string(rank) +
               " exceeds " + std::to_string(kMaxRank);
      return false;
    }
    const bool typed = (version >= 4 && dtype_code_size(dtype) != 0) || (version >= 6 && quant_dtype_code(dtype));
    if (dtype != LOOM_DTYPE_F32 && !typed) {
      *error = at(start) + ": tensor " + std::to_string(t) + ": dtype " + std::to_string(dtype) +
               " is not supported in format " + std::to_string(version) +
               (version >= 6   ? " (f32, bool, i32, i64, u8 and i8 are)"
                : version >= 4 ? " (f32, bool, i32 and i64 are)"
                               : " (f32 only before format 4)");
      return false;
    }
    bt.dtype = static_cast<loom_dtype_t>(dtype);
    bt.shape.resize(rank);
    for (uint32_t d = 0; d < rank; ++d) {
      if (!r.i64("tensor dimension", &bt.shape[d], error)) return false;
    }
    for (uint32_t d = 0; version < 5 && d < rank; ++d) {
      if (bt.shape[d] < 0) {
        *error = at(start) + ": tensor " + std::to_string(t) + ": dimension " + std::to_string(d) +
                 " is " + std::to_string(bt.shape[d]) + " (open dimensions need format 5)";
        return false;
      }
    }
    if (!v2) continue;
    uint32_t flags = 0;
    const size_t flags_at = r.offset();
    if (!r.u32("tensor flags", &flags, error)) return false;
    if (flags > (version >= 3 ? 3u : 1u)) {
      *error = at(flags_at) + ": tensor " + std::to_string(t) + ": unknown flags " +
               std::to_string(flags) + " in format " + std::to_string(version);
      return false;
    }
    if (flags == 3) {
      *error = at(flags_at) + ": tensor " + std::to_string(t) +
               ": flags 3 mark it both constant and parameter";
      return false;
    }
    if (flags == 2) {
      bt.parameter = true;
      continue;
    }
    if (flags == 0) continue;
    const bool int_constant =
        version >= 6 && (bt.dtype == LOOM_DTYPE_U8 || bt.dtype == LOOM_DTYPE_I8 || bt.dtype == LOOM_DTYPE_I32);
    if (bt.dtype != LOOM_DTYPE_F32 && !int_constant) {
      *error = at(flags_at) + ": tensor " + std::to_string(t) + ": a constant of dtype " +
               dtype_name(bt.dtype) + (version >= 6 ? " (constants hold f32, u8, i8 or i32 values)"
                                                    : " (constants hold f32 values only)");
      return false;
    }
    for (uint32_t d = 0; d < rank; ++d) {
      if (bt.shape[d] < 0) {
        *error = at(start) + ": tensor " + std::to_string(t) + ": constant with dimension " +
                 std::to_string(d) + " of " + std::to_string(bt.shape[d]);
        return false;
      }
    }
    uint64_t elements = 0;
    if (!element_count(bt.shape, &elements)) {
      *error = at(start) + ": tensor " + std::to_string(t) + ": constant of shape " +
               detail::shape_string(bt.shape) + " has 2^60 elements or more";
      return false;
    }
    bt.constant = true;
    if (int_constant) {
      const size_t width = dtype_size(bt.dtype);
      if (!r.fits(elements, width, "constant value", error)) return false;
      bt.bytes.resize(static_cast<size_t>(elements) * width);
      if (!bt.bytes.empty()) std::memcpy(bt.bytes.data(), static_cast<const unsigned char*>(data) + r.offset(), bt.bytes.size());
      r.skip(bt.bytes.size());
      continue;
    }
    if (!r.fits(elements, 4, "constant value", error)) return false;
    bt.data.resize(static_cast<size_t>(elements));
    for (float& f : bt.data) r.f32("constant value", &f, error);
  }
  if (!r.fits(inputs, 4, "graph input", error)) return false;
  g.inputs.resize(inputs);
  for (uint32_t& i : g.inputs) {
    if (!r.u32("graph input", &i, error)) return false;
  }
  if (!r.fits(outputs, 4, "graph output", error)) return false;
  g.outputs.resize(outputs);
  for (uint32_t& o : g.outputs) {
    if (!r.u32("graph output", &o, error)) return false;
  }
  // The fixed fields (36 bytes, 44 in v2) plus the one output every node has.
  const size_t node_fixed_bytes = v2 ? 48 : 40;
  if (!r.fits(nodes, node_fixed_bytes, "node", error)) return false;
  g.nodes.resize(nodes);
  for (uint32_t n = 0; n < nodes; ++n) {
    BlobNode& node = g.nodes[n];
    const size_t start = r.offset();
    uint32_t op = 0, n_in = 0, n_out = 0;
    if (!r.u32("node op", &op, error) || !r.u32("node input_count", &n_in, error) ||
        !r.u32("node output_count", &n_out, error) || !r.i64("node axis", &node.axis, error) ||
        !r.f32("node alpha", &node.alpha, error) || !r.f32("node beta", &node.beta, error) ||
        !r.i32("node trans_a", &node.trans_a, error) ||
        !r.i32("node trans_b", &node.trans_b, error)) {
      return false;
    }
    if (version < 12 && op > kLastOpV11 && op <= kLastOp) {
      *error = at(start) + ": node " + std::to_string(n) + " (" + op_name(static_cast<Op>(op)) +
               "): needs format 12, the blob is format " + std::to_string(version);
      return false;
    }
    if (version < 10 && op > kLastOpV9 && op <= kLastOpV11) {
      *error = at(start) + ": node " + std::to_string(n) + " (" + op_name(static_cast<Op>(op)) +
               "): needs format 10, the blob is format " + std::to_string(version);
      return false;
    }
    if (op < 1 || op > last_op(version)) {
      *error = at(start) + ": node " + std::to_string(n) + ": unknown operator " +
               std::to_string(op) + " for format " + std::to_string(version);
      return false;
    }
    node.op = static_cast<Op>(op);
    if (v2) {
      uint32_t n_ints = 0, n_floats = 0;
      if (!r.u32("node int_count", &n_ints, error) || !r.u32("node float_count", &n_floats, error)) {
        return false;
      }
      if (!r.fits(n_ints, 8, "node int", error)) return false;
      node.ints.resize(n_ints);
      for (int64_t& v : node.ints) r.i64("node int", &v, error);
      if (!r.fits(n_floats, 4, "node float", error)) return false;
      node.floats.resize(n_floats);
      for (float& f : node.floats) r.f32("node float", &f, error);
    }
    if (version < 10 && uses_format10(node)) {
      *error = at(start) + ": node " + std::to_string(n) + " (" + op_name(node.op) +
               "): a Cast to u8 or i8 needs format 10, the blob is format " + std::to_string(version);
      return false;
    }
    if (version < 5 && node.op == Op::kCopy && !node.ints.empty()) {
      *error = at(start) + ": node " + std::to_string(n) + " (Copy): a shape spec (ints) needs format 5, "
               "the blob is format " + std::to_string(version);
      return false;
    }
    if (!r.fits(uint64_t{n_in} + n_out, 4, "node operand", error)) return false;
    node.inputs.resize(n_in);
    node.outputs.resize(n_out);
    for (uint32_t& i : node.inputs) {
      if (!r.u32("node input", &i, error)) return false;
    }
    for (uint32_t& o : node.outputs) {
      if (!r.u32("node output", &o, error)) return false;
    }
    if (version < 7 && uses_format7(node)) {
      *error = at(start) + ": node " + std::to_string(n) + " (" + op_name(node.op) +
               "): a fused quantized step (an output clamp, a QLinearMatMul bias or trans_b) needs format 7, "
               "the blob is format " + std::to_string(version);
      return false;
    }
    if (version < 10 && requantizes_round_first(node)) {
      *error = at(start) + ": node " + std::to_string(n) + " (" + op_name(node.op) +
               "): trans_a 1 (requantize as a QuantizeLinear: round, then add the zero point) needs format 10, "
               "the blob is format " + std::to_string(version);
      return false;
    }
    if (version < 8 && is_open_resize(node)) {
      *error = at(start) + ": node " + std::to_string(n) +
               " (Resize): the open form (taps made per binding) needs format 8, the blob is format " +
               std::to_string(version);
      return false;
    }
  }
  if (r.remaining() != 0) {
    *error = at(r.offset()) + ": " + std::to_string(r.remaining()) +
             " unexpected bytes after the last node";
    return false;
  }
  if (!validate(g, error)) return false;
  for (size_t n = 0; version < 11 && n < g.nodes.size(); ++n) {
    const BlobNode& node = g.nodes[n];
    const loom_dtype_t type = g.tensors[node.outputs[0]].dtype;
    if (uses_format11(node, type)) {
      *error = "node " + std::to_string(n) + " (" + op_name(node.op) + "): moving " + dtype_name(type) +
               " elements needs format 11, the blob is format " + std::to_string(version);
      return false;
    }
  }
  *out = std::move(g);
  return true;
}

}  // namespace loom::cpu_simd

#include "loom/cpu_simd/blob_bind.hpp"
