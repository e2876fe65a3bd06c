#include "model_server.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include "loom/version.hpp"

namespace loom::serve {

namespace {

using Clock = std::chrono::steady_clock;

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

// Upper bounds (seconds) of the request-latency histogram's buckets.
constexpr double kLatencyBuckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                      0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                      5,      10};
constexpr size_t kBucketCount = sizeof(kLatencyBuckets) / sizeof(kLatencyBuckets[0]);

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

// A Prometheus label value: backslash, quote and newline escaped.
std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

// What ModelServer::Model holds (outside the anonymous namespace, as the
// model has external linkage). A request waiting for its model's pool:
struct Pending {
  InferRequest request;
  std::promise<Result<InferResponse>> done;
  Clock::time_point enqueued;
  // Dimension 0 of every input when they all agree on it and the model
  // batches; -1: the request runs alone.
  int64_t rows = -1;
};

// Counters of one model on one device ("" before any run got there).
struct DeviceCounters {
  uint64_t success = 0;
  uint64_t failure = 0;
  double queue_seconds = 0;
  double compute_seconds = 0;
  uint64_t batches = 0;
  uint64_t batch_rows = 0;
};

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

class Worker;

struct ModelServer::Model {
  ModelConfig config;
  std::shared_ptr<Program> program;
  FunctionInfo function;
  bool batching = false;      // requests may be run together
  int64_t batch_rows = 1;     // the most rows of one batched run
  std::atomic<bool> batching_broken{false};  // an output is not batch-major

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Pending>> queue;  // batching: requests for the worker threads
  bool stopping = false;
  std::vector<std::thread> workers;             // batching: one per instance
  // Without batching there are no threads of its own: the thread that takes
  // a request runs it on an idle instance (no hand-over between threads),
  // waiting for one when all are busy.
  std::vector<std::shared_ptr<Worker>> instances;
  std::vector<Worker*> idle;
  size_t waiting = 0;  // callers waiting for an idle instance

  mutable std::mutex metrics_mu;
  std::map<std::string, DeviceCounters> counters;  // by device label
  uint64_t latency_buckets[kBucketCount + 1] = {};  // the last: +Inf
  double latency_sum = 0;
  uint64_t latency_count = 0;
};

namespace {

// Whether two requests can share a run: same inputs in the same order with
// the same shapes except dimension 0.
bool batch_compatible(const Pending& a, const Pending& b) {
  if (a.rows < 0 || b.rows < 0 || a.request.inputs.size() != b.request.inputs.size()) return false;
  for (size_t i = 0; i < a.request.inputs.size(); ++i) {
    const Tensor& x = a.request.inputs[i].tensor;
    const Tensor& y = b.request.inputs[i].tensor;
    if (a.request.inputs[i].name != b.request.inputs[i].name || x.dtype() != y.dtype() ||
        x.rank() != y.rank() || !std::equal(x.shape().begin() + 1, x.shape().end(), y.shape().begin() + 1)) {
      return false;
    }
  }
  return true;
}

std::string devices_label(const Program& program) {
  std::vector<std::string> devices;
  for (const DelegatePlacement& p : program.placements()) {
    if (std::find(devices.begin(), devices.end(), p.device) == devices.end()) devices.push_back(p.device);
  }
  std::sort(devices.begin(), devices.end());
  std::string out;
  for (const std::string& d : devices) out += (out.empty() ? "" : ",") + d;
  return out.empty() ? "reference" : out;
}

}  // namespace

// Runs requests on one session of `model`; owns the session. With batching,
// loop() is its thread; without, callers run run_batch() on it in turn.
class Worker {
 public:
  Worker(ModelServer* server, ModelServer::Model* model, std::unique_ptr<Session> session)
      : server_(server), model_(model), session_(std::move(session)) {}

  void loop() {
    for (;;) {
      std::vector<std::unique_ptr<Pending>> batch = next_batch();
      if (batch.empty()) return;
      run_batch(batch);
    }
  }

