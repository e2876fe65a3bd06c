// cpu-simd's blob loader: decode() (header, tensor and node tables,
// constants, the operators' shape and dtype rules), which executable_load
// and check_blob run before anything else. A blob that decodes must encode
// at the current format and decode again to the same graph size.
// An open blob (format 5) is also bound at one binding (bind_shapes).
// executable_estimate's work count (blob_work.hpp) runs on every blob that
// decodes: finite, non-negative FLOPs and bytes, none for an open blob.
// tests/unit/cpu_simd/blob_format_v4_test.cpp holds the mutation tests with
// an independent oracle; this harness explores beyond them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "loom/cpu_simd/blob_format.hpp"
#include "loom/cpu_simd/blob_work.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom::cpu_simd;
  BlobGraph graph;
  std::string error;
  if (!decode(data, size, &graph, &error)) {
    if (error.empty()) loom::fuzz::fail("a refused blob without a message");
    return 0;
  }
  const auto bytes = encode(graph);
  BlobGraph again;
  if (!decode(bytes.data(), bytes.size(), &again, &error)) {
    loom::fuzz::fail("a decoded blob, encoded again, is refused: " + error);
  }
  if (again.tensors.size() != graph.tensors.size() || again.nodes.size() != graph.nodes.size()) {
    loom::fuzz::fail("a decoded blob changes its size through encode + decode");
  }
  std::vector<NodeWork> work;
  if (graph_work(graph, &work) == has_open_dims(graph)) {
    loom::fuzz::fail("graph_work counts an open graph or refuses a static one");
  }
  for (const NodeWork& w : work) {
    if (!(w.flops >= 0) || !(w.bytes >= 0) || !(w.flops < 1e300) || !(w.bytes < 1e300)) {
      loom::fuzz::fail("a node's work is negative or not finite");
    }
  }
  if (has_open_dims(graph)) {
    // Format 5: bind every open input dimension to 2; a binding either fails
    // with a message or gives a static graph that passes validate.
    std::vector<std::vector<int64_t>> shapes;
    for (uint32_t i : graph.inputs) {
      shapes.push_back(graph.tensors[i].shape);
      for (int64_t& d : shapes.back()) d = d < 0 ? 2 : d;
    }
    BlobGraph bound;
    if (!bind_shapes(graph, shapes, &bound, &error)) {
      if (error.empty()) loom::fuzz::fail("a refused binding without a message");
    } else if (has_open_dims(bound) || !validate(bound, &error)) {
      loom::fuzz::fail("a bound graph is still open or invalid: " + error);
    }
  }
  return 0;
}
