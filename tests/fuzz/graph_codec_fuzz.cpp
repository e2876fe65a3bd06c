// The graph.fbs codec (decode_graph: flatbuffers verifier, indices, dtypes,
// shapes, data sizes, graph::validate). A graph that decodes must encode,
// and decode again to the same structure.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "graph/graph_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  auto graph = graph::decode_graph(fuzz::bytes_of(data, size));
  if (!graph.ok()) {
    fuzz::check_refusal(graph.status());
    return 0;
  }
  auto bytes = graph::encode_graph(*graph);
  if (!bytes.ok()) {
    fuzz::check_refusal(bytes.status());
    return 0;
  }
  auto again = graph::decode_graph(*bytes);
  if (!again.ok()) fuzz::fail("a decoded graph, encoded again, does not decode");
  if (again->nodes.size() != graph->nodes.size() || again->tensors.size() != graph->tensors.size()) {
    fuzz::fail("a decoded graph changes its size through encode + decode");
  }
  return 0;
}
