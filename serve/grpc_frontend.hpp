// The gRPC front end of `loom serve`: the Open Inference Protocol's
// inference.GRPCInferenceService (grpc_predict_v2.proto) on gRPC's
// synchronous server, each call answered on a thread of gRPC's pool through
// the ModelServer. The conversion of its messages is in grpc_convert.hpp;
// this header includes no generated code.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "loom/status.hpp"
#include "model_server.hpp"

namespace loom::serve {

struct GrpcOptions {
  // host:port to listen on; port 0: the system picks one (see port()).
  std::string address = "0.0.0.0:8001";
  // The largest message the server receives; gRPC itself answers a larger
  // one with RESOURCE_EXHAUSTED. Also the bound on a request's input bytes
  // (typed contents can decode to more bytes than their message holds).
  // Values above 2 GiB - 1, gRPC's own limit, are taken as that.
  uint64_t max_message_bytes = 64ull << 20;
  // The most threads gRPC runs calls on (its resource quota); calls beyond
  // them get RESOURCE_EXHAUSTED from gRPC. 0: gRPC's default (threads are
  // added as calls need them).
  uint32_t threads = 0;
};

// A running gRPC server. Move-only through its unique_ptr; every member may
// be called from any thread.
class GrpcFrontend {
 public:
  // Listens on options.address and starts serving `server`, which must
  // outlive the front end. UNAVAILABLE when the address cannot be bound (in
  // use, or not a host:port); INVALID_ARGUMENT for a null server or a
  // max_message_bytes of 0.
  static Result<std::unique_ptr<GrpcFrontend>> start(ModelServer* server, const GrpcOptions& options);
  // Shuts down (deadline 0) unless shutdown() was called.
  ~GrpcFrontend();
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  // The port bound.
  int port() const;
  // Stops taking new calls, lets calls in flight finish for at most
  // `deadline`, then cancels the rest and returns once every handler has
  // returned (a handler waiting in ModelServer::infer returns when its run
  // does). Later calls return at once.
  void shutdown(std::chrono::milliseconds deadline);

  struct Impl;  // private

 private:
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::serve
