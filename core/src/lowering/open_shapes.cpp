#include "lowering/open_shapes.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "graph/graph_codec.hpp"
#include "host/compile_entries.hpp"
#include "lowering/driver.hpp"
#include "program_file/function_layout.hpp"

namespace loom::lowering {

namespace {

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

std::vector<std::string> split_names(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// "dimension 2 ('height')".
std::string dim_label(const ValueDef& v, size_t d) {
  std::string s = "dimension " + std::to_string(d);
  if (d < v.dim_symbols.size() && !v.dim_symbols[d].empty()) s += " ('" + v.dim_symbols[d] + "')";
  return s;
}

}  // namespace

bool has_open_dims(const ValueDef& value) {
  return std::any_of(value.shape.begin(), value.shape.end(), [](int64_t d) { return d < 0; });
}

std::vector<passes::DeclaredType> kept_declared(const graph::Graph& graph,
                                                std::span<const passes::DeclaredType> declared) {
  const kernels::KernelRegistry reference = kernels::KernelRegistry::reference();
  std::vector<passes::DeclaredType> out(graph.tensors.size());
  for (const graph::Node& node : graph.nodes) {
    if (node.domain.empty() && reference.find(node.op_type) != nullptr) continue;
    for (int32_t t : node.outputs) {
      if (static_cast<size_t>(t) < declared.size() && declared[t].is_static()) out[t] = declared[t];
    }
  }
  return out;
}

Result<uint32_t> add_open_graph_artifact(EmittedProgram& out, const graph::Graph& graph,
                                         std::span<const passes::DeclaredType> declared,
                                         const std::vector<std::string>& targets, bool all_variants,
                                         const EmitOptions& options) {
  graph::Graph stored = graph;
  // What a binding decides carries no type in the artifact; only the model's
  // statements about ops without a reference kernel are kept.
  const kernels::KernelRegistry reference = kernels::KernelRegistry::reference();
  std::vector<bool> keep(stored.tensors.size(), false);
  for (const graph::Node& node : stored.nodes) {
    const bool has_kernel = node.domain.empty() && reference.find(node.op_type) != nullptr;
    if (has_kernel) continue;
    for (int32_t t : node.outputs) {
      keep[t] = static_cast<size_t>(t) < declared.size() && declared[t].is_static();
    }
  }
  for (size_t t = 0; t < stored.tensors.size(); ++t) {
    graph::Tensor& tensor = stored.tensors[t];
    if (tensor.is_constant()) continue;
    if (keep[t]) {
      tensor.dtype = declared[t].dtype;
      tensor.shape = declared[t].dims;
    } else if (std::find(stored.inputs.begin(), stored.inputs.end(), static_cast<int32_t>(t)) ==
               stored.inputs.end()) {
      tensor.dtype = DType::kInvalid;
      tensor.shape.clear();
    }
  }
  graph::EncodeOptions encode;
  encode.open = true;
  LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, graph::encode_graph(stored, encode));
  for (const graph::Tensor& t : stored.tensors) {
    if (t.is_constant() && graph::encodes_as_parameter(t, encode)) {
      LOOM_RETURN_IF_ERROR(add_parameter(out, t, options).status());
    }
  }
  ProgramDef& program = out.writer.program();
  ArtifactDef artifact;
  artifact.codegen_id = "loom";
  artifact.loader_key = std::string(kGraphLoaderKey);
  artifact.format_version = kOpenGraphFormatVersion;
  artifact.file_name = "main.graph";
  artifact.content_segment = static_cast<int32_t>(out.writer.add_segment(bytes));
  artifact.metadata.push_back({std::string(kOpenTargetsKey), join_names(targets)});
  artifact.metadata.push_back({std::string(kOpenVariantsKey), all_variants ? "all" : "first"});
  if (options.keep_qdq_weights) artifact.metadata.push_back({std::string(kOpenQdqWeightsKey), "kept"});
  program.artifacts.push_back(std::move(artifact));
  return static_cast<uint32_t>(program.artifacts.size() - 1);
}

Result<EmittedProgram> emit_open_program(const graph::Graph& graph, const OpenSignature& signature,
                                         std::span<const passes::DeclaredType> declared,
                                         const std::vector<std::string>& targets,
                                         bool all_variants, const EmitOptions& options) {
  if (signature.inputs.size() != graph.inputs.size() || signature.outputs.size() != graph.outputs.size()) {
    return internal_error("open signature does not match the graph's inputs and outputs");
  }
  EmittedProgram out = start_program(options);
  LOOM_ASSIGN_OR_RETURN(uint32_t artifact,
                        add_open_graph_artifact(out, graph, declared, targets, all_variants, options));
  FunctionDef f;
  f.name = "main";
  f.graph_artifact = static_cast<int32_t>(artifact);
  for (const ValueDef& v : signature.inputs) {
    f.inputs.push_back(static_cast<uint32_t>(f.values.size()));
    f.values.push_back(v);
  }
  for (const ValueDef& v : signature.outputs) {
    f.outputs.push_back(static_cast<uint32_t>(f.values.size()));
    f.values.push_back(v);
  }
  f.reflection = function_reflection(f);
  out.writer.program().functions.push_back(std::move(f));
  return out;
}

Status finish_native_open_program(EmittedProgram& compiled, const graph::Graph& graph,
                                  const OpenSignature& signature,
                                  std::span<const passes::DeclaredType> declared,
                                  const std::vector<std::string>& targets, bool all_variants,
                                  const EmitOptions& options) {
  ProgramDef& program = compiled.writer.program();
  if (program.functions.empty() || program.functions.front().name != "main") {
    return internal_error("native open-shape program: no function 'main'");
  }
  LOOM_ASSIGN_OR_RETURN(uint32_t artifact,
                        add_open_graph_artifact(compiled, graph, declared, targets, all_variants, options));
  FunctionDef& f = program.functions.front();
  if (f.inputs.size() != signature.inputs.size() || f.outputs.size() != signature.outputs.size()) {
    return internal_error("native open-shape program: 'main' has " + std::to_string(f.inputs.size()) + " inputs and " +
                          std::to_string(f.outputs.size()) + " results, the signature " +
                          std::to_string(signature.inputs.size()) + " and " + std::to_string(signature.outputs.size()));
  }
  f.graph_artifact = static_cast<int32_t>(artifact);
  // The signature's statement of each argument: its symbols and bounds on
  // the dimensions both leave open.
  auto annotate = [](ValueDef& v, const ValueDef& want) -> Status {
    if (v.name != want.name || v.shape.size() != want.shape.size()) {
      return internal_error("native open-shape program: argument '" + v.name + "' " + shape_to_string(v.shape) +
                            " is not the signature's '" + want.name + "' " + shape_to_string(want.shape));
    }
    v.dim_symbols = want.dim_symbols;
    v.dim_min = want.dim_min;
    v.dim_max = want.dim_max;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (want.shape[d] < 0) v.shape[d] = -1;
    }
    return Status();
  };
  for (size_t i = 0; i < f.inputs.size(); ++i) LOOM_RETURN_IF_ERROR(annotate(f.values[f.inputs[i]], signature.inputs[i]));
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    ValueDef& v = f.values[f.outputs[i]];
    const ValueDef& want = signature.outputs[i];
    if (want.shape.size() == v.shape.size()) {
      v.dim_symbols = want.dim_symbols;
      v.dim_min = want.dim_min;
      v.dim_max = want.dim_max;
      // A dimension the binding fixes (the model's 'N' of an output, with
      // --input-shape input=1,3,?,?) keeps no symbol or bounds: it is a size.
      for (size_t d = 0; d < v.shape.size(); ++d) {
        if (v.shape[d] < 0) continue;
        if (d < v.dim_symbols.size()) v.dim_symbols[d].clear();
        if (d < v.dim_min.size()) v.dim_min[d] = 0;
        if (d < v.dim_max.size()) v.dim_max[d] = 0;
      }
    }
  }
  f.reflection = function_reflection(f);
  return Status();
}

