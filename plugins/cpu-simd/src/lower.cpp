// Node-by-node lowering of graph.fbs to the cpu-simd blob. A node is claimed
// only when every input it sees (op type, domain, opset, each attribute and
// its value, dtypes, constant operands, shapes) is one cpu-simd runs exactly
// as the ONNX operator of that opset specifies; anything else is refused with
// the reason, so the partitioner can place the node elsewhere.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "compile.hpp"

namespace loom::cpu_simd {
namespace {

using Shape = std::vector<int64_t>;

// (name, first opset that has the attribute)
using AllowList = std::initializer_list<std::pair<const char*, int64_t>>;

class Lowering {
 public:
  Lowering(const GraphView& g, const gfb::Node& node, BlobNode* out, std::string* why)
      : g_(g), node_(node), out_(out), why_(why), opset_(node.opset()) {}

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

  // An f32 tensor the kernel reads at run time (graph input, inline constant
  // or an earlier node's output).
  bool data(size_t i) {
    if (!present(i)) return fail("input " + std::to_string(i) + " is missing");
    const int32_t t = input(i);
    const gfb::Tensor& tensor = g_.tensor(t);
    if (tensor.dtype() != gfb::DType::f32) {
      return fail("input " + std::to_string(i) + " is " + gfb::EnumNameDType(tensor.dtype()) +
                  "; cpu-simd runs f32 only");
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
    out_->inputs.push_back(static_cast<uint32_t>(t));
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
  // `allowed_outputs` entries in all) must be left out (-1). f32.
  bool output(size_t allowed_outputs) {
    const auto* outs = node_.outputs();
    if (outs == nullptr || outs->size() == 0 || outs->Get(0) == -1) return fail("has no output");
    if (outs->size() > allowed_outputs) {
      return fail("has " + std::to_string(outs->size()) + " outputs, expected at most " +
                  std::to_string(allowed_outputs));
    }
    for (uint32_t i = 1; i < outs->size(); ++i) {
      if (outs->Get(i) != -1) return fail("optional output " + std::to_string(i) + " is not supported");
    }
    const gfb::Tensor& t = g_.tensor(outs->Get(0));
    if (t.dtype() != gfb::DType::f32) {
      return fail(std::string("output is ") + gfb::EnumNameDType(t.dtype()) + "; cpu-simd runs f32 only");
    }
    if (t.data() != nullptr || t.parameter() != nullptr || g_.is_input[outs->Get(0)]) {
      return fail("output tensor is a constant or a graph input");
    }
    if (!shape_ok(g_.shape(outs->Get(0)), "output")) return false;
    out_->outputs = {static_cast<uint32_t>(outs->Get(0))};
    return true;
  }
  Shape output_shape() const { return g_.shape(node_.outputs()->Get(0)); }

  BlobNode& node() { return *out_; }

 private:
  const GraphView& g_;
  const gfb::Node& node_;
  BlobNode* out_;
  std::string* why_;
  int64_t opset_;
};

// --------------------------------------------------------------- op lowering

bool lower_binary(Lowering& l, Op op, int64_t min_opset) {
  if (l.opset() < min_opset) return l.fail("opset " + std::to_string(l.opset()) + " uses legacy broadcasting");
  l.node().op = op;
  return l.check_attributes({}) && l.check_inputs(2, 2) && l.data(0) && l.data(1) && l.output(1);
}

bool lower_max_min(Lowering& l, Op op) {
  if (l.opset() < 8) return l.fail("opset " + std::to_string(l.opset()) + " has no broadcasting");
  if (!l.check_attributes({}) || !l.check_inputs(1, 2)) return false;
  if (l.input_count() == 1) {
    l.node().op = Op::kCopy;
    return l.data(0) && l.output(1) && (l.output_shape() == l.shape_of(0) || l.fail("output shape differs from the input's"));
  }
  l.node().op = op;
  return l.data(0) && l.data(1) && l.output(1);
}

bool lower_unary(Lowering& l, Op op, int64_t min_opset, AllowList attrs = {}) {
  if (l.opset() < min_opset) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  l.node().op = op;
  return l.check_attributes(attrs) && l.check_inputs(1, 1) && l.data(0) && l.output(1);
}

bool lower_copy_same(Lowering& l) {
  l.node().op = Op::kCopy;
  if (!l.check_attributes({}) || !l.check_inputs(1, 1) || !l.data(0) || !l.output(1)) return false;
  if (l.output_shape() != l.shape_of(0)) return l.fail("output shape differs from the input's");
  return true;
}

bool lower_clip(Lowering& l) {
  if (l.opset() < 6) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  BlobNode& n = l.node();
  n.op = Op::kClip;
  if (l.opset() < 11) {
    if (!l.check_attributes({{"min", 6}, {"max", 6}}) || !l.check_inputs(1, 1)) return false;
    if (!l.get_float("min", std::numeric_limits<float>::lowest(), &n.alpha) ||
        !l.get_float("max", std::numeric_limits<float>::max(), &n.beta)) {
      return false;
    }
  } else {
    if (!l.check_attributes({}) || !l.check_inputs(1, 3)) return false;
    n.alpha = -std::numeric_limits<float>::infinity();
    n.beta = std::numeric_limits<float>::infinity();
    if (l.present(1) && !l.constant_f32_scalar(1, &n.alpha)) return false;
    if (l.present(2) && !l.constant_f32_scalar(2, &n.beta)) return false;
  }
  return l.data(0) && l.output(1);
}

bool lower_dropout(Lowering& l) {
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  l.node().op = Op::kCopy;
  if (!l.check_attributes({{"ratio", 7}, {"seed", 12}})) return false;
  if (l.opset() >= 12 && l.has("ratio")) return l.fail("attribute 'ratio' is an input from opset 12");
  if (!l.check_inputs(1, l.opset() >= 12 ? 3 : 1)) return false;
  if (l.present(2)) {
    bool training = true;
    if (!l.constant_bool(2, &training)) return false;
    if (training) return l.fail("training_mode is true");
  }
  // The ratio only matters in training mode.
  return l.data(0) && l.output(2) &&
         (l.output_shape() == l.shape_of(0) || l.fail("output shape differs from the input's"));
}

bool lower_softmax(Lowering& l, Op op) {
  BlobNode& n = l.node();
  n.op = op;
  if (!l.check_attributes({{"axis", 1}}) || !l.check_inputs(1, 1)) return false;
  const bool legacy = l.opset() < 13;
  if (!l.get_int("axis", legacy ? 1 : -1, &n.axis)) return false;
  if (legacy) n.ints = {1};
  return l.data(0) && l.output(1);
}

bool lower_concat(Lowering& l) {
  if (l.opset() < 4) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  BlobNode& n = l.node();
  n.op = Op::kConcat;
  if (!l.check_attributes({{"axis", 4}}) || !l.check_inputs(1, 1u << 16)) return false;
  if (!l.has("axis")) return l.fail("attribute 'axis' is required");
  if (!l.get_int("axis", 0, &n.axis)) return false;
  if (n.axis < 0 && l.opset() < 11) return l.fail("negative axis before opset 11");
  for (size_t i = 0; i < l.input_count(); ++i) {
    if (!l.data(i)) return false;
  }
  return l.output(1);
}

bool lower_reshape(Lowering& l) {
  if (l.opset() < 5) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  l.node().op = Op::kCopy;
  int64_t allowzero = 0;
  if (!l.check_attributes({{"allowzero", 14}}) || !l.check_inputs(2, 2) ||
      !l.get_int("allowzero", 0, &allowzero)) {
    return false;
  }
  Shape spec;
  if (!l.present(1) || !l.constant_i64s(1, &spec)) {
    return l.present(1) ? false : l.fail("the shape input is missing");
  }
  if (!l.data(0) || !l.output(1)) return false;
  const Shape x = l.shape_of(0);
  uint64_t total = 0;
  element_count(x, &total);
  Shape target(spec.size());
  int64_t infer = -1;
  uint64_t known = 1;
  for (size_t d = 0; d < spec.size(); ++d) {
    int64_t v = spec[d];
    if (v == -1) {
      if (infer >= 0) return l.fail("shape has more than one -1");
      infer = static_cast<int64_t>(d);
      continue;
    }
    if (v == 0 && allowzero == 0) {
      if (d >= x.size()) return l.fail("shape copies dimension " + std::to_string(d) + " the input lacks");
      v = x[d];
    }
    if (v < 0) return l.fail("shape has the negative dimension " + std::to_string(v));
    target[d] = v;
    if (v != 0 && known > (uint64_t{1} << 60) / static_cast<uint64_t>(v)) return l.fail("shape is too large");
    known *= static_cast<uint64_t>(v);
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return l.fail("shape's -1 cannot be inferred");
    target[static_cast<size_t>(infer)] = static_cast<int64_t>(total / known);
  }
  if (target != l.output_shape()) {
    return l.fail("the shape input gives " + detail::shape_string(target) + ", the output is declared " +
                  detail::shape_string(l.output_shape()));
  }
  return true;
}

bool lower_flatten(Lowering& l) {
  l.node().op = Op::kCopy;
  int64_t axis = 1;
  if (!l.check_attributes({{"axis", 1}}) || !l.check_inputs(1, 1) || !l.get_int("axis", 1, &axis) ||
      !l.data(0) || !l.output(1)) {
    return false;
  }
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < 0 && l.opset() < 11) return l.fail("negative axis before opset 11");
  if (axis < -rank || axis > rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x[static_cast<size_t>(d)];
  if (l.output_shape() != Shape{outer, inner}) return l.fail("output shape differs from Flatten's rule");
  return true;
}

bool lower_transpose(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kTranspose;
  if (!l.check_attributes({{"perm", 1}}) || !l.check_inputs(1, 1) || !l.get_ints("perm", &n.ints) ||
      !l.data(0) || !l.output(1)) {
    return false;
  }
  if (!l.has("perm")) {
    const size_t rank = l.shape_of(0).size();
    for (size_t d = 0; d < rank; ++d) n.ints.push_back(static_cast<int64_t>(rank - 1 - d));
  }
  return true;
}

bool lower_gemm(Lowering& l) {
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " uses legacy broadcasting");
  BlobNode& n = l.node();
  n.op = Op::kGemm;
  int64_t ta = 0, tb = 0;
  if (!l.check_attributes({{"alpha", 1}, {"beta", 1}, {"transA", 1}, {"transB", 1}}) ||
      !l.check_inputs(l.opset() >= 11 ? 2 : 3, 3) || !l.get_float("alpha", 1.0f, &n.alpha) ||
      !l.get_float("beta", 1.0f, &n.beta) || !l.get_int("transA", 0, &ta) ||
      !l.get_int("transB", 0, &tb) || !l.data(0) || !l.data(1)) {
    return false;
  }
  n.trans_a = ta != 0;
  n.trans_b = tb != 0;
  if (l.present(2) && !l.data(2)) return false;
  return l.output(1);
}

// Conv, MaxPool, AveragePool: resolves auto_pad into explicit pads.
bool lower_window(Lowering& l, Op op) {
  BlobNode& n = l.node();
  n.op = op;
  const bool conv = op == Op::kConv;
  if (conv) {
    if (!l.check_attributes({{"auto_pad", 1}, {"dilations", 1}, {"group", 1}, {"kernel_shape", 1},
                             {"pads", 1}, {"strides", 1}}) ||
        !l.check_inputs(2, 3) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2))) {
      return false;
    }
  } else if (op == Op::kMaxPool) {
    if (!l.check_attributes({{"auto_pad", 1}, {"kernel_shape", 1}, {"pads", 1}, {"strides", 1},
                             {"storage_order", 8}, {"dilations", 10}, {"ceil_mode", 10}}) ||
        !l.check_inputs(1, 1) || !l.data(0)) {
      return false;
    }
  } else {
    if (!l.check_attributes({{"auto_pad", 1}, {"kernel_shape", 1}, {"pads", 1}, {"strides", 1},
                             {"count_include_pad", 7}, {"ceil_mode", 10}, {"dilations", 19}}) ||
        !l.check_inputs(1, 1) || !l.data(0)) {
      return false;
    }
  }
  if (!l.output(op == Op::kMaxPool ? 2 : 1)) return false;
  const Shape x = l.shape_of(0);
  if (x.size() < 3 || x.size() > static_cast<size_t>(2 + kMaxSpatial)) {
    return l.fail("input rank " + std::to_string(x.size()) + " is not 3 to " + std::to_string(2 + kMaxSpatial));
  }
  const size_t k = x.size() - 2;
  Shape kernel, strides, dilations, pads;
  std::string auto_pad;
  int64_t group = 1, ceil_mode = 0, count_include_pad = 0, storage_order = 0;
  if (!l.get_ints("kernel_shape", &kernel) || !l.get_ints("strides", &strides) ||
      !l.get_ints("dilations", &dilations) || !l.get_ints("pads", &pads) ||
      !l.get_string("auto_pad", "NOTSET", &auto_pad) || !l.get_int("group", 1, &group) ||
      !l.get_int("ceil_mode", 0, &ceil_mode) || !l.get_int("count_include_pad", 0, &count_include_pad) ||
      !l.get_int("storage_order", 0, &storage_order)) {
    return false;
  }
  if (conv) {
    const Shape w = l.shape_of(1);
    if (w.size() != x.size()) return l.fail("weight rank differs from the input's");
    const Shape from_w(w.begin() + 2, w.end());
    if (kernel.empty()) kernel = from_w;
    if (kernel != from_w) return l.fail("kernel_shape disagrees with the weight's shape");
  } else if (kernel.empty()) {
    return l.fail("attribute 'kernel_shape' is required");
  }
  if (strides.empty()) strides.assign(k, 1);
  if (dilations.empty()) dilations.assign(k, 1);
  if (kernel.size() != k || strides.size() != k || dilations.size() != k) {
    return l.fail("kernel_shape, strides and dilations need " + std::to_string(k) + " entries");
  }
  if ((ceil_mode != 0 && ceil_mode != 1) || (count_include_pad != 0 && count_include_pad != 1) ||
      (storage_order != 0 && storage_order != 1)) {
    return l.fail("ceil_mode, count_include_pad and storage_order must be 0 or 1");
  }
  for (size_t i = 0; i < k; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || kernel[i] > kMaxAttr ||
        strides[i] > kMaxAttr || dilations[i] > kMaxAttr) {
      return l.fail("kernel_shape, strides and dilations must be positive and < 2^31");
    }
  }
  Shape begin(k, 0), end(k, 0);
  if (auto_pad == "NOTSET") {
    if (!pads.empty()) {
      if (pads.size() != 2 * k) return l.fail("pads needs " + std::to_string(2 * k) + " entries");
      for (size_t i = 0; i < k; ++i) {
        begin[i] = pads[i];
        end[i] = pads[k + i];
        if (begin[i] < 0 || end[i] < 0 || begin[i] > kMaxAttr || end[i] > kMaxAttr) {
          return l.fail("pads must be >= 0 and < 2^31");
        }
      }
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!pads.empty()) return l.fail("pads together with auto_pad " + auto_pad);
    if (ceil_mode != 0) return l.fail("ceil_mode together with auto_pad " + auto_pad);
    for (size_t i = 0; i < k; ++i) {
      const int64_t out = (x[2 + i] + strides[i] - 1) / strides[i];
      const int64_t span = (kernel[i] - 1) * dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - x[2 + i]);
      begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    }
  } else if (auto_pad == "VALID") {
    if (!pads.empty()) return l.fail("pads together with auto_pad VALID");
  } else {
    return l.fail("auto_pad '" + auto_pad + "' is unknown");
  }
  n.ints = {static_cast<int64_t>(k)};
  if (conv) {
    n.ints.push_back(group);
  } else {
    n.ints.push_back(ceil_mode);
    n.ints.push_back(count_include_pad);
  }
  for (const Shape* v : {&kernel, &strides, &dilations, &begin, &end}) {
    n.ints.insert(n.ints.end(), v->begin(), v->end());
  }
  return true;
}

