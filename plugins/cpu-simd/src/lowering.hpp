// The Lowering helper that lower.cpp, lower_data.cpp and lower_typed.cpp
// share: one graph.fbs node's attributes, operands and output, each accessor
// failing with the reason the node is refused. A node usually lowers to one
// blob node; Split lowers to one Slice per output.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>

#include "compile.hpp"

namespace loom::cpu_simd::lowering {

using Shape = std::vector<int64_t>;

// An attribute allow-list: names, with the first opset that has each.
using AllowList = std::initializer_list<sdk::AttributeRule>;

// Whether a blob tensor may have this dtype (format 4: f32, bool, i32, i64).
inline bool blob_dtype_ok(gfb::DType d) {
  return d == gfb::DType::f32 || d == gfb::DType::bool_ || d == gfb::DType::i32 || d == gfb::DType::i64;
}

// The blob dtype of a graph.fbs dtype (the enums share their values).
inline loom_dtype_t blob_dtype(gfb::DType d) { return static_cast<loom_dtype_t>(d); }

// The graph.fbs dtype of a tensor (the enums share their values).
inline gfb::DType dtype_of(const sdk::TensorView& t) { return static_cast<gfb::DType>(t.dtype()); }

// The node's reads go through sdk::NodeView (attributes, constant
// operands), the checks vendors' plugins use too; what Lowering adds is
// cpu-simd's rules (which dtypes and shapes a kernel takes) and the blob
// nodes it fills.
class Lowering {
 public:
  // `out` gets one blob node (more with add_node).
  Lowering(const sdk::GraphView& g, size_t index, std::vector<BlobNode>* out, std::string* why)
      : node_(g.node(index)), out_(out), why_(why), opset_(node_.opset()),
        open_graph_(g.has_open_dims()) {
    out_->assign(1, BlobNode{});
  }

  int64_t opset() const { return opset_; }
  // The node as the SDK sees it (attribute kinds the helpers below lack).
  const sdk::NodeView& view() const { return node_; }
  // Whether any tensor of the graph has an open dimension.
  bool open_graph() const { return open_graph_; }
  // Whether input 0 or output 0 has an open dimension (ABI 1.2 open graphs):
  // then a Copy's lowering writes a shape spec instead of checking shapes.
  bool open_shapes() const {
    return open_graph_ && ((present(0) && is_open(shape_of(0))) ||
                           (node_.has_output(0) && is_open(output_shape(0))));
  }

  bool fail(std::string why) {
    *why_ = std::move(why);
    return false;
  }
  // Input that no implementation runs correctly (a zero scale, a
  // per-channel length that is not the channel count): fails like fail(),
  // and marks the node so that compile_supported claims it and compile
  // reports `why` instead of leaving it to a kernel that would answer wrongly.
  bool invalid(std::string why) {
    invalid_ = true;
    return fail(std::move(why));
  }
  bool is_invalid() const { return invalid_; }
  // True when `s` is OK; otherwise fail() with its message.
  bool ok(const sdk::Status& s) { return s.ok() || fail(s.message()); }

  // --- attributes

  bool check_attributes(AllowList allowed) {
    return ok(node_.check_attributes(allowed));
  }
  bool has(const char* name) const { return node_.has_attribute(name); }
  bool get_int(const char* name, int64_t def, int64_t* v) { return ok(node_.get_int(name, def, v)); }
  bool get_float(const char* name, float def, float* v) { return ok(node_.get_float(name, def, v)); }
  bool get_ints(const char* name, Shape* v) { return ok(node_.get_ints(name, v)); }
  bool get_string(const char* name, const char* def, std::string* v) {
    return ok(node_.get_string(name, def, v));
  }

  // --- operands

  size_t input_count() const { return node_.input_count(); }
  bool present(size_t i) const { return node_.has_input(i); }
  int32_t input(size_t i) const { return node_.input_index(i); }
  Shape shape_of(size_t i) const { return node_.input(i).shape(); }

  bool check_inputs(size_t min, size_t max) {
    const size_t n = input_count();
    if (n < min || n > max) {
      return fail("has " + std::to_string(n) + " inputs, expected " + std::to_string(min) +
                  (min == max ? "" : " to " + std::to_string(max)));
    }
    return true;
  }

