// The public API of the Loom runtime: discover devices, load a program onto
// them, and run its functions.
//
//   auto runtime = loom::Runtime::create().value();
//   auto program = runtime->load_program("model.loom", {.device = "cpu-simd://0"});
//   auto session = (*program)->create_session("main");
//   (*session)->set_input("x", x);
//   (*session)->run();
//   const loom::Tensor& y = *(*session)->output("y");
//
// Runtime::start_trace() records what runs do (loom/trace.hpp).
//
// Thread safety: Runtime and Program are thread-safe. A Session is not; each
// thread that runs a function uses its own Session (they are cheap to create
// and share the program's loaded executables). Program::run creates a
// temporary Session and is therefore thread-safe too.
#pragma once

#include <cstdint>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/artifacts.hpp"
#include "loom/device.hpp"
#include "loom/program.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"
#include "loom/trace.hpp"
#include "loom/value.hpp"

namespace loom {

namespace host {
class PluginHost;
}
namespace runtime {
class OpenSession;
class StagedSession;
}

class Program;
class Session;

// How much a log line matters (plugins' lines, through the host's log
// service).
enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

struct RuntimeOptions {
  // Folders searched for plugin manifests before $LOOM_PLUGIN_PATH and the
  // plugin folder of the build/install tree.
  std::vector<std::filesystem::path> plugin_paths;
  bool use_environment = true;      // search $LOOM_PLUGIN_PATH
  bool use_default_folder = true;   // search <program dir>/../lib/loom/plugins
                                    // (and <dir of libloom.so>/loom/plugins)
  // Search the per-user folder, last: $XDG_DATA_HOME/loom/plugins, else
  // $HOME/.local/share/loom/plugins.
  bool use_user_folder = true;
  // Cap on the worker threads of every plugin that uses them; 0 = all cores.
  uint32_t threads = 0;
  // Further options handed to every plugin when it is created (key, value);
  // plugins ignore keys they do not know.
  std::vector<std::pair<std::string, std::string>> plugin_options;
  // Receives every line plugins log, at every level, as "PLUGIN: message"
  // (from any thread; calls are serialized). Unset: warnings and errors go
  // to stderr as "loom: warning: ...", debug and info lines are dropped.
  std::function<void(LogLevel, std::string_view)> log_sink;
  // Plugins to run each in a process of their own (loom-plugin-host), by
  // name; "*" isolates every plugin (a name no plugin has makes create()
  // fail with NOT_FOUND). A plugin whose manifest says
  // "isolation": "process" is isolated too. An isolated plugin that crashes
  // or stops answering loses its devices (DEVICE_LOST; with
  // LoadOptions::fallback the program moves on) and this process lives on.
  // Its devices take tensors in shared-memory buffers, copied in and out.
  std::vector<std::string> isolated_plugins;
  // Load each plugin once in a child process before loading it into this
  // one, so that a plugin that crashes, hangs or exits while loading is
  // listed as rejected (with the signal, exit or timeout) instead of taking
  // this process down. Costs one short-lived process per plugin probed;
  // several plugins are probed at once.
  bool probe_plugins = true;
  // Remember probe verdicts across processes, so that a plugin is probed
  // once per build of its library: a later start with the same library,
  // Loom build, plugin options and environment (less the shell's own
  // variables) loads a plugin that passed without a probe and rejects one
  // that crashed or hung with the remembered reason, at once. Verdicts live
  // in `probe_cache_folder`, else in $LOOM_PROBE_CACHE (an absolute path;
  // "off" or "0" turns remembering off), else $XDG_CACHE_HOME/loom/probes,
  // else $HOME/.cache/loom/probes. Deleting the folder forgets them.
  bool remember_probes = true;
  std::filesystem::path probe_cache_folder;
  // Refuse every plugin without a valid conformance stamp (`loom
  // conformance --stamp`, beside its manifest): one that is unstamped, whose
  // stamp is for another library build or version, or records a failed check
  // is listed as rejected with the reason and never loaded.
  bool require_conformance = false;
  // Record every call this runtime makes into its plugins (their loading,
  // allocations, copies, executable loads with their blobs, executions with
  // their input and output tensors, fences, statuses) into a capture file
  // at this path, written when the runtime and every object it made are
  // gone (`loom run --record`; replay it with `loom replay`). Empty: no
  // recording. create() fails when the file cannot be created.
  std::filesystem::path record_path;
};

struct PlacementExplanation;

struct LoadOptions {
  // Which devices the delegates may run on, in order of preference: a device
  // URI ("cpu-simd://0"), a plugin name, "kind:gpu", a list tried in order
  // ("vulkan-compute,fpga-stub,cpu-simd"), "policy:fastest", requirements
  // ("kind:gpu&dtype:f16"); the grammar is DeviceSelector's (loom/device.hpp).
  // Empty: for each delegate the first variant (in the program's order of
  // preference) that a present device can load. Every delegate tries its
  // candidates in order until one loads: a variant a device refuses or fails
  // to load (incompatible, out of memory, an init error) falls back to the
  // next, and explain() says what happened to each.
  std::string device;
  // Where the archives of external parameters are: (scope, path of the .irpa
  // file; a relative path is taken from the current directory). A scope
  // listed here takes all its parameters from that file; every other scope
  // is looked up at the path the program records, relative to the program
  // file's folder. A program loaded from memory has no folder, so each scope
  // it uses must be listed. Listing a scope the program does not use is an
  // error (not_found), so that a misspelt scope is not ignored. (The
  // initializer lets callers brace-initialize `device` alone without a
  // missing-initializer warning.)
  std::vector<std::pair<std::string, std::filesystem::path>> parameter_archives = {};
  // Whether external parameters must match the xxh3 checksums the program
  // records. Turn it off to run with other weights of the same names, sizes
  // and types (fine-tuned, or `loom params strip`/`splat` fakes for tests);
  // sizes, dtypes and shapes are still checked.
  bool check_parameter_checksums = true;
  // How long Session::run waits for an asynchronous delegate to signal its
  // fence. A device that does not finish in time (a hung kernel) makes run
  // fail with DEADLINE_EXCEEDED naming the delegate and the device; the
  // session must not be run again after that (its device may still be busy
  // with it). Zero means no limit.
  std::chrono::milliseconds run_timeout{60'000};
  // The largest buffer, in bytes, that a session of this program may
  // allocate for one tensor the program declares (a function input, output
  // or intermediate value) or for a function's arena. A session whose
  // function declares more fails with RESOURCE_EXHAUSTED naming the tensor
  // and both sizes, before anything is allocated, so that a small file
  // cannot claim the machine's memory. Zero: half of this machine's physical
  // memory.
  uint64_t max_tensor_bytes = 0;
  // Open-shape programs (compiled with open dimensions; docs/dynamic-
  // shapes.md): how many bindings (one shape per input) are kept prepared,
  // most recently used first. The program keeps this many specializations
  // (the subgraphs compiled and loaded for a binding), shared by its
  // sessions; each session keeps this many sessions of them, arena and
  // buffers included, so that alternating between shapes it has seen
  // compiles and allocates nothing. At least 1.
  size_t shape_cache = 4;
  // Control flow (docs/control-flow.md): the most iterations one Loop or
  // Scan may run in one run. A Loop whose trip count is larger, or whose
  // condition still holds after this many, fails with RESOURCE_EXHAUSTED
  // naming the node instead of running on. At least 1.
  uint64_t max_loop_iterations = 10'000'000;
  // Run-time fallback: when a delegate's device fails a run with
  // DEVICE_LOST or DEADLINE_EXCEEDED, move that delegate to the next
  // candidate of its placement (the selector's order; candidates that failed
  // at load are skipped) and run once more. Every session of the program
  // then uses the new device. Off: the run fails with a status naming the
  // delegate and the device. After a deadline the hung device may still hold
  // the old execution's buffers; they are kept until the session is destroyed.
  bool fallback = false;
  // Called on the running thread after each move (see also Program::fallbacks()).
  std::function<void(const struct FallbackEvent&)> on_fallback = nullptr;
  // When set, filled with every candidate considered for each delegate and
  // what became of it, whether or not loading succeeds (the same as
  // Program::explain() on success). Borrowed for the load_program call.
  PlacementExplanation* explanation = nullptr;
};

// A tensor with the name of the function argument or result it belongs to.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// One argument or result of a function, as the program declares it.
struct ArgumentInfo {
  std::string name;
  DType dtype = DType::kInvalid;  // a result of an open-shape function: kInvalid when unknown
  // -1 for an open dimension (an open-shape function's): any size that
  // agrees with `symbols` and the bounds.
  Shape shape;
  // Per dimension, or empty when none is named: the symbol of an open
  // dimension ("batch"; inputs sharing one must agree), "" otherwise.
  std::vector<std::string> symbols;
  // Per dimension, or empty: bounds of an open dimension (0 = none).
  std::vector<int64_t> min;
  std::vector<int64_t> max;
  // A staged function's argument may be a sequence of tensors or an optional
  // (docs/control-flow.md); `dtype` is then the elements' (kInvalid: any).
  // Session::set_input_value and output_value carry such values.
  ValueKind kind = ValueKind::kTensor;
};

struct FunctionInfo {
  std::string name;
  std::vector<ArgumentInfo> inputs;
  std::vector<ArgumentInfo> outputs;
  std::string reflection;  // IREE-style ABI JSON as stored in the program
  // An open-shape function: some input has an open dimension. Sessions bind
  // them from the shapes given to set_input.
  bool open = false;
  // A staged function (control flow, docs/control-flow.md): open too; its
  // parts and bodies are specialized for the shapes they meet as it runs.
  bool staged = false;
};

// Where one delegate of a loaded program runs.
struct DelegatePlacement {
  std::string delegate;    // the delegate's name
  std::string loader_key;  // of the variant chosen
  std::string device;      // URI
};

// A delegate moved to another device at run time (LoadOptions::fallback).
struct FallbackEvent {
  std::string delegate;
  std::string from_device;
  std::string to_device;
  std::string to_loader_key;
  Status reason;  // what the failed run reported
};

// One pair of a delegate's variant and a device that placement considered.
struct PlacementCandidate {
  enum class Outcome : uint8_t {
    kChosen = 0,    // the delegate runs here
    kRefused = 1,   // see reason: not selected, no device, check or load failed
    kNotTried = 2,  // an earlier candidate was chosen
  };
  // `variant` of a device the selector picked that no variant can use.
  static constexpr uint32_t kNoVariant = UINT32_MAX;
  std::string loader_key;  // of the variant; empty with kNoVariant
  uint32_t variant = 0;    // position in the delegate's variants, 0 = the program's first
  std::string device;      // URI; empty when no device serves the loader key
  std::string matched_by;  // the selector alternative that offered the device
  double score = 0;        // under a policy: the device's rank by kind, higher first
  // policy:fastest: the plugin's estimate of one execution (ABI 1.1
  // executable_estimate), ns; candidates with one come first, fastest first.
  // 0: none.
  uint64_t estimate_ns = 0;
  Outcome outcome = Outcome::kNotTried;
  std::string reason;      // why refused; for the chosen one, why it came first
};

std::string_view placement_outcome_name(PlacementCandidate::Outcome outcome);

struct DelegateExplanation {
  std::string delegate;
  // Candidates in the order they were tried; those the selector excluded or
  // that no device serves come last.
  std::vector<PlacementCandidate> candidates;
};

// How every delegate of a program was placed.
struct PlacementExplanation {
  std::string selector;  // as given; empty for the default
  std::vector<DelegateExplanation> delegates;
  // A readable table, one line per candidate.
  std::string to_string() const;
};

// Owns the plugin host. Create one per process (or per isolated use).
class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> create(const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Every plugin found, with its state; loads each usable plugin so that its
  // devices can be listed.
  std::vector<PluginRecord> plugins();
  // Every device of every usable plugin.
  std::vector<DeviceInfo> devices();
  // The devices of the plugin named `plugin`, loading that plugin only.
  // NOT_FOUND lists the plugins found; a rejected plugin gives its reason.
  Result<std::vector<DeviceInfo>> devices(std::string_view plugin);
  // The folders searched for plugin manifests when the runtime was created,
  // in search order, each with whether it existed.
  std::vector<PluginFolder> plugin_folders() const;

  // Maps, verifies and prepares a program file: external parameters are found
  // in their archives (LoadOptions::parameter_archives) and checked, each
  // delegate is loaded on a device per `options`. Errors name the parameter
  // or the delegate, the archive or the device, and the reason.
  Result<std::shared_ptr<Program>> load_program(const std::filesystem::path& path,
                                                const LoadOptions& options = {});
  // The same for a program in memory; `bytes` must outlive the Program. Its
  // external parameters need LoadOptions::parameter_archives.
  Result<std::shared_ptr<Program>> load_program(std::span<const std::byte> bytes,
                                                const LoadOptions& options = {});

  // Starts recording a trace of every run of this runtime's programs, and of
  // the events its plugins send, until stop_trace(); replaces a trace being
  // recorded. The returned trace keeps what was recorded.
  std::shared_ptr<Trace> start_trace();
  void stop_trace();

  // The plugin host behind this runtime, for Loom's own compile side and
  // tools (compile_onnx_file asks its plugins for their compile entries).
  // host::PluginHost is declared only: its header is private to Loom, so an
  // application cannot use it. Lives as long as the runtime.
  host::PluginHost& plugin_host() const { return *host_; }

 private:
  Runtime() = default;
  Result<std::shared_ptr<Program>> load_program_file(const std::filesystem::path& path,
                                                     const LoadOptions& options);
  // `folder`: the program file's folder, empty for a program in memory.
  // `host` is kept by a program with open-shape functions, which compiles
  // through its plugins for each new binding.
  static Result<std::shared_ptr<Program>> prepare(const std::shared_ptr<host::PluginHost>& host,
                                                  std::unique_ptr<ProgramReader> reader,
                                                  const std::filesystem::path& folder,
                                                  const LoadOptions& options);
  std::shared_ptr<host::PluginHost> host_;
};

// A program loaded onto devices. Thread-safe; keeps its plugins loaded.
class Program {
 public:
  ~Program();