bool lower_batch_norm(Lowering& l) {
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  BlobNode& n = l.node();
  n.op = Op::kBatchNorm;
  if (!l.check_attributes({{"epsilon", 1}, {"momentum", 1}, {"spatial", 7}, {"training_mode", 14}}) ||
      !l.check_inputs(5, 5) || !l.get_float("epsilon", 1e-5f, &n.alpha)) {
    return false;
  }
  if (l.opset() >= 9 && l.has("spatial")) return l.fail("attribute 'spatial' was removed in opset 9");
  int64_t spatial = 1, training = 0;
  if (!l.get_int("spatial", 1, &spatial) || !l.get_int("training_mode", 0, &training)) return false;
  if (spatial != 1) return l.fail("spatial = 0 is not supported");
  if (training != 0) return l.fail("training_mode is not supported");
  for (size_t i = 0; i < 5; ++i) {
    if (!l.data(i)) return false;
  }
  // Opsets before 14 list up to four training outputs, which must be left out.
  return l.output(l.opset() >= 14 ? 3 : 5);
}

// ReduceMean, ReduceSum, ReduceMax, ReduceMin: axes from the attribute or,
// from opset 13 (ReduceSum) / 18 (the others), from an inline constant
// input; no axes reduce everything unless noop_with_empty_axes. A reduction
// over an empty axis (whose ONNX result is 0, NaN or an infinity depending
// on the operator) is refused.
bool lower_reduce(Lowering& l, Op op) {
  BlobNode& n = l.node();
  n.op = op;
  const int64_t input_axes_from = op == Op::kReduceSum ? 13 : 18;
  const bool axes_input = l.opset() >= input_axes_from;
  if (!l.check_attributes({{"axes", 1}, {"keepdims", 1}, {"noop_with_empty_axes", input_axes_from}}) ||
      !l.check_inputs(1, axes_input ? 2 : 1)) {
    return false;
  }
  if (axes_input && l.has("axes")) {
    return l.fail("attribute 'axes' is an input from opset " + std::to_string(input_axes_from));
  }
  int64_t keepdims = 1, noop = 0;
  Shape axes;
  if (!l.get_int("keepdims", 1, &keepdims) || !l.get_int("noop_with_empty_axes", 0, &noop) ||
      !l.get_ints("axes", &axes)) {
    return false;
  }
  if ((keepdims != 0 && keepdims != 1) || (noop != 0 && noop != 1)) {
    return l.fail("keepdims and noop_with_empty_axes must be 0 or 1");
  }
  if (axes_input && l.present(1) && !l.constant_i64s(1, &axes)) return false;
  if (!l.data(0) || !l.output(1)) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axes.empty() && noop == 1) {
    n.op = Op::kCopy;
    return l.output_shape() == x || l.fail("output shape differs from the input's");
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<bool> seen(x.size(), false);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    seen[static_cast<size_t>(a)] = true;
    if (x[static_cast<size_t>(a)] == 0) return l.fail("reduced axis " + std::to_string(a) + " is empty");
  }
  if (axes.empty()) {  // a scalar: nothing to reduce
    n.op = Op::kCopy;
    return l.output_shape() == x || l.fail("output shape differs from the input's");
  }
  std::sort(axes.begin(), axes.end());
  n.ints = {keepdims};
  n.ints.insert(n.ints.end(), axes.begin(), axes.end());
  return true;
}

