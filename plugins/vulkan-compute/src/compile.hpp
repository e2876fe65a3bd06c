// The compile side of vulkan-compute: graph.fbs (schemas/graph.fbs) in, a
// blob program out. A node is claimed only when the plugin computes it as
// the ONNX operator of its opset specifies: elementwise unary and binary
// operators (numpy broadcasting), MatMul, Gemm, and the reshape family
// (Reshape, Flatten, Squeeze, Unsqueeze) as aliases without a copy.
// MatMul/Gemm absorb a following Add of a broadcast bias and a Relu.
#pragma once

#include <cstddef>
#include <string>

#include "loom/graph/graph_generated.h"
#include "loom/vulkan_compute/kernels.hpp"
#include "vk_loader.hpp"

namespace loom::vulkan {

// compile_supported: out[i] for each of the graph's `node_count` nodes.
Status compile_supported(const void* data, size_t size, size_t node_count, bool* out);

// compile: the blob program of the whole subgraph (every node must lower).
Status compile_graph(const void* data, size_t size, BlobProgram* out);

}  // namespace loom::vulkan
