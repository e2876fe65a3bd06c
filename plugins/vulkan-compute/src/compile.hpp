// The compile side of vulkan-compute: graph.fbs (schemas/graph.fbs) in, a
// blob program out. lower.cpp and lower_nn.cpp decide node by node what is
// claimed (the op set is in the plugin's README); compile.cpp assembles the blob: tensors,
// aliases for the reshape family, dispatches, and the folding of a following
// bias Add and Relu into MatMul/Gemm (Relu into Conv).
#pragma once

#include <cstddef>
#include <string>

#include "loom/sdk/compile.hpp"
#include "loom/sdk/graph.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "vk_loader.hpp"

namespace loom::vulkan {

// compile_supported: claims every node lower_node accepts.
Status compile_supported(const sdk::GraphView& graph, sdk::Claims* claims);

// compile: the blob program of the whole subgraph (every node must lower).
Status compile_graph(const sdk::GraphView& graph, BlobProgram* out);

}  // namespace loom::vulkan
