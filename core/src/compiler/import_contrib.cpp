#include "compiler/import_contrib.hpp"

#include <cstddef>
#include <memory>
#include <utility>

namespace loom::compiler {
namespace {

// A quantized operand: data, scale, zero point (kNoTensor when left out).
struct Quantized {
  int32_t x = graph::kNoTensor, scale = graph::kNoTensor, zero = graph::kNoTensor;
};

class Expander {
 public:
  Expander(const graph::Node& node, int64_t opset, const graph::Graph& graph, const std::string& where,
           const AddTensor& add, std::vector<graph::Node>* out)
      : node_(node), opset_(opset), graph_(graph), where_(where), add_(add), out_(out) {}

  Status run() {
    const std::string& op = node_.op_type;
    if (opset_ < 10) {
      return invalid_argument(where_ + ": the model imports default-domain opset " + std::to_string(opset_) +
                              "; its QuantizeLinear / DequantizeLinear form needs opset 10 or later");
    }
    size_t outputs = 0;
    for (int32_t t : node_.outputs) outputs += t != graph::kNoTensor ? 1 : 0;
    if (node_.outputs.size() != 1 || outputs != 1) {
      return invalid_argument(where_ + " has " + std::to_string(node_.outputs.size()) + " outputs, expected 1");
    }
    if (op == "QLinearAdd" || op == "QLinearMul") return binary(op == "QLinearAdd" ? "Add" : "Mul");
    if (op == "QLinearConcat") return concat();
    // One quantized input (X, X_scale, X_zero_point, Y_scale, Y_zero_point).
    if (op == "QLinearSigmoid") {
      LOOM_RETURN_IF_ERROR(check_attributes({}));
      return unary("Sigmoid", {});
    }
    if (op == "QLinearLeakyRelu") {
      LOOM_RETURN_IF_ERROR(check_attributes({"alpha"}));
      std::vector<AttributeDef> attrs;
      if (const AttributeDef* a = find("alpha")) {
        if (a->kind != AttributeKind::kFloat) return invalid_argument(where_ + ": attribute 'alpha' must be a float");
        attrs.push_back(*a);
      }
      return unary("LeakyRelu", std::move(attrs));
    }
    if (op == "QLinearGlobalAveragePool") {
      LOOM_RETURN_IF_ERROR(check_attributes({"channels_last"}));
      LOOM_RETURN_IF_ERROR(check_channels_first());
      return unary("GlobalAveragePool", {});
    }
    // QLinearAveragePool: AveragePool's attributes, less channels_last.
    LOOM_RETURN_IF_ERROR(check_attributes(
        {"auto_pad", "ceil_mode", "channels_last", "count_include_pad", "kernel_shape", "pads", "strides"}));
    LOOM_RETURN_IF_ERROR(check_channels_first());
    std::vector<AttributeDef> attrs;
    for (const AttributeDef& a : node_.attributes) {
      if (a.name != "channels_last") attrs.push_back(a);
    }
    return unary("AveragePool", std::move(attrs));
  }

 private:
  bool present(size_t i) const { return i < node_.inputs.size() && node_.inputs[i] != graph::kNoTensor; }

  const AttributeDef* find(const std::string& name) const {
    for (const AttributeDef& a : node_.attributes) {
      if (a.name == name) return &a;
    }
    return nullptr;
  }

  Status check_attributes(std::initializer_list<const char*> allowed) const {
    for (const AttributeDef& a : node_.attributes) {
      bool known = false;
      for (const char* name : allowed) known = known || a.name == name;
      if (!known) return invalid_argument(where_ + ": attribute '" + a.name + "' is not supported");
    }
    return Status();
  }

  // channels_last 1 (an NHWC tensor, which ONNX Runtime's own layout pass
  // writes, not its quantizer) is refused.
  Status check_channels_first() const {
    const AttributeDef* a = find("channels_last");
    if (a == nullptr) return Status();
    if (a->kind != AttributeKind::kInt || (a->i != 0 && a->i != 1)) {
      return invalid_argument(where_ + ": attribute 'channels_last' must be 0 or 1");
    }
    if (a->i == 1) return unimplemented(where_ + ": channels_last 1 (NHWC data) is not supported");
    return Status();
  }

