// The per-node lowering helper shared by lower.cpp (elementwise, matmul,
// reshape family) and lower_nn.cpp (conv, pools, reductions, softmax):
// attribute and operand accessors that record why a node is refused.
// Private to the plugin's compile side.
#pragma once

#include <initializer_list>
#include <string>

#include "loom/sdk/graph.hpp"

#include "lower.hpp"

namespace loom::vulkan::lowering {

// Node reads go through sdk::NodeView (attributes, constant operands), the
// checks vendors' plugins use too; Lowering adds vulkan-compute's rules (f32
// only, rank and size limits) and the Lowered it fills.
//
// Two modes. Over a static graph (`bound` NULL) every shape is the graph's
// and output_is() checks the declared output against the operator's rule.
// Binding an open graph (`bound` set: one shape per graph tensor, those of
// the node's operands concrete) the operands' shapes come from `bound`, and
// output_is() makes the rule's shape the output's: it must fit the shape the
// graph declares (rank, and every dimension the graph fixes) and the
// kernels' limits, and is written to `bound` for the nodes that read it.
class Lowering {
 public:
  Lowering(const sdk::GraphView& g, size_t n, Lowered* out, std::string* why, std::vector<Shape>* bound = nullptr,
           const std::string* int8_unavailable = nullptr)
      : node_(g.node(n)), out_(out), why_(why), opset_(node_.opset()), bound_(bound),
        int8_unavailable_(int8_unavailable) {}

  // Why the int8 kernels cannot run for this compile (empty: they can).
  std::string int8_unavailable() const {
    return int8_unavailable_ == nullptr ? std::string(kNoInt8Target) : *int8_unavailable_;
  }
  const sdk::NodeView& node() const { return node_; }

  // Records why the node is refused (the first reason output_is gave, when
  // it gave one) and returns false.
  bool fail(std::string why) {
    if (!pinned_) *why_ = std::move(why);
    return false;
  }
  bool window_fail(const char* name, int64_t x) {
    return fail(std::string("attribute ") + name + " value " + std::to_string(x) +
                " is beyond the kernels' 32-bit indexing");
  }
  bool binding() const { return bound_ != nullptr; }
  // True when `s` is OK; otherwise fail() with its message.
  bool ok(const Status& s) { return s.ok() || fail(s.message()); }
  int64_t opset() const { return opset_; }
  std::string op() const { return node_.op_type(); }

  bool attributes(std::initializer_list<sdk::AttributeRule> allowed) {
    return ok(node_.check_attributes(allowed));
  }
  bool has(const char* name) const { return node_.has_attribute(name); }
  bool get_float(const char* name, float def, float* v) { return ok(node_.get_float(name, def, v)); }
  bool get_int(const char* name, int64_t def, int64_t* v) { return ok(node_.get_int(name, def, v)); }
  bool get_ints(const char* name, Shape* v) { return ok(node_.get_ints(name, v)); }
  // A window attribute (strides, pads, kernel_shape, group, ...): the
  // kernels index in 32 bits, and the shape rules add and multiply these
  // with dimensions (< 2^31), so values beyond +-2^30 are refused before
  // any arithmetic can overflow.
  static constexpr int64_t kWindowBound = int64_t{1} << 30;
  bool get_window_ints(const char* name, Shape* v) {
    if (!get_ints(name, v)) return false;
    for (int64_t x : *v) {
      if (x < -kWindowBound || x > kWindowBound) return window_fail(name, x);
    }
    return true;
  }
  bool get_window_int(const char* name, int64_t def, int64_t* v) {
    if (!get_int(name, def, v)) return false;
    return (*v >= -kWindowBound && *v <= kWindowBound) || window_fail(name, *v);
  }
  bool get_string(const char* name, const char* def, std::string* v) {
    return ok(node_.get_string(name, def, v));
  }
  // A constant i64 vector input (an axes operand).
  bool constant_i64s(size_t i, Shape* v) { return ok(node_.constant_int64s(i, v)); }
  // A constant f32 vector input (Resize's scales).
  bool constant_f32s(size_t i, std::vector<float>* v) { return ok(node_.constant_floats(i, v)); }
  bool constant_f32_scalar(size_t i, float* v) { return ok(node_.constant_float(i, v)); }

  size_t input_count() const { return node_.input_count(); }
  bool present(size_t i) const { return node_.has_input(i); }
  int32_t input(size_t i) const { return node_.input_index(i); }
  // Input i's shape as the graph declares it (-1 where open).
  Shape declared_of(size_t i) const { return node_.input(i).shape(); }
  Shape shape_of(size_t i) const {
    return bound_ != nullptr ? (*bound_)[static_cast<size_t>(input(i))] : node_.input(i).shape();
  }

