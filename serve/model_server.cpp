// ModelServer: loading the models, their metadata, checking and taking
// requests, draining. The sessions at work are in model_pool.cpp, the
// metrics in model_metrics.cpp.
#include "model_server.hpp"

#include <algorithm>
#include <cctype>
#include <iostream>

#include "loom/version.hpp"
#include "model_state.hpp"

namespace loom::serve {

namespace {

struct DatatypeName {
  DType dtype;
  std::string_view name;
};
constexpr DatatypeName kDatatypes[] = {
    {DType::kBool, "BOOL"}, {DType::kU8, "UINT8"},   {DType::kU16, "UINT16"},
    {DType::kU32, "UINT32"}, {DType::kU64, "UINT64"}, {DType::kI8, "INT8"},
    {DType::kI16, "INT16"},  {DType::kI32, "INT32"},  {DType::kI64, "INT64"},
    {DType::kF16, "FP16"},   {DType::kF32, "FP32"},   {DType::kF64, "FP64"},
    {DType::kBF16, "BF16"},
};

// Model names appear in URLs and metric labels: the characters KServe allows
// in a name, and a few more.
bool valid_model_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

std::string join_names(const std::vector<ArgumentInfo>& args) {
  std::string out;
  for (const ArgumentInfo& a : args) out += (out.empty() ? "" : ", ") + a.name;
  return out;
}

}  // namespace

std::string_view kserve_datatype(DType dtype) {
  for (const DatatypeName& d : kDatatypes) {
    if (d.dtype == dtype) return d.name;
  }
  return {};
}

Status check_model_name(std::string_view name) {
  if (valid_model_name(name)) return Status();
  return invalid_argument("model name '" + std::string(name) + "' is not 1 to 128 letters, digits, '_', '-' or '.'");
}

DType dtype_from_kserve(std::string_view datatype) {
  for (const DatatypeName& d : kDatatypes) {
    if (d.name == datatype) return d.dtype;
  }
  return DType::kInvalid;
}



namespace {

// Why `function` cannot batch along dimension 0; empty when it can.
std::string batch_refusal(const FunctionInfo& function) {
  std::string symbol;
  for (const ArgumentInfo& in : function.inputs) {
    if (in.shape.empty()) return "input '" + in.name + "' is a scalar";
    if (in.shape[0] != -1) {
      return "input '" + in.name + "' has a fixed dimension 0 (" + std::to_string(in.shape[0]) +
             "); batching needs it open (symbolic in the ONNX model, or -1 in loom compile --input-shape)";
    }
    const std::string s = in.symbols.empty() ? std::string() : in.symbols[0];
    if (&in != &function.inputs.front() && s != symbol) {
      return "inputs '" + function.inputs.front().name + "' and '" + in.name +
             "' do not share the symbol of dimension 0";
    }
    symbol = s;
  }
  if (function.inputs.empty()) return "the function has no inputs";
  return {};
}

}  // namespace

Result<std::unique_ptr<ModelServer>> ModelServer::create(Runtime* runtime, const ServerOptions& options) {
  if (options.models.empty()) return invalid_argument("no model to serve (give --model NAME=PATH)");
  std::unique_ptr<ModelServer> server(new ModelServer());
  server->runtime_ = runtime;
  server->options_ = options;
  for (const ModelConfig& config : options.models) {
    LOOM_RETURN_IF_ERROR(check_model_name(config.name));
    if (server->find(config.name) != nullptr) {
      return invalid_argument("model '" + config.name + "' is given twice");
    }
    if (config.instances == 0 || config.instances > 256) {
      return invalid_argument("model '" + config.name + "': --instances " +
                              std::to_string(config.instances) + " is not in 1..256");
    }
    if (config.max_batch == 0) {
      return invalid_argument("model '" + config.name + "': --max-batch 0; use 1 for no batching");
    }
    auto model = std::make_unique<Model>();
    model->config = config;
    LoadOptions load;
    load.device = config.device.empty() ? options.device : config.device;
    load.fallback = options.fallback;
    load.run_timeout = options.run_timeout;
    // Every batch size is a binding of an open-shape program: keep them all
    // prepared so that alternating sizes compiles nothing.
    load.shape_cache = std::max<size_t>(load.shape_cache, config.max_batch + 1);
    auto program = runtime->load_program(config.program, load);
    if (!program.ok()) {
      return Status(program.status().code(),
                    "model '" + config.name + "' (" + config.source + "): " + program.status().message());
    }
    model->program = *program;
    std::vector<FunctionInfo> functions = model->program->functions();
    if (functions.empty()) return invalid_argument("model '" + config.name + "': the program has no function");
    auto function = config.function.empty() ? Result<FunctionInfo>(functions.front())
                                            : model->program->function(config.function);
    if (!function.ok()) {
      return Status(function.status().code(), "model '" + config.name + "': " + function.status().message());
    }
    model->function = *function;
    if (config.max_batch > 1) {
      const std::string why = batch_refusal(model->function);
      if (why.empty()) {
        model->batching = true;
        model->batch_rows = config.max_batch;
        const ArgumentInfo& in = model->function.inputs.front();
        if (!in.max.empty() && in.max[0] > 0) model->batch_rows = std::min<int64_t>(model->batch_rows, in.max[0]);
      } else {
        std::cerr << "loom serve: warning: model '" << config.name << "' is not batched: " << why << "\n";
      }
    }
    std::vector<std::unique_ptr<Session>> sessions;
    for (uint32_t i = 0; i < config.instances; ++i) {
      auto session = model->program->create_session(model->function.name);
      if (!session.ok()) {
        return Status(session.status().code(),
                      "model '" + config.name + "': session " + std::to_string(i) + ": " +
                          session.status().message());
      }
      sessions.push_back(std::move(*session));
    }
    Model* raw = model.get();
    server->models_.push_back(std::move(model));
    for (auto& session : sessions) {
      std::shared_ptr<Worker> worker = make_worker(server.get(), raw, std::move(session));
      raw->workers.emplace_back([worker] { worker_loop(*worker); });
    }
  }
  return server;
}

ModelServer::~ModelServer() {
  for (auto& model : models_) {
    {
      std::lock_guard lock(model->mu);
      model->stopping = true;
    }
    model->cv.notify_all();
    for (std::thread& t : model->workers) t.join();
    for (auto& p : model->queue) p->done.set_value(unavailable("the server stopped before the request ran"));
    model->queue.clear();
  }
}

ModelServer::Model* ModelServer::find(std::string_view name) const {
  for (const auto& m : models_) {
    if (m->config.name == name) return m.get();
  }
  return nullptr;
}

bool ModelServer::ready() const { return !draining_.load(); }

namespace {
Status unknown_model(std::string_view name, const std::vector<std::string>& served) {
  std::string list;
  for (const std::string& s : served) list += (list.empty() ? "" : ", ") + s;
  return not_found("model '" + std::string(name) + "' is not served here; models: " + list);
}
}  // namespace

std::vector<std::string> ModelServer::model_names() const {
  std::vector<std::string> names;
  for (const auto& m : models_) names.push_back(m->config.name);
  return names;
}

Result<bool> ModelServer::model_ready(std::string_view name, std::string_view version) const {
  Model* m = find(name);
  if (m == nullptr) return unknown_model(name, model_names());
  if (!version.empty() && version != "1") {
    return not_found("model '" + std::string(name) + "' has no version '" + std::string(version) +
                     "'; its only version is 1");
  }
  return !draining_.load();
}

ServerMetadata ModelServer::server_metadata() const {
  return {"loom", LOOM_VERSION_STRING, {"binary_tensor_data", "loom_trace"}};
}

Result<ModelMetadata> ModelServer::model_metadata(std::string_view name, std::string_view version) const {
  LOOM_RETURN_IF_ERROR(model_ready(name, version).status());
  const Model* m = find(name);
  ModelMetadata out;
  out.name = m->config.name;
  out.versions = {"1"};
  out.platform = "loom";
  for (const ArgumentInfo& a : m->function.inputs) {
    out.inputs.push_back({a.name, std::string(kserve_datatype(a.dtype)), a.shape});
  }
  for (const ArgumentInfo& a : m->function.outputs) {
    out.outputs.push_back({a.name, std::string(kserve_datatype(a.dtype)), a.shape});
  }
  return out;
}

namespace {

// Checks `request` against the function's signature; returns the rows the
// request adds to a batch (-1: it runs alone).
Result<int64_t> check_request(const ModelServer::Model& m, const InferRequest& request,
                              uint64_t max_request_bytes) {
  const std::string where = "model '" + m.config.name + "': ";
  uint64_t bytes = 0;
  int64_t rows = -2;  // -2: no input seen yet
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const InferTensor& in = request.inputs[i];
    for (size_t j = 0; j < i; ++j) {
      if (request.inputs[j].name == in.name) return invalid_argument(where + "input '" + in.name + "' is given twice");
    }
    auto arg = std::find_if(m.function.inputs.begin(), m.function.inputs.end(),
                            [&](const ArgumentInfo& a) { return a.name == in.name; });
    if (arg == m.function.inputs.end()) {
      return invalid_argument(where + "unknown input '" + in.name + "'; its inputs are " + join_names(m.function.inputs));
    }
    if (in.tensor.dtype() != arg->dtype) {
      return invalid_argument(where + "input '" + in.name + "' has datatype " +
                              std::string(kserve_datatype(in.tensor.dtype())) + "; the model takes " +
                              std::string(kserve_datatype(arg->dtype)));
    }
    const Shape& shape = in.tensor.shape();
    bool fits = shape.size() == arg->shape.size();
    for (size_t d = 0; fits && d < shape.size(); ++d) {
      if (arg->shape[d] >= 0 && shape[d] != arg->shape[d]) fits = false;
      if (d < arg->min.size() && arg->min[d] > 0 && shape[d] < arg->min[d]) fits = false;
      if (d < arg->max.size() && arg->max[d] > 0 && shape[d] > arg->max[d]) fits = false;
    }
    if (!fits) {
      return invalid_argument(where + "input '" + in.name + "' has shape " + shape_to_string(shape) +
                              "; the model takes " + shape_to_string(arg->shape) +
                              " (?: any size within its bounds)");
    }
    bytes += in.tensor.byte_size();
    const int64_t r = shape.empty() ? -1 : shape[0];
    rows = rows == -2 ? r : (rows == r ? rows : -1);
  }
  for (const ArgumentInfo& arg : m.function.inputs) {
    auto given = std::find_if(request.inputs.begin(), request.inputs.end(),
                              [&](const InferTensor& t) { return t.name == arg.name; });
    if (given == request.inputs.end()) return invalid_argument(where + "input '" + arg.name + "' is missing");
  }
  if (bytes > max_request_bytes) {
    return resource_exhausted(where + "the inputs hold " + std::to_string(bytes) +
                              " bytes; this server takes at most " + std::to_string(max_request_bytes) +
                              " (--max-request-bytes)");
  }
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const std::string& name = request.outputs[i].name;
    auto arg = std::find_if(m.function.outputs.begin(), m.function.outputs.end(),
                            [&](const ArgumentInfo& a) { return a.name == name; });
    if (arg == m.function.outputs.end()) {
      return invalid_argument(where + "unknown output '" + name + "'; its outputs are " + join_names(m.function.outputs));
    }
    for (size_t j = 0; j < i; ++j) {
      if (request.outputs[j].name == name) return invalid_argument(where + "output '" + name + "' is asked for twice");
    }
  }
  // An empty batch row count (0) runs alone too: nothing to concatenate.
  return (m.batching && rows > 0) ? rows : -1;
}

