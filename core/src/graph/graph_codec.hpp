// graph_codec: loom::graph::Graph <-> schemas/graph.fbs bytes, the operator IR
// the compiler hands to plugins (compile_supported / compile).
//
// Encoding follows the contract in graph.fbs's header comment: a constant of
// at most EncodeOptions::inline_limit bytes, or of an integer or bool dtype
// (shape operands: Reshape's shape, Slice's starts), is written with inline
// `data`; a larger floating-point constant is written as a `parameter` (its
// tensor name, which is also the program parameter's name) and appended to
// Graph.inputs, so a compiled blob receives it as an execute input.
//
// Decoding verifies everything a plugin would have to (flatbuffers Verifier
// with depth and table limits, every index, dtype, shape and data size) and
// returns a Graph that passes graph::validate; parameter tensors come back as
// graph inputs without data. The compiler decodes what it encoded in tests;
// plugins have their own reader on the generated code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "graph/graph.hpp"
#include "loom/status.hpp"

namespace loom::graph {

struct EncodeOptions {
  // Float constants larger than this become parameters.
  uint64_t inline_limit = 4096;
  // An open graph (ValidateOptions::open): what an open-shape program keeps.
  bool open = false;
};

// Whether `tensor` (a constant) is written as a parameter under `options`.
bool encodes_as_parameter(const Tensor& tensor, const EncodeOptions& options);

Result<std::vector<std::byte>> encode_graph(const Graph& graph, const EncodeOptions& options = {});

// `open`: accept an open graph (ValidateOptions::open); plugins are never
// handed one.
Result<Graph> decode_graph(std::span<const std::byte> bytes, bool open = false);

}  // namespace loom::graph