// Gather with indices that are an inline i64 or i32 constant (what exporters
// write for x[:, 0] and friends); negative indices count from the end.
bool lower_gather(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kGather;
  int64_t axis = 0;
  if (!l.check_attributes({{"axis", 1}}) || !l.check_inputs(2, 2) || !l.get_int("axis", 0, &axis)) {
    return false;
  }
  Shape values, index_shape;
  if (!l.constant_indices(1, &values, &index_shape) || !l.data(0) || !l.output(1)) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  if (x.size() + index_shape.size() > kMaxRank + 1) return l.fail("the output rank exceeds " + std::to_string(kMaxRank));
  const int64_t extent = x[static_cast<size_t>(axis)];
  for (int64_t& v : values) {
    if (v < -extent || v >= extent) {
      return l.fail("index " + std::to_string(v) + " is outside axis " + std::to_string(axis) +
                    " of extent " + std::to_string(extent));
    }
    if (v < 0) v += extent;
  }
  n.axis = axis;
  n.ints = {static_cast<int64_t>(index_shape.size())};
  n.ints.insert(n.ints.end(), index_shape.begin(), index_shape.end());
  n.ints.insert(n.ints.end(), values.begin(), values.end());
  return true;
}

enum class ResizeCoord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn };

// Where output position `o` of an axis resized from `in` to `out` elements
// (factor `scale`) samples the input, in input coordinates.
double resize_source(ResizeCoord coord, double scale, int64_t in, int64_t out, int64_t o) {
  const double p = static_cast<double>(o);
  switch (coord) {
    case ResizeCoord::kHalfPixel: return (p + 0.5) / scale - 0.5;
    case ResizeCoord::kPytorchHalfPixel: return out > 1 ? (p + 0.5) / scale - 0.5 : -0.5;
    case ResizeCoord::kAlignCorners:
      return out > 1 ? p * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    case ResizeCoord::kAsymmetric: return p / scale;
    case ResizeCoord::kTfHalfPixelForNn: return (p + 0.5) / scale;
  }
  return 0.0;
}

