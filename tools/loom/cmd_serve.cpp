// `loom serve`: the models given, served over the Open Inference Protocol
// (KServe v2) on REST and gRPC until SIGTERM or SIGINT, which drain it.
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "http_frontend.hpp"
#include "loom/file_type.hpp"
#include "loom/runtime.hpp"
#include "model_server.hpp"
#if LOOM_SERVE_GRPC
#include "grpc_frontend.hpp"
#endif
#if LOOM_HAVE_COMPILER
#include "loom/compiler.hpp"
#include "loom/conformance/model_compare.hpp"
#endif

namespace loom::cli {
namespace {

bool has_suffix(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Scratch folders of compiled ONNX models, removed at exit.
struct ScratchFolders {
  ScratchFolders() = default;
  ScratchFolders(const ScratchFolders&) = delete;
  ScratchFolders& operator=(const ScratchFolders&) = delete;
  ~ScratchFolders() {
    for (const auto& dir : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
  std::vector<std::filesystem::path> dirs;
};

// An ONNX model compiled for the plugins `device` selects, with the model's
// open dimensions left open (the batch dimension among them), so that one
// program serves every request shape.
Result<std::filesystem::path> compile_model(Runtime& runtime, const std::string& name, const std::string& path,
                                            const std::string& device, ScratchFolders& scratch) {
#if LOOM_HAVE_COMPILER
  compiler::CompileOptions options;
  if (device.empty()) {
    // As `loom compile` without --target: every plugin that compiles, each
    // subgraph with variants for the others and the reference kernels.
    options.targets = compiler::default_targets(runtime.plugin_host());
    options.variants = compiler::CompileOptions::Variants::kAll;
  } else {
    LOOM_ASSIGN_OR_RETURN(options.targets, conformance::compile_targets_for(runtime, device));
  }
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "loom-serve-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return unavailable("cannot create a scratch folder in " + base.string());
  scratch.dirs.emplace_back(pattern);
  std::filesystem::path out = scratch.dirs.back() / (name + ".loom");
  auto report = compiler::compile_onnx_file(runtime.plugin_host(), path, out, options);
  if (!report.ok()) return Status(report.status().code(), "model '" + name + "': " + report.status().message());
  return out;
#else
  (void)runtime;
  (void)device;
  (void)scratch;
  return unimplemented("model '" + name + "': " + path +
                       " is an ONNX model, and this loom was built without the compiler; compile it to a "
                       ".loom program first");
#endif
}

Status parse_model_option(const std::string& text, const char* option, std::string* name, std::string* value) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return invalid_argument(std::string(option) + " '" + text + "' is not NAME=VALUE");
  }
  *name = text.substr(0, eq);
  *value = text.substr(eq + 1);
  return Status();
}

Status serve(const ServeArgs& args) {
  // SIGTERM and SIGINT are taken by sigwait below; block them before any
  // thread starts, so that every thread inherits the mask and none of them
  // is picked to die of the signal.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (args.no_http && args.no_grpc) {
    return invalid_argument("--no-http and --no-grpc leave nothing to listen on; keep one of them");
  }
  RuntimeOptions runtime_options;
  runtime_options.threads = args.threads;
  LOOM_RETURN_IF_ERROR(add_plugin_options(args.plugin_options, &runtime_options));
  add_isolated_plugins(args.isolate, &runtime_options);
  runtime_options.require_conformance = args.require_conformance;
  LOOM_ASSIGN_OR_RETURN(auto runtime, Runtime::create(runtime_options));

  serve::ServerOptions options;
  options.device = args.device;
  options.fallback = args.fallback;
  options.run_timeout = std::chrono::seconds(args.timeout_s);
  options.max_request_bytes = args.max_request_bytes;
  options.max_queue = args.max_queue;
  ScratchFolders scratch;
  for (const std::string& text : args.models) {
    serve::ModelConfig model;
    std::string path;
    LOOM_RETURN_IF_ERROR(parse_model_option(text, "--model", &model.name, &path));
    LOOM_RETURN_IF_ERROR(serve::check_model_name(model.name));
    for (const std::string& d : args.model_devices) {
      std::string name, selector;
      LOOM_RETURN_IF_ERROR(parse_model_option(d, "--model-device", &name, &selector));
      if (name == model.name) model.device = selector;
    }
    model.source = path;
    model.instances = args.instances;
    model.max_batch = args.max_batch;
    model.batch_delay = std::chrono::microseconds(args.batch_delay_us);
    LOOM_RETURN_IF_ERROR(check_regular_file(path, "model '" + model.name + "'"));
    if (has_suffix(path, ".onnx")) {
      const std::string device = model.device.empty() ? args.device : model.device;
      LOOM_ASSIGN_OR_RETURN(model.program, compile_model(*runtime, model.name, path, device, scratch));
    } else {
      model.program = path;
    }
    options.models.push_back(std::move(model));
  }
  for (const std::string& d : args.model_devices) {
    std::string name, selector;
    LOOM_RETURN_IF_ERROR(parse_model_option(d, "--model-device", &name, &selector));
    bool known = false;
    for (const auto& m : options.models) known = known || m.name == name;
    if (!known) return invalid_argument("--model-device names model '" + name + "', which no --model gives");
  }
  LOOM_ASSIGN_OR_RETURN(auto server, serve::ModelServer::create(runtime.get(), options));

  std::unique_ptr<serve::HttpFrontend> http;
  if (!args.no_http) {
    serve::HttpOptions http_options;
    http_options.host = args.host;
    http_options.port = args.http_port;
    http_options.threads = args.http_threads;
    http_options.max_pending_connections = args.http_max_waiting;
    http_options.read_timeout_s = args.http_read_timeout_s;
    http_options.max_body_bytes = args.max_request_bytes;
    LOOM_ASSIGN_OR_RETURN(http, serve::HttpFrontend::start(server.get(), http_options));
    std::printf("loom serve: REST on http://%s:%d\n", args.host.c_str(), http->port());
  }
#if LOOM_SERVE_GRPC
  std::unique_ptr<serve::GrpcFrontend> grpc;
  if (!args.no_grpc) {
    serve::GrpcOptions grpc_options;
    // An IPv6 host goes in brackets ("[::]:8001").
    const bool v6 = args.host.find(':') != std::string::npos && args.host.front() != '[';
    grpc_options.address = (v6 ? "[" + args.host + "]" : args.host) + ":" + std::to_string(args.grpc_port);
    grpc_options.max_message_bytes = args.max_request_bytes;
    LOOM_ASSIGN_OR_RETURN(grpc, serve::GrpcFrontend::start(server.get(), grpc_options));
    std::printf("loom serve: gRPC on %s:%d\n", args.host.c_str(), grpc->port());
  }
#endif
  for (const auto& m : options.models) {
    std::printf("loom serve: model '%s' from %s%s%s\n", m.name.c_str(), m.source.c_str(),
                m.device.empty() && args.device.empty() ? "" : " on ",
                (m.device.empty() ? args.device : m.device).c_str());
  }
  std::printf("loom serve: ready\n");
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::printf("loom serve: %s: draining (%llu requests in flight)\n", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
              static_cast<unsigned long long>(server->in_flight()));
  std::fflush(stdout);
  server->begin_drain();
  const bool idle = server->wait_idle(std::chrono::seconds(args.drain_timeout_s));
  if (http) http->shutdown();
#if LOOM_SERVE_GRPC
  if (grpc) grpc->shutdown(std::chrono::milliseconds(idle ? 1000 : 0));
#endif
  std::printf("loom serve: stopped%s\n", idle ? "" : " (the drain timeout passed with requests in flight)");
  std::fflush(stdout);
  return Status();
}

}  // namespace

int run_serve(const ServeArgs& args) {
  Status status = serve(args);
  if (!status.ok()) return fail(status);
  return 0;
}

}  // namespace loom::cli

