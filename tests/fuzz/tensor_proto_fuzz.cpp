// The TensorProto reader behind `.pb` tensor files (loom run --input, loom
// test-onnx): parse_tensor_pb, i.e. protobuf's parser, then
// onnx_io::read_tensor over raw_data, the typed fields and external data
// (refused here: no folder); and parse_value_pb over the same bytes as a
// SequenceProto and as an OptionalProto (test-onnx's sequence and optional
// data).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "loom/conformance/onnx_cases.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  for (const bool optional : {false, true}) {
    auto value = conformance::parse_value_pb(fuzz::bytes_of(data, size), optional, "fuzz.pb");
    if (!value.ok()) {
      fuzz::check_refusal(value.status());
      continue;
    }
    if (!optional && !value->second.is_sequence()) {
      fuzz::fail("a SequenceProto read as something other than a sequence");
    }
    for (const Tensor& t : value->second.elements) {
      if (t.byte_size() != t.element_count() * dtype_size(t.dtype())) fuzz::fail("a sequence element of the wrong size");
    }
  }
  auto tensor = conformance::parse_tensor_pb(fuzz::bytes_of(data, size), "fuzz.pb");
  if (!tensor.ok()) {
    fuzz::check_refusal(tensor.status());
    return 0;
  }
  const Tensor& t = tensor->tensor;
  // (Typed fields may hold more bytes than the file: a varint of one byte
  // can be an int64 element. Only the tensor's own consistency is checked.)
  if (t.byte_size() != t.element_count() * dtype_size(t.dtype())) {
    fuzz::fail("a tensor whose size disagrees with its dtype and shape");
  }
  return 0;
}
