// vulkan-compute's blob loader without a Vulkan device: decode()
// (decode_structure, then validate_dispatch on every dispatch: bindings,
// push constants, every index a kernel computes, workgroup counts), which
// the plugin runs before it creates a buffer or a pipeline; then
// executable_estimate's work count (blob_work.hpp) on what decoded: finite,
// non-negative FLOPs and bytes, executed FLOPs at least the useful ones.
// A format-3 blob (an open graph) goes through the plugin's own reader
// (OpenGraph::make: head, graph.fbs verification, every node at the probe
// binding, as on a device with the int8 kernels) and is then bound at two bindings (every open dimension 1, then
// 7), as execute would: each binding either fails with a message or gives a
// program that encodes and decodes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "loom/vulkan_compute/blob_format.hpp"
#include "loom/vulkan_compute/blob_work.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "open_graph.hpp"

namespace {

void open_blob(const uint8_t* data, size_t size) {
  using namespace loom::vulkan;
  std::unique_ptr<OpenGraph> graph;
  // A device that runs the int8 kernels: quantized nodes lower too.
  const loom::sdk::Status s = OpenGraph::make(data, size, std::string(), &graph);
  if (!s.ok()) {
    if (s.message().empty()) loom::fuzz::fail("a refused open blob without a message");
    return;
  }
  for (int64_t v : {1, 7}) {
    std::vector<Shape> inputs;
    for (size_t i = 0; i < graph->graph().input_count(); ++i) {
      Shape shape = graph->graph().input(i).shape();
      for (int64_t& d : shape) d = d < 0 ? v : d;
      inputs.push_back(shape);
    }
    BlobProgram program;
    std::vector<Shape> outputs;
    const loom::sdk::Status b = graph->bind(inputs, &program, &outputs);
    if (!b.ok()) {
      if (b.message().empty()) loom::fuzz::fail("a refused binding without a message");
      continue;
    }
    if (outputs.size() != graph->graph().output_count()) loom::fuzz::fail("a binding lost an output's shape");
    const auto bytes = encode(program);
    BlobProgram again;
    std::string error;
    if (!decode(bytes.data(), bytes.size(), &again, &error)) {
      loom::fuzz::fail("a bound program is refused by decode: " + error);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom::vulkan;
  if (blob_version(data, size) == kOpenFormatVersion) {
    open_blob(data, size);
    return 0;
  }
  BlobProgram program;
  std::string error;
  if (!decode(data, size, &program, &error)) {
    if (error.empty()) loom::fuzz::fail("a refused blob without a message");
    return 0;
  }
  if (program.data_size != 0 && (program.data_view < data || program.data_view + program.data_size > data + size)) {
    loom::fuzz::fail("the data section lies outside the blob");
  }
  for (const DispatchWork& w : program_work(program)) {
    if (!(w.flops >= 0) || !(w.bytes >= 0) || !(w.flops < 1e300) || !(w.bytes < 1e300)) {
      loom::fuzz::fail("a dispatch's work is negative or not finite");
    }
    if (w.kind == WorkKind::kMatMul && w.executed_flops + 1 < w.flops * (1 - 1e-9)) {
      loom::fuzz::fail("a matmul executes fewer flops than it computes");
    }
  }
  program.data.assign(program.data_view, program.data_view + program.data_size);
  const auto bytes = encode(program);
  BlobProgram again;
  if (!decode(bytes.data(), bytes.size(), &again, &error)) {
    loom::fuzz::fail("a decoded blob, encoded again, is refused: " + error);
  }
  return 0;
}