std::vector<std::vector<Shape>> probe_bindings(const OpenSignature& signature) {
  std::vector<std::vector<Shape>> out(2);
  constexpr int64_t kProbe[2] = {96, 160};
  for (int p = 0; p < 2; ++p) {
    std::map<std::string, int64_t, std::less<>> by_symbol;
    for (const ValueDef& v : signature.inputs) {
      Shape s = v.shape;
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] >= 0) continue;
        const int64_t lo = d < v.dim_min.size() && v.dim_min[d] > 0 ? v.dim_min[d] : 1;
        const int64_t hi = d < v.dim_max.size() && v.dim_max[d] > 0 ? v.dim_max[d] : INT64_MAX;
        int64_t value = std::clamp(kProbe[p], lo, hi);
        // A narrow range that clamps both probes to one value: its ends.
        if (std::clamp(kProbe[0], lo, hi) == std::clamp(kProbe[1], lo, hi)) value = p == 0 ? lo : hi;
        const std::string symbol = d < v.dim_symbols.size() ? v.dim_symbols[d] : std::string();
        if (!symbol.empty()) {
          auto [it, fresh] = by_symbol.emplace(symbol, value);
          value = it->second;
        }
        s[d] = value;
      }
      out[static_cast<size_t>(p)].push_back(std::move(s));
    }
  }
  return out;
}

