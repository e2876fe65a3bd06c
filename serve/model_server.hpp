// The core of `loom serve`: the models a server serves, a pool of sessions
// per model with optional dynamic batching, metrics, and draining. It knows
// nothing of HTTP or gRPC: the REST front end (http_frontend.hpp) and the
// gRPC one (grpc_frontend.hpp) turn the Open Inference Protocol's messages
// (KServe v2) into InferRequest and back, so both speak through one path
// and report errors with the same codes and messages.
//
// Thread safety: every member of ModelServer may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/runtime.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::serve {

// The protocol's name of a dtype ("FP32", "INT64", "BOOL"); empty for
// kInvalid.
std::string_view kserve_datatype(DType dtype);
// The dtype of a protocol datatype name; kInvalid for an unknown one and for
// "BYTES", which no Loom program takes.
DType dtype_from_kserve(std::string_view datatype);

// INVALID_ARGUMENT unless `name` is 1 to 128 letters, digits, '_', '-' or
// '.': model names appear in URLs, metric labels and file names.
Status check_model_name(std::string_view name);

// One model to serve, as `--model NAME=PATH` gives it.
struct ModelConfig {
  std::string name;
  // A program file (.loom). ONNX models are compiled to one by the caller
  // (cmd_serve.cpp) before the server is made.
  std::filesystem::path program;
  std::string source;       // what the user named (the .onnx or .loom path), for metadata
  std::string device;       // LoadOptions::device for this model; empty: the server's
  std::string function;     // empty: the program's first
  uint32_t instances = 1;   // sessions, each on a thread of its own
  // Dynamic batching: requests whose inputs agree except in dimension 0 are
  // run together, up to this many rows, when every input's dimension 0 is
  // open (one symbol). 1: off.
  uint32_t max_batch = 1;
  // How long the first request of a batch waits for others to join it.
  std::chrono::microseconds batch_delay{0};
};

struct ServerOptions {
  std::vector<ModelConfig> models;
  std::string device;       // default device selector of every model
  bool fallback = false;    // LoadOptions::fallback
  std::chrono::milliseconds run_timeout{60'000};
  // The largest request the server takes: the sum of its input tensors'
  // bytes (and, for the front ends, the body's size). Larger requests get
  // RESOURCE_EXHAUSTED naming both sizes.
  uint64_t max_request_bytes = 64ull << 20;
  // Requests waiting per model beyond which new ones are refused with
  // UNAVAILABLE ("queue full"), so that a burst cannot grow memory without
  // bound.
  uint32_t max_queue = 1024;
};

// One input or output as a request or response carries it.
struct InferTensor {
  std::string name;
  Tensor tensor;
  // Outputs only: the client asked for this output in binary form (REST's
  // binary-data extension); the gRPC front end ignores it.
  bool binary = false;
};

struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequest {
  std::string model;
  std::string version;  // empty: the model's only version
  std::string id;       // echoed in the response
  std::vector<InferTensor> inputs;
  // Empty: every output of the function, in its order.
  std::vector<RequestedOutput> outputs;
  bool all_binary = false;  // REST "binary_data_output": every output binary
};

struct InferResponse {
  std::string model;
  std::string version;
  std::string id;
  std::vector<InferTensor> outputs;
};

// What the metadata endpoints report of one input or output.
struct TensorMetadata {
  std::string name;
  std::string datatype;  // the protocol's name
  Shape shape;           // -1 for an open dimension
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;  // "loom"
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// The server's name, version and the protocol extensions it speaks.
struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

class ModelServer {
 public:
  // Loads every model on its device and starts its sessions. Errors name the
  // model. `runtime` must outlive the server.
  static Result<std::unique_ptr<ModelServer>> create(Runtime* runtime, const ServerOptions& options);
  ~ModelServer();  // stops the workers; requests still queued get UNAVAILABLE
  ModelServer(const ModelServer&) = delete;
  ModelServer& operator=(const ModelServer&) = delete;

  // The process is up (always true once made).
  bool live() const { return true; }
  // Every model is ready and the server is not draining.
  bool ready() const;
  // Whether `name` (and `version`, when not empty) is served and ready;
  // NOT_FOUND for an unknown model or version.
  Result<bool> model_ready(std::string_view name, std::string_view version) const;
  ServerMetadata server_metadata() const;
  Result<ModelMetadata> model_metadata(std::string_view name, std::string_view version) const;
  // The names of the models, in the order given.
  std::vector<std::string> model_names() const;

  // Runs one request on the model's pool and waits for its response.
  // INVALID_ARGUMENT: an input is unknown, missing, given twice, or of the
  // wrong dtype or shape (the message names it, with both values); an
  // unknown output is asked for. NOT_FOUND: no such model or version.
  // RESOURCE_EXHAUSTED: the inputs are larger than max_request_bytes.
  // UNAVAILABLE: the server is draining, or the model's queue is full.
  // Otherwise the run's own status.
  Result<InferResponse> infer(InferRequest request);

  // Starts draining: ready() turns false and new requests get UNAVAILABLE;
  // requests already taken run to the end (a batch being gathered runs at
  // once rather than waiting out its delay).
  void begin_drain();
  bool draining() const { return draining_.load(); }
  // Waits until no request is in flight, at most `timeout`; whether none is.
  bool wait_idle(std::chrono::milliseconds timeout);
  uint64_t in_flight() const { return in_flight_.load(); }

  // The metrics in Prometheus' text format (version 0.0.4).
  std::string metrics_text() const;
  // Counts a request a front end refused before it reached infer() (a
  // malformed body), under model "" when the model is unknown.
  void count_rejected(std::string_view protocol, std::string_view model);

  // Records a trace of every run for `duration` (bounded to 60 s) and
  // returns it as Chrome trace JSON; FAILED_PRECONDITION while another is
  // being recorded.
  Result<std::string> record_trace(std::chrono::milliseconds duration);

  struct Model;  // private

 private:
  ModelServer() = default;
  Runtime* runtime_ = nullptr;
  ServerOptions options_;
  std::vector<std::unique_ptr<Model>> models_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<bool> tracing_{false};
  std::atomic<uint64_t> rejected_http_{0};
  std::atomic<uint64_t> rejected_grpc_{0};
  Model* find(std::string_view name) const;
};

}  // namespace loom::serve
