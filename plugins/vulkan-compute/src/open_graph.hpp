// Open-shape blobs (format 3, ABI 1.2 LOOM_PLUGIN_CAP_OPEN_SHAPES): the
// graph compile received, with its open dimensions, kept by an executable
// that lowers it once per binding (compile.hpp, bind_graph) and caches the
// result (executable.hpp). This file reads and checks such a blob and binds
// one execution's input shapes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lower.hpp"
#include "loom/sdk/graph.hpp"

namespace loom::vulkan {

// A verified open graph: the graph.fbs bytes (an owned, aligned copy of the
// blob's) and the view over them. Read-only after make(): thread-safe.
class OpenGraph {
 public:
  // Reads a format-3 blob: its head (decode_open), the graph
  // (sdk::GraphView::open with open dimensions allowed) and every node at
  // the probe binding (check_open_graph). INCOMPATIBLE naming what is wrong
  // otherwise ("vulkan-compute open blob rejected: ..."). `int8_unavailable`:
  // why the loading device cannot run the int8 kernels (empty when it can);
  // a graph with quantized nodes is then refused with it.
  static Status make(const void* blob, size_t size, const std::string& int8_unavailable,
                     std::unique_ptr<OpenGraph>* out);
  OpenGraph(const OpenGraph&) = delete;
  OpenGraph& operator=(const OpenGraph&) = delete;

  const sdk::GraphView& graph() const { return graph_; }

  // The concrete shapes of one execution's inputs (`inputs[i]`, rank
  // `ranks[i]`), checked against the graph inputs' declared shapes: the
  // count, the rank and every dimension the graph fixes. INVALID_ARGUMENT
  // naming the input and both shapes otherwise.
  Status input_shapes(const loom_tensor_t* const* inputs, size_t count, std::vector<Shape>* out) const;

  // Binds `inputs` (from input_shapes): every tensor's shape by the
  // operators' rules (bind_graph) and the static program for that binding.
  // `*outputs` receives the graph outputs' shapes. INVALID_ARGUMENT naming
  // the node and the binding when a rule fails.
  Status bind(const std::vector<Shape>& inputs, BlobProgram* program, std::vector<Shape>* outputs) const;

  // "x=[2,3,8,8], w=[4,3,3,3]": a binding for messages.
  std::string binding_text(const std::vector<Shape>& inputs) const;

 private:
  OpenGraph() = default;
  std::vector<uint8_t> bytes_;
  sdk::GraphView graph_;
  std::string int8_unavailable_;
};

}  // namespace loom::vulkan