namespace {

// The i64 values of constant tensor `t`, or nullopt.
std::optional<std::vector<int64_t>> i64_values(const graph::Tensor& t) {
  if (!t.is_constant() || t.dtype != DType::kI64 || t.data->size() % 8 != 0) return std::nullopt;
  std::vector<int64_t> v(t.data->size() / 8);
  std::memcpy(v.data(), t.data->data(), t.data->size());
  return v;
}

// The shape ONNX Reshape (allowzero 0) makes of data shaped `x` with target
// `spec`; nullopt when the spec does not resolve.
std::optional<Shape> resolve_reshape(const Shape& x, const std::vector<int64_t>& spec) {
  Shape out(spec.size());
  int64_t infer = -1;
  int64_t total = 1, known = 1;
  for (int64_t d : x) total *= d;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (v == 0) {
      if (i >= x.size()) return std::nullopt;
      v = x[i];
    }
    if (v < 0) return std::nullopt;
    out[i] = v;
    known *= v;
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    out[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return out;
}

// How many times each tensor of `g` is read (node operands and graph
// outputs).
std::vector<size_t> tensor_uses(const graph::Graph& g) {
  std::vector<size_t> uses(g.tensors.size(), 0);
  for (const graph::Node& n : g.nodes) {
    for (int32_t t : n.inputs) {
      if (t >= 0) ++uses[static_cast<size_t>(t)];
    }
  }
  for (int32_t t : g.outputs) ++uses[static_cast<size_t>(t)];
  return uses;
}

// Reshape nodes of `g` whose target is a constant of this Reshape alone
// (the folded end of a Shape/Gather/Concat chain), with allowzero 0:
// (node index, target tensor index).
std::vector<std::pair<size_t, int32_t>> reshape_targets(const graph::Graph& g) {
  const std::vector<size_t> uses = tensor_uses(g);
  std::vector<std::pair<size_t, int32_t>> out;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const graph::Node& node = g.nodes[n];
    if (node.op_type != "Reshape" || !node.domain.empty() || node.inputs.size() != 2 || node.outputs.size() != 1 ||
        node.inputs[1] < 0) {
      continue;
    }
    bool allowzero = false;
    for (const AttributeDef& a : node.attributes) allowzero = allowzero || (a.name == "allowzero" && a.i != 0);
    const int32_t target = node.inputs[1];
    if (allowzero || uses[static_cast<size_t>(target)] != 1 || !g.tensors[static_cast<size_t>(target)].is_constant()) {
      continue;
    }
    out.emplace_back(n, target);
  }
  return out;
}

// Resize nodes (opset 11 and later, every axis, "stretch") whose 'sizes' is
// a constant of this node alone (F.interpolate(x, size=y.shape[-2:]) folded)
// and whose 'scales' is left out or empty: (node index, sizes tensor index).
std::vector<std::pair<size_t, int32_t>> resize_sizes(const graph::Graph& g) {
  const std::vector<size_t> uses = tensor_uses(g);
  std::vector<std::pair<size_t, int32_t>> out;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const graph::Node& node = g.nodes[n];
    if (node.op_type != "Resize" || !node.domain.empty() || node.opset < 11 || node.inputs.size() != 4 ||
        node.outputs.size() != 1 || node.inputs[0] < 0 || node.inputs[3] < 0) {
      continue;
    }
    bool plain = true;
    for (const AttributeDef& a : node.attributes) {
      plain = plain && a.name != "axes" && !(a.name == "keep_aspect_ratio_policy" && a.s != "stretch");
    }
    const int32_t scales = node.inputs[2];
    if (scales >= 0 && (!g.tensors[static_cast<size_t>(scales)].is_constant() ||
                        !g.tensors[static_cast<size_t>(scales)].data->empty())) {
      continue;
    }
    const int32_t sizes = node.inputs[3];
    if (!plain || uses[static_cast<size_t>(sizes)] != 1 || !g.tensors[static_cast<size_t>(sizes)].is_constant()) {
      continue;
    }
    out.emplace_back(n, sizes);
  }
  return out;
}

// The scales that make Resize give data shaped `x` exactly `sizes`, sampling
// exactly as with `sizes` (the reference reads sizes as the scale
// sizes/x in double precision): per axis, sizes/x must be a float and
// floor(x * it) must give sizes back. nullopt otherwise.
std::optional<std::vector<float>> exact_scales(const Shape& x, const std::vector<int64_t>& sizes) {
  if (x.size() != sizes.size()) return std::nullopt;
  std::vector<float> out(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] <= 0 || sizes[d] <= 0) return std::nullopt;
    const double r = static_cast<double>(sizes[d]) / static_cast<double>(x[d]);
    const float f = static_cast<float>(r);
    if (static_cast<double>(f) != r || std::floor(static_cast<double>(x[d]) * r) != static_cast<double>(sizes[d])) {
      return std::nullopt;
    }
    out[d] = f;
  }
  return out;
}