// Decrements the in-flight count when the request is answered.
struct InFlight {
  explicit InFlight(std::atomic<uint64_t>& n) : n_(n) { n_.fetch_add(1); }
  ~InFlight() { n_.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  std::atomic<uint64_t>& n_;
};

}  // namespace

Result<InferResponse> ModelServer::infer(InferRequest request) {
  // Counted before the drain check, so that wait_idle() after begin_drain()
  // sees every request that got past it.
  InFlight in_flight(in_flight_);
  Model* m = find(request.model);
  if (m == nullptr) return unknown_model(request.model, model_names());
  auto fail = [&](Status status) -> Result<InferResponse> {
    std::lock_guard lock(m->metrics_mu);
    m->counters[""].failure += 1;
    return status;
  };
  if (!request.version.empty() && request.version != "1") {
    return fail(not_found("model '" + m->config.name + "' has no version '" + request.version +
                          "'; its only version is 1"));
  }
  if (draining_.load()) return fail(unavailable("the server is shutting down; send the request elsewhere"));
  auto rows = check_request(*m, request, options_.max_request_bytes);
  if (!rows.ok()) return fail(rows.status());
  auto pending = std::make_unique<Pending>();
  pending->request = std::move(request);
  pending->rows = *rows;
  pending->enqueued = Clock::now();
  std::future<Result<InferResponse>> future = pending->done.get_future();
  {
    std::lock_guard lock(m->mu);
    if (m->stopping) return fail(unavailable("the server is stopping"));
    if (m->queue.size() >= options_.max_queue) {
      return fail(unavailable("model '" + m->config.name + "': " + std::to_string(m->queue.size()) +
                              " requests are waiting already (--max-queue); retry later"));
    }
    m->queue.push_back(std::move(pending));
  }
  m->cv.notify_all();
  return future.get();
}

void ModelServer::begin_drain() {
  draining_.store(true);
  for (auto& m : models_) {
    { std::lock_guard lock(m->mu); }
    m->cv.notify_all();
  }
}

bool ModelServer::wait_idle(std::chrono::milliseconds timeout) {
  const Clock::time_point end = Clock::now() + timeout;
  while (in_flight_.load() != 0) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace loom::serve