  const ProgramReader& reader() const;
  const ArtifactRegistry& artifacts() const;
  std::vector<FunctionInfo> functions() const;
  Result<FunctionInfo> function(std::string_view name) const;
  // Where each delegate runs now (a fallback may have moved one).
  std::vector<DelegatePlacement> placements() const;
  // Every run-time fallback so far, oldest first.
  std::vector<FallbackEvent> fallbacks() const;
  // Every variant × device considered for each delegate and why it was
  // chosen or refused.
  const PlacementExplanation& explain() const;

  // A Session for running `function` (default: the only or first function).
  Result<std::unique_ptr<Session>> create_session(std::string_view function = {});
  // Runs `function` once with inputs bound by name; returns the results in the
  // function's order.
  Result<std::vector<NamedTensor>> run(std::string_view function,
                                       std::span<const NamedTensor> inputs);

  struct State;  // private

 private:
  friend class Runtime;
  explicit Program(std::unique_ptr<State> state);
  std::shared_ptr<State> state_;
};

// A run started by Session::run_async. Copyable; every copy refers to the
// same run.
class RunHandle {
 public:
  RunHandle() = default;
  // Waits up to `timeout` for the run to finish and returns its status; while
  // it is still going, DEADLINE_EXCEEDED (wait again). The default waits for
  // as long as it takes (each delegate is still bounded by the run timeout).
  Status wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) const;
  // Whether the run has finished (wait() would return at once).
  bool done() const;