// Resize node `n` of `g` reads `scales` (the bytes of an f32 vector) from
// its former 'sizes' tensor, in the 'scales' position: (X, roi, scales).
void resize_by_scales(graph::Graph& g, size_t n, int32_t sizes, graph::ConstantBytes scales) {
  graph::Tensor& t = g.tensors[static_cast<size_t>(sizes)];
  t.dtype = DType::kF32;
  t.data = std::move(scales);
  graph::Node& node = g.nodes[n];
  node.inputs[2] = sizes;
  node.inputs.resize(3);
}

}  // namespace

void unify_shape_targets(graph::Graph& a, graph::Graph& b) {
  unify_reshape_targets(a, b);
  if (a.nodes.size() != b.nodes.size() || a.tensors.size() != b.tensors.size()) return;
  // A Resize to sizes that are the same multiple of its input at both
  // bindings (an FPN's upsampling to the next level's size) reads that
  // multiple as its scales instead.
  for (const auto& [n, sizes] : resize_sizes(a)) {
    const graph::Node& na = a.nodes[n];
    const graph::Node& nb = b.nodes[n];
    if (nb.op_type != "Resize" || nb.inputs != na.inputs || nb.outputs != na.outputs) continue;
    auto va = i64_values(a.tensors[static_cast<size_t>(sizes)]);
    auto vb = i64_values(b.tensors[static_cast<size_t>(sizes)]);
    if (!va || !vb || *va == *vb) continue;
    auto sa = exact_scales(a.tensors[static_cast<size_t>(na.inputs[0])].shape, *va);
    auto sb = exact_scales(b.tensors[static_cast<size_t>(nb.inputs[0])].shape, *vb);
    if (!sa || !sb || *sa != *sb) continue;
    auto bytes = std::make_shared<std::vector<std::byte>>(sa->size() * sizeof(float));
    std::memcpy(bytes->data(), sa->data(), bytes->size());
    resize_by_scales(a, n, sizes, bytes);
    resize_by_scales(b, n, sizes, std::move(bytes));
  }
}

void adopt_shape_targets(const graph::Graph& reference, graph::Graph& bound) {
  adopt_reshape_targets(reference, bound);
  if (reference.nodes.size() != bound.nodes.size() || reference.tensors.size() != bound.tensors.size()) return;
  for (const auto& [n, sizes] : resize_sizes(bound)) {
    const graph::Node& nr = reference.nodes[n];
    const graph::Node& nb = bound.nodes[n];
    if (nr.op_type != "Resize" || nr.inputs.size() != 3 || nr.inputs[2] != sizes || nr.inputs[0] != nb.inputs[0] ||
        nr.outputs != nb.outputs) {
      continue;
    }
    const graph::Tensor& tr = reference.tensors[static_cast<size_t>(sizes)];
    if (tr.dtype != DType::kF32 || !tr.is_constant()) continue;
    auto own = i64_values(bound.tensors[static_cast<size_t>(sizes)]);
    if (!own) continue;
    auto want = exact_scales(bound.tensors[static_cast<size_t>(nb.inputs[0])].shape, *own);
    if (!want || want->size() * sizeof(float) != tr.data->size() ||
        std::memcmp(want->data(), tr.data->data(), tr.data->size()) != 0) {
      continue;
    }
    resize_by_scales(bound, n, sizes, tr.data);
  }
}

