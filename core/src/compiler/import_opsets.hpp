// Which opsets of the default ONNX domain the importer takes, and the node
// forms that differ between them (private to the importer).
//
// Loom's kernels implement each operator from opset 7 on and look at the
// node's opset where a later opset changed it. A node written for an older
// opset (1-6) is brought to its opset-7 form here when the two differ only
// in spelling (legacy `broadcast`/`axis` attributes that numpy broadcasting
// already covers, `consumed_inputs`, Cast's type name, Reshape's shape
// attribute, ...), and refused by name when it does not (training-mode
// BatchNormalization, Tile-1). A node of opsets 18-21 that sets an attribute
// Loom does not implement (LpPool ceil_mode, QuantizeLinear block_size, ...)
// is refused by name too, instead of being run as if it were absent.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "graph/graph.hpp"
#include "loom/status.hpp"

namespace loom::compiler {

inline constexpr int64_t kMinDefaultOpset = 1;
inline constexpr int64_t kMaxDefaultOpset = 21;

// Ok for opsets kMinDefaultOpset..kMaxDefaultOpset; kUnimplemented otherwise.
Status check_default_opset(int64_t opset);

// What normalize_node_form may do to the graph being read: add a constant
// (a reshaped operand, an attribute turned into an input), returning its
// tensor index.
using AddConstant = std::function<Result<int32_t>(graph::Tensor)>;

// Rewrites `node` (default domain, already read with its attributes and
// inputs) into the form the kernels and plugins implement, or refuses it.
// `graph` holds what has been read so far: graph inputs and constants carry
// their shapes. `where` names the node for messages.
Status normalize_node_form(graph::Node& node, const graph::Graph& graph, const std::string& where,
                           const AddConstant& add_constant);

}  // namespace loom::compiler