  struct Runner;  // private

 private:
  friend class Session;
  std::shared_ptr<Runner> runner_;
  uint64_t run_ = 0;
};

// How a session's call of one delegate gets its operands: decided when the
// session is made, never per run (Session::transfers).
struct DelegateTransfers {
  std::string delegate;
  std::string device;           // URI; "reference" for a loom.reference variant
  uint32_t host_pointers = 0;   // used in host memory (a device that executes on host pointers)
  // In the session's arena, which the device imported once as one buffer
  // (buffer_import_host): read and written in place, no copies.
  uint32_t imported = 0;
  uint32_t staged_in = 0;       // copied into a device buffer before each run
  uint32_t staged_out = 0;      // copied back out of one after each run
  uint32_t constants = 0;       // copied to the device once, with the session
};

// Runs one function repeatedly. Owns the inputs' staging, the arena of
// intermediates and the outputs, all allocated when the Session is created,
// so run() allocates nothing. Not thread-safe: one Session per thread.
class Session {
 public:
  ~Session();

  const FunctionInfo& function() const;

  // Copies `tensor` into the input named `name`; dtype and shape must match.
  // An open-shape function takes any shape that fits its signature: rank,
  // fixed dimensions and bounds are checked here, inputs that share a symbol
  // at run(); errors name the input, the dimension and both values.
  Status set_input(std::string_view name, const Tensor& tensor);
  Status set_input(size_t index, const Tensor& tensor);
  // Binds caller memory as input `index` without copying. `data` must hold
  // the input's bytes and stay valid and unchanged until run() returns. An
  // input with an open dimension takes set_input only (which carries the
  // shape).
  Status bind_input(size_t index, const void* data, size_t size);
  // Sets an input of any kind (ArgumentInfo::kind): a tensor for a tensor
  // input, a sequence for a sequence input, and for an optional one a
  // tensor or sequence (as its kind says) or Value::none(). A value of
  // another kind is refused with an error naming the input; a tensor input
  // takes a Value holding a tensor as set_input does.
  Status set_input_value(std::string_view name, const Value& value);
  Status set_input_value(size_t index, const Value& value);