  // Runs the requests of `batch` as one run when there are several and every
  // output comes back batch-major; otherwise one by one. Answers each.
  void run_batch(std::vector<std::unique_ptr<Pending>>& batch);

 private:
  // The next requests to run together: the oldest one, and, when the model
  // batches, others that fit with it, gathered until the batch is full, the
  // oldest has waited batch_delay, or the server drains. Empty: stop.
  std::vector<std::unique_ptr<Pending>> next_batch() {
    std::vector<std::unique_ptr<Pending>> batch;
    std::unique_lock lock(model_->mu);
    model_->cv.wait(lock, [&] { return model_->stopping || !model_->queue.empty(); });
    if (model_->queue.empty()) return batch;
    batch.push_back(std::move(model_->queue.front()));
    model_->queue.pop_front();
    if (!model_->batching || model_->batching_broken.load() || batch[0]->rows < 0) return batch;
    int64_t rows = batch[0]->rows;
    const Clock::time_point deadline = batch[0]->enqueued + model_->config.batch_delay;
    for (;;) {
      for (auto it = model_->queue.begin(); it != model_->queue.end() && rows < model_->batch_rows;) {
        if (batch_compatible(*batch[0], **it) && rows + (*it)->rows <= model_->batch_rows) {
          rows += (*it)->rows;
          batch.push_back(std::move(*it));
          it = model_->queue.erase(it);
        } else {
          ++it;
        }
      }
      if (rows >= model_->batch_rows || model_->stopping || server_->draining() ||
          Clock::now() >= deadline) {
        return batch;
      }
      model_->cv.wait_until(lock, deadline);
    }
  }

  // Sets the inputs, runs, and copies the asked-for outputs of `request`.
  Result<std::vector<InferTensor>> run_one(const std::vector<InferTensor>& inputs,
                                           const InferRequest& request) {
    for (const InferTensor& in : inputs) LOOM_RETURN_IF_ERROR(session_->set_input(in.name, in.tensor));
    LOOM_RETURN_IF_ERROR(run_session());
    return collect(request, /*row_begin=*/0, /*rows=*/-1);
  }

  Status run_session() {
    Status status = session_->run();
    if (status.code() == StatusCode::kDeadlineExceeded) {
      // The session must not run again after a deadline (its device may
      // still be busy with it): the next request gets a new one.
      auto fresh = model_->program->create_session(model_->function.name);
      if (fresh.ok()) session_ = std::move(*fresh);
    }
    return status;
  }

  // The outputs `request` asked for, or rows [row_begin, row_begin + rows)
  // of each when the run was a batch (rows < 0: the whole tensors).
  Result<std::vector<InferTensor>> collect(const InferRequest& request, int64_t row_begin, int64_t rows) {
    std::vector<InferTensor> out;
    auto add = [&](size_t index, bool binary) -> Status {
      const Tensor& t = session_->output(index);
      Shape shape = t.shape();
      std::span<const std::byte> bytes = t.bytes();
      if (rows >= 0) {
        const size_t row_bytes = shape[0] == 0 ? 0 : t.byte_size() / static_cast<size_t>(shape[0]);
        bytes = bytes.subspan(static_cast<size_t>(row_begin) * row_bytes, static_cast<size_t>(rows) * row_bytes);
        shape[0] = rows;
      }
      LOOM_ASSIGN_OR_RETURN(Tensor copy, Tensor::copy_of(t.dtype(), shape, bytes));
      out.push_back({model_->function.outputs[index].name, std::move(copy), binary || request.all_binary});
      return Status();
    };
    if (request.outputs.empty()) {
      for (size_t i = 0; i < session_->output_count(); ++i) LOOM_RETURN_IF_ERROR(add(i, false));
      return out;
    }
    for (const RequestedOutput& want : request.outputs) {
      for (size_t i = 0; i < model_->function.outputs.size(); ++i) {
        if (model_->function.outputs[i].name == want.name) LOOM_RETURN_IF_ERROR(add(i, want.binary));
      }
    }
    return out;
  }

