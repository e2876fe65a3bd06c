// The ONNX importer: Model::parse (protobuf with a size bound), then
// import_onnx (graph reading, opset and attribute checks, shape inference,
// constant folding with the reference kernels, BatchNormalization folding,
// dead node removal), as `loom compile` runs it. Dynamic input dimensions
// are bound to 1 so that inference gets past the inputs.
#include <cstddef>
#include <cstdint>

#include "compiler/import.hpp"
#include "fuzz_support.hpp"
#include "kernels/kernel.hpp"
#include "onnx/onnx_model.hpp"
#include "onnx/onnx_pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  static const kernels::KernelRegistry registry = kernels::KernelRegistry::reference();
  auto model = onnx_io::Model::parse(fuzz::bytes_of(data, size), {}, "fuzz.onnx");
  if (!model.ok()) {
    fuzz::check_refusal(model.status());
    return 0;
  }
  compiler::ImportOptions options;
  for (const auto& input : (*model)->proto().graph().input()) {
    if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape()) continue;
    const auto& dims = input.type().tensor_type().shape().dim();
    bool dynamic = false;
    Shape shape;
    for (const auto& dim : dims) {
      const bool known = dim.has_dim_value() && dim.dim_value() >= 0;
      dynamic = dynamic || !known;
      shape.push_back(known ? dim.dim_value() : 1);
    }
    if (dynamic) options.input_shapes.emplace_back(input.name(), std::move(shape));
  }
  auto imported = compiler::import_onnx(**model, options, registry);
  if (!imported.ok()) {
    fuzz::check_refusal(imported.status());
    return 0;
  }
  // An open graph (open dimensions, or input values that decide shapes)
  // keeps its values untyped until a binding: it is valid as an open graph.
  Status valid = graph::validate(imported->graph, {.open = imported->open});
  if (!valid.ok()) fuzz::fail("an imported graph fails graph::validate: " + valid.message());
  if (imported->open && imported->signature.inputs.size() != imported->graph.inputs.size()) {
    fuzz::fail("an open import's signature does not match its graph's inputs");
  }
  return 0;
}
