// The gRPC front end's conversions between the protocol's messages
// (grpc_predict_v2.proto, generated at build time) and the ModelServer's
// protocol-neutral requests. Separate from grpc_frontend.hpp so that the
// front end's users see no generated code; the unit tests and the fuzz
// harness (tests/fuzz/serve_grpc_fuzz.cpp) call these without a server.
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include <cstdint>

#include "grpc_predict_v2.pb.h"
#include "loom/status.hpp"
#include "model_server.hpp"

namespace loom::serve {

// Checks and converts one ModelInferRequest. Errors, each naming the input
// (or output) and the values that disagree: INVALID_ARGUMENT for an unknown
// or unsupported datatype, a negative or overflowing shape, contents in a
// field other than the datatype's (FP16 and BF16 have none: raw only),
// typed contents and raw_input_contents in one request, a raw entry count
// other than the input count, an element or byte count other than the
// shape's, an integer out of its datatype's range, an unnamed input or
// output, a shared-memory parameter; RESOURCE_EXHAUSTED when the inputs
// come to more than `max_request_bytes`. Sizes are checked before anything
// is allocated. Unknown inputs and outputs are left to ModelServer::infer.
Result<InferRequest> infer_request_from_proto(const inference::ModelInferRequest& m, uint64_t max_request_bytes);

// Writes `r` into `out` (which should be empty). The outputs' elements go
// into raw_output_contents when `raw_outputs` (the request was raw) or when
// an output's datatype has no typed field (FP16, BF16): the protocol does
// not mix the two in one response. Otherwise into each output's contents.
void infer_response_to_proto(const InferResponse& r, bool raw_outputs, inference::ModelInferResponse* out);

// The gRPC code of a Loom status code (INCOMPATIBLE: FAILED_PRECONDITION,
// DEVICE_LOST: UNAVAILABLE, the others by name).
grpc::StatusCode grpc_status_code(StatusCode code);

}  // namespace loom::serve
