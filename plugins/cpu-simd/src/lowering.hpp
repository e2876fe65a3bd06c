// The Lowering helper that lower.cpp, lower_data.cpp and lower_typed.cpp
// share: one graph.fbs node's attributes, operands and output, each accessor
// failing with the reason the node is refused. A node usually lowers to one
// blob node; Split lowers to one Slice per output.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "compile.hpp"

namespace loom::cpu_simd::lowering {

using Shape = std::vector<int64_t>;

// (name, first opset that has the attribute)
using AllowList = std::initializer_list<std::pair<const char*, int64_t>>;

// Whether a blob tensor may have this dtype (format 4: f32, bool, i32, i64).
inline bool blob_dtype_ok(gfb::DType d) {
  return d == gfb::DType::f32 || d == gfb::DType::bool_ || d == gfb::DType::i32 || d == gfb::DType::i64;
}

// The blob dtype of a graph.fbs dtype (the enums share their values).
inline loom_dtype_t blob_dtype(gfb::DType d) { return static_cast<loom_dtype_t>(d); }

class Lowering {
 public:
  // `out` gets one blob node (more with add_node).
  Lowering(const GraphView& g, const gfb::Node& node, std::vector<BlobNode>* out, std::string* why)
      : g_(g), node_(node), out_(out), why_(why), opset_(node.opset()) {
    out_->assign(1, BlobNode{});
  }

  int64_t opset() const { return opset_; }

  bool fail(std::string why) {
    *why_ = std::move(why);
    return false;
  }

  // --- attributes

  bool check_attributes(AllowList allowed) {
    const auto* attrs = node_.attributes();
    if (attrs == nullptr) return true;
    for (uint32_t i = 0; i < attrs->size(); ++i) {
      const std::string name = attrs->Get(i)->name()->str();
      bool ok = false;
      for (const auto& [n, since] : allowed) ok = ok || (name == n && opset_ >= since);
      if (!ok) return fail("attribute '" + name + "' is not supported at opset " + std::to_string(opset_));
      for (uint32_t j = 0; j < i; ++j) {
        if (attrs->Get(j)->name()->str() == name) return fail("attribute '" + name + "' appears twice");
      }
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
  bool has(const char* name) const { return find(name) != nullptr; }

  bool get_int(const char* name, int64_t def, int64_t* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::int_) return fail(std::string("attribute '") + name + "' is not an int");
    *v = a->i();
    return true;
  }
  bool get_float(const char* name, float def, float* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::float_) return fail(std::string("attribute '") + name + "' is not a float");
    *v = a->f();
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
  bool get_string(const char* name, const char* def, std::string* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::string) return fail(std::string("attribute '") + name + "' is not a string");
    *v = a->s() == nullptr ? "" : a->s()->str();
    return true;
  }

  // --- operands

  size_t input_count() const { return node_.inputs() == nullptr ? 0 : node_.inputs()->size(); }
  bool present(size_t i) const { return i < input_count() && node_.inputs()->Get(i) != -1; }
  int32_t input(size_t i) const { return node_.inputs()->Get(static_cast<uint32_t>(i)); }
  Shape shape_of(size_t i) const { return g_.shape(input(i)); }

  bool check_inputs(size_t min, size_t max) {
    const size_t n = input_count();
    if (n < min || n > max) {
      return fail("has " + std::to_string(n) + " inputs, expected " + std::to_string(min) +
                  (min == max ? "" : " to " + std::to_string(max)));
    }
    return true;
  }

  gfb::DType dtype_of(size_t i) const { return g_.tensor(input(i)).dtype(); }

