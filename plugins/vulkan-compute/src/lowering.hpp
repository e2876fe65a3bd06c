// The per-node lowering helper shared by lower.cpp (elementwise, matmul,
// reshape family) and lower_nn.cpp (conv, pools, reductions, softmax):
// attribute and operand accessors that record why a node is refused.
// Private to the plugin's compile side.
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>

#include "lower.hpp"

namespace loom::vulkan::lowering {

class Lowering {
 public:
  Lowering(const Graph& g, size_t n, Lowered* out, std::string* why)
      : g_(g), node_(g.node(n)), out_(out), why_(why), opset_(node_.opset()) {}

  bool fail(std::string why) {
    *why_ = std::move(why);
    return false;
  }
  int64_t opset() const { return opset_; }
  std::string op() const { return node_.op_type()->str(); }

  bool attributes(std::initializer_list<const char*> allowed) {
    const auto* attrs = node_.attributes();
    if (attrs == nullptr) return true;
    for (uint32_t i = 0; i < attrs->size(); ++i) {
      const char* name = attrs->Get(i)->name()->c_str();
      bool ok = false;
      for (const char* a : allowed) ok = ok || std::strcmp(a, name) == 0;
      if (!ok) return fail(std::string("attribute '") + name + "' is not supported");
    }
    return true;
  }
  const gfb::Attribute* find(const char* name) const {
    const auto* attrs = node_.attributes();
    if (attrs == nullptr) return nullptr;
    for (uint32_t i = 0; i < attrs->size(); ++i) {
      if (std::strcmp(attrs->Get(i)->name()->c_str(), name) == 0) return attrs->Get(i);
    }
    return nullptr;
  }
  bool get_float(const char* name, float def, float* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::float_) return fail(std::string("attribute '") + name + "' is not a float");
    *v = a->f();
    return true;
  }
  bool get_int(const char* name, int64_t def, int64_t* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::int_) return fail(std::string("attribute '") + name + "' is not an int");
    *v = a->i();
    return true;
  }

  bool get_ints(const char* name, Shape* v) {
    const gfb::Attribute* a = find(name);
    v->clear();
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::ints) return fail(std::string("attribute '") + name + "' is not ints");
    if (a->ints() != nullptr) v->assign(a->ints()->begin(), a->ints()->end());
    return true;
  }
  // A constant i64 vector input (an axes operand).
  bool constant_i64s(size_t i, Shape* v) {
    const gfb::Tensor& t = g_.tensor(input(i));
    if (t.data() == nullptr || t.parameter() != nullptr || g_.is_input[static_cast<size_t>(input(i))] ||
        t.dtype() != gfb::DType::i64 || g_.shape(input(i)).size() != 1 || t.data()->size() % 8 != 0) {
      return fail("input " + std::to_string(i) + " must be an inline 1-D i64 constant");
    }
    v->resize(t.data()->size() / 8);
    if (!v->empty()) std::memcpy(v->data(), t.data()->data(), t.data()->size());
    return true;
  }
  // A constant f32 vector input (Resize's scales).
  bool constant_f32s(size_t i, std::vector<float>* v) {
    const gfb::Tensor& t = g_.tensor(input(i));
    const size_t bytes = t.data() == nullptr ? 0 : t.data()->size();
    if (t.data() == nullptr || t.parameter() != nullptr || g_.is_input[static_cast<size_t>(input(i))] ||
        t.dtype() != gfb::DType::f32 || g_.shape(input(i)).size() != 1 || bytes % 4 != 0 ||
        static_cast<int64_t>(bytes / 4) != g_.shape(input(i))[0]) {
      return fail("input " + std::to_string(i) + " must be an inline 1-D f32 constant");
    }
    v->resize(bytes / 4);
    if (!v->empty()) std::memcpy(v->data(), t.data()->data(), bytes);
    return true;
  }
  bool get_string(const char* name, const char* def, std::string* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::string) return fail(std::string("attribute '") + name + "' is not a string");
    *v = a->s() == nullptr ? "" : a->s()->str();
    return true;
  }

  size_t input_count() const { return node_.inputs() == nullptr ? 0 : node_.inputs()->size(); }
  bool present(size_t i) const { return i < input_count() && node_.inputs()->Get(static_cast<uint32_t>(i)) != -1; }
  int32_t input(size_t i) const { return node_.inputs()->Get(static_cast<uint32_t>(i)); }
  Shape shape_of(size_t i) const { return g_.shape(input(i)); }

  bool inputs(size_t min, size_t max) {
    const size_t n = input_count();
    if (n < min || n > max) {
      return fail("has " + std::to_string(n) + " inputs, expected " + std::to_string(min) +
                  (min == max ? "" : " to " + std::to_string(max)));
    }
    return true;
  }
  // An f32 operand read by a kernel; an inline constant must hold its bytes.
  bool data(size_t i) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const gfb::Tensor& t = g_.tensor(input(i));
    if (t.dtype() != gfb::DType::f32) {
      return fail("input " + std::to_string(i) + " is " + gfb::EnumNameDType(t.dtype()) +
                  "; vulkan-compute runs f32 only");
    }
    uint64_t n = 0;
    if (!element_count(g_.shape(input(i)), &n) || g_.shape(input(i)).size() > kMaxRank) {
      return fail("input " + std::to_string(i) + " has shape " + shape_text(shape_of(i)) +
                  ", beyond vulkan-compute's limits");
    }
    if (!g_.is_input[static_cast<size_t>(input(i))] && t.data() != nullptr &&
        t.data()->size() != n * 4) {
      return fail("constant input " + std::to_string(i) + " holds " + std::to_string(t.data()->size()) +
                  " bytes, its shape needs " + std::to_string(n * 4));
    }
    out_->operands.push_back(input(i));
    return true;
  }
  bool constant_f32_scalar(size_t i, float* v) {
    const gfb::Tensor& t = g_.tensor(input(i));
    if (t.data() == nullptr || t.parameter() != nullptr || g_.is_input[static_cast<size_t>(input(i))] ||
        t.dtype() != gfb::DType::f32 || t.data()->size() != 4) {
      return fail("input " + std::to_string(i) + " must be an inline f32 scalar constant");
    }
    std::memcpy(v, t.data()->data(), 4);
    return true;
  }
  // The one f32 output (further optional outputs must be left out).
  bool output() {
    const auto* outs = node_.outputs();
    if (outs == nullptr || outs->size() == 0 || outs->Get(0) == -1) return fail("has no output");
    for (uint32_t i = 1; i < outs->size(); ++i) {
      if (outs->Get(i) != -1) return fail("optional output " + std::to_string(i) + " is not supported");
    }
    const int32_t o = outs->Get(0);
    const gfb::Tensor& t = g_.tensor(o);
    if (t.dtype() != gfb::DType::f32) return fail(std::string("output is ") + gfb::EnumNameDType(t.dtype()));
    if (t.data() != nullptr || t.parameter() != nullptr || g_.is_input[static_cast<size_t>(o)]) {
      return fail("output tensor is a constant or a graph input");
    }
    uint64_t n = 0;
    if (!element_count(g_.shape(o), &n) || g_.shape(o).size() > kMaxRank) {
      return fail("output shape " + shape_text(g_.shape(o)) + " is beyond vulkan-compute's limits");
    }
    out_->output = o;
    return true;
  }
  Shape output_shape() const { return g_.shape(out_->output); }
  Lowered& out() { return *out_; }

 private:
  const Graph& g_;
  const gfb::Node& node_;
  Lowered* out_;
  std::string* why_;
  int64_t opset_;
};

// Row-major element strides of `s`.
std::vector<uint64_t> contiguous_strides(const Shape& s);

// The output shape equals input 0's; a refusal otherwise.
bool same_shape_out(Lowering& l);

bool lower_softmax(Lowering& l, bool log_softmax);
bool lower_conv(Lowering& l);
bool lower_pool(Lowering& l, const std::string& op);
bool lower_reduce(Lowering& l, const std::string& op);
bool lower_layernorm(Lowering& l);
bool lower_slice(Lowering& l);
bool lower_concat(Lowering& l);
bool lower_resize(Lowering& l);
bool lower_conv_transpose(Lowering& l);

}  // namespace loom::vulkan::lowering