  void run_batch_impl(std::vector<std::unique_ptr<Pending>>& batch) {
    const Clock::time_point start = Clock::now();
    std::vector<Result<std::vector<InferTensor>>> results;
    uint64_t runs = 0;
    if (batch.size() > 1) {
      if (auto merged = run_merged(batch); merged.has_value()) {
        results = std::move(*merged);
        runs = 1;
      }
    }
    if (results.empty()) {
      for (const auto& p : batch) {
        results.push_back(run_one(p->request.inputs, p->request));
        ++runs;
      }
    }
    const Clock::time_point end = Clock::now();
    const std::string device = device_label();
    const double compute = std::chrono::duration<double>(end - start).count();
    {
      std::lock_guard lock(model_->metrics_mu);
      DeviceCounters& c = model_->counters[device];
      c.batches += runs;
      for (size_t i = 0; i < batch.size(); ++i) {
        (results[i].ok() ? c.success : c.failure) += 1;
        c.queue_seconds += std::chrono::duration<double>(start - batch[i]->enqueued).count();
        c.compute_seconds += compute / static_cast<double>(batch.size());
        c.batch_rows += batch[i]->rows > 0 ? static_cast<uint64_t>(batch[i]->rows) : 1;
        const double latency = std::chrono::duration<double>(end - batch[i]->enqueued).count();
        size_t b = 0;
        while (b < kBucketCount && latency > kLatencyBuckets[b]) ++b;
        model_->latency_buckets[b] += 1;
        model_->latency_sum += latency;
        model_->latency_count += 1;
      }
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      Pending& p = *batch[i];
      if (!results[i].ok()) {
        p.done.set_value(results[i].status());
        continue;
      }
      InferResponse response;
      response.model = model_->config.name;
      response.version = "1";
      response.id = p.request.id;
      response.outputs = std::move(*results[i]);
      p.done.set_value(std::move(response));
    }
  }

  // One run of every request of `batch` concatenated along dimension 0.
  // Nothing (the caller runs them one by one) when the run is refused as
  // an argument error (so that one request cannot fail the others) or an
  // output's dimension 0 is not the batch's rows.
  std::optional<std::vector<Result<std::vector<InferTensor>>>> run_merged(
      const std::vector<std::unique_ptr<Pending>>& batch) {
    int64_t total = 0;
    for (const auto& p : batch) total += p->rows;
    const std::vector<InferTensor>& first = batch[0]->request.inputs;
    for (size_t i = 0; i < first.size(); ++i) {
      Shape shape = first[i].tensor.shape();
      shape[0] = total;
      auto merged = Tensor::zeros(first[i].tensor.dtype(), shape);
      if (!merged.ok()) return std::nullopt;
      std::byte* dst = static_cast<std::byte*>(merged->data());
      for (const auto& p : batch) {
        const Tensor& part = p->request.inputs[i].tensor;
        if (part.byte_size() != 0) std::memcpy(dst, part.data(), part.byte_size());
        dst += part.byte_size();
      }
      if (!session_->set_input(first[i].name, *merged).ok()) return std::nullopt;
    }
    Status status = run_session();
    if (status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kOutOfRange) {
      return std::nullopt;
    }
    std::vector<Result<std::vector<InferTensor>>> results;
    if (!status.ok()) {
      for (size_t i = 0; i < batch.size(); ++i) results.push_back(status);
      return results;
    }
    for (size_t o = 0; o < session_->output_count(); ++o) {
      const Tensor& t = session_->output(o);
      if (t.rank() == 0 || t.shape()[0] != total) {
        if (!model_->batching_broken.exchange(true)) {
          std::cerr << "loom serve: warning: model '" << model_->config.name << "': output '"
                    << model_->function.outputs[o].name << "' has shape " << shape_to_string(t.shape())
                    << " for a batch of " << total
                    << " rows, so its rows cannot be split among requests; batching is off for "
                       "this model\n";
        }
        return std::nullopt;
      }
    }
    int64_t row = 0;
    for (const auto& p : batch) {
      results.push_back(collect(p->request, row, p->rows));
      row += p->rows;
    }
    return results;
  }