  // A tensor the kernel reads at run time (graph input, inline constant or
  // an earlier node's output): f32, or with `any_dtype` any blob dtype
  // (blob_dtype_ok); inline constants must be f32 (the blob embeds no others).
  bool data(size_t i, bool any_dtype = false) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const int32_t t = input(i);
    const gfb::Tensor& tensor = g_.tensor(t);
    if (any_dtype ? !blob_dtype_ok(tensor.dtype()) : tensor.dtype() != gfb::DType::f32) {
      return fail("input " + std::to_string(i) + " is " + gfb::EnumNameDType(tensor.dtype()) +
                  (any_dtype ? "; cpu-simd runs f32, bool, i32 and i64" : "; cpu-simd runs f32 only here"));
    }
    if (tensor.data() != nullptr && !g_.is_input[static_cast<size_t>(t)] &&
        tensor.dtype() != gfb::DType::f32) {
      return fail("input " + std::to_string(i) + " is an inline " + gfb::EnumNameDType(tensor.dtype()) +
                  " constant; cpu-simd embeds f32 constants only");
    }
    if (!shape_ok(g_.shape(t), "input " + std::to_string(i))) return false;
    if (tensor.data() != nullptr && !g_.is_input[static_cast<size_t>(t)]) {
      uint64_t elements = 0;
      element_count(g_.shape(t), &elements);
      if (tensor.data()->size() != elements * sizeof(float)) {
        return fail("constant input " + std::to_string(i) + " holds " +
                    std::to_string(tensor.data()->size()) + " bytes, its shape needs " +
                    std::to_string(elements * sizeof(float)));
      }
    }
    node().inputs.push_back(static_cast<uint32_t>(t));
    return true;
  }

