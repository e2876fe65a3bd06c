// serve_load: a load generator for `loom serve`, and the in-process baseline
// it is compared with (benchmarks/serve/run_serve_bench.sh).
//
//   serve_load --model NAME --input FILE.npy [--input FILE.npy ...]
//              (--grpc HOST:PORT | --http HOST:PORT | --in-process PROGRAM.loom [--device SEL])
//              [--clients N] [--requests R] [--warmup W] [--ping]
//
// N client threads send R requests in all (the inputs in binary form:
// gRPC's raw_input_contents, REST's binary-data extension), each over its own
// connection, one request at a time. Client k sends the inputs scaled by
// (1 + k/8), so that a response sent to the wrong client is caught: every
// response is checked for its id and against the client's first answer
// (relative 1e-3 + absolute 1e-5 per element, since a batched run may round
// differently from a lone one). --in-process runs Session::run on the same
// program in this process, on one thread: the baseline the server's
// overhead is measured against. Prints one JSON line: throughput, p50, p90,
// p99 in microseconds, errors, mismatches, lost requests. --ping times the
// protocol's round trip alone (ServerLive, GET /v2/health/live): the floor
// that no server on this transport goes below.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "grpc_predict_v2.grpc.pb.h"
#include "loom/npy.hpp"
#include "loom/runtime.hpp"
#include "model_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string model;
  std::vector<std::string> inputs;
  std::string grpc, http, in_process, device;
  int clients = 1;
  int requests = 1000;
  int warmup = 20;
  bool ping = false;
};

struct NamedInput {
  std::string name;
  loom::Tensor tensor;
};

// One client's inputs: every float element scaled by `scale`.
std::vector<NamedInput> scaled_inputs(const std::vector<NamedInput>& base, float scale) {
  std::vector<NamedInput> out = base;
  for (NamedInput& in : out) {
    if (in.tensor.dtype() != loom::DType::kF32) continue;
    float* p = in.tensor.data_as<float>();
    for (uint64_t i = 0; i < in.tensor.element_count(); ++i) p[i] *= scale;
  }
  return out;
}

bool close_enough(const std::string& got, const std::string& want) {
  if (got.size() != want.size() || got.size() % 4 != 0) return false;
  const float* a = reinterpret_cast<const float*>(got.data());
  const float* b = reinterpret_cast<const float*>(want.data());
  for (size_t i = 0; i < got.size() / 4; ++i) {
    if (!(std::fabs(a[i] - b[i]) <= 1e-5f + 1e-3f * std::fabs(b[i]))) return false;
  }
  return true;
}

// A connection that sends one request and returns the first output's bytes
// and the echoed id.
class Client {
 public:
  virtual ~Client() = default;
  virtual bool infer(const std::string& id, std::string* output, std::string* echoed, std::string* error) = 0;
  // The protocol's round trip without a model (--ping): ServerLive, or
  // GET /v2/health/live.
  virtual bool ping(std::string* error) = 0;
};

class GrpcClient : public Client {
 public:
  GrpcClient(const std::string& address, const std::string& model, const std::vector<NamedInput>& inputs) {
    grpc::ChannelArguments channel_args;
    channel_args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per client
    channel_args.SetMaxReceiveMessageSize(-1);
    channel_args.SetMaxSendMessageSize(-1);
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), channel_args));
    request_.set_model_name(model);
    for (const NamedInput& in : inputs) {
      auto* t = request_.add_inputs();
      t->set_name(in.name);
      t->set_datatype(std::string(loom::serve::kserve_datatype(in.tensor.dtype())));
      for (int64_t d : in.tensor.shape()) t->add_shape(d);
      request_.add_raw_input_contents(reinterpret_cast<const char*>(in.tensor.data()), in.tensor.byte_size());
    }
  }
  bool infer(const std::string& id, std::string* output, std::string* echoed, std::string* error) override {
    request_.set_id(id);
    inference::ModelInferResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->ModelInfer(&context, request_, &response);
    if (!status.ok()) {
      *error = "gRPC " + std::to_string(status.error_code()) + ": " + status.error_message();
      return false;
    }
    if (response.raw_output_contents_size() == 0) {
      *error = "no raw_output_contents in the response";
      return false;
    }
    *output = response.raw_output_contents(0);
    *echoed = response.id();
    return true;
  }

  bool ping(std::string* error) override {
    inference::ServerLiveRequest request;
    inference::ServerLiveResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->ServerLive(&context, request, &response);
    if (!status.ok()) *error = status.error_message();
    return status.ok() && response.live();
  }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  inference::ModelInferRequest request_;
};