  // The devices the last run used; recomputed when the program changes (an
  // open-shape binding) or a delegate fell back.
  std::string device_label() {
    std::shared_ptr<Program> bound = session_->bound_program();
    const Program* now = bound ? bound.get() : model_->program.get();
    const size_t fallbacks = model_->program->fallbacks().size();
    if (now != labelled_ || fallbacks != fallbacks_seen_ || label_.empty()) {
      label_ = devices_label(*now);
      labelled_ = now;
      fallbacks_seen_ = fallbacks;
    }
    return label_;
  }

  ModelServer* server_;
  ModelServer::Model* model_;
  std::unique_ptr<Session> session_;
  std::string label_;
  const Program* labelled_ = nullptr;
  size_t fallbacks_seen_ = 0;
};

void Worker::run_batch(std::vector<std::unique_ptr<Pending>>& batch) { run_batch_impl(batch); }

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
      auto worker = std::make_shared<Worker>(server.get(), raw, std::move(session));
      raw->instances.push_back(worker);
      if (raw->batching) {
        raw->workers.emplace_back([worker] { worker->loop(); });
      } else {
        raw->idle.push_back(worker.get());
      }
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
    // Callers running on an instance finish their run first.
    std::unique_lock lock(model->mu);
    model->cv.wait(lock, [&] { return model->idle.size() == model->instances.size() || model->batching; });
    lock.unlock();
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
  if (!m->batching) {
    Worker* instance = nullptr;
    {
      std::unique_lock lock(m->mu);
      if (m->idle.empty()) {
        if (m->waiting >= options_.max_queue) {
          return fail(unavailable("model '" + m->config.name + "': " + std::to_string(m->waiting) +
                                  " requests are waiting already (--max-queue); retry later"));
        }
        ++m->waiting;
        m->cv.wait(lock, [&] { return m->stopping || !m->idle.empty(); });
        --m->waiting;
      }
      if (m->idle.empty()) return fail(unavailable("the server is stopping"));
      instance = m->idle.back();
      m->idle.pop_back();
    }
    std::vector<std::unique_ptr<Pending>> one;
    one.push_back(std::move(pending));
    instance->run_batch(one);
    {
      std::lock_guard lock(m->mu);
      m->idle.push_back(instance);
    }
    m->cv.notify_all();
    return future.get();
  }
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

void ModelServer::count_rejected(std::string_view protocol, std::string_view model) {
  (protocol == "grpc" ? rejected_grpc_ : rejected_http_).fetch_add(1);
  if (Model* m = find(model)) {
    std::lock_guard lock(m->metrics_mu);
    m->counters[""].failure += 1;
  }
}

std::string ModelServer::metrics_text() const {
  std::string out;
  auto head = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return std::string(buf);
  };
  head("loom_serve_ready", "gauge", "1 while the server takes requests, 0 while it drains.");
  out += std::string("loom_serve_ready ") + (draining_.load() ? "0" : "1") + "\n";
  head("loom_serve_in_flight", "gauge", "Requests taken and not yet answered.");
  out += "loom_serve_in_flight " + std::to_string(in_flight_.load()) + "\n";
  head("loom_serve_rejected_requests_total", "counter",
       "Requests refused before reaching a model (malformed), by protocol.");
  out += "loom_serve_rejected_requests_total{protocol=\"http\"} " + std::to_string(rejected_http_.load()) + "\n";
  out += "loom_serve_rejected_requests_total{protocol=\"grpc\"} " + std::to_string(rejected_grpc_.load()) + "\n";

