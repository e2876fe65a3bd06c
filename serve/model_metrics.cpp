// ModelServer's metrics in Prometheus' text format, and traces on demand.
#include <cstdio>
#include <thread>

#include "model_state.hpp"

namespace loom::serve {

namespace {

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
    depths.emplace_back(m->config.name, m->queue.size());
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