int64_t resize_clamp(double v, int64_t in) {
  if (!(v > 0)) return 0;
  return v >= static_cast<double>(in - 1) ? in - 1 : static_cast<int64_t>(v);
}

// Resize from opset 11: nearest (any nearest_mode) or linear (separable over
// every resized axis), the coordinate modes half_pixel, pytorch_half_pixel,
// align_corners, asymmetric and tf_half_pixel_for_nn, constant scales or
// sizes (with axes from opset 18). The sampling positions are computed here
// once, in double precision, into the blob's tap table. Refused: cubic,
// tf_crop_and_resize, half_pixel_symmetric, antialias, exclude_outside,
// keep_aspect_ratio_policy other than stretch, align_corners with a scale
// that does not give a whole output length, and align_corners or
// pytorch_half_pixel shrinking an axis to one element (where ONNX's
// reference and its formula disagree).
bool lower_resize(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kResize;
  if (l.opset() < 11) return l.fail("Resize before opset 11 is not supported");
  std::string mode, coord_name, rounding, policy;
  int64_t antialias = 0, exclude_outside = 0;
  float cubic_a = 0, extrapolation = 0;
  Shape axes;
  if (!l.check_attributes({{"coordinate_transformation_mode", 11}, {"cubic_coeff_a", 11},
                           {"exclude_outside", 11}, {"extrapolation_value", 11}, {"mode", 11},
                           {"nearest_mode", 11}, {"antialias", 18}, {"axes", 18},
                           {"keep_aspect_ratio_policy", 18}}) ||
      !l.check_inputs(1, 4) || !l.get_string("mode", "nearest", &mode) ||
      !l.get_string("coordinate_transformation_mode", "half_pixel", &coord_name) ||
      !l.get_string("nearest_mode", "round_prefer_floor", &rounding) ||
      !l.get_string("keep_aspect_ratio_policy", "stretch", &policy) ||
      !l.get_int("antialias", 0, &antialias) || !l.get_int("exclude_outside", 0, &exclude_outside) ||
      !l.get_float("cubic_coeff_a", -0.75f, &cubic_a) ||
      !l.get_float("extrapolation_value", 0.0f, &extrapolation) || !l.get_ints("axes", &axes)) {
    return false;
  }
  const bool linear = mode == "linear";
  if (!linear && mode != "nearest") return l.fail("mode " + mode + " is not supported (nearest and linear are)");
  ResizeCoord coord;
  if (coord_name == "half_pixel") coord = ResizeCoord::kHalfPixel;
  else if (coord_name == "pytorch_half_pixel") coord = ResizeCoord::kPytorchHalfPixel;
  else if (coord_name == "align_corners") coord = ResizeCoord::kAlignCorners;
  else if (coord_name == "asymmetric") coord = ResizeCoord::kAsymmetric;
  else if (coord_name == "tf_half_pixel_for_nn") coord = ResizeCoord::kTfHalfPixelForNn;
  else return l.fail("coordinate_transformation_mode " + coord_name + " is not supported");
  if (rounding != "round_prefer_floor" && rounding != "round_prefer_ceil" && rounding != "floor" &&
      rounding != "ceil") {
    return l.fail("nearest_mode " + rounding + " is unknown");
  }
  if (antialias != 0) return l.fail("antialias is not supported");
  if (exclude_outside != 0) return l.fail("exclude_outside is not supported");
  if (policy != "stretch") return l.fail("keep_aspect_ratio_policy " + policy + " is not supported");
  if (!l.data(0) || !l.output(1)) return false;
  const Shape x = l.shape_of(0), y = l.output_shape();
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0 || y.size() != x.size()) return l.fail("X and Y must have the same rank, at least 1");
  for (int64_t d : x) {
    if (d < 1 || d > kMaxAttr) return l.fail("input shape " + detail::shape_string(x) + " has an empty or huge axis");
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<bool> named(x.size(), false);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (named[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    named[static_cast<size_t>(a)] = true;
  }
  auto given = [&](size_t i) { return l.present(i) && l.shape_of(i) != Shape{0}; };
  std::vector<float> scales;
  Shape sizes;
  if (given(2) && !l.constant_f32s(2, &scales)) return false;
  if (given(3) && !l.constant_i64s(3, &sizes)) return false;
  if (scales.empty() == sizes.empty()) return l.fail("exactly one of scales and sizes must be given");
  if ((scales.empty() ? sizes.size() : scales.size()) != axes.size()) {
    return l.fail("scales or sizes do not name every resized axis once");
  }
  std::vector<double> scale(x.size(), 1.0);
  Shape want = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const double in = static_cast<double>(x[a]);
    if (!scales.empty()) {
      const double s = scales[i];
      if (!(s > 0) || !std::isfinite(s) || in * s >= static_cast<double>(kMaxAttr)) {
        return l.fail("scale " + std::to_string(s) + " is not a positive finite factor");
      }
      scale[a] = s;
      want[a] = static_cast<int64_t>(std::floor(in * s));
    } else {
      if (sizes[i] < 1 || sizes[i] > kMaxAttr) return l.fail("size " + std::to_string(sizes[i]) + " is out of range");
      want[a] = sizes[i];
      scale[a] = static_cast<double>(sizes[i]) / in;
    }
  }
  if (want != y) {
    return l.fail("the output is declared " + detail::shape_string(y) + ", the scales give " +
                  detail::shape_string(want));
  }
  uint64_t positions = 0;
  for (int64_t d : y) positions += static_cast<uint64_t>(d);
  if (positions > (uint64_t{1} << 24)) return l.fail("the output is too large for a tap table");
  n.ints = {linear ? 1 : 0};
  n.ints.insert(n.ints.end(), y.begin(), y.end());
  for (size_t a = 0; a < x.size(); ++a) {
    const double length = scale[a] * static_cast<double>(x[a]);
    if (coord == ResizeCoord::kAlignCorners && std::fabs(length - static_cast<double>(y[a])) > 1e-9 * length) {
      return l.fail("align_corners with scale " + std::to_string(scale[a]) + " on axis " + std::to_string(a) +
                    " does not give a whole output length");
    }
    if ((coord == ResizeCoord::kAlignCorners || coord == ResizeCoord::kPytorchHalfPixel) && y[a] == 1 &&
        x[a] != 1) {
      return l.fail(coord_name + " shrinking axis " + std::to_string(a) + " to one element is not supported");
    }
    for (int64_t o = 0; o < y[a]; ++o) {
      const double c = resize_source(coord, scale[a], x[a], y[a], o);
      if (!std::isfinite(c)) return l.fail("a sampling position is not finite");
      const double lo = std::floor(c), frac = c - lo;
      if (linear) {
        n.ints.push_back(resize_clamp(lo, x[a]));
        n.ints.push_back(resize_clamp(lo + 1, x[a]));
        n.floats.push_back(static_cast<float>(frac));
      } else {
        bool up = false;
        if (frac != 0) {
          if (rounding == "round_prefer_floor") up = frac > 0.5;
          else if (rounding == "round_prefer_ceil") up = frac >= 0.5;
          else up = rounding == "ceil";
        }
        const int64_t i = resize_clamp(up ? lo + 1 : lo, x[a]);
        n.ints.push_back(i);
        n.ints.push_back(i);
      }
    }
  }
  return true;
}