  struct Row {
    std::string model, device;
    DeviceCounters c;
  };
  std::vector<Row> rows;
  std::vector<std::pair<std::string, size_t>> depths;
  struct Latency {
    std::string model;
    std::vector<uint64_t> buckets;
    double sum;
    uint64_t count;
  };
  std::vector<Latency> latencies;
  for (const auto& m : models_) {
    {
      std::lock_guard lock(m->metrics_mu);
      for (const auto& [device, c] : m->counters) rows.push_back({m->config.name, device, c});
      latencies.push_back({m->config.name,
                           std::vector<uint64_t>(m->latency_buckets, m->latency_buckets + kBucketCount + 1),
                           m->latency_sum, m->latency_count});
    }
    std::lock_guard lock(m->mu);
    depths.emplace_back(m->config.name, m->queue.size() + m->waiting);
  }
  auto labels = [](const Row& r) {
    return "{model=\"" + label_value(r.model) + "\",device=\"" + label_value(r.device.empty() ? "none" : r.device) + "\"";
  };
  head("loom_serve_requests_total", "counter",
       "Inference requests answered, by model, device (none: refused before running) and outcome.");
  for (const Row& r : rows) {
    out += "loom_serve_requests_total" + labels(r) + ",outcome=\"success\"} " + std::to_string(r.c.success) + "\n";
    out += "loom_serve_requests_total" + labels(r) + ",outcome=\"failure\"} " + std::to_string(r.c.failure) + "\n";
  }
  head("loom_serve_queue_seconds_total", "counter", "Time requests waited for a session, summed.");
  for (const Row& r : rows) out += "loom_serve_queue_seconds_total" + labels(r) + "} " + num(r.c.queue_seconds) + "\n";
  head("loom_serve_compute_seconds_total", "counter",
       "Time sessions spent running requests (a batch's time shared among its requests), summed.");
  for (const Row& r : rows) {
    out += "loom_serve_compute_seconds_total" + labels(r) + "} " + num(r.c.compute_seconds) + "\n";
  }
  head("loom_serve_runs_total", "counter", "Session runs (a batch of several requests is one run).");
  for (const Row& r : rows) out += "loom_serve_runs_total" + labels(r) + "} " + std::to_string(r.c.batches) + "\n";
  head("loom_serve_rows_total", "counter", "Rows (dimension 0) of the requests run.");
  for (const Row& r : rows) out += "loom_serve_rows_total" + labels(r) + "} " + std::to_string(r.c.batch_rows) + "\n";
  head("loom_serve_queue_depth", "gauge", "Requests waiting for a session, by model.");
  for (const auto& [model, depth] : depths) {
    out += "loom_serve_queue_depth{model=\"" + label_value(model) + "\"} " + std::to_string(depth) + "\n";
  }
  head("loom_serve_request_duration_seconds", "histogram",
       "Time from a request's arrival at its model to its answer, by model.");
  for (const Latency& l : latencies) {
    uint64_t cumulative = 0;
    const std::string model = label_value(l.model);
    for (size_t b = 0; b <= kBucketCount; ++b) {
      cumulative += l.buckets[b];
      const std::string le = b < kBucketCount ? num(kLatencyBuckets[b]) : "+Inf";
      out += "loom_serve_request_duration_seconds_bucket{model=\"" + model + "\",le=\"" + le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += "loom_serve_request_duration_seconds_sum{model=\"" + model + "\"} " + num(l.sum) + "\n";
    out += "loom_serve_request_duration_seconds_count{model=\"" + model + "\"} " + std::to_string(l.count) + "\n";
  }
  return out;
}

Result<std::string> ModelServer::record_trace(std::chrono::milliseconds duration) {
  if (duration.count() <= 0 || duration > std::chrono::milliseconds(60'000)) {
    return invalid_argument("a trace lasts 1 to 60000 ms; asked for " + std::to_string(duration.count()));
  }
  if (tracing_.exchange(true)) return failed_precondition("a trace is being recorded already; try again when it ends");
  std::shared_ptr<Trace> trace = runtime_->start_trace();
  std::this_thread::sleep_for(duration);
  runtime_->stop_trace();
  tracing_.store(false);
  return trace->to_chrome_json();
}

}  // namespace loom::serve