  // The input count must be in [lo, hi] and the inputs `required` present.
  Status check_inputs(size_t lo, size_t hi, std::initializer_list<size_t> required) const {
    const size_t n = node_.inputs.size();
    if (n < lo || n > hi) {
      return invalid_argument(where_ + " has " + std::to_string(n) + " inputs, expected " + std::to_string(lo) +
                              (hi == lo ? "" : " to " + std::to_string(hi)));
    }
    for (size_t i : required) {
      if (!present(i)) return invalid_argument(where_ + ": input " + std::to_string(i) + " is required");
    }
    return Status();
  }

  Quantized operand(size_t first) const {
    return {node_.inputs[first], node_.inputs[first + 1], present(first + 2) ? node_.inputs[first + 2] : graph::kNoTensor};
  }

  Result<int32_t> tensor(const std::string& suffix) {
    return add_(graph::Tensor{node_.name + ":" + suffix, DType::kInvalid, {}, nullptr});
  }

  void emit(const std::string& op, const std::string& suffix, std::vector<int32_t> inputs, int32_t output,
            std::vector<AttributeDef> attrs = {}) {
    graph::Node n;
    n.name = node_.name + "/" + suffix;
    n.op_type = op;
    n.opset = opset_;
    n.inputs = std::move(inputs);
    n.outputs = {output};
    n.attributes = std::move(attrs);
    out_->push_back(std::move(n));
  }

  // DequantizeLinear of `q` into a new f32 tensor.
  Result<int32_t> dequantize(const Quantized& q, const std::string& what) {
    LOOM_ASSIGN_OR_RETURN(int32_t f, tensor(what + "_f32"));
    std::vector<int32_t> in = {q.x, q.scale};
    if (q.zero != graph::kNoTensor) in.push_back(q.zero);
    emit("DequantizeLinear", "dequantize_" + what, std::move(in), f);
    return f;
  }

  // The 8-bit type of the node's quantized data: a zero point's or an
  // input's dtype where the graph read so far knows it (a constant or a
  // graph input), else kInvalid.
  DType known_type(const std::vector<Quantized>& inputs) const {
    for (const Quantized& q : inputs) {
      for (int32_t t : {q.zero, q.x}) {
        if (t != graph::kNoTensor && graph_.tensors[static_cast<size_t>(t)].dtype != DType::kInvalid) {
          return graph_.tensors[static_cast<size_t>(t)].dtype;
        }
      }
    }
    return DType::kInvalid;
  }

  // QuantizeLinear of `f` to the node's output. A left-out output zero
  // point is 0 of the inputs' type (u8 needs none: QuantizeLinear's
  // default); a type the graph does not know yet is an error.
  Status quantize(int32_t f, int32_t scale, int32_t zero, const std::vector<Quantized>& inputs) {
    std::vector<int32_t> in = {f, scale};
    if (zero != graph::kNoTensor) {
      in.push_back(zero);
    } else {
      const DType type = known_type(inputs);
      if (type == DType::kInvalid) {
        return invalid_argument(where_ + ": the output zero point is left out and the type of the quantized "
                                "inputs is not known where the node is read (give the zero point)");
      }
      if (type != DType::kU8) {
        if (type != DType::kI8) {
          return invalid_argument(where_ + ": quantized inputs are " + std::string(dtype_name(type)) +
                                  ", expected u8 or i8");
        }
        auto bytes = std::make_shared<std::vector<std::byte>>(1, std::byte{0});
        LOOM_ASSIGN_OR_RETURN(int32_t z, add_(graph::Tensor{node_.name + ":output_zero_point", type, {}, bytes}));
        in.push_back(z);
      }
    }
    emit("QuantizeLinear", "quantize", std::move(in), node_.outputs[0]);
    return Status();
  }

