// The compile side of vulkan-compute: graph.fbs (schemas/graph.fbs) in, a
// blob program out. lower.cpp and lower_nn.cpp decide node by node what is
// claimed (the op set is in the plugin's README); compile.cpp assembles the blob: tensors,
// aliases for the reshape family, dispatches, and the folding of a following
// bias Add and Relu into MatMul/Gemm (Relu into Conv), and of
// DequantizeLinear -> Conv -> QuantizeLinear into one qconv (fuse_qdq.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/sdk/compile.hpp"
#include "loom/sdk/graph.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "lower.hpp"

namespace loom::vulkan {

// compile_supported: claims every node lower_node accepts.
// `int8_unavailable`: why the plugin's devices cannot run the int8 kernels
// (empty when they can): quantized nodes are declined with it.
// `notes`, when given: why quantized nodes were declined (sdk::DeclineNotes).
Status compile_supported(const sdk::GraphView& graph, const std::string& int8_unavailable, sdk::Claims* claims,
                         std::vector<std::string>* notes = nullptr);

// compile: the blob program of the whole subgraph (every node must lower);
// format 4 when it uses the int8 kernels, else format 2. `notes`, when
// given, gets a line per convolution of dequantized values: int8 (fused
// into a qconv) or f32, and why (fuse_qdq.hpp).
Status compile_graph(const sdk::GraphView& graph, const std::string& int8_unavailable, BlobProgram* out,
                     std::vector<std::string>* notes = nullptr);

// Open graphs (ABI 1.2, LOOM_PLUGIN_CAP_OPEN_SHAPES). compile_supported
// claims a node of an open graph when its rule holds with its operands'
// open dimensions at a probe size (64) and gives an output shape that fits
// the declared one. check_open_graph: every node so, and the graph's
// structure (f32 inputs, operands written before they are read, every
// output written); INVALID_ARGUMENT naming the node otherwise.
// `int8_unavailable` as for compile_supported: where the int8 kernels
// cannot run (empty when they can), a quantized node fails the check.
Status check_open_graph(const sdk::GraphView& graph, const std::string& int8_unavailable);

// One binding of an open graph: `shapes` holds one shape per graph tensor,
// the graph inputs' concrete (constants' are static); each node's output
// shape is computed by its rule, checked against the declared shape and
// the kernels' limits, and written to `shapes`; then `*out` is the static
// program for these shapes, exactly as compile_graph would make it for the
// graph with these shapes. INVALID_ARGUMENT naming the node and why when a
// rule fails at this binding. The quantized nodes lower onto the int8
// kernels unless `int8_unavailable` says why they cannot run there, and the
// QDQ groups fuse as in compile_graph (`notes` as there).
Status bind_graph(const sdk::GraphView& graph, const std::string& int8_unavailable, std::vector<Shape>* shapes,
                  BlobProgram* out, std::vector<std::string>* notes = nullptr);

// The compile notes of an open graph: those of its binding with every open
// input dimension at the probe size (the fusions do not depend on sizes);
// the error when that binding fails a rule (the notes then stay unsaid).
Status probe_binding_notes(const sdk::GraphView& graph, const std::string& int8_unavailable,
                           std::vector<std::string>* notes);

}  // namespace loom::vulkan