  // The raw bytes of an inline constant input of `dtype` and `count`
  // elements (count < 0: any); null after fail().
  const uint8_t* constant(size_t i, gfb::DType dtype, size_t elem_size, int64_t count,
                          uint64_t* elements) {
    const gfb::Tensor& tensor = g_.tensor(input(i));
    const std::string where = "input " + std::to_string(i);
    if (tensor.data() == nullptr || tensor.parameter() != nullptr || g_.is_input[input(i)]) {
      fail(where + " must be an inline constant");
      return nullptr;
    }
    if (tensor.dtype() != dtype) {
      fail(where + " is " + std::string(gfb::EnumNameDType(tensor.dtype())) + ", expected " +
           gfb::EnumNameDType(dtype));
      return nullptr;
    }
    if (!element_count(g_.shape(input(i)), elements) ||
        tensor.data()->size() != *elements * elem_size ||
        (count >= 0 && *elements != static_cast<uint64_t>(count))) {
      fail(where + " has the wrong size");
      return nullptr;
    }
    return tensor.data()->data();
  }
  bool constant_f32_scalar(size_t i, float* v) {
    uint64_t n = 0;
    const uint8_t* p = constant(i, gfb::DType::f32, 4, 1, &n);
    if (p == nullptr) return false;
    std::memcpy(v, p, 4);
    return true;
  }
  bool constant_i64s(size_t i, Shape* v) {
    uint64_t n = 0;
    const uint8_t* p = constant(i, gfb::DType::i64, 8, -1, &n);
    if (p == nullptr) return false;
    if (g_.shape(input(i)).size() != 1) return fail("input " + std::to_string(i) + " must be 1-D");
    v->resize(static_cast<size_t>(n));
    if (n != 0) std::memcpy(v->data(), p, static_cast<size_t>(n) * 8);
    return true;
  }
  // An inline f32 constant, 1-D.
  bool constant_f32s(size_t i, std::vector<float>* v) {
    uint64_t n = 0;
    const uint8_t* p = constant(i, gfb::DType::f32, 4, -1, &n);
    if (p == nullptr) return false;
    if (g_.shape(input(i)).size() != 1) return fail("input " + std::to_string(i) + " must be 1-D");
    v->resize(static_cast<size_t>(n));
    if (n != 0) std::memcpy(v->data(), p, static_cast<size_t>(n) * 4);
    return true;
  }
  // An inline i64 or i32 constant of any shape (Gather's indices), at most
  // 2^20 values.
  bool constant_indices(size_t i, Shape* values, Shape* shape) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const gfb::DType dtype = g_.tensor(input(i)).dtype();
    const bool wide = dtype == gfb::DType::i64;
    if (!wide && dtype != gfb::DType::i32) {
      return fail("input " + std::to_string(i) + " is " + gfb::EnumNameDType(dtype) + ", expected i64 or i32");
    }
    uint64_t n = 0;
    const uint8_t* p = constant(i, dtype, wide ? 8 : 4, -1, &n);
    if (p == nullptr) return false;
    if (n > (uint64_t{1} << 20)) return fail("input " + std::to_string(i) + " holds more than 2^20 indices");
    *shape = g_.shape(input(i));
    values->resize(static_cast<size_t>(n));
    for (size_t k = 0; k < n; ++k) {
      if (wide) {
        std::memcpy(&(*values)[k], p + 8 * k, 8);
      } else {
        int32_t v32 = 0;
        std::memcpy(&v32, p + 4 * k, 4);
        (*values)[k] = v32;
      }
    }
    return true;
  }
  bool constant_bool(size_t i, bool* v) {
    uint64_t n = 0;
    const uint8_t* p = constant(i, gfb::DType::bool_, 1, 1, &n);
    if (p == nullptr) return false;
    *v = p[0] != 0;
    return true;
  }

  bool shape_ok(const Shape& s, const std::string& what) {
    uint64_t ignored = 0;
    if (s.size() > kMaxRank || !element_count(s, &ignored)) {
      return fail(what + " has shape " + detail::shape_string(s) + ", beyond cpu-simd's limits");
    }
    return true;
  }

  // The node's one output; the operator's optional further outputs (up to
  // `allowed_outputs` entries in all) must be left out (-1). Of `dtype`.
  bool output(size_t allowed_outputs, gfb::DType dtype = gfb::DType::f32) {
    const auto* outs = node_.outputs();
    if (outs == nullptr || outs->size() == 0 || outs->Get(0) == -1) return fail("has no output");
    if (outs->size() > allowed_outputs) {
      return fail("has " + std::to_string(outs->size()) + " outputs, expected at most " +
                  std::to_string(allowed_outputs));
    }
    for (uint32_t i = 1; i < outs->size(); ++i) {
      if (outs->Get(i) != -1) return fail("optional output " + std::to_string(i) + " is not supported");
    }
    if (!output_ok(0, dtype)) return false;
    node().outputs = {static_cast<uint32_t>(outs->Get(0))};
    return true;
  }
  // Output `i` (present) is a tensor of `dtype` that a node may write.
  bool output_ok(size_t i, gfb::DType dtype) {
    const std::string what = i == 0 ? "output" : "output " + std::to_string(i);
    const int32_t index = node_.outputs()->Get(static_cast<uint32_t>(i));
    if (index == -1) return fail(what + " is left out");
    const gfb::Tensor& t = g_.tensor(index);
    if (t.dtype() != dtype) {
      return fail(what + " is " + gfb::EnumNameDType(t.dtype()) + ", expected " + gfb::EnumNameDType(dtype));
    }
    if (t.data() != nullptr || t.parameter() != nullptr || g_.is_input[static_cast<size_t>(index)]) {
      return fail(what + " tensor is a constant or a graph input");
    }
    return shape_ok(g_.shape(index), what);
  }
  size_t output_count() const { return node_.outputs() == nullptr ? 0 : node_.outputs()->size(); }
  int32_t output_index(size_t i) const { return node_.outputs()->Get(static_cast<uint32_t>(i)); }
  Shape output_shape(size_t i = 0) const { return g_.shape(output_index(i)); }

  BlobNode& node() { return out_->front(); }
  // A further blob node (Split's second and later Slices).
  BlobNode& add_node() { return out_->emplace_back(); }

 private:
  const GraphView& g_;
  const gfb::Node& node_;
  std::vector<BlobNode>* out_;
  std::string* why_;
  int64_t opset_;
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

}  // namespace loom::cpu_simd::lowering