void unify_reshape_targets(graph::Graph& a, graph::Graph& b) {
  if (a.nodes.size() != b.nodes.size() || a.tensors.size() != b.tensors.size()) return;
  for (const auto& [n, target] : reshape_targets(a)) {
    const graph::Node& na = a.nodes[n];
    const graph::Node& nb = b.nodes[n];
    if (nb.op_type != "Reshape" || nb.inputs != na.inputs || nb.outputs != na.outputs) continue;
    graph::Tensor& ta = a.tensors[static_cast<size_t>(target)];
    graph::Tensor& tb = b.tensors[static_cast<size_t>(target)];
    auto va = i64_values(ta);
    auto vb = i64_values(tb);
    if (!va || !vb || va->size() != vb->size() || *va == *vb) continue;
    const Shape& xa = a.tensors[static_cast<size_t>(na.inputs[0])].shape;
    const Shape& xb = b.tensors[static_cast<size_t>(nb.inputs[0])].shape;
    // Entries equal at both bindings stay; one equal to the data's own
    // dimension at its index at both becomes 0 (copy it); one other entry
    // that differs becomes -1 (inferred).
    std::vector<int64_t> spec(va->size());
    bool inferred = std::find(va->begin(), va->end(), -1) != va->end();
    bool ok = true;
    for (size_t i = 0; i < spec.size() && ok; ++i) {
      if ((*va)[i] == (*vb)[i]) {
        spec[i] = (*va)[i];
      } else if (i < xa.size() && i < xb.size() && (*va)[i] == xa[i] && (*vb)[i] == xb[i]) {
        spec[i] = 0;
      } else if (!inferred) {
        spec[i] = -1;
        inferred = true;
      } else {
        ok = false;
      }
    }
    if (!ok) continue;
    // The spelling must give each binding exactly the shape its own target
    // gave.
    if (resolve_reshape(xa, spec) != resolve_reshape(xa, *va) || resolve_reshape(xb, spec) != resolve_reshape(xb, *vb) ||
        !resolve_reshape(xa, spec)) {
      continue;
    }
    auto bytes = std::make_shared<std::vector<std::byte>>(spec.size() * 8);
    std::memcpy(bytes->data(), spec.data(), bytes->size());
    ta.data = bytes;
    tb.data = std::move(bytes);
  }
}

void adopt_reshape_targets(const graph::Graph& reference, graph::Graph& bound) {
  if (reference.nodes.size() != bound.nodes.size() || reference.tensors.size() != bound.tensors.size()) return;
  for (const auto& [n, target] : reshape_targets(bound)) {
    const graph::Node& nr = reference.nodes[n];
    const graph::Node& nb = bound.nodes[n];
    if (nr.op_type != "Reshape" || nr.inputs != nb.inputs || nr.outputs != nb.outputs) continue;
    const graph::Tensor& tr = reference.tensors[static_cast<size_t>(target)];
    graph::Tensor& tb = bound.tensors[static_cast<size_t>(target)];
    if (!tr.is_constant() || tr.data == tb.data) continue;
    auto spec = i64_values(tr);
    auto own = i64_values(tb);
    if (!spec || !own || spec->size() != own->size() || *spec == *own) continue;
    const Shape& x = bound.tensors[static_cast<size_t>(nb.inputs[0])].shape;
    auto want = resolve_reshape(x, *own);
    if (want && resolve_reshape(x, *spec) == want) tb.data = tr.data;
  }
}

std::string compare_bindings(const graph::Graph& a, const graph::Graph& b) {
  if (a.tensors.size() != b.tensors.size() || a.nodes.size() != b.nodes.size()) {
    return std::to_string(a.nodes.size()) + " nodes and " + std::to_string(a.tensors.size()) + " tensors at one binding, " +
           std::to_string(b.nodes.size()) + " and " + std::to_string(b.tensors.size()) + " at another";
  }
  if (a.inputs != b.inputs || a.outputs != b.outputs) return "the graph's inputs or outputs differ";
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    const graph::Tensor& x = a.tensors[t];
    const graph::Tensor& y = b.tensors[t];
    const std::string what = "tensor '" + x.name + "'";
    if (x.name != y.name) return what + " is '" + y.name + "' at another binding";
    if (x.dtype != y.dtype || x.shape.size() != y.shape.size()) return what + ": its type follows the binding";
    if (x.is_constant() != y.is_constant()) return what + " is a constant at one binding only";
    if (!x.is_constant() || x.data == y.data) continue;
    if (*x.data != *y.data) return what + ": a constant whose value follows the binding (shapes computed into values)";
    if (x.shape != y.shape) return what + ": a constant whose shape follows the binding";
  }
  for (size_t n = 0; n < a.nodes.size(); ++n) {
    const graph::Node& x = a.nodes[n];
    const graph::Node& y = b.nodes[n];
    if (x.op_type != y.op_type || x.domain != y.domain || x.opset != y.opset || x.inputs != y.inputs ||
        x.outputs != y.outputs || !(x.attributes == y.attributes)) {
      return graph::describe_node(a, n) + " differs at another binding";
    }
  }
  return std::string();
}

