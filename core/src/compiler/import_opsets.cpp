#include "compiler/import_opsets.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "onnx/onnx_pb.h"

namespace loom::compiler {

namespace {

bool op_in(std::string_view op, std::initializer_list<std::string_view> ops) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

AttributeDef* find_attr(graph::Node& node, std::string_view name) {
  for (AttributeDef& a : node.attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

void drop_attr(graph::Node& node, std::string_view name) {
  std::erase_if(node.attributes, [&](const AttributeDef& a) { return a.name == name; });
}

int64_t int_attr(graph::Node& node, std::string_view name, int64_t fallback) {
  const AttributeDef* a = find_attr(node, name);
  return a != nullptr && a->kind == AttributeKind::kInt ? a->i : fallback;
}

AttributeDef make_int_attr(std::string name, int64_t value) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = value;
  return a;
}

// The shape of input `k` when it is known at read time (a graph input or a
// constant); null otherwise.
const Shape* known_shape(const graph::Node& node, const graph::Graph& g, size_t k) {
  if (k >= node.inputs.size() || node.inputs[k] == graph::kNoTensor) return nullptr;
  const graph::Tensor& t = g.tensors[node.inputs[k]];
  if (t.dtype == DType::kInvalid) return nullptr;
  for (int64_t d : t.shape) {
    if (d < 0) return nullptr;
  }
  return &t.shape;
}

// The shape of input `k`, possibly with open dimensions (-1), when at least
// its rank is known at read time; null otherwise.
const Shape* known_rank(const graph::Node& node, const graph::Graph& g, size_t k) {
  if (k >= node.inputs.size() || node.inputs[k] == graph::kNoTensor) return nullptr;
  const graph::Tensor& t = g.tensors[node.inputs[k]];
  return t.dtype == DType::kInvalid ? nullptr : &t.shape;
}

// A copy of constant input `k` with a new shape (same elements).
Result<int32_t> reshaped_constant(const graph::Node& node, const graph::Graph& g, size_t k,
                                  Shape shape, const AddConstant& add_constant) {
  const graph::Tensor& t = g.tensors[node.inputs[k]];
  graph::Tensor copy{t.name + ":" + node.name + "_opset7", t.dtype, std::move(shape), t.data};
  return add_constant(std::move(copy));
}

// Add, Sub, ... before opset 7: `broadcast` 1 lets B broadcast to A, its
// dimensions lined up with A's from `axis` (default: A's last ones, which
// is what numpy broadcasting does).
Status legacy_broadcast(graph::Node& node, const graph::Graph& g, const std::string& where,
                        const AddConstant& add_constant) {
  const int64_t broadcast = int_attr(node, "broadcast", 0);
  const AttributeDef* axis_attr = find_attr(node, "axis");
  const bool has_axis = axis_attr != nullptr;
  const int64_t axis = has_axis ? axis_attr->i : 0;
  drop_attr(node, "broadcast");
  drop_attr(node, "axis");
  if (broadcast == 0 || !has_axis) return Status();
  // Only the ranks matter (an open-shape import leaves dimensions open).
  const Shape* a = known_rank(node, g, 0);
  const Shape* b = known_rank(node, g, 1);
  if (a == nullptr || b == nullptr) {
    return unimplemented(where + ": legacy broadcasting (opset " + std::to_string(node.opset) +
                         ", attribute 'axis' " + std::to_string(axis) +
                         ") needs the ranks of both operands at import, and one is computed by "
                         "another node");
  }
  const int64_t ra = static_cast<int64_t>(a->size()), rb = static_cast<int64_t>(b->size());
  if (axis < 0 || axis + rb > ra) {
    return invalid_argument(where + ": attribute 'axis' " + std::to_string(axis) +
                            " does not place B " + shape_to_string(*b) + " inside A " +
                            shape_to_string(*a));
  }
  if (axis + rb == ra) return Status();
  if (!g.tensors[node.inputs[1]].is_constant()) {
    return unimplemented(where + ": legacy broadcasting of B " + shape_to_string(*b) + " from axis " +
                         std::to_string(axis) + " of A " + shape_to_string(*a) +
                         " is supported only when B is a constant");
  }
  Shape padded = *b;
  padded.resize(static_cast<size_t>(ra - axis), 1);
  LOOM_ASSIGN_OR_RETURN(node.inputs[1], reshaped_constant(node, g, 1, std::move(padded), add_constant));
  return Status();
}

// Opsets 1-6 forms, rewritten to opset 7's (and the node's opset with them).
Status legacy_form(graph::Node& node, const graph::Graph& g, const std::string& where,
                   const AddConstant& add_constant) {
  const std::string& op = node.op_type;
  // An in-place hint of opsets 1-5, with no effect on the result.
  drop_attr(node, "consumed_inputs");
  if (op_in(op, {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater",
                 "Less"})) {
    LOOM_RETURN_IF_ERROR(legacy_broadcast(node, g, where, add_constant));
    node.opset = 7;
  } else if (op == "Gemm") {
    // C broadcasts to A*B from opset 7 on; a C that does not need it (the
    // only one `broadcast` 0 allowed) is the same either way.
    drop_attr(node, "broadcast");
    node.opset = 7;
  } else if (op == "BatchNormalization") {
    if (int_attr(node, "is_test", 0) == 0) {
      return unimplemented(where + ": attribute 'is_test' is 0 (training mode, opset " +
                           std::to_string(node.opset) +
                           "); Loom implements inference BatchNormalization only");
    }
    drop_attr(node, "is_test");
    node.opset = 7;
  } else if (op == "Dropout") {
    if (int_attr(node, "is_test", 0) == 0) {
      return unimplemented(where + ": attribute 'is_test' is 0 (random training-mode Dropout, opset " +
                           std::to_string(node.opset) + "); Loom implements inference Dropout only");
    }
    drop_attr(node, "is_test");
    node.opset = 7;
  } else if (op == "PRelu") {
    // A 1-D slope of X's channel count applies along axis 1; from opset 7
    // the slope broadcasts numpy-style, so give it trailing 1s.
    const Shape* x = known_shape(node, g, 0);
    const Shape* slope = known_shape(node, g, 1);
    if (x != nullptr && slope != nullptr && g.tensors[node.inputs[1]].is_constant() &&
        slope->size() == 1 && x->size() >= 2 && (*slope)[0] == (*x)[1] && (*slope)[0] != 1) {
      Shape padded(x->size() - 1, 1);
      padded[0] = (*slope)[0];
      LOOM_ASSIGN_OR_RETURN(node.inputs[1], reshaped_constant(node, g, 1, std::move(padded), add_constant));
      node.opset = 7;
    }
    // Otherwise the reference kernel applies the opset-6 rule itself.
  } else if (op == "Cast" && node.opset < 6) {
    AttributeDef* to = find_attr(node, "to");
    if (to != nullptr && to->kind == AttributeKind::kString) {
      ::onnx::TensorProto_DataType type{};
      if (!::onnx::TensorProto_DataType_Parse(to->s, &type)) {
        return invalid_argument(where + ": attribute 'to' names no ONNX type: '" + to->s + "'");
      }
      *to = make_int_attr("to", static_cast<int64_t>(type));
    }
    node.opset = 6;
  } else if (op == "Concat" && node.opset < 4) {
    // The axis was optional, 1 by default.
    if (find_attr(node, "axis") == nullptr) node.attributes.push_back(make_int_attr("axis", 1));
    node.opset = 4;
  } else if (op == "Reshape" && node.opset < 5) {
    const AttributeDef* shape = find_attr(node, "shape");
    if (shape == nullptr || node.inputs.size() != 1) {
      return invalid_argument(where + ": opset " + std::to_string(node.opset) +
                              " Reshape needs attribute 'shape' and one input");
    }
    const std::vector<int64_t> dims = shape->ints;
    auto bytes = std::make_shared<std::vector<std::byte>>(dims.size() * sizeof(int64_t));
    if (!dims.empty()) std::memcpy(bytes->data(), dims.data(), bytes->size());
    graph::Tensor t{node.name + ":shape", DType::kI64, Shape{static_cast<int64_t>(dims.size())},
                    std::move(bytes)};
    LOOM_ASSIGN_OR_RETURN(int32_t index, add_constant(std::move(t)));
    node.inputs.push_back(index);
    drop_attr(node, "shape");
    node.opset = 5;
  } else if (op == "Split" && node.opset < 2) {
    if (node.inputs.size() > 1) {
      return unimplemented(where + ": Split-1 with the split sizes as input 'split' is not supported");
    }
    node.opset = 2;
  } else if (op == "Pad" && node.opset < 2) {
    if (AttributeDef* pads = find_attr(node, "paddings")) pads->name = "pads";
    node.opset = 2;
  } else if ((op == "LpPool" || op == "GlobalLpPool") && node.opset < 2) {
    if (AttributeDef* p = find_attr(node, "p"); p != nullptr && p->kind == AttributeKind::kFloat) {
      if (p->f != static_cast<float>(static_cast<int64_t>(p->f))) {
        return unimplemented(where + ": attribute 'p' " + std::to_string(p->f) +
                             " is not an integer; Loom implements integer p");
      }
      *p = make_int_attr("p", static_cast<int64_t>(p->f));
    }
    node.opset = 2;
  } else if (op == "Upsample") {
    // Upsample-1: NCHW, 'height_scale' and 'width_scale'; 'bilinear'.
    const AttributeDef* h = find_attr(node, "height_scale");
    const AttributeDef* w = find_attr(node, "width_scale");
    if (h == nullptr || w == nullptr) {
      return invalid_argument(where + ": opset " + std::to_string(node.opset) +
                              " Upsample needs attributes 'height_scale' and 'width_scale'");
    }
    AttributeDef scales;
    scales.name = "scales";
    scales.kind = AttributeKind::kFloats;
    scales.floats = {1.0f, 1.0f, h->f, w->f};
    drop_attr(node, "height_scale");
    drop_attr(node, "width_scale");
    node.attributes.push_back(std::move(scales));
    node.opset = 7;
  } else if (op == "Tile" && node.opset < 6) {
    return unimplemented(where + ": Tile-1 (inputs 'tiles' and 'axis') is not supported; Loom "
                         "implements Tile from opset 6");
  }
  return Status();
}

// An attribute of opsets 18-21 that Loom does not implement, unless it has
// the value that means "as before".
struct NewAttribute {
  std::string_view op;
  std::string_view attribute;
  int64_t since;
  std::string_view what;
};

constexpr NewAttribute kUnimplementedAttributes[] = {
    {"LpPool", "ceil_mode", 18, "ceil mode"},
    {"QuantizeLinear", "block_size", 21, "blocked quantization"},
    {"DequantizeLinear", "block_size", 21, "blocked quantization"},
    {"QuantizeLinear", "output_dtype", 21, "an output type other than the zero point's"},
};

// The value of a new attribute that keeps the old behaviour.
bool has_default_value(const graph::Node& node, const AttributeDef& a) {
  if (a.kind != AttributeKind::kInt) return false;
  if (a.name == "output_dtype") {
    // The zero point's dtype decides; a matching output_dtype is the same.
    // Without a zero point the default is uint8 (ONNX TensorProto code 2).
    const bool has_zero_point = node.inputs.size() > 2 && node.inputs[2] != graph::kNoTensor;
    return a.i == 0 || has_zero_point || a.i == ::onnx::TensorProto_DataType_UINT8;
  }
  return a.i == 0;
}

Status new_form(graph::Node& node, const std::string& where) {
  for (const NewAttribute& n : kUnimplementedAttributes) {
    if (node.op_type != n.op || node.opset < n.since) continue;
    for (const AttributeDef& a : node.attributes) {
      if (a.name == n.attribute && !has_default_value(node, a)) {
        return unimplemented(where + ": attribute '" + a.name + "' (opset " + std::to_string(n.since) +
                             ", " + std::string(n.what) + ") is not supported");
      }
    }
  }
  return Status();
}

}  // namespace

Status check_default_opset(int64_t opset) {
  if (opset < kMinDefaultOpset || opset > kMaxDefaultOpset) {
    return unimplemented("the model uses opset " + std::to_string(opset) +
                         " of the default ONNX domain; Loom supports opsets " +
                         std::to_string(kMinDefaultOpset) + " to " + std::to_string(kMaxDefaultOpset));
  }
  return Status();
}

Status normalize_node_form(graph::Node& node, const graph::Graph& graph, const std::string& where,
                           const AddConstant& add_constant) {
  if (node.opset < 7) LOOM_RETURN_IF_ERROR(legacy_form(node, graph, where, add_constant));
  if (node.opset >= 18) LOOM_RETURN_IF_ERROR(new_form(node, where));
  return Status();
}

}  // namespace loom::compiler
