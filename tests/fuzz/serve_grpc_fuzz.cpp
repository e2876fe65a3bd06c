// The gRPC front end's request conversion (serve/grpc_convert.hpp): any
// bytes that parse as an inference.ModelInferRequest go through
// infer_request_from_proto. What it accepts must stay within the request
// limit and agree with the message; what it refuses must say why. An
// accepted request's inputs are then written back as a response, typed and
// raw, and must come back with the same bytes.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_support.hpp"
#include "grpc_convert.hpp"

namespace {

constexpr uint64_t kFuzzRequestLimit = 1 << 20;

void check_response_round_trip(const loom::serve::InferRequest& request, bool raw) {
  loom::serve::InferResponse response;
  response.model = request.model;
  for (const auto& input : request.inputs) response.outputs.push_back(input);
  inference::ModelInferResponse proto;
  loom::serve::infer_response_to_proto(response, raw, &proto);
  if (proto.outputs_size() != static_cast<int>(request.inputs.size())) loom::fuzz::fail("outputs lost in the response");
  const bool written_raw = proto.raw_output_contents_size() > 0;
  if (raw && !request.inputs.empty() && !written_raw) loom::fuzz::fail("a raw response without raw contents");
  // Read the response back as a request and compare the tensors.
  inference::ModelInferRequest again;
  for (int i = 0; i < proto.outputs_size(); ++i) {
    const auto& o = proto.outputs(i);
    auto* in = again.add_inputs();
    in->set_name(o.name());
    in->set_datatype(o.datatype());
    *in->mutable_shape() = o.shape();
    *in->mutable_contents() = o.contents();
  }
  *again.mutable_raw_input_contents() = proto.raw_output_contents();
  auto reread = loom::serve::infer_request_from_proto(again, kFuzzRequestLimit);
  if (!reread.ok()) loom::fuzz::fail("a response's tensors do not read back as a request");
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const auto& a = request.inputs[i].tensor;
    const auto& b = reread->inputs[i].tensor;
    if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.byte_size() != b.byte_size() ||
        (a.byte_size() != 0 && std::memcmp(a.data(), b.data(), a.byte_size()) != 0)) {
      loom::fuzz::fail("a tensor changed on its way through a response");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > INT_MAX) return 0;
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto request = loom::serve::infer_request_from_proto(message, kFuzzRequestLimit);
  if (!request.ok()) {
    loom::fuzz::check_refusal(request.status());
    return 0;
  }
  if (request->inputs.size() != static_cast<size_t>(message.inputs_size())) loom::fuzz::fail("inputs lost");
  if (request->outputs.size() != static_cast<size_t>(message.outputs_size())) loom::fuzz::fail("outputs lost");
  uint64_t total = 0;
  for (const auto& input : request->inputs) {
    if (input.name.empty()) loom::fuzz::fail("an input without a name accepted");
    total += input.tensor.byte_size();
  }
  if (total > kFuzzRequestLimit) loom::fuzz::fail("inputs over the request limit accepted");
  check_response_round_trip(*request, false);
  check_response_round_trip(*request, true);
  return 0;
}
