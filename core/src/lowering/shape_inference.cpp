// Shape inference and constant folding in one forward walk: folding a node
// gives the next nodes constant operands, which is what lets Reshape/Expand/
// Slice infer their shapes from the Shape->Gather->Concat chains exporters
// emit, so the two cannot run as separate passes.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lowering/graph_passes.hpp"

namespace loom::lowering::passes {

bool DeclaredType::is_static() const {
  if (dtype == DType::kInvalid || !has_shape) return false;
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
}

std::string describe(const graph::Node& node) {
  std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
  return "node '" + node.name + "' (" + op + ", opset " + std::to_string(node.opset) + ")";
}

namespace {

bool is_random(std::string_view op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomUniformLike" || op == "Multinomial" || op == "Bernoulli";
}

// The operand index a needs_constant() message names ("Op: operand 1 (...").
std::optional<size_t> operand_of(const Status& s) {
  const std::string& m = s.message();
  const size_t at = m.find("operand ");
  if (at == std::string::npos) return std::nullopt;
  size_t i = at + 8, v = 0;
  bool any = false;
  while (i < m.size() && m[i] >= '0' && m[i] <= '9' && v < 100000) {
    v = v * 10 + static_cast<size_t>(m[i] - '0');
    any = true;
    ++i;
  }
  return any ? std::optional<size_t>(v) : std::nullopt;
}

graph::ConstantBytes make_bytes(std::vector<std::byte> bytes) {
  return std::make_shared<const std::vector<std::byte>>(std::move(bytes));
}

std::vector<std::byte> i64_bytes(const std::vector<int64_t>& v) {
  std::vector<std::byte> out(v.size() * sizeof(int64_t));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Shape and Size need only their operand's shape, which is always static
// here, so they fold without a kernel (ONNX Shape-15 start/end included).
void fold_shape_or_size(graph::Graph& g, const graph::Node& node) {
  const Shape& in = g.tensors[node.inputs[0]].shape;
  graph::Tensor& out = g.tensors[node.outputs[0]];
  out.dtype = DType::kI64;
  if (node.op_type == "Size") {
    // Every shape here passed element_count(), so this does not overflow.
    const auto n = element_count(in);
    out.shape = {};
    out.data = make_bytes(i64_bytes({n.ok() ? static_cast<int64_t>(*n) : 0}));
    return;
  }
  const int64_t rank = static_cast<int64_t>(in.size());
  kernels::Attributes attrs(node.attributes, static_cast<int32_t>(node.opset));
  auto clamp = [&](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  const int64_t start = clamp(attrs.get_int("start", 0));
  const int64_t end = clamp(attrs.get_int("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(in[i]);
  out.shape = {static_cast<int64_t>(dims.size())};
  out.data = make_bytes(i64_bytes(dims));
}

Status check_declared(const graph::Graph& g, int32_t t, const DeclaredType& d,
                      const graph::Node& node) {
  const graph::Tensor& tensor = g.tensors[t];
  if (d.dtype != DType::kInvalid && d.dtype != tensor.dtype) {
    return invalid_argument("tensor '" + tensor.name + "' (output of " + describe(node) +
                            ") is declared " + std::string(dtype_name(d.dtype)) +
                            " in the model but infers as " +
                            std::string(dtype_name(tensor.dtype)));
  }
  if (!d.has_shape) return Status();
  bool match = d.dims.size() == tensor.shape.size();
  for (size_t i = 0; match && i < d.dims.size(); ++i) {
    match = d.dims[i] < 0 || d.dims[i] == tensor.shape[i];
  }
  if (!match) {
    std::string declared = "[";
    for (size_t i = 0; i < d.dims.size(); ++i) {
      declared += (i ? ", " : "") + (d.dims[i] < 0 ? std::string("?") : std::to_string(d.dims[i]));
    }
    declared += "]";
    return invalid_argument("tensor '" + tensor.name + "' (output of " + describe(node) +
                            ") is declared with shape " + declared +
                            " in the model but infers as " + shape_to_string(tensor.shape));
  }
  return Status();
}

// A node no reference kernel implements: kept with the model's output types
// when a target plugin takes it.
Status keep_for_plugin(graph::Graph& g, const graph::Node& node,
                       std::span<const DeclaredType> declared, const InferOptions& options) {
  const std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
  const std::string where = "(node '" + node.name + "', opset " + std::to_string(node.opset) + ")";
  if (!options.plugin_takes || !options.plugin_takes(node.domain, node.op_type, node.opset)) {
    return unimplemented("unsupported operator '" + op + "' " + where +
                         ": no reference kernel, and no target plugin takes it");
  }
  for (int32_t t : node.outputs) {
    const bool known = static_cast<size_t>(t) < declared.size() && declared[t].is_static();
    if (!known) {
      return unimplemented("operator '" + op + "' " + where +
                           " has no reference kernel; a target plugin takes it, but the model "
                           "does not state the static type of its output '" +
                           g.tensors[t].name + "' (value_info or graph output)");
    }
    if (!element_count(declared[t].dims).ok()) {
      return invalid_argument("output '" + g.tensors[t].name + "' of " + describe(node) +
                              " is declared with an impossible shape " +
                              shape_to_string(declared[t].dims));
    }
    g.tensors[t].dtype = declared[t].dtype;
    g.tensors[t].shape = declared[t].dims;
  }
  return Status();
}

// Runs the node's kernel on its constant operands; false when the outputs
// are too large to keep in the program (they are then computed at run time).
Result<bool> fold_node(graph::Graph& g, const graph::Node& node, const kernels::KernelInfo& k,
                       std::span<const kernels::TensorRef> in) {
  uint64_t total = 0;
  for (int32_t t : node.outputs) {
    LOOM_ASSIGN_OR_RETURN(uint64_t n, element_count(g.tensors[t].shape));
    const uint64_t es = dtype_size(g.tensors[t].dtype);
    if (es == 0 || n > kMaxFoldBytes / es) return false;
    total += n * es;
  }
  if (total > kMaxFoldBytes) return false;
  std::vector<std::vector<std::byte>> buffers(node.outputs.size());
  std::vector<kernels::TensorRef> out(node.outputs.size());
  for (size_t k2 = 0; k2 < node.outputs.size(); ++k2) {
    const graph::Tensor& t = g.tensors[node.outputs[k2]];
    buffers[k2].resize(static_cast<size_t>(*element_count(t.shape)) * dtype_size(t.dtype));
    out[k2] = kernels::TensorRef{t.dtype, t.shape, buffers[k2].data(), buffers[k2].size()};
  }
  Status s = k.run(in, out, kernels::Attributes(node.attributes, static_cast<int32_t>(node.opset)));
  if (!s.ok()) return s.with_context("folding " + describe(node));
  for (size_t k2 = 0; k2 < node.outputs.size(); ++k2) {
    g.tensors[node.outputs[k2]].data = make_bytes(std::move(buffers[k2]));
  }
  return true;
}

// Whether node `n` is the DequantizeLinear of a constant weight or bias of a
// QDQ group (see InferOptions::keep_qdq_weights): its output is read as
// input 1 or 2 of a Conv, ConvTranspose, MatMul or Gemm whose input 0 a DequantizeLinear
// writes and whose output, alone or through one Relu or Clip, only a
// QuantizeLinear reads.
bool is_qdq_weight(const graph::Graph& g, size_t n, const std::vector<std::vector<size_t>>& readers,
                   const std::vector<int64_t>& producer) {
  const graph::Node& dq = g.nodes[n];
  auto onnx = [](const graph::Node& node, std::string_view op) {
    return (node.domain.empty() || node.domain == "ai.onnx") && node.op_type == op;
  };
  if (!onnx(dq, "DequantizeLinear") || dq.outputs.size() != 1) return false;
  auto only_reader = [&](int32_t t) -> const graph::Node* {
    if (t == graph::kNoTensor || readers[t].size() != 1) return nullptr;
    for (int32_t o : g.outputs) {
      if (o == t) return nullptr;
    }
    return &g.nodes[readers[t][0]];
  };
  for (size_t r : readers[dq.outputs[0]]) {
    const graph::Node& core = g.nodes[r];
    if (!onnx(core, "Conv") && !onnx(core, "ConvTranspose") && !onnx(core, "MatMul") && !onnx(core, "Gemm")) {
      continue;
    }
    if (core.inputs.size() < 2 || core.outputs.size() != 1 || core.inputs[0] == dq.outputs[0]) continue;
    const int32_t x = core.inputs[0];
    if (x == graph::kNoTensor || producer[x] < 0 || !onnx(g.nodes[producer[x]], "DequantizeLinear")) continue;
    const graph::Node* next = only_reader(core.outputs[0]);
    if (next != nullptr && (onnx(*next, "Relu") || onnx(*next, "Clip")) && next->outputs.size() == 1) {
      next = only_reader(next->outputs[0]);
    }
    if (next != nullptr && onnx(*next, "QuantizeLinear")) return true;
  }
  return false;
}

}  // namespace

Status infer_and_fold(graph::Graph& g, std::span<const DeclaredType> declared,
                      const kernels::KernelRegistry& kernels, const InferOptions& options,
                      bool fold, InferStats& stats, std::optional<NeedsValue>& needs) {
  needs.reset();
  std::vector<bool> folded(g.nodes.size(), false);
  std::vector<std::vector<size_t>> readers;
  std::vector<int64_t> producer;
  if (options.keep_qdq_weights) {
    readers.resize(g.tensors.size());
    producer.assign(g.tensors.size(), -1);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (int32_t t : g.nodes[n].inputs) {
        if (t != graph::kNoTensor) readers[t].push_back(n);
      }
      for (int32_t t : g.nodes[n].outputs) {
        if (t != graph::kNoTensor) producer[t] = static_cast<int64_t>(n);
      }
    }
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const graph::Node& node = g.nodes[n];
    const bool onnx_op = node.domain.empty();
    bool all_constant = true;
    for (int32_t t : node.inputs) {
      if (t != graph::kNoTensor && !g.tensors[t].is_constant()) all_constant = false;
    }
    if (fold && onnx_op && (node.op_type == "Shape" || node.op_type == "Size") &&
        node.inputs.size() == 1 && node.inputs[0] != graph::kNoTensor &&
        node.outputs.size() == 1) {
      fold_shape_or_size(g, node);
      folded[n] = true;
      ++stats.folded_nodes;
      continue;
    }
    const kernels::KernelInfo* k = onnx_op ? kernels.find(node.op_type) : nullptr;
    if (k == nullptr || k->infer == nullptr) {
      LOOM_RETURN_IF_ERROR(keep_for_plugin(g, node, declared, options));
      continue;
    }

    std::vector<kernels::TensorRef> refs(node.inputs.size());
    std::vector<kernels::TensorType> types(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int32_t t = node.inputs[i];
      if (t == graph::kNoTensor) continue;
      const graph::Tensor& tensor = g.tensors[t];
      types[i].dtype = tensor.dtype;
      types[i].shape = tensor.shape;
      if (tensor.is_constant()) {
        refs[i] = kernels::TensorRef{tensor.dtype, tensor.shape,
                                     const_cast<std::byte*>(tensor.data->data()),
                                     tensor.data->size()};
        types[i].value = &refs[i];
      }
    }
    const kernels::Attributes attrs(node.attributes, static_cast<int32_t>(node.opset));
    auto inferred = k->infer(types, attrs);
    if (!inferred.ok()) {
      const Status& s = inferred.status();
      if (s.code() == StatusCode::kFailedPrecondition) {
        auto idx = operand_of(s);
        int32_t t = graph::kNoTensor;
        if (idx && *idx < node.inputs.size() && node.inputs[*idx] != graph::kNoTensor &&
            !g.tensors[node.inputs[*idx]].is_constant()) {
          t = node.inputs[*idx];
        } else {
          for (int32_t in : node.inputs) {
            if (in != graph::kNoTensor && !g.tensors[in].is_constant()) {
              t = in;
              break;
            }
          }
        }
        if (t != graph::kNoTensor) {
          needs = NeedsValue{n, t, s};
          return Status();
        }
      }
      return s.with_context(describe(node));
    }
    if (inferred->size() < node.outputs.size()) {
      // Optional outputs (training statistics, masks) the kernel does not
      // compute: unsupported rather than malformed.
      return unimplemented(describe(node) + " asks for " + std::to_string(node.outputs.size()) +
                           " outputs; its reference kernel computes " +
                           std::to_string(inferred->size()));
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int32_t t = node.outputs[o];
      graph::Tensor& out = g.tensors[t];
      out.dtype = (*inferred)[o].dtype;
      out.shape = (*inferred)[o].shape;
      if (dtype_size(out.dtype) == 0 || !element_count(out.shape).ok()) {
        return internal_error(describe(node) + ": output '" + out.name +
                              "' infers as an invalid type " +
                              std::string(dtype_name(out.dtype)) + " " +
                              shape_to_string(out.shape));
      }
      if (static_cast<size_t>(t) < declared.size()) {
        LOOM_RETURN_IF_ERROR(check_declared(g, t, declared[t], node));
      }
    }
    if (fold && all_constant && !is_random(node.op_type) && k->run != nullptr &&
        !(options.keep_qdq_weights && is_qdq_weight(g, n, readers, producer))) {
      LOOM_ASSIGN_OR_RETURN(bool done, fold_node(g, node, *k, refs));
      if (done) {
        folded[n] = true;
        ++stats.folded_nodes;
      }
    }
  }
  size_t w = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!folded[n]) {
      if (w != n) g.nodes[w] = std::move(g.nodes[n]);
      ++w;
    }
  }
  g.nodes.resize(w);
  return Status();
}

// The model inputs (not constant) that tensor `t` is computed from.
std::vector<int32_t> source_inputs(const graph::Graph& g, int32_t t) {
  std::vector<int32_t> producer(g.tensors.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int32_t o : g.nodes[n].outputs) producer[o] = static_cast<int32_t>(n);
  }
  std::vector<bool> seen(g.tensors.size(), false);
  std::vector<int32_t> stack{t}, found;
  while (!stack.empty()) {
    const int32_t x = stack.back();
    stack.pop_back();
    if (x == graph::kNoTensor || seen[x] || g.tensors[x].is_constant()) continue;
    seen[x] = true;
    if (producer[x] < 0) {
      if (std::find(g.inputs.begin(), g.inputs.end(), x) != g.inputs.end()) found.push_back(x);
      continue;
    }
    for (int32_t in : g.nodes[producer[x]].inputs) stack.push_back(in);
  }
  std::sort(found.begin(), found.end());
  return found;
}

bool binds_values_per_run(const graph::Tensor& input) {
  uint64_t count = 1;
  for (int64_t d : input.shape) {
    if (d < 0) return false;
    if (d == 0) return true;
    if (static_cast<uint64_t>(d) > kMaxValueInputElements / count) return false;
    count *= static_cast<uint64_t>(d);
  }
  return count <= kMaxValueInputElements;
}

}  // namespace loom::lowering::passes