class HttpClient : public Client {
 public:
  HttpClient(const std::string& address, const std::string& model, const std::vector<NamedInput>& inputs)
      : http_("http://" + address), path_("/v2/models/" + model + "/infer") {
    http_.set_keep_alive(true);
    http_.set_tcp_nodelay(true);
    http_.set_read_timeout(120, 0);
    for (const NamedInput& in : inputs) {
      nlohmann::json t = {{"name", in.name},
                          {"datatype", std::string(loom::serve::kserve_datatype(in.tensor.dtype()))},
                          {"shape", in.tensor.shape()},
                          {"parameters", {{"binary_data_size", in.tensor.byte_size()}}}};
      inputs_json_.push_back(t);
      binary_.append(reinterpret_cast<const char*>(in.tensor.data()), in.tensor.byte_size());
    }
  }
  bool infer(const std::string& id, std::string* output, std::string* echoed, std::string* error) override {
    nlohmann::json doc = {{"id", id}, {"inputs", inputs_json_}, {"parameters", {{"binary_data_output", true}}}};
    const std::string head = doc.dump();
    httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(head.size())}};
    auto res = http_.Post(path_.c_str(), headers, head + binary_, "application/octet-stream");
    if (!res) {
      *error = "HTTP: " + httplib::to_string(res.error());
      return false;
    }
    if (res->status != 200) {
      *error = "HTTP " + std::to_string(res->status) + ": " + res->body;
      return false;
    }
    const size_t json_length = std::stoul(res->get_header_value("Inference-Header-Content-Length"));
    auto reply = nlohmann::json::parse(res->body.substr(0, json_length));
    const size_t size = reply["outputs"][0]["parameters"]["binary_data_size"].get<size_t>();
    *output = res->body.substr(json_length, size);
    *echoed = reply.value("id", "");
    return true;
  }

  bool ping(std::string* error) override {
    auto res = http_.Get("/v2/health/live");
    if (!res || res->status != 200) *error = res ? "HTTP " + std::to_string(res->status) : "HTTP: no answer";
    return res && res->status == 200;
  }

 private:
  httplib::Client http_;
  std::string path_;
  nlohmann::json inputs_json_ = nlohmann::json::array();
  std::string binary_;
};

class InProcessClient : public Client {
 public:
  InProcessClient(loom::Session* session, const std::vector<NamedInput>& inputs)
      : session_(session), inputs_(inputs) {}
  bool infer(const std::string& id, std::string* output, std::string* echoed, std::string* error) override {
    for (const NamedInput& in : inputs_) {
      if (loom::Status s = session_->set_input(in.name, in.tensor); !s.ok()) {
        *error = s.message();
        return false;
      }
    }
    if (loom::Status s = session_->run(); !s.ok()) {
      *error = s.message();
      return false;
    }
    const loom::Tensor& t = session_->output(0);
    output->assign(reinterpret_cast<const char*>(t.data()), t.byte_size());
    *echoed = id;
    return true;
  }

  bool ping(std::string* error) override {
    *error = "--ping needs --grpc or --http";
    return false;
  }

 private:
  loom::Session* session_;
  std::vector<NamedInput> inputs_;
};

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
  return sorted[i];
}

