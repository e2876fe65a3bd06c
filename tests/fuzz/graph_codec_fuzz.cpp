// The graph.fbs codec (decode_graph: flatbuffers verifier, indices, dtypes,
// shapes, data sizes, graph::validate). A graph that decodes must encode,
// and decode again to the same structure. Both readings: the one plugins get,
// and the open graph of an open-shape program's "loom.graph" artifact
// (untyped values, open dimensions), which the runtime reads.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.hpp"
#include "graph/graph_codec.hpp"

namespace {

void round_trip_open(std::span<const std::byte> input) {
  using namespace loom;
  auto graph = graph::decode_graph(input, /*open=*/true);
  if (!graph.ok()) {
    loom::fuzz::check_refusal(graph.status());
    return;
  }
  graph::EncodeOptions open;
  open.open = true;
  auto bytes = graph::encode_graph(*graph, open);
  if (!bytes.ok()) {
    loom::fuzz::check_refusal(bytes.status());
    return;
  }
  auto again = graph::decode_graph(*bytes, /*open=*/true);
  if (!again.ok()) loom::fuzz::fail("a decoded open graph, encoded again, does not decode");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  round_trip_open(fuzz::bytes_of(data, size));
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