  bool inputs(size_t min, size_t max) {
    const size_t n = input_count();
    if (n < min || n > max) {
      return fail("has " + std::to_string(n) + " inputs, expected " + std::to_string(min) +
                  (min == max ? "" : " to " + std::to_string(max)));
    }
    return true;
  }
  // An f32 operand read by a kernel (an inline constant's bytes were
  // checked against its shape when the SDK opened the graph).
  bool data(size_t i) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const sdk::TensorView t = node_.input(i);
    if (t.dtype() != LOOM_DTYPE_F32) {
      return fail("input " + std::to_string(i) + " is " + sdk::dtype_name(t.dtype()) +
                  "; vulkan-compute runs f32 only");
    }
    const Shape s = shape_of(i);
    uint64_t n = 0;
    if (!element_count(s, &n) || s.size() > kMaxRank) {
      return fail("input " + std::to_string(i) + " has shape " + shape_text(s) +
                  ", beyond vulkan-compute's limits");
    }
    out_->operands.push_back(t.index());
    return true;
  }
  // Input i, of dtype `dtype`, read by an int8 kernel.
  bool typed_data(size_t i, loom_dtype_t dtype) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const sdk::TensorView t = node_.input(i);
    if (t.dtype() != dtype) {
      return fail("input " + std::to_string(i) + " is " + sdk::dtype_name(t.dtype()) + ", expected " +
                  sdk::dtype_name(dtype));
    }
    const Shape s = shape_of(i);
    uint64_t n = 0;
    if (!element_count(s, &n) || s.size() > kMaxRank || n == 0) {
      return fail("input " + std::to_string(i) + " has shape " + shape_text(s) +
                  ", beyond vulkan-compute's limits or empty");
    }
    out_->operands.push_back(t.index());
    return true;
  }
  // The one output, of `dtype` (f32 unless an int8 kernel writes it;
  // further optional outputs must be left out).
  bool output(loom_dtype_t dtype = LOOM_DTYPE_F32) {
    if (!node_.has_output(0)) return fail("has no output");
    for (size_t i = 1; i < node_.output_count(); ++i) {
      if (node_.has_output(i)) return fail("optional output " + std::to_string(i) + " is not supported");
    }
    const sdk::TensorView t = node_.output(0);
    if (t.dtype() != dtype) return fail(std::string("output is ") + sdk::dtype_name(t.dtype()));
    if (t.is_constant() || t.is_graph_input()) return fail("output tensor is a constant or a graph input");
    out_->output = t.index();
    if (bound_ != nullptr) return true;  // output_is() gives the shape
    uint64_t n = 0;
    if (!element_count(t.shape(), &n) || t.rank() > kMaxRank) {
      return fail("output shape " + shape_text(t.shape()) + " is beyond vulkan-compute's limits");
    }
    output_shape_ = t.shape();
    return true;
  }
  // The output shape is `want`, the operator's rule applied to the
  // operands (see the modes above). False without a message of its own for
  // a static graph whose declared output differs (the caller says how);
  // binding, false with the reason the shape does not fit.
  bool output_is(const Shape& want) {
    if (bound_ == nullptr) return want == output_shape_;
    const Shape declared = node_.output(0).shape();
    bool fits = declared.size() == want.size();
    for (size_t d = 0; fits && d < want.size(); ++d) fits = declared[d] < 0 || declared[d] == want[d];
    uint64_t n = 0;
    if (!fits) {
      fail("output shape " + shape_text(want) + " by the operator's rule does not fit the declared " +
           shape_text(declared));
    } else if (!element_count(want, &n) || want.size() > kMaxRank) {
      fail("output shape " + shape_text(want) + " is beyond vulkan-compute's limits (rank 8, 2^31 elements)");
    } else {
      output_shape_ = want;
      (*bound_)[static_cast<size_t>(out_->output)] = want;
      return true;
    }
    pinned_ = true;
    return false;
  }
  // The output's shape: the declared one, or binding, the one output_is set.
  Shape output_shape() const { return output_shape_; }
  Lowered& out() { return *out_; }

 private:
  const sdk::NodeView node_;
  Lowered* out_;
  std::string* why_;
  int64_t opset_;
  std::vector<Shape>* bound_;
  const std::string* int8_unavailable_;
  bool pinned_ = false;  // output_is gave the reason: later fail() calls keep it
  Shape output_shape_;
};

// Row-major element strides of `s`.
std::vector<uint64_t> contiguous_strides(const Shape& s);

// The output shape equals input 0's; a refusal otherwise.
bool same_shape_out(Lowering& l);

bool lower_softmax(Lowering& l, bool log_softmax);
bool lower_conv(Lowering& l);
// The 2-D convolution attributes (strides, dilations, pads, kernel_shape,
// group, auto_pad) over x (input 0) and w (input `wi`), checked against the
// output's shape (output() first) into `p`.
bool conv_geometry(Lowering& l, size_t wi, bool bias, ConvParams* p);
// lower_quant.cpp (format 4): QuantizeLinear, DequantizeLinear,
// QLinearConv, ConvInteger.
bool lower_quantize(Lowering& l, bool quantize);
bool lower_qconv(Lowering& l, bool qlinear);
bool lower_qmatmul(Lowering& l, bool qlinear);
bool lower_pool(Lowering& l, const std::string& op);
bool lower_reduce(Lowering& l, const std::string& op);
bool lower_layernorm(Lowering& l);
bool lower_slice(Lowering& l);
bool lower_concat(Lowering& l);
bool lower_resize(Lowering& l);
bool lower_conv_transpose(Lowering& l);

}  // namespace loom::vulkan::lowering