  // A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point.
  Status binary(const std::string& op) {
    LOOM_RETURN_IF_ERROR(check_attributes({}));
    LOOM_RETURN_IF_ERROR(check_inputs(7, 8, {0, 1, 3, 4, 6}));
    const Quantized a = operand(0), b = operand(3);
    LOOM_ASSIGN_OR_RETURN(int32_t af, dequantize(a, "a"));
    LOOM_ASSIGN_OR_RETURN(int32_t bf, dequantize(b, "b"));
    LOOM_ASSIGN_OR_RETURN(int32_t cf, tensor("c_f32"));
    emit(op, op == "Add" ? "add" : "mul", {af, bf}, cf);
    return quantize(cf, node_.inputs[6], present(7) ? node_.inputs[7] : graph::kNoTensor, {a, b});
  }

  // X, X_scale, X_zero_point, Y_scale, Y_zero_point.
  Status unary(const std::string& op, std::vector<AttributeDef> attrs) {
    LOOM_RETURN_IF_ERROR(check_inputs(4, 5, {0, 1, 3}));
    const Quantized x = operand(0);
    LOOM_ASSIGN_OR_RETURN(int32_t xf, dequantize(x, "x"));
    LOOM_ASSIGN_OR_RETURN(int32_t yf, tensor("y_f32"));
    emit(op, "f32_" + op, {xf}, yf, std::move(attrs));
    return quantize(yf, node_.inputs[3], present(4) ? node_.inputs[4] : graph::kNoTensor, {x});
  }

  // Y_scale, Y_zero_point, then X, X_scale, X_zero_point per input; axis.
  Status concat() {
    LOOM_RETURN_IF_ERROR(check_attributes({"axis"}));
    const AttributeDef* axis = find("axis");
    if (axis == nullptr || axis->kind != AttributeKind::kInt) {
      return invalid_argument(where_ + ": attribute 'axis' (an int) is required");
    }
    const size_t n = node_.inputs.size();
    if (n < 5 || (n - 2) % 3 != 0) {
      return invalid_argument(where_ + " has " + std::to_string(n) +
                              " inputs, expected Y_scale, Y_zero_point and three per input (X, X_scale, X_zero_point)");
    }
    if (!present(0)) return invalid_argument(where_ + ": input 0 (Y_scale) is required");
    std::vector<Quantized> parts;
    std::vector<int32_t> floats;
    for (size_t i = 2; i < n; i += 3) {
      if (!present(i) || !present(i + 1)) {
        return invalid_argument(where_ + ": input " + std::to_string(present(i) ? i + 1 : i) + " is required");
      }
      parts.push_back(operand(i));
      LOOM_ASSIGN_OR_RETURN(int32_t f, dequantize(parts.back(), "x" + std::to_string(parts.size() - 1)));
      floats.push_back(f);
    }
    LOOM_ASSIGN_OR_RETURN(int32_t yf, tensor("y_f32"));
    emit("Concat", "concat", std::move(floats), yf, {*axis});
    return quantize(yf, node_.inputs[0], present(1) ? node_.inputs[1] : graph::kNoTensor, parts);
  }

  const graph::Node& node_;
  const int64_t opset_;
  const graph::Graph& graph_;
  const std::string& where_;
  const AddTensor& add_;
  std::vector<graph::Node>* out_;
};

}  // namespace

bool is_expanded_contrib(const graph::Node& node) {
  if (node.domain != kContribDomain) return false;
  const std::string& op = node.op_type;
  return op == "QLinearAdd" || op == "QLinearMul" || op == "QLinearSigmoid" || op == "QLinearLeakyRelu" ||
         op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool" || op == "QLinearConcat";
}

Status expand_contrib_node(const graph::Node& node, int64_t default_opset, const graph::Graph& graph,
                           const std::string& where, const AddTensor& add, std::vector<graph::Node>* out) {
  return Expander(node, default_opset, graph, where, add, out).run();
}

}  // namespace loom::compiler