  gfb::DType dtype_of(size_t i) const { return lowering::dtype_of(node_.input(i)); }

  // A tensor the kernel reads at run time (graph input, inline constant or
  // an earlier node's output): f32, or with `any_dtype` any blob dtype
  // (blob_dtype_ok); inline constants must be f32 (the blob embeds no others).
  bool data(size_t i, bool any_dtype = false) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const sdk::TensorView t = node_.input(i);
    const gfb::DType d = lowering::dtype_of(t);
    if (any_dtype ? !blob_dtype_ok(d) : d != gfb::DType::f32) {
      return fail("input " + std::to_string(i) + " is " + gfb::EnumNameDType(d) +
                  (any_dtype ? "; cpu-simd runs f32, bool, i32 and i64" : "; cpu-simd runs f32 only here"));
    }
    return take(i, t, d);
  }

  // A tensor an operator moves without reading its values (Identity,
  // Reshape, Concat, Transpose, Slice, Gather, ...): f32, bool, i32, i64, u8
  // or i8 (other than f32: blob format 11), not an inline constant unless
  // f32, and of input 0's dtype. Its output is then moved_output's.
  bool moved(size_t i) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const gfb::DType d = dtype_of(i);
    if (!blob_dtype_ok(d) && d != gfb::DType::u8 && d != gfb::DType::i8) {
      return fail("input " + std::to_string(i) + " is " + gfb::EnumNameDType(d) +
                  "; cpu-simd moves f32, bool, i32, i64, u8 and i8");
    }
    if (i > 0 && present(0) && d != dtype_of(0)) {
      return fail("input " + std::to_string(i) + " is " + gfb::EnumNameDType(d) + ", input 0 is " +
                  gfb::EnumNameDType(dtype_of(0)));
    }
    const sdk::TensorView t = node_.input(i);
    return take(i, t, d);
  }
  // Input `i` (tensor `t` of dtype `d`, checked by data or moved) becomes
  // an input of the blob node: not an inline constant unless f32, of a
  // shape cpu-simd takes.
  bool take(size_t i, const sdk::TensorView& t, gfb::DType d) {
    if (t.has_data() && !t.is_graph_input() && d != gfb::DType::f32) {
      return fail("input " + std::to_string(i) + " is an inline " + gfb::EnumNameDType(d) +
                  " constant; cpu-simd embeds f32 constants only");
    }
    if (!shape_ok(t.shape(), "input " + std::to_string(i))) return false;
    node().inputs.push_back(static_cast<uint32_t>(t.index()));
    return true;
  }
  // The output of a node whose inputs passed `moved`: of input 0's dtype.
  bool moved_output(size_t allowed_outputs) { return output(allowed_outputs, dtype_of(0)); }

  bool constant_f32_scalar(size_t i, float* v) { return ok(node_.constant_float(i, v)); }
  // Input `i`'s values when it is an inline f32 constant; false (no
  // failure recorded) otherwise.
  bool constant_values(size_t i, std::vector<float>* v) const {
    if (!present(i)) return false;
    const sdk::TensorView t = node_.input(i);
    return t.has_data() && !t.is_graph_input() && t.dtype() == LOOM_DTYPE_F32 && t.read_floats(v).ok();
  }
  bool constant_i64s(size_t i, Shape* v) { return ok(node_.constant_int64s(i, v)); }
  bool constant_f32s(size_t i, std::vector<float>* v) { return ok(node_.constant_floats(i, v)); }
  // An inline i64 or i32 constant of any shape (Gather's indices), at most
  // 2^20 values.
  bool constant_indices(size_t i, Shape* values, Shape* shape) {
    sdk::TensorView t(nullptr, -1);
    if (!ok(node_.constant_input(i, &t))) return false;
    if (t.dtype() != LOOM_DTYPE_I64 && t.dtype() != LOOM_DTYPE_I32) {
      return fail("input " + std::to_string(i) + " is " + sdk::dtype_name(t.dtype()) + ", expected i64 or i32");
    }
    if (t.element_count() > (uint64_t{1} << 20)) {
      return fail("input " + std::to_string(i) + " holds more than 2^20 indices");
    }
    *shape = t.shape();
    return ok(t.read_ints(values));
  }
  bool constant_bool(size_t i, bool* v) {
    sdk::TensorView t(nullptr, -1);
    if (!ok(node_.constant_input(i, &t))) return false;
    if (t.dtype() != LOOM_DTYPE_BOOL || t.element_count() != 1) {
      return fail("input " + std::to_string(i) + " must be an inline bool scalar constant");
    }
    *v = t.data()[0] != 0;
    return true;
  }

  bool shape_ok(const Shape& s, const std::string& what) {
    uint64_t ignored = 0;
    Shape known = s;
    for (int64_t& d : known) d = d == -1 && open_graph_ ? 1 : d;
    if (s.size() > kMaxRank || !element_count(known, &ignored)) {
      return fail(what + " has shape " + detail::shape_string(s) + ", beyond cpu-simd's limits");
    }
    return true;
  }

  // The node's one output; the operator's optional further outputs (up to
  // `allowed_outputs` entries in all) must be left out (-1). Of `dtype`.
  bool output(size_t allowed_outputs, gfb::DType dtype = gfb::DType::f32) {
    const size_t outs = output_count();
    if (!node_.has_output(0)) return fail("has no output");
    if (outs > allowed_outputs) {
      return fail("has " + std::to_string(outs) + " outputs, expected at most " +
                  std::to_string(allowed_outputs));
    }
    for (size_t i = 1; i < outs; ++i) {
      if (node_.has_output(i)) return fail("optional output " + std::to_string(i) + " is not supported");
    }
    if (!output_ok(0, dtype)) return false;
    node().outputs = {static_cast<uint32_t>(output_index(0))};
    return true;
  }
  // Output `i` (present) is a tensor of `dtype` that a node may write.
  bool output_ok(size_t i, gfb::DType dtype) {
    const std::string what = i == 0 ? "output" : "output " + std::to_string(i);
    if (!node_.has_output(i)) return fail(what + " is left out");
    const sdk::TensorView t = node_.output(i);
    if (lowering::dtype_of(t) != dtype) {
      return fail(what + " is " + gfb::EnumNameDType(lowering::dtype_of(t)) + ", expected " +
                  gfb::EnumNameDType(dtype));
    }
    if (t.is_constant() || t.is_graph_input()) return fail(what + " tensor is a constant or a graph input");
    return shape_ok(t.shape(), what);
  }
  size_t output_count() const { return node_.output_count(); }
  bool has_output(size_t i) const { return node_.has_output(i); }
  int32_t output_index(size_t i) const { return node_.output_index(i); }
  Shape output_shape(size_t i = 0) const { return node_.output(i).shape(); }

  BlobNode& node() { return out_->front(); }
  // A further blob node (Split's second and later Slices).
  BlobNode& add_node() { return out_->emplace_back(); }

 private:
  const sdk::NodeView node_;
  std::vector<BlobNode>* out_;
  std::string* why_;
  int64_t opset_;
  bool open_graph_;
  bool invalid_ = false;
};

// Format-3 operators (lower_data.cpp).
bool lower_reduce(Lowering& l, Op op);
bool lower_gather(Lowering& l);
bool lower_resize(Lowering& l);
bool lower_conv_transpose(Lowering& l);
bool lower_layer_norm(Lowering& l);
bool lower_slice(Lowering& l);

// Format-4 operators and Split (lower_typed.cpp).
bool lower_split(Lowering& l);
bool lower_pad(Lowering& l);
bool lower_where(Lowering& l);
bool lower_equal(Lowering& l);
bool lower_cast(Lowering& l);

// Format-9 recurrent operators (lower_rnn.cpp): op kLstm, kGru or kRnn.
bool lower_recurrent(Lowering& l, Op op);

// Format-6 quantized operators (lower_quant.cpp).
bool lower_quantize(Lowering& l);
bool lower_dequantize(Lowering& l);
bool lower_qlinear_conv(Lowering& l);
bool lower_qlinear_matmul(Lowering& l);
bool lower_conv_integer(Lowering& l);
bool lower_matmul_integer(Lowering& l);
// Format 10: DynamicQuantizeLinear as three nodes (lower_quant.cpp).
bool lower_dynamic_quantize(Lowering& l);

}  // namespace loom::cpu_simd::lowering