int usage(const std::string& why) {
  std::cerr << "serve_load: " << why
            << "\nusage: serve_load --model NAME --input NAME=FILE.npy ... (--grpc HOST:PORT | --http HOST:PORT | "
               "--in-process PROGRAM.loom [--device SEL]) [--clients N] [--requests R] [--warmup W]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "--model") args.model = value();
    else if (a == "--input") args.inputs.push_back(value());
    else if (a == "--grpc") args.grpc = value();
    else if (a == "--http") args.http = value();
    else if (a == "--in-process") args.in_process = value();
    else if (a == "--device") args.device = value();
    else if (a == "--clients") args.clients = std::atoi(value().c_str());
    else if (a == "--requests") args.requests = std::atoi(value().c_str());
    else if (a == "--warmup") args.warmup = std::atoi(value().c_str());
    else if (a == "--ping") args.ping = true;
    else return usage("unknown argument '" + a + "'");
  }
  if (args.inputs.empty() || args.clients < 1 || args.requests < 1) return usage("missing or bad arguments");
  if ((args.grpc.empty() ? 0 : 1) + (args.http.empty() ? 0 : 1) + (args.in_process.empty() ? 0 : 1) != 1) {
    return usage("give one of --grpc, --http, --in-process");
  }
  std::vector<NamedInput> base;
  for (const std::string& text : args.inputs) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos) return usage("--input '" + text + "' is not NAME=FILE.npy");
    auto t = loom::io::read_npy(text.substr(eq + 1));
    if (!t.ok()) return usage(t.status().message());
    base.push_back({text.substr(0, eq), std::move(*t)});
  }

  std::unique_ptr<loom::Runtime> runtime;
  std::shared_ptr<loom::Program> program;
  std::vector<std::unique_ptr<loom::Session>> sessions;
  std::vector<std::unique_ptr<Client>> clients;
  std::string mode;
  for (int k = 0; k < args.clients; ++k) {
    const std::vector<NamedInput> inputs = scaled_inputs(base, 1.0f + static_cast<float>(k) / 8.0f);
    if (!args.grpc.empty()) {
      mode = "grpc";
      clients.push_back(std::make_unique<GrpcClient>(args.grpc, args.model, inputs));
    } else if (!args.http.empty()) {
      mode = "http";
      clients.push_back(std::make_unique<HttpClient>(args.http, args.model, inputs));
    } else {
      mode = "in-process";
      if (!runtime) {
        auto r = loom::Runtime::create();
        if (!r.ok()) return usage(r.status().message());
        runtime = std::move(*r);
        auto p = runtime->load_program(args.in_process, {.device = args.device});
        if (!p.ok()) return usage(p.status().message());
        program = *p;
      }
      auto s = program->create_session();
      if (!s.ok()) return usage(s.status().message());
      sessions.push_back(std::move(*s));
      clients.push_back(std::make_unique<InProcessClient>(sessions.back().get(), inputs));
    }
  }

  // Each client's reference answer, then the warm-up.
  std::vector<std::string> expected(clients.size());
  for (size_t k = 0; k < clients.size(); ++k) {
    std::string echoed, error;
    for (int w = 0; w < std::max(1, args.warmup); ++w) {
      if (!clients[k]->infer("warmup", &expected[k], &echoed, &error)) {
        std::cerr << "serve_load: warm-up request failed: " << error << "\n";
        return 1;
      }
    }
  }

  std::atomic<int> next{0};
  std::atomic<int> errors{0}, mismatches{0}, wrong_ids{0};
  std::vector<std::vector<double>> latencies(clients.size());
  std::string first_error;
  std::mutex error_mu;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (size_t k = 0; k < clients.size(); ++k) {
    threads.emplace_back([&, k] {
      std::string output, echoed, error;
      for (;;) {
        const int n = next.fetch_add(1);
        if (n >= args.requests) return;
        const std::string id = std::to_string(k) + "-" + std::to_string(n);
        const Clock::time_point t0 = Clock::now();
        const bool ok = args.ping ? clients[k]->ping(&error) : clients[k]->infer(id, &output, &echoed, &error);
        latencies[k].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (!ok) {
          errors.fetch_add(1);
          std::lock_guard lock(error_mu);
          if (first_error.empty()) first_error = error;
          continue;
        }
        if (args.ping) continue;
        if (echoed != id) wrong_ids.fetch_add(1);
        if (!close_enough(output, expected[k])) mismatches.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  if (args.ping) mode += "-ping";
  nlohmann::json report = {{"mode", mode},
                           {"model", args.model},
                           {"clients", args.clients},
                           {"requests", args.requests},
                           {"answered", all.size()},
                           {"seconds", seconds},
                           {"throughput_rps", static_cast<double>(all.size()) / seconds},
                           {"p50_us", percentile(all, 0.50)},
                           {"p90_us", percentile(all, 0.90)},
                           {"p99_us", percentile(all, 0.99)},
                           {"errors", errors.load()},
                           {"wrong_ids", wrong_ids.load()},
                           {"mismatches", mismatches.load()}};
  if (!first_error.empty()) report["first_error"] = first_error;
  std::cout << report.dump() << std::endl;
  const bool clean = errors.load() == 0 && wrong_ids.load() == 0 && mismatches.load() == 0 &&
                     all.size() == static_cast<size_t>(args.requests);
  return clean ? 0 : 1;
}
