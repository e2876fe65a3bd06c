// bind_shapes: an open cpu-simd graph (format 5 and up) bound to one
// execution's input shapes. Included at the end of blob_format.hpp, whose
// validate() it applies to the bound graph.
#pragma once

#include <string>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {

// Binds the open dimensions of `open` (a validated format-5 graph) to one
// execution's input shapes (`inputs[i]` for graph input i): every node's
// output shape follows from its inputs' by its shape rule (a Copy's by its
// shape spec), and must agree with the dimensions the graph declares. Fills
// `*out` with the concrete graph, validated like a static one (so every
// attribute is checked against the bound shapes before anything runs).
// False with `*error` naming the input or node otherwise. Work is linear in
// the graph's size; constants are copied.
inline bool bind_shapes(const BlobGraph& open, const std::vector<std::vector<int64_t>>& inputs,
                        BlobGraph* out, std::string* error) {
  if (inputs.size() != open.inputs.size()) {
    *error = "the graph takes " + std::to_string(open.inputs.size()) + " inputs, got " +
             std::to_string(inputs.size()) + " shapes";
    return false;
  }
  BlobGraph g = open;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BlobTensor& t = g.tensors[open.inputs[i]];
    bool ok = shape_fits(inputs[i], t.shape);
    for (int64_t d : inputs[i]) ok = ok && d >= 0;
    if (!ok) {
      *error = "input " + std::to_string(i) + " has shape " + detail::shape_string(inputs[i]) +
               ", which does not fit the declared " + detail::shape_string(t.shape);
      return false;
    }
    t.shape = inputs[i];
  }
  std::vector<const std::vector<int64_t>*> in_shapes;
  std::vector<int64_t> inferred;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    BlobNode& node = g.nodes[n];
    in_shapes.clear();
    for (uint32_t t : node.inputs) in_shapes.push_back(&g.tensors[t].shape);
    BlobTensor& o = g.tensors[node.outputs[0]];
    const std::string where = "node " + std::to_string(n) + " (" + op_name(node.op) + ")";
    std::string why;
    if (!infer_output_shape(node, in_shapes, &inferred, &why) ||
        (is_open_resize(node) && !bind_open_resize(&node, *in_shapes[0], &why))) {
      *error = where + ": " + why;
      return false;
    }
    if (node.op == Op::kCopy && node.ints.empty()) continue;  // validated static
    if (!shape_fits(inferred, o.shape)) {
      *error = where + ": produces " + detail::shape_string(inferred) + " for output tensor " +
               std::to_string(node.outputs[0]) + ", declared " + detail::shape_string(o.shape);
      return false;
    }
    o.shape = inferred;
  }
  if (!validate(g, error)) return false;
  *out = std::move(g);
  return true;
}

}  // namespace loom::cpu_simd
