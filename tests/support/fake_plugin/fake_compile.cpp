#include "fake_compile.hpp"

#include <cstdint>

#include "loom/graph/graph_generated.h"

namespace fake_compile {

namespace {

const loom::graph::fb::Graph* verified(const void* data, size_t size, std::string* error) {
  if (data == nullptr) {
    *error = "graph is NULL";
    return nullptr;
  }
  flatbuffers::Verifier::Options options;
  options.max_depth = 16;
  options.max_tables = 1'000'000;
  flatbuffers::Verifier verifier(static_cast<const uint8_t*>(data), size, options);
  if (size < 8 || !loom::graph::fb::GraphBufferHasIdentifier(data) ||
      !loom::graph::fb::VerifyGraphBuffer(verifier)) {
    *error = "graph is not a valid graph.fbs buffer";
    return nullptr;
  }
  return loom::graph::fb::GetGraph(data);
}

size_t node_count_of(const loom::graph::fb::Graph* g) { return g->nodes() == nullptr ? 0 : g->nodes()->size(); }

}  // namespace

bool parse_ops(const char* value, std::set<std::string>* ops) {
  ops->clear();
  std::string text = value;
  if (text.empty()) return true;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) return false;
    ops->insert(name);
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

std::string supported(const std::set<std::string>& ops, const void* graph, size_t size,
                      size_t node_count, bool* out_supported) {
  std::string error;
  const loom::graph::fb::Graph* g = verified(graph, size, &error);
  if (g == nullptr) return error;
  if (node_count != node_count_of(g)) {
    return "node_count " + std::to_string(node_count) + " but the graph has " +
           std::to_string(node_count_of(g)) + " nodes";
  }
  if (node_count > 0 && out_supported == nullptr) return "out_supported is NULL";
  for (size_t i = 0; i < node_count; ++i) {
    const auto* n = g->nodes()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const bool default_domain = n->domain() == nullptr || n->domain()->size() == 0;
    out_supported[i] = default_domain && ops.count(n->op_type()->str()) > 0;
  }
  return {};
}

std::string compile(const std::set<std::string>& ops, const void* graph, size_t size,
                    std::string* blob) {
  std::string error;
  const loom::graph::fb::Graph* g = verified(graph, size, &error);
  if (g == nullptr) return error;
  const size_t nodes = node_count_of(g);
  if (nodes == 0) return "graph has no nodes";
  std::string names;
  for (size_t i = 0; i < nodes; ++i) {
    const std::string op = g->nodes()->Get(static_cast<flatbuffers::uoffset_t>(i))->op_type()->str();
    if (ops.count(op) == 0) return "cannot compile op " + op;
    names += (names.empty() ? "" : ",") + op;
  }
  const size_t inputs = g->inputs() == nullptr ? 0 : g->inputs()->size();
  const size_t outputs = g->outputs() == nullptr ? 0 : g->outputs()->size();
  *blob = nodes == 1 && names == "Add" && inputs == 2 && outputs == 1 ? "fake:add" : "fake:graph:" + names;
  return {};
}

}  // namespace fake_compile