// ConvTranspose with explicit pads (or auto_pad VALID) and output_padding
// below the stride; output_shape and auto_pad SAME_* are refused.
bool lower_conv_transpose(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kConvTranspose;
  if (!l.check_attributes({{"auto_pad", 1}, {"dilations", 1}, {"group", 1}, {"kernel_shape", 1},
                           {"output_padding", 1}, {"output_shape", 1}, {"pads", 1}, {"strides", 1}}) ||
      !l.check_inputs(2, 3) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2)) ||
      !l.output(1)) {
    return false;
  }
  if (l.has("output_shape")) return l.fail("attribute 'output_shape' is not supported");
  const Shape x = l.shape_of(0), w = l.shape_of(1);
  if (x.size() < 3 || x.size() > static_cast<size_t>(2 + kMaxSpatial) || w.size() != x.size()) {
    return l.fail("input rank " + std::to_string(x.size()) + " is not 3 to " + std::to_string(2 + kMaxSpatial) +
                  " or differs from the weight's");
  }
  const size_t k = x.size() - 2;
  Shape kernel, strides, dilations, pads, output_padding;
  std::string auto_pad;
  int64_t group = 1;
  if (!l.get_ints("kernel_shape", &kernel) || !l.get_ints("strides", &strides) ||
      !l.get_ints("dilations", &dilations) || !l.get_ints("pads", &pads) ||
      !l.get_ints("output_padding", &output_padding) || !l.get_string("auto_pad", "NOTSET", &auto_pad) ||
      !l.get_int("group", 1, &group)) {
    return false;
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return l.fail("auto_pad " + auto_pad + " is not supported");
  if (auto_pad == "VALID" && !pads.empty()) return l.fail("pads together with auto_pad VALID");
  const Shape from_w(w.begin() + 2, w.end());
  if (kernel.empty()) kernel = from_w;
  if (kernel != from_w) return l.fail("kernel_shape disagrees with the weight's shape");
  if (strides.empty()) strides.assign(k, 1);
  if (dilations.empty()) dilations.assign(k, 1);
  if (output_padding.empty()) output_padding.assign(k, 0);
  if (pads.empty()) pads.assign(2 * k, 0);
  if (strides.size() != k || dilations.size() != k || output_padding.size() != k || pads.size() != 2 * k) {
    return l.fail("strides, dilations, output_padding and pads need " + std::to_string(k) + " (pads " +
                  std::to_string(2 * k) + ") entries");
  }
  if (group < 1 || group > kMaxAttr || x[1] % group != 0 || w[0] != x[1]) {
    return l.fail("group " + std::to_string(group) + " does not divide the input channels or the weight");
  }
  for (size_t i = 0; i < k; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || strides[i] > kMaxAttr || dilations[i] > kMaxAttr ||
        pads[i] < 0 || pads[k + i] < 0 || pads[i] > kMaxAttr || pads[k + i] > kMaxAttr ||
        output_padding[i] < 0 || output_padding[i] >= strides[i]) {
      return l.fail("strides and dilations must be positive, pads >= 0, output_padding below the stride");
    }
  }
  n.ints = {static_cast<int64_t>(k), group};
  for (const Shape* v : {&kernel, &strides, &dilations}) n.ints.insert(n.ints.end(), v->begin(), v->end());
  n.ints.insert(n.ints.end(), pads.begin(), pads.end());  // begins, then ends
  n.ints.insert(n.ints.end(), output_padding.begin(), output_padding.end());
  return true;
}

