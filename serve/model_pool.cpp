// The sessions of a model at work: taking requests (gathered into batches
// when the model batches), running them, splitting batched outputs, and
// counting what they did.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <optional>

#include "model_state.hpp"

namespace loom::serve {

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

// Runs requests on one session of `model` on a thread of its own (loop());
// owns the session.
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

  // Runs the requests of `batch` as one run when there are several and every
  // output comes back batch-major; otherwise one by one. Answers each.
  void run_batch(std::vector<std::unique_ptr<Pending>>& batch) {
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


std::shared_ptr<Worker> make_worker(ModelServer* server, ModelServer::Model* model,
                                    std::unique_ptr<Session> session) {
  return std::make_shared<Worker>(server, model, std::move(session));
}

void worker_loop(Worker& worker) { worker.loop(); }

}  // namespace loom::serve
