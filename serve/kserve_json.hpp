// The Open Inference Protocol's REST messages (KServe v2) as JSON: the
// inference request (with the binary-data extension), the response, the
// metadata documents and errors. Pure functions over strings, so that the
// REST front end stays thin and the parser can be fuzzed alone
// (tests/fuzz/serve_json_fuzz.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model_server.hpp"

namespace loom::serve {

// Parses the body of POST /v2/models/{model}/infer into a request (its
// model and version are the URL's; the caller sets them). `header_length`
// is the Inference-Header-Content-Length header's value when given: then the
// body's first `header_length` bytes are the JSON and the rest the inputs'
// binary data, in the order of the inputs whose parameters carry
// binary_data_size. An input's `data` is a flat array in row-major order or
// nested arrays of the tensor's shape; FP16 and BF16 inputs come as binary
// data only (JSON has no such numbers). Every error is INVALID_ARGUMENT
// naming the input and what was wrong (RESOURCE_EXHAUSTED when the inputs
// exceed `max_request_bytes`).
Result<InferRequest> parse_infer_request(std::string_view body, std::optional<uint64_t> header_length,
                                         uint64_t max_request_bytes);

// A response body: the JSON document, then the binary outputs' bytes when
// any output is binary (asked for, or FP16/BF16, which are always binary);
// `json_length` is then the Inference-Header-Content-Length to send.
struct EncodedResponse {
  std::string body;
  std::optional<size_t> json_length;
};
EncodedResponse encode_infer_response(const InferResponse& response);

std::string server_metadata_json(const ServerMetadata& metadata);
std::string model_metadata_json(const ModelMetadata& metadata);
// {"error": message}, the protocol's error body.
std::string error_json(std::string_view message);

}  // namespace loom::serve