Result<graph::Graph> typed_open_graph(const OpenGraph& open, const OpenSignature& signature,
                                      const kernels::KernelRegistry& kernels) {
  const std::vector<std::vector<Shape>> probes = probe_bindings(signature);
  std::vector<graph::Graph> bound;
  for (const std::vector<Shape>& shapes : probes) {
    auto b = bind_open_graph(open, shapes, kernels, UINT64_MAX);
    if (!b.ok()) {
      std::string at;
      for (size_t i = 0; i < shapes.size(); ++i) {
        at += (i ? ", " : "") + signature.inputs[i].name + "=" + shape_to_string(shapes[i]);
      }
      return unimplemented("binding the graph at " + at + " to learn its open shapes: " + b.status().message());
    }
    if (!b->frozen_inputs.empty()) {
      return unimplemented("input values decide shapes, so each binding is compiled on its own");
    }
    bound.push_back(std::move(b->graph));
  }
  unify_shape_targets(bound[0], bound[1]);
  const std::string differs = compare_bindings(bound[0], bound[1]);
  if (!differs.empty()) return unimplemented("the graph's structure follows the binding: " + differs);
  graph::Graph merged = std::move(bound[0]);
  for (size_t t = 0; t < merged.tensors.size(); ++t) {
    graph::Tensor& x = merged.tensors[t];
    if (x.is_constant()) continue;
    const Shape& other = bound[1].tensors[t].shape;
    for (size_t d = 0; d < x.shape.size(); ++d) {
      if (x.shape[d] != other[d]) x.shape[d] = -1;
    }
  }
  // Inputs keep the signature's statement: a dimension it leaves open stays
  // open even where both probes gave it one size.
  for (size_t i = 0; i < merged.inputs.size() && i < signature.inputs.size(); ++i) {
    graph::Tensor& x = merged.tensors[static_cast<size_t>(merged.inputs[i])];
    for (size_t d = 0; d < x.shape.size() && d < signature.inputs[i].shape.size(); ++d) {
      if (signature.inputs[i].shape[d] < 0) x.shape[d] = -1;
    }
  }
  return merged;
}

Result<OpenGraph> decode_open_graph(
    std::span<const std::byte> bytes, const std::vector<KeyValue>& metadata, size_t function_inputs,
    const std::function<Result<graph::ConstantBytes>(const std::string& name)>& parameter) {
  OpenGraph out;
  LOOM_ASSIGN_OR_RETURN(out.graph, graph::decode_graph(bytes, /*open=*/true));
  graph::Graph& g = out.graph;
  if (g.inputs.size() < function_inputs) {
    return invalid_argument("graph IR: " + std::to_string(g.inputs.size()) +
                            " inputs, but the function has " + std::to_string(function_inputs));
  }
  // Inputs past the function's are the weights the artifact names.
  for (size_t i = function_inputs; i < g.inputs.size(); ++i) {
    graph::Tensor& t = g.tensors[static_cast<size_t>(g.inputs[i])];
    LOOM_ASSIGN_OR_RETURN(graph::ConstantBytes data, parameter(t.name));
    auto count = element_count(t.shape);
    if (!count.ok() || dtype_size(t.dtype) == 0 || data->size() != *count * dtype_size(t.dtype)) {
      return invalid_argument("parameter '" + t.name + "': " + std::to_string(data->size()) +
                              " bytes, but the graph reads it as " +
                              std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape));
    }
    t.data = std::move(data);
  }
  g.inputs.resize(function_inputs);
  out.declared.resize(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const graph::Tensor& tensor = g.tensors[t];
    const bool is_input = std::find(g.inputs.begin(), g.inputs.end(), static_cast<int32_t>(t)) != g.inputs.end();
    if (tensor.is_constant() || is_input || tensor.dtype == DType::kInvalid) continue;
    out.declared[t] = passes::DeclaredType{tensor.dtype, true, tensor.shape, {}};
  }
  for (const KeyValue& kv : metadata) {
    if (kv.key == kOpenTargetsKey) out.targets = split_names(kv.value);
    if (kv.key == kOpenVariantsKey) {
      if (kv.value != "first" && kv.value != "all") {
        return invalid_argument("metadata '" + kv.key + "': '" + kv.value + "' is neither 'first' nor 'all'");
      }
      out.all_variants = kv.value == "all";
    }
    if (kv.key == kOpenQdqWeightsKey) {
      if (kv.value != "kept" && kv.value != "folded") {
        return invalid_argument("metadata '" + kv.key + "': '" + kv.value + "' is neither 'kept' nor 'folded'");
      }
      out.keep_qdq_weights = kv.value == "kept";
    }
  }
  return out;
}