  // Runs the function. Inputs not set are zero (an input with an open
  // dimension must be set). An open-shape function runs the program prepared
  // for this binding of its inputs' shapes: the session's own, kept for the
  // last LoadOptions::shape_cache bindings, or a new session of the
  // program's specialization for it (made at the first run of a binding:
  // shape inference, then the subgraphs compiled and loaded).
  Status run();
  // Starts run() on the session's own thread (made at the first call) and
  // returns at once. Until the handle's wait() returns the run's status, the
  // session's inputs, outputs and settings must not be touched, and run() or
  // run_async() again is refused (FAILED_PRECONDITION).
  Result<RunHandle> run_async();

  // How long run() waits for an asynchronous delegate, for this session
  // (default LoadOptions::run_timeout; zero: no limit). Negative is refused.
  Status set_run_timeout(std::chrono::milliseconds timeout);

  // For each delegate call, in the function's order, how its operands
  // reach the device. Values passed between two devices that both import
  // host memory are not copied; the rest are staged.
  std::vector<DelegateTransfers> transfers() const;

  // An open-shape function: the program prepared for the last run's binding
  // (an ordinary program: its placements(), explain(), functions with the
  // bound shapes), shared with the program's cache. Null before the first
  // run and for an ordinary function.
  std::shared_ptr<Program> bound_program() const;

  size_t output_count() const;
  // Results of the last run(); valid until the next run() or destruction.
  // Their shapes are the run's (an open-shape function's vary with the
  // binding); before the first run of an open-shape function, empty.
  // A result that is not a tensor (a sequence, an empty optional) reads as
  // an empty tensor here, and output(name) refuses it: read it with
  // output_value.
  const Tensor& output(size_t index) const;
  Result<const Tensor*> output(std::string_view name) const;
  // Any result of the last run() as a Value (a copy): a tensor, a sequence,
  // or none (an empty optional).
  Result<Value> output_value(size_t index) const;
  Result<Value> output_value(std::string_view name) const;

  struct State;  // private

 private:
  friend class runtime::OpenSession;  // runs sessions of a native open-shape binding
  friend class runtime::StagedSession;  // runs sessions of the parts and bodies of a staged function
  friend class Program;
  explicit Session(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace loom