// LayerNormalization (opset 17): normalizes over axes [axis, rank) with
// Scale and B of exactly those dims; stash_type 1 (f32) and the Mean and
// InvStdDev outputs left out.
bool lower_layer_norm(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kLayerNormalization;
  int64_t axis = -1, stash = 1;
  if (!l.check_attributes({{"axis", 17}, {"epsilon", 17}, {"stash_type", 17}}) || !l.check_inputs(2, 3) ||
      !l.get_int("axis", -1, &axis) || !l.get_float("epsilon", 1e-5f, &n.alpha) ||
      !l.get_int("stash_type", 1, &stash) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2)) ||
      !l.output(3)) {
    return false;
  }
  if (stash != 1) return l.fail("stash_type " + std::to_string(stash) + " is not supported (1 is)");
  const int64_t rank = static_cast<int64_t>(l.shape_of(0).size());
  if (axis < -rank || axis >= rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
  n.axis = axis < 0 ? axis + rank : axis;
  if (!(n.alpha >= 0.0f) || n.alpha > 1.0f) return l.fail("epsilon is not in [0, 1]");
  return true;
}

bool dispatch(Lowering& l, const std::string& op) {
  if (op == "Add") return lower_binary(l, Op::kAdd, 7);
  if (op == "Sub") return lower_binary(l, Op::kSub, 7);
  if (op == "Mul") return lower_binary(l, Op::kMul, 7);
  if (op == "Div") return lower_binary(l, Op::kDiv, 7);
  if (op == "Pow") return lower_binary(l, Op::kPow, 7);
  if (op == "PRelu") return lower_binary(l, Op::kPRelu, 7);
  if (op == "Max") return lower_max_min(l, Op::kMax);
  if (op == "Min") return lower_max_min(l, Op::kMin);
  if (op == "Relu") return lower_unary(l, Op::kRelu, 6);
  if (op == "Sigmoid") return lower_unary(l, Op::kSigmoid, 6);
  if (op == "Tanh") return lower_unary(l, Op::kTanh, 6);
  if (op == "Exp") return lower_unary(l, Op::kExp, 6);
  if (op == "Log") return lower_unary(l, Op::kLog, 6);
  if (op == "Sqrt") return lower_unary(l, Op::kSqrt, 6);
  if (op == "Neg") return lower_unary(l, Op::kNeg, 6);
  if (op == "Abs") return lower_unary(l, Op::kAbs, 6);
  if (op == "Reciprocal") return lower_unary(l, Op::kReciprocal, 6);
  if (op == "Floor") return lower_unary(l, Op::kFloor, 6);
  if (op == "Ceil") return lower_unary(l, Op::kCeil, 6);
  if (op == "Erf") return lower_unary(l, Op::kErf, 9);
  if (op == "Softplus") return lower_unary(l, Op::kSoftplus, 1);
  if (op == "HardSwish") return lower_unary(l, Op::kHardSwish, 14);
  BlobNode& n = l.node();
  if (op == "LeakyRelu") {
    return lower_unary(l, Op::kLeakyRelu, 6, {{"alpha", 1}}) && l.get_float("alpha", 0.01f, &n.alpha);
  }
  if (op == "Elu") {
    return lower_unary(l, Op::kElu, 6, {{"alpha", 1}}) && l.get_float("alpha", 1.0f, &n.alpha);
  }
  if (op == "Selu") {
    return lower_unary(l, Op::kSelu, 6, {{"alpha", 1}, {"gamma", 1}}) &&
           l.get_float("alpha", 1.67326319217681884765625f, &n.alpha) &&
           l.get_float("gamma", 1.05070102214813232421875f, &n.beta);
  }
  if (op == "HardSigmoid") {
    return lower_unary(l, Op::kHardSigmoid, 6, {{"alpha", 1}, {"beta", 1}}) &&
           l.get_float("alpha", 0.2f, &n.alpha) && l.get_float("beta", 0.5f, &n.beta);
  }
  if (op == "Clip") return lower_clip(l);
  if (op == "Identity") return lower_copy_same(l);
  if (op == "Dropout") return lower_dropout(l);
  if (op == "Softmax") return lower_softmax(l, Op::kSoftmax);
  if (op == "LogSoftmax") return lower_softmax(l, Op::kLogSoftmax);
  if (op == "Concat") return lower_concat(l);
  if (op == "Reshape") return lower_reshape(l);
  if (op == "Flatten") return lower_flatten(l);
  if (op == "Transpose") return lower_transpose(l);
  if (op == "MatMul") {
    n.op = Op::kMatMul;
    return l.check_attributes({}) && l.check_inputs(2, 2) && l.data(0) && l.data(1) && l.output(1);
  }
  if (op == "Gemm") return lower_gemm(l);
  if (op == "Conv") return lower_window(l, Op::kConv);
  if (op == "MaxPool") return lower_window(l, Op::kMaxPool);
  if (op == "AveragePool") return lower_window(l, Op::kAveragePool);
  if (op == "GlobalAveragePool") {
    n.op = Op::kGlobalAveragePool;
    return l.check_attributes({}) && l.check_inputs(1, 1) && l.data(0) && l.output(1);
  }
  if (op == "BatchNormalization") return lower_batch_norm(l);
  if (op == "ReduceMean") return lower_reduce(l, Op::kReduceMean);
  if (op == "ReduceSum") return lower_reduce(l, Op::kReduceSum);
  if (op == "ReduceMax") return lower_reduce(l, Op::kReduceMax);
  if (op == "ReduceMin") return lower_reduce(l, Op::kReduceMin);
  if (op == "Gather") return lower_gather(l);
  if (op == "Resize") return lower_resize(l);
  if (op == "ConvTranspose") return lower_conv_transpose(l);
  if (op == "LayerNormalization") return lower_layer_norm(l);
  return l.fail("operator " + op + " is not implemented by cpu-simd");
}

}  // namespace