Status check_input_shape(const ValueDef& v, std::span<const int64_t> s) {
  if (v.unranked) {  // a staged program's part: any rank
    for (int64_t d : s) {
      if (d < 0) return invalid_argument("input '" + v.name + "' has a negative dimension " + shape_to_string(s));
    }
    return Status();
  }
  if (s.size() != v.shape.size()) {
    return invalid_argument("input '" + v.name + "' must have rank " + std::to_string(v.shape.size()) +
                            " (" + shape_to_string(v.shape) + "), got rank " + std::to_string(s.size()) +
                            " (" + shape_to_string(s) + ")");
  }
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] < 0) {
      return invalid_argument("input '" + v.name + "' " + dim_label(v, d) + " is " +
                              std::to_string(s[d]) + "; sizes are not negative");
    }
    if (v.shape[d] >= 0) {
      if (s[d] != v.shape[d]) {
        return invalid_argument("input '" + v.name + "' " + dim_label(v, d) + " is fixed at " +
                                std::to_string(v.shape[d]) + " by the program, got " +
                                std::to_string(s[d]) + " (" + shape_to_string(s) + " for " +
                                shape_to_string(v.shape) + ")");
      }
      continue;
    }
    const int64_t lo = d < v.dim_min.size() ? v.dim_min[d] : 0;
    const int64_t hi = d < v.dim_max.size() ? v.dim_max[d] : 0;
    if ((lo != 0 && s[d] < lo) || (hi != 0 && s[d] > hi)) {
      return invalid_argument("input '" + v.name + "' " + dim_label(v, d) + " is " + std::to_string(s[d]) +
                              ", outside its declared range " + std::to_string(lo) + ".." +
                              (hi != 0 ? std::to_string(hi) : ""));
    }
  }
  return Status();
}

Status check_binding(const OpenSignature& signature, std::span<const Shape> shapes) {
  if (shapes.size() != signature.inputs.size()) {
    return invalid_argument("got " + std::to_string(shapes.size()) + " input shapes for " +
                            std::to_string(signature.inputs.size()) + " inputs");
  }
  // symbol -> (size, input, dimension) of its first binding
  std::map<std::string, std::tuple<int64_t, size_t, size_t>, std::less<>> bound;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ValueDef& v = signature.inputs[i];
    const Shape& s = shapes[i];
    LOOM_RETURN_IF_ERROR(check_input_shape(v, s));
    for (size_t d = 0; d < s.size() && d < v.dim_symbols.size(); ++d) {
      if (v.shape[d] >= 0 || v.dim_symbols[d].empty()) continue;
      auto [it, fresh] = bound.try_emplace(v.dim_symbols[d], s[d], i, d);
      if (!fresh && std::get<0>(it->second) != s[d]) {
        const ValueDef& first = signature.inputs[std::get<1>(it->second)];
        return invalid_argument("input '" + v.name + "' " + dim_label(v, d) + " is " +
                                std::to_string(s[d]) + ", but input '" + first.name + "' dimension " +
                                std::to_string(std::get<2>(it->second)) + " binds '" + v.dim_symbols[d] +
                                "' to " + std::to_string(std::get<0>(it->second)));
      }
    }
  }
  return Status();
}

