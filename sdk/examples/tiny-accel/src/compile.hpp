// tiny-accel's compile side: the only files of the plugin that read
// graph.fbs, so the only ones that need loom/sdk/graph.hpp (flatbuffers and
// the generated header of CMake target Loom::graph_schema).
#pragma once

#include "loom/sdk/graph.hpp"
#include "program.hpp"

namespace tiny_accel {

// Claims every node tiny-accel runs: Add, Mul (numpy broadcasting), Relu
// and 2-D MatMul on float32 tensors of rank <= 8.
Status compile_supported(const loom::sdk::GraphView& graph, loom::sdk::Claims* claims);

// The program of a subgraph whose nodes were all claimed; INVALID_ARGUMENT
// naming the node otherwise.
Status compile_graph(const loom::sdk::GraphView& graph, Program* out);

}  // namespace tiny_accel
