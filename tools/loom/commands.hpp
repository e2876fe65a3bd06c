// The subcommands of the `loom` program. Each returns the process exit code
// and prints a one-line error to stderr on failure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace CLI {
class App;
}

namespace loom {
struct RuntimeOptions;
}

namespace loom::cli {

struct DevicesArgs {
  bool json = false;
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
  std::vector<std::string> isolate;         // --isolate NAME[,NAME]
  bool require_conformance = false;         // --require-conformance
};

// `loom doctor` (cmd_doctor.cpp).
struct DoctorArgs {
  std::string plugin;                     // manifest path, library path or name; empty: all
  std::vector<std::string> plugin_paths;  // --plugin-path DIR
  bool require_conformance = false;       // --require-conformance
  bool json = false;
};

struct InspectArgs {
  std::string file;
  bool json = false;
};

struct RunArgs {
  std::string file;
  std::string function;
  std::string device;
  std::vector<std::string> inputs;   // NAME=PATH.npy | NAME=PATH.pb | NAME=random
  std::vector<std::string> outputs;  // NAME=PATH.npy
  std::string output_dir;            // every output as DIR/<name>.npy
  std::vector<std::string> params;   // SCOPE=PATH.irpa
  bool no_param_checksums = false;
  uint32_t repeat = 1;
  uint32_t threads = 0;
  uint32_t timeout_s = 60;                  // --timeout: per delegate wait; 0: none
  uint64_t max_tensor_bytes = 0;            // --max-tensor-bytes; 0: the runtime's default
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
  std::vector<std::string> isolate;         // --isolate NAME[,NAME]
  bool require_conformance = false;         // --require-conformance
  bool explain = false;                     // print every placement candidate
  bool json = false;                        // one JSON document on stdout
  std::string trace;                        // --trace FILE.json: Chrome trace events
  bool profile = false;                     // print time per delegate and op
  bool verbose = false;                     // print plugins' info lines on stderr
  bool fallback = false;                    // move a delegate off a failed device
  std::string record;                       // --record FILE: capture every plugin call
};

// `loom replay` (cmd_replay.cpp).
struct ReplayArgs {
  std::string capture;
  std::string plugin;                       // --plugin NAME|MANIFEST
  std::string device;                       // --device URI
  std::vector<std::string> tolerances;      // --tolerance [DTYPE=]BOUND[,BOUND]
  std::string report;                       // --report R.json
  std::string junit;                        // --junit J.xml
  std::vector<std::string> plugin_paths;    // --plugin-path DIR
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
  uint32_t threads = 0;
  bool in_process = false;                  // --in-process: no child process
  bool json = false;
  std::string calls = "executions";         // --calls executions|all
  uint64_t timeout_ms = 60'000;             // --timeout MS (calls mode)
};

// `loom capture info|dump` (cmd_capture.cpp).
struct CaptureArgs {
  std::string action;  // info | dump
  std::string capture;
  bool json = false;   // info --json
};

// `loom estimate` (cmd_estimate.cpp).
struct EstimateArgs {
  std::string file;
  uint32_t threads = 0;
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
  bool json = false;
};

// `loom test-onnx` (cmd_test_onnx.cpp; built when loom has the compiler).
struct TestOnnxArgs {
  std::vector<std::string> dirs;   // cases or folders of cases
  std::string device;              // URI; empty: the reference kernels
  std::string report;              // JSON report path
  std::string known_failures;      // tests/onnx/known_failures.txt format
  std::string filter;              // keep cases whose name contains this
  std::string baseline;            // cases that must pass (tests/onnx/baseline_*.txt)
  std::string write_baseline;      // write the passing cases to this file
  uint32_t timeout_s = 300;        // per case; 0: none
  bool timeout_given = false;      // --timeout given: not scaled by $LOOM_TIME_SCALE
  uint32_t threads = 0;
  bool no_fork = false;            // run cases in this process (debugging)
  bool open_shapes = false;        // compile each case once with every dimension open
  bool json = false;               // print the --report document instead of text
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
};

struct DemoArgs {
  std::string save_dir;
  std::string onnx_data;  // ONNX test data root; empty: libonnx-testdata's
  bool mlp = false;       // the built-in MLP even when ONNX models can run
  uint32_t threads = 0;
  bool external_params = false;
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
  bool json = false;  // one JSON document on stdout instead of the table
};

// `loom params <action> ...` (cmd_params.cpp); one struct for every action.
struct ParamsArgs {
  std::string action;                 // create, dump, repack, strip, splat, rename, extract
  std::string input;                  // IN / FILE
  std::string output;                 // -o
  std::vector<std::string> pairs;     // create: NAME=FILE.npy; rename: OLD=NEW
  std::string from_onnx;              // create --from-onnx
  bool append = false;                // create --append
  uint64_t alignment = 64;            // create --alignment
  bool json = false;                  // dump --json
  bool inline_external = false;       // repack/splat/rename --inline-external
  bool raw = false;                   // extract --raw
  std::string key;                    // splat --key
  std::string pattern;                // splat --pattern
  std::string name;                   // extract NAME
};

// `loom compile` (cmd_compile.cpp).
struct CompileArgs {
  std::string model;
  std::string output;                       // -o
  std::vector<std::string> targets;         // --target a,b (repeatable); none: no plugin
  std::vector<std::string> input_shapes;    // NAME=DIMS
  std::string params_out;
  std::string params_scope = "model";
  std::vector<std::string> plugin_paths;    // --plugin-path DIR
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
  std::string variants;                     // first | all; empty: all without --target, else first
  bool json = false;
};

// `loom compare` (cmd_compare.cpp; built when loom has the compiler).
struct CompareArgs {
  std::string model;                        // MODEL.onnx or PROGRAM.loom
  std::string device;                       // --device: the device under test
  std::string reference;                    // --reference: a second device; empty: reference kernels
  std::vector<std::string> inputs;          // NAME=PATH.npy | NAME=PATH.pb
  std::string rtol = "1e-3";                // --rtol, parsed by the command
  std::string atol = "1e-4";                // --atol
  bool split_delegates = false;             // every plugin node compiled on its own
  std::string bisect;                       // --bisect DIR: write the divergent step there
  bool json = false;                        // --json: the report as one JSON document
  uint32_t threads = 0;
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
};

// `loom serve` (cmd_serve.cpp; built with LOOM_WITH_SERVE).
struct ServeArgs {
  std::vector<std::string> models;          // --model NAME=PATH (.loom or .onnx)
  std::vector<std::string> model_devices;   // --model-device NAME=SELECTOR
  std::string device;                       // --device: every model's default selector
  std::string host = "0.0.0.0";
  int http_port = 8000;
  int grpc_port = 8001;
  bool no_http = false, no_grpc = false;
  uint32_t instances = 1;                   // sessions per model
  uint32_t max_batch = 1;                   // 1: no dynamic batching
  uint64_t batch_delay_us = 0;
  uint32_t threads = 0;                     // plugin worker threads; 0: all cores
  uint32_t http_threads = 32;
  uint32_t http_max_waiting = 256;          // connections waiting for a thread
  uint32_t http_read_timeout_s = 10;        // a silent client is dropped after this
  uint32_t timeout_s = 60;                  // per delegate wait; 0: none
  uint64_t max_request_bytes = 64ull << 20;
  uint32_t max_queue = 1024;                // waiting requests per model
  uint32_t drain_timeout_s = 30;            // SIGTERM: longest wait for requests in flight
  bool fallback = false;
  std::vector<std::string> plugin_options;  // --plugin-option KEY=VALUE
  std::vector<std::string> isolate;         // --isolate NAME[,NAME]
  bool require_conformance = false;
};
CLI::App* add_serve_command(CLI::App& app, ServeArgs& args);
int run_serve(const ServeArgs& args);

// Registers `params` and its actions on `app`, filling `args` when parsed.
CLI::App* add_params_command(CLI::App& app, ParamsArgs& args);

int run_devices(const DevicesArgs& args);
int run_inspect(const InspectArgs& args);
int run_doctor(const DoctorArgs& args);
int run_run(const RunArgs& args);
int run_estimate(const EstimateArgs& args);
int run_replay(const ReplayArgs& args);
int run_capture(const CaptureArgs& args);
int run_demo(const DemoArgs& args);
// The demo on ONNX models under `data_root` (demo_onnx.cpp; with the compiler).
int run_onnx_demo(const DemoArgs& args, const std::filesystem::path& data_root);
int run_test_onnx(const TestOnnxArgs& args);
int run_compare(const CompareArgs& args);

// `loom conformance` (cmd_conformance.cpp).
struct ConformanceArgs {
  std::string plugin;  // manifest, library or name
  std::string device;
  std::string level = "basic";
  std::string report, junit, markdown;
  std::vector<std::string> only, skip, onnx_dirs, blobs, plugin_options, plugin_paths;
  uint32_t timeout_s = 120;        // per step of a check (see SuiteOptions::check_timeout)
  bool timeout_given = false;      // --timeout given: not scaled by $LOOM_TIME_SCALE
  bool list = false, no_fork = false, quiet = false, stamp = false;
  // The operator sweep (loom/conformance/operator_sweep.hpp) instead of the
  // suite: --ops runs it, --coverage and --list-ops only compile.
  bool ops = false, perf = false, coverage = false, list_ops = false;
  std::vector<std::string> op_names;  // --op, comma-separated or repeated
};
CLI::App* add_conformance_command(CLI::App& app, ConformanceArgs& args);
int run_conformance(const ConformanceArgs& args);
int run_params(const ParamsArgs& args);
int run_compile(const CompileArgs& args);
int run_params_dump(const ParamsArgs& args);  // params_dump.cpp

// Appends each --plugin-option KEY=VALUE to options->plugin_options;
// INVALID_ARGUMENT for text without a key (cmd_run.cpp).
Status add_plugin_options(const std::vector<std::string>& texts, RuntimeOptions* options);
// Adds --isolate's plugin names ("a,b" or repeated) to `options`.
void add_isolated_plugins(const std::vector<std::string>& texts, RuntimeOptions* options);

// Reads an --input file: .npy or a serialized ONNX TensorProto (.pb), by
// extension, else by content; only a regular file is opened (cmd_run.cpp).
Result<Tensor> read_input_file(const std::string& path);

// Prints "loom: error: <status message>" to stderr and returns 1.
int fail(const Status& status);

}  // namespace loom::cli