Result<BoundGraph> bind_open_graph(const OpenGraph& open, std::span<const Shape> shapes,
                                   const kernels::KernelRegistry& kernels, uint64_t max_tensor_bytes,
                                   InputValues values) {
  if (shapes.size() != open.graph.inputs.size() || (!values.empty() && values.size() != shapes.size())) {
    return invalid_argument("got " + std::to_string(shapes.size()) + " input shapes for " +
                            std::to_string(open.graph.inputs.size()) + " inputs");
  }
  BoundGraph out;
  passes::InferOptions infer;
  // Ops without a reference kernel were kept at compile time because a
  // target took them; their declared types stand.
  infer.plugin_takes = [](std::string_view, std::string_view, int64_t) { return true; };
  infer.keep_qdq_weights = open.keep_qdq_weights;
  graph::Graph g;
  // Each round freezes at least one more input, so there are at most as
  // many rounds as inputs.
  for (;;) {
    g = open.graph;  // constants are shared, not copied
    for (size_t i = 0; i < shapes.size(); ++i) g.tensors[static_cast<size_t>(g.inputs[i])].shape = shapes[i];
    for (size_t i : out.frozen_inputs) {
      graph::Tensor& t = g.tensors[static_cast<size_t>(open.graph.inputs[i])];
      auto count = element_count(t.shape);
      if (!count.ok() || values[i].size() != *count * dtype_size(t.dtype)) {
        return invalid_argument("input '" + t.name + "': " + std::to_string(values[i].size()) +
                                " bytes for " + std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape));
      }
      t.data = std::make_shared<const std::vector<std::byte>>(values[i].begin(), values[i].end());
    }
    passes::InferStats stats;
    std::optional<passes::NeedsValue> needs;
    LOOM_RETURN_IF_ERROR(passes::infer_and_fold(g, open.declared, kernels, infer, true, stats, needs));
    if (!needs) break;
    const graph::Node& node = g.nodes[needs->node];
    const std::vector<int32_t> sources = passes::source_inputs(g, needs->tensor);
    std::vector<size_t> more;
    std::string data_inputs;  // sources too large to bind per run
    for (int32_t t : sources) {
      for (size_t i = 0; i < open.graph.inputs.size(); ++i) {
        const bool frozen = std::find(out.frozen_inputs.begin(), out.frozen_inputs.end(), i) != out.frozen_inputs.end();
        if (open.graph.inputs[i] != t || frozen) continue;
        if (!passes::binds_values_per_run(g.tensors[static_cast<size_t>(t)])) {
          data_inputs += (data_inputs.empty() ? "'" : ", '") + g.tensors[static_cast<size_t>(t)].name + "'";
        }
        more.push_back(i);
      }
    }
    if (!data_inputs.empty()) {
      return unimplemented("the output shape of " + passes::describe(node) + " depends on the values of input " +
                           data_inputs + ", not only on the input shapes; only an input of at most " +
                           std::to_string(passes::kMaxValueInputElements) + " elements is bound per run");
    }
    if (values.empty() || more.empty()) {
      return unimplemented("the output shape of " + passes::describe(node) + " depends on the values of '" +
                           g.tensors[static_cast<size_t>(needs->tensor)].name +
                           "', not only on the input shapes" +
                           (values.empty() ? std::string("; the values are not known here")
                                           : std::string("; ") + needs->cause.message()));
    }
    out.frozen_inputs.insert(out.frozen_inputs.end(), more.begin(), more.end());
    std::sort(out.frozen_inputs.begin(), out.frozen_inputs.end());
  }
  // Frozen inputs are constants now, no longer inputs of the graph.
  std::vector<int32_t> inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (!std::binary_search(out.frozen_inputs.begin(), out.frozen_inputs.end(), i)) inputs.push_back(g.inputs[i]);
  }
  g.inputs = std::move(inputs);
  // Every size is known now: refuse a binding that would make a tensor
  // larger than the session may allocate, naming it, before any compile.
  std::vector<int32_t> producer(g.tensors.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int32_t t : g.nodes[n].outputs) producer[static_cast<size_t>(t)] = static_cast<int32_t>(n);
  }
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const graph::Tensor& tensor = g.tensors[t];
    auto count = element_count(tensor.shape);
    const uint64_t es = dtype_size(tensor.dtype);
    const bool over = !count.ok() || (es != 0 && *count > max_tensor_bytes / es);
    if (!over) continue;
    const std::string bytes = count.ok() ? std::to_string(*count * es) + " bytes" : "more bytes than fit 64 bits";
    return resource_exhausted(
        "tensor '" + tensor.name + "' " +
        (producer[t] >= 0 ? "(output of " + graph::describe_node(g, static_cast<size_t>(producer[t])) + ") "
                          : std::string()) +
        "is " + std::string(dtype_name(tensor.dtype)) + " " + shape_to_string(tensor.shape) + " at this binding, " +
        bytes + "; the limit is " + std::to_string(max_tensor_bytes) + " bytes (max_tensor_bytes)");
  }
  LOOM_RETURN_IF_ERROR(passes::fold_batch_norm(g).status());
  passes::remove_dead_nodes(g);
  passes::compact_tensors(g);
  Status valid = graph::validate(g);
  if (!valid.ok()) return internal_error("the bound graph is inconsistent: " + valid.message());
  out.graph = std::move(g);
  return out;
}

Result<Specialization> specialize_open_graph(const OpenGraph& open, std::span<const Shape> shapes,
                                             host::PluginHost& host,
                                             const kernels::KernelRegistry& kernels,
                                             uint64_t max_tensor_bytes, InputValues values) {
  LOOM_ASSIGN_OR_RETURN(BoundGraph bound_graph, bind_open_graph(open, shapes, kernels, max_tensor_bytes, values));
  const graph::Graph& bound = bound_graph.graph;
  Specialization out;
  out.frozen_inputs = std::move(bound_graph.frozen_inputs);
  std::vector<std::shared_ptr<host::LoadedPlugin>> targets;
  for (const std::string& name : open.targets) {
    auto plugin = host::load_compile_target(host, name);
    if (!plugin.ok()) {
      out.skipped_targets.push_back(plugin.status().message());
      continue;
    }
    targets.push_back(std::move(*plugin));
  }
  EmitOptions emit;
  emit.producer = "loom-runtime (open-shape specialization)";
  emit.all_variants = open.all_variants;
  LOOM_ASSIGN_OR_RETURN(GraphCompileResult compiled, compile_graph(bound, targets, emit));
  LOOM_ASSIGN_OR_RETURN(out.program, compiled.program.writer.write_buffer());
  return out;
}

}  // namespace loom::lowering
