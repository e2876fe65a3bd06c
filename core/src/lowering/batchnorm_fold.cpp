// BatchNormalization folded into the Conv before it. In inference form BN is
// y = (x - mean) * s + bias with s = scale / sqrt(var + eps) per channel, and
// channel c of a Conv output is linear in filter c, so scaling filter c by
// s[c] and taking bias' = (bias_conv - mean) * s + bias gives the same result
// with one node fewer. Only f32 weights are rewritten (computed in double).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "lowering/graph_passes.hpp"
#include "kernels/kernel.hpp"

namespace loom::lowering::passes {

namespace {

bool is_f32_vector(const graph::Graph& g, int32_t t, int64_t n) {
  if (t == graph::kNoTensor) return false;
  const graph::Tensor& x = g.tensors[t];
  return x.is_constant() && x.dtype == DType::kF32 && x.shape.size() == 1 && x.shape[0] == n;
}

std::vector<float> floats_of(const graph::Tensor& t) {
  std::vector<float> v(t.data->size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), t.data->data(), v.size() * sizeof(float));
  return v;
}

std::string unique_name(const std::unordered_set<std::string>& names, const std::string& base) {
  std::string name = base;
  for (int i = 1; names.count(name) != 0; ++i) name = base + "_" + std::to_string(i);
  return name;
}

}  // namespace

Result<size_t> fold_batch_norm(graph::Graph& g) {
  std::vector<int> uses(g.tensors.size(), 0);
  std::vector<int32_t> consumer(g.tensors.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int32_t t : g.nodes[n].inputs) {
      if (t == graph::kNoTensor) continue;
      ++uses[t];
      consumer[t] = static_cast<int32_t>(n);
    }
  }
  for (int32_t t : g.outputs) uses[t] += 1000;  // a graph output must stay as it is
  std::unordered_set<std::string> names;
  for (const graph::Tensor& t : g.tensors) names.insert(t.name);

  std::vector<bool> removed(g.nodes.size(), false);
  size_t fused = 0;
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    graph::Node& conv = g.nodes[c];
    if (!conv.domain.empty() || conv.op_type != "Conv" || conv.outputs.size() != 1 ||
        conv.inputs.size() < 2) {
      continue;
    }
    const int32_t y = conv.outputs[0];
    if (uses[y] != 1) continue;
    const size_t b = static_cast<size_t>(consumer[y]);
    const graph::Node& bn = g.nodes[b];
    if (!bn.domain.empty() || bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 ||
        bn.inputs[0] != y || bn.outputs.size() != 1) {
      continue;
    }
    kernels::Attributes bn_attrs(bn.attributes, static_cast<int32_t>(bn.opset));
    if (bn_attrs.get_int("training_mode", 0) != 0) continue;
    const int32_t w_index = conv.inputs[1];
    if (w_index == graph::kNoTensor) continue;
    const graph::Tensor& w = g.tensors[w_index];
    if (!w.is_constant() || w.dtype != DType::kF32 || w.shape.size() < 2 || w.shape[0] <= 0) {
      continue;
    }
    const int64_t m = w.shape[0];
    const int32_t bias_index = conv.inputs.size() > 2 ? conv.inputs[2] : graph::kNoTensor;
    if (bias_index != graph::kNoTensor && !is_f32_vector(g, bias_index, m)) continue;
    bool params_ok = true;
    for (size_t i = 1; i < 5; ++i) params_ok = params_ok && is_f32_vector(g, bn.inputs[i], m);
    if (!params_ok) continue;

    const double eps = bn_attrs.get_float("epsilon", 1e-5f);
    const std::vector<float> scale = floats_of(g.tensors[bn.inputs[1]]);
    const std::vector<float> shift = floats_of(g.tensors[bn.inputs[2]]);
    const std::vector<float> mean = floats_of(g.tensors[bn.inputs[3]]);
    const std::vector<float> var = floats_of(g.tensors[bn.inputs[4]]);
    std::vector<float> weights = floats_of(w);
    std::vector<float> bias(static_cast<size_t>(m), 0.0f);
    if (bias_index != graph::kNoTensor) bias = floats_of(g.tensors[bias_index]);
    const size_t per_filter = weights.size() / static_cast<size_t>(m);
    for (size_t f = 0; f < static_cast<size_t>(m); ++f) {
      const double s = static_cast<double>(scale[f]) / std::sqrt(static_cast<double>(var[f]) + eps);
      for (size_t i = 0; i < per_filter; ++i) {
        float& v = weights[f * per_filter + i];
        v = static_cast<float>(static_cast<double>(v) * s);
      }
      bias[f] = static_cast<float>((static_cast<double>(bias[f]) - mean[f]) * s + shift[f]);
    }

    auto as_bytes = [](const std::vector<float>& v) {
      auto out = std::make_shared<std::vector<std::byte>>(v.size() * sizeof(float));
      if (!v.empty()) std::memcpy(out->data(), v.data(), out->size());
      return graph::ConstantBytes(std::move(out));
    };
    graph::Tensor new_w{unique_name(names, w.name + "/bn_folded"), DType::kF32, w.shape,
                        as_bytes(weights)};
    names.insert(new_w.name);
    const std::string bias_base =
        bias_index != graph::kNoTensor ? g.tensors[bias_index].name : g.tensors[y].name + "/bias";
    graph::Tensor new_b{unique_name(names, bias_base + "/bn_folded"), DType::kF32, Shape{m},
                        as_bytes(bias)};
    names.insert(new_b.name);
    const int32_t nw = g.add_tensor(std::move(new_w));
    const int32_t nb = g.add_tensor(std::move(new_b));
    uses.resize(g.tensors.size(), 0);
    consumer.resize(g.tensors.size(), -1);
    conv.inputs.resize(3);
    conv.inputs[1] = nw;
    conv.inputs[2] = nb;
    conv.outputs[0] = bn.outputs[0];
    removed[b] = true;
    ++fused;
  }
  size_t w_pos = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!removed[n]) {
      if (w_pos != n) g.nodes[w_pos] = std::move(g.nodes[n]);
      ++w_pos;
    }
  }
  g.nodes.resize(w_pos);
  return fused;
}

}  // namespace loom::lowering::passes
