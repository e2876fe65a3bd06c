// inference.GRPCInferenceService on gRPC's synchronous server. Each call
// runs on a thread of gRPC's pool and, for ModelInfer, waits there in
// ModelServer::infer: the server's sessions and queue bound the work, gRPC's
// pool only the calls waiting for it.
#include "grpc_frontend.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <set>
#include <utility>

#include "grpc_convert.hpp"
#include "grpc_predict_v2.grpc.pb.h"

namespace loom::serve {
namespace {

grpc::Status to_grpc_status(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(grpc_status_code(status.code()), status.message());
}

void fill_tensor_metadata(const TensorMetadata& from, inference::ModelMetadataResponse::TensorMetadata* to) {
  to->set_name(from.name);
  to->set_datatype(from.datatype);
  for (int64_t d : from.shape) to->add_shape(d);
}

}  // namespace

// The service's handlers. Outside the anonymous namespace because
// GrpcFrontend::Impl holds one (a member of internal type in a class of
// external linkage draws -Wsubobject-linkage in unity builds).
class GrpcServiceHandlers final : public inference::GRPCInferenceService::Service {
 public:
  GrpcServiceHandlers(ModelServer* server, uint64_t max_request_bytes)
      : server_(server), max_request_bytes_(max_request_bytes) {
    for (std::string& name : server->model_names()) models_.insert(std::move(name));
  }

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* out) override {
    out->set_live(server_->live());
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* out) override {
    out->set_ready(server_->ready());
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* in,
                          inference::ModelReadyResponse* out) override {
    Result<bool> ready = server_->model_ready(in->name(), in->version());
    if (!ready.ok()) return to_grpc_status(ready.status());
    out->set_ready(*ready);
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* out) override {
    serve::ServerMetadata metadata = server_->server_metadata();
    out->set_name(metadata.name);
    out->set_version(metadata.version);
    for (const std::string& e : metadata.extensions) out->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* in,
                             inference::ModelMetadataResponse* out) override {
    Result<serve::ModelMetadata> metadata = server_->model_metadata(in->name(), in->version());
    if (!metadata.ok()) return to_grpc_status(metadata.status());
    out->set_name(metadata->name);
    for (const std::string& v : metadata->versions) out->add_versions(v);
    out->set_platform(metadata->platform);
    for (const TensorMetadata& t : metadata->inputs) fill_tensor_metadata(t, out->add_inputs());
    for (const TensorMetadata& t : metadata->outputs) fill_tensor_metadata(t, out->add_outputs());
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* in,
                          inference::ModelInferResponse* out) override {
    Result<InferRequest> request = infer_request_from_proto(*in, max_request_bytes_);
    if (!request.ok()) {
      server_->count_rejected("grpc", models_.contains(in->model_name()) ? std::string_view(in->model_name()) : "");
      return to_grpc_status(request.status());
    }
    Result<InferResponse> response = server_->infer(std::move(request).value());
    if (!response.ok()) return to_grpc_status(response.status());
    infer_response_to_proto(*response, in->raw_input_contents_size() > 0, out);
    return grpc::Status::OK;
  }

 private:
  ModelServer* server_;
  uint64_t max_request_bytes_;
  std::set<std::string, std::less<>> models_;  // fixed for the server's life
};

struct GrpcFrontend::Impl {
  Impl(ModelServer* server, uint64_t max_request_bytes) : service(server, max_request_bytes) {}
  GrpcServiceHandlers service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::once_flag shut_down;
};

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcFrontend::~GrpcFrontend() { shutdown(std::chrono::milliseconds(0)); }

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::start(ModelServer* server, const GrpcOptions& options) {
  if (server == nullptr) return invalid_argument("gRPC front end: no model server");
  if (options.max_message_bytes == 0) return invalid_argument("gRPC front end: max_message_bytes is 0");
  auto impl = std::make_unique<Impl>(server, options.max_message_bytes);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(&impl->service);
  const int max_message = static_cast<int>(std::min<uint64_t>(options.max_message_bytes, INT_MAX));
  builder.SetMaxReceiveMessageSize(max_message);
  // gRPC sets SO_REUSEPORT by default, so a second server on a busy port
  // would share it silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.threads > 0) {
    grpc::ResourceQuota quota("loom-serve-grpc");
    quota.SetMaxThreads(static_cast<int>(std::min<uint32_t>(options.threads, INT_MAX)));
    builder.SetResourceQuota(quota);
  }
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return unavailable("gRPC front end cannot listen on '" + options.address +
                       "' (the port is in use, or it is not host:port)");
  }
  return std::unique_ptr<GrpcFrontend>(new GrpcFrontend(std::move(impl)));
}

int GrpcFrontend::port() const { return impl_->port; }

void GrpcFrontend::shutdown(std::chrono::milliseconds deadline) {
  std::call_once(impl_->shut_down, [&] {
    impl_->server->Shutdown(std::chrono::system_clock::now() + deadline);
    impl_->server->Wait();
  });
}

}  // namespace loom::serve
