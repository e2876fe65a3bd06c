// The TensorProto reader behind `.pb` tensor files (loom run --input, loom
// test-onnx): parse_tensor_pb, i.e. protobuf's parser, then
// onnx_io::read_tensor over raw_data, the typed fields and external data
// (refused here: no folder).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "loom/conformance/onnx_cases.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
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