bool lower_node(const GraphView& g, size_t index, BlobNode* out, std::string* why) {
  const gfb::Node& node = *g.graph->nodes()->Get(static_cast<uint32_t>(index));
  *out = BlobNode{};
  if (node.domain() != nullptr && node.domain()->size() != 0 && node.domain()->str() != "ai.onnx") {
    *why = "domain '" + node.domain()->str() + "' is not the default ONNX domain";
    return false;
  }
  if (node.opset() < 1) {
    *why = "opset " + std::to_string(node.opset()) + " is not valid";
    return false;
  }
  Lowering l(g, node, out, why);
  if (!dispatch(l, node.op_type()->str())) return false;
  // The output shape the operator's rule gives must be the declared one
  // (kCopy's shapes were checked by its lowering).
  std::vector<Shape> shapes;
  for (uint32_t t : out->inputs) shapes.push_back(g.shape(static_cast<int32_t>(t)));
  std::vector<const Shape*> in;
  for (const Shape& s : shapes) in.push_back(&s);
  Shape inferred;
  std::string error;
  if (!infer_output_shape(*out, in, &inferred, &error)) {
    *why = error;
    return false;
  }
  const Shape declared = g.shape(static_cast<int32_t>(out->outputs[0]));
  if (out->op != Op::kCopy && inferred != declared) {
    *why = "the output is declared " + detail::shape_string(declared) + " but the operator gives " +
           detail::shape_string(inferred);
    return false;
  }
  return true;
}

}  // namespace loom::cpu_simd