namespace loom::cli {

CLI::App* add_serve_command(CLI::App& app, ServeArgs& args) {
  auto* cmd = app.add_subcommand(
      "serve", "Serve models over the Open Inference Protocol (KServe v2: REST and gRPC) until "
               "SIGTERM or SIGINT, which drain the server (docs/serving.md)");
  cmd->add_option("--model", args.models,
                  "NAME=PATH: serve the program (.loom) or ONNX model (.onnx, compiled at start with "
                  "its open dimensions kept open) as NAME; repeat for more models")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--device", args.device, "Device selector of every model (as in loom run)");
  cmd->add_option("--model-device", args.model_devices, "NAME=SELECTOR: the device selector of one model")
      ->allow_extra_args(false);
  cmd->add_option("--host", args.host, "Address to listen on (default 0.0.0.0)");
  cmd->add_option("--http-port", args.http_port, "REST port (default 8000; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", args.grpc_port, "gRPC port (default 8001; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_flag("--no-http", args.no_http, "Serve gRPC only");
  cmd->add_flag("--no-grpc", args.no_grpc, "Serve REST only");
  cmd->add_option("--instances", args.instances, "Sessions per model, each on a thread of its own (default 1)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--max-batch", args.max_batch,
                  "Run up to this many rows of requests together along dimension 0, for models whose "
                  "inputs leave it open (default 1: no batching)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--batch-delay-us", args.batch_delay_us,
                  "How long a request waits for others to batch with (default 0)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{10'000'000}));
  cmd->add_option("--threads", args.threads, "Cap on each plugin's worker threads (default: all cores)");
  cmd->add_option("--http-threads", args.http_threads, "Threads serving REST connections (default 32)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--http-max-waiting", args.http_max_waiting,
                  "Connections waiting for a REST thread beyond which new ones get 503 at once (default 256)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--http-read-timeout", args.http_read_timeout_s,
                  "Seconds a REST client may stay silent mid-request before it is dropped (default 10)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--timeout", args.timeout_s, "Seconds a delegate may take per run; 0: no limit (default 60)");
  cmd->add_option("--max-request-bytes", args.max_request_bytes,
                  "Largest request body and sum of input tensors (default 64 MiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  cmd->add_option("--max-queue", args.max_queue,
                  "Requests waiting per model beyond which new ones get 503 / UNAVAILABLE (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--drain-timeout", args.drain_timeout_s,
                  "On SIGTERM, seconds to wait for requests in flight before stopping (default 30)");
  cmd->add_flag("--fallback", args.fallback, "Move a delegate whose device fails to its next candidate");
  cmd->add_option("--plugin-option", args.plugin_options, "KEY=VALUE handed to every plugin")
      ->allow_extra_args(false);
  cmd->add_option("--isolate", args.isolate, "NAME[,NAME]: run these plugins each in a process of its own")
      ->allow_extra_args(false);
  cmd->add_flag("--require-conformance", args.require_conformance,
                "Reject every plugin without a valid conformance stamp");
  return cmd;
}

}  // namespace loom::cli
