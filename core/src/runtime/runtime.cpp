// Runtime and Program: plugin discovery, loading a program (placement of its
// delegates is runtime/placement.cpp), and running it through temporary
// sessions.
#include "loom/runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "host/discovery/doctor.hpp"
#include "host/isolation/log_channel.hpp"
#include "host/recording/capture_recorder.hpp"
#include "host/discovery/probe_cache.hpp"
#include "runtime/open_function.hpp"
#include "runtime/staged_function.hpp"
#include "runtime/placement.hpp"
#include "runtime/program_state.hpp"
#include "runtime/tensor_limits.hpp"

namespace loom {

// tensor_limits.hpp: half of the physical memory, so that one declared
// tensor cannot take the whole machine.
uint64_t default_max_tensor_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 40;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 2;
}

Result<std::unique_ptr<Runtime>> Runtime::create(const RuntimeOptions& options) {
  host::HostOptions host_options;
  host_options.search_paths = options.plugin_paths;
  host_options.use_environment = options.use_environment;
  host_options.use_default_folder = options.use_default_folder;
  host_options.use_user_folder = options.use_user_folder;
  host_options.isolated_plugins = options.isolated_plugins;
  host_options.probe = options.probe_plugins;
  host_options.require_conformance = options.require_conformance;
  if (options.probe_plugins && options.remember_probes) {
    if (!options.probe_cache_folder.empty()) {
      host_options.probe_cache_folder = options.probe_cache_folder;
    } else if (auto folder = host::default_probe_cache_folder()) {
      host_options.probe_cache_folder = std::move(*folder);
    }
  }
  if (options.threads != 0) {
    host_options.plugin_options.emplace_back(LOOM_OPTION_THREADS,
                                             std::to_string(options.threads));
  }
  for (const auto& option : options.plugin_options) {
    host_options.plugin_options.push_back(option);
  }
  if (options.log_sink) {
    host_options.log_sink = [sink = options.log_sink](auto level, std::string_view line) {
      sink(static_cast<LogLevel>(std::clamp(static_cast<int>(level), 0, 3)), line);
    };
  }
  if (!options.record_path.empty()) {
    LOOM_ASSIGN_OR_RETURN(host_options.recorder, host::CaptureRecorder::create(options.record_path));
  }
  LOOM_ASSIGN_OR_RETURN(auto host, host::PluginHost::create(std::move(host_options)));
  std::unique_ptr<Runtime> runtime(new Runtime());
  runtime->host_ = std::shared_ptr<host::PluginHost>(std::move(host));
  return runtime;
}

Result<std::vector<PluginDiagnosis>> diagnose_plugins(const RuntimeOptions& options,
                                                      std::string_view plugin) {
  host::HostOptions host_options;
  host_options.search_paths = options.plugin_paths;
  host_options.use_environment = options.use_environment;
  host_options.use_default_folder = options.use_default_folder;
  host_options.require_conformance = options.require_conformance;
  return host::diagnose(host_options, plugin, host::LibrarySearchPath::from_system());
}

Runtime::~Runtime() = default;

std::shared_ptr<Trace> Runtime::start_trace() {
  auto trace = std::make_shared<Trace>();
  host_->channel()->set_trace(trace);
  return trace;
}

void Runtime::stop_trace() { host_->channel()->set_trace(nullptr); }

std::vector<PluginFolder> Runtime::plugin_folders() const { return host_->search_folders(); }

std::vector<PluginRecord> Runtime::plugins() {
  host_->load_all();
  return host_->plugins();
}

std::vector<DeviceInfo> Runtime::devices() {
  std::vector<DeviceInfo> out;
  for (const PluginRecord& record : plugins()) {
    out.insert(out.end(), record.devices.begin(), record.devices.end());
  }
  return out;
}

Result<std::vector<DeviceInfo>> Runtime::devices(std::string_view plugin) {
  LOOM_ASSIGN_OR_RETURN(auto loaded, host_->load(plugin));
  return loaded->devices();
}

namespace {

// Memory a program claims is checked against LoadOptions::max_tensor_bytes
// before it is reserved; an allocation that fails anyway (the machine is out
// of memory) becomes a status instead of an abort.
template <typename F>
Result<std::shared_ptr<Program>> without_bad_alloc(std::string_view what, F&& load) {
  try {
    return load();
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory while loading " + std::string(what));
  }
}

}  // namespace

Result<std::shared_ptr<Program>> Runtime::load_program(const std::filesystem::path& path,
                                                       const LoadOptions& options) {
  return without_bad_alloc(path.string(), [&] { return load_program_file(path, options); });
}

Result<std::shared_ptr<Program>> Runtime::load_program_file(const std::filesystem::path& path,
                                                            const LoadOptions& options) {
  auto reader = ProgramReader::open_file(path);
  if (!reader.ok()) return reader.status().with_context(path.string());
  // External parameters are found relative to the program's folder.
  std::error_code ec;
  std::filesystem::path folder = std::filesystem::absolute(path, ec).parent_path();
  if (ec || folder.empty()) folder = path.parent_path().empty() ? "." : path.parent_path();
  auto program = prepare(host_, std::move(*reader), folder, options);
  if (!program.ok()) return program.status().with_context(path.string());
  return program;
}

Result<std::shared_ptr<Program>> Runtime::load_program(std::span<const std::byte> bytes,
                                                       const LoadOptions& options) {
  return without_bad_alloc("a program from memory", [&]() -> Result<std::shared_ptr<Program>> {
    LOOM_ASSIGN_OR_RETURN(auto reader, ProgramReader::open_buffer(bytes));
    return prepare(host_, std::move(reader), {}, options);
  });
}

Result<std::shared_ptr<Program>> Runtime::prepare(const std::shared_ptr<host::PluginHost>& host_,
                                                  std::unique_ptr<ProgramReader> reader,
                                                  const std::filesystem::path& folder,
                                                  const LoadOptions& options) {
  auto state = std::make_unique<Program::State>();
  state->reader = std::move(reader);
  const ProgramDef& def = state->reader->program();
  LOOM_ASSIGN_OR_RETURN(state->registry, ArtifactRegistry::build(*state->reader));
  LOOM_ASSIGN_OR_RETURN(state->parameters,
                        runtime::ParameterStore::open(*state->reader, folder,
                                                      options.parameter_archives,
                                                      options.check_parameter_checksums));
  state->kernels = kernels::KernelRegistry::reference();
  if (options.run_timeout.count() < 0) {
    return invalid_argument("LoadOptions::run_timeout is negative (" +
                            std::to_string(options.run_timeout.count()) + " ms)");
  }
  state->run_timeout = options.run_timeout;
  state->max_tensor_bytes =
      options.max_tensor_bytes != 0 ? options.max_tensor_bytes : default_max_tensor_bytes();
  state->channel = host_->channel();
  if (options.max_loop_iterations == 0) {
    return invalid_argument("LoadOptions::max_loop_iterations is 0; a Loop needs at least 1");
  }
  state->max_loop_iterations = options.max_loop_iterations;

  // The selector is resolved before any delegate is looked at, so that a
  // typo is reported as such even for a program without delegates.
  auto explain = [&options, &state](Status status) {
    if (options.explanation != nullptr) *options.explanation = state->explanation;
    return status;
  };
  state->explanation.selector = options.device;
  LOOM_ASSIGN_OR_RETURN(DeviceSelector selector, DeviceSelector::parse(options.device));
  auto placer = runtime::Placer::create(*host_, std::move(selector));
  if (!placer.ok()) return explain(placer.status());
  state->fallback = options.fallback;
  state->on_fallback = options.on_fallback;

  // Functions are planned before placement, which needs to know whether the
  // functions of "loom.reference" variants can run. Such a function that
  // cannot (an op without a reference kernel) only makes its variant unusable.
  std::vector<std::string> reference_functions;
  for (const ArtifactDef& artifact : def.artifacts) {
    if (artifact.loader_key != kReferenceLoaderKey) continue;
    const Artifact* a = state->registry.artifact(static_cast<uint32_t>(&artifact - def.artifacts.data()));
    if (a != nullptr) {
      reference_functions.emplace_back(reinterpret_cast<const char*>(a->content.data()),
                                       a->content.size());
    }
  }
  if (options.shape_cache == 0) {
    return invalid_argument("LoadOptions::shape_cache is 0; an open-shape program keeps at least one binding");
  }
  for (const FunctionDef& function : def.functions) {
    if (function.staged) {
      // Control flow: run step by step on the host (docs/control-flow.md).
      const runtime::ParameterStore& parameters = state->parameters;
      auto staged_plan = runtime::build_staged_plan(
          def, function, state->kernels, [&parameters](uint32_t p) { return parameters.bytes(p); });
      if (!staged_plan.ok()) return staged_plan.status();
      // Its arguments as declared, open as an open-shape function's are.
      runtime::FunctionPlan plan = runtime::open_function_plan(function);
      plan.info.staged = true;
      plan.staged = std::move(*staged_plan);
      state->functions.push_back(std::move(plan));
      state->host = host_;
      continue;
    }
    if (function.graph_artifact >= 0) {
      // An open-shape function: specialized per binding, through this host,
      // with these options (less what only this load call may use).
      LoadOptions inner = options;
      inner.explanation = nullptr;
      inner.parameter_archives.clear();
      const Artifact* a = state->registry.artifact(static_cast<uint32_t>(function.graph_artifact));
      if (a == nullptr) {
        return invalid_argument("function '" + function.name + "': graph artifact " +
                                std::to_string(function.graph_artifact) + " is missing");
      }
      std::shared_ptr<host::PluginHost> host = host_;
      runtime::ProgramLoader load = [host, inner](std::span<const std::byte> bytes) -> Result<std::shared_ptr<Program>> {
        LOOM_ASSIGN_OR_RETURN(auto reader, ProgramReader::open_buffer(bytes));
        return Runtime::prepare(host, std::move(reader), {}, inner);
      };
      LOOM_ASSIGN_OR_RETURN(auto open, runtime::OpenFunction::create(
                                           *state->reader, state->parameters, a->content, function, host_,
                                           std::move(load), options.shape_cache, state->max_tensor_bytes,
                                           host_->channel()));
      if (!function.instructions.empty()) {
        LOOM_RETURN_IF_ERROR(open->enable_native(*state->reader, state->parameters, function, state->kernels,
                                                 def.delegates.size()));
      }
      runtime::FunctionPlan plan = runtime::open_function_plan(function);
      plan.open = std::move(open);
      state->functions.push_back(std::move(plan));
      state->host = host_;
      continue;
    }
    auto plan = runtime::build_function_plan(*state->reader, state->parameters, function,
                                             state->kernels, def.delegates.size());
    if (!plan.ok()) {
      if (std::find(reference_functions.begin(), reference_functions.end(), function.name) ==
          reference_functions.end()) {
        return plan.status();
      }
      state->unplanned_functions.emplace_back(function.name, plan.status().message());
      continue;
    }
    state->functions.push_back(std::move(*plan));
  }

  const Program::State& loaded_state = *state;
  placer->set_reference_loader([&loaded_state](uint32_t delegate, uint32_t artifact) {
    return loaded_state.load_reference(delegate, artifact);
  });
  for (uint32_t d = 0; d < def.delegates.size(); ++d) {
    auto loaded = placer->place(def, state->registry, d,
                                &state->explanation.delegates.emplace_back(),
                                &state->alternatives.emplace_back());
    if (!loaded.ok()) return explain(loaded.status());
    state->placements.push_back({loaded->name, loaded->loader_key, loaded->device_uri});
    state->delegates.push_back(std::make_shared<runtime::LoadedDelegate>(std::move(*loaded)));
  }
  (void)explain(Status());
  return std::shared_ptr<Program>(new Program(std::move(state)));
}

// ---------------------------------------------------------------------------

Program::Program(std::unique_ptr<State> state) : state_(std::move(state)) {}
Program::~Program() = default;

const ProgramReader& Program::reader() const { return *state_->reader; }
const ArtifactRegistry& Program::artifacts() const { return state_->registry; }
std::vector<DelegatePlacement> Program::placements() const {
  std::lock_guard<std::mutex> lock(state_->placement_mutex);
  return state_->placements;
}

std::vector<FallbackEvent> Program::fallbacks() const {
  std::lock_guard<std::mutex> lock(state_->placement_mutex);
  return state_->fallback_events;
}

Result<runtime::LoadedDelegate> Program::State::load_reference(uint32_t index,
                                                               uint32_t artifact) const {
  const DelegateDef& delegate = reader->program().delegates[index];
  const Artifact* a = registry.artifact(artifact);
  if (a == nullptr) return internal_error("artifact " + std::to_string(artifact) + " is missing");
  const std::string name(reinterpret_cast<const char*>(a->content.data()), a->content.size());
  for (const auto& [unplanned, why] : unplanned_functions) {
    if (unplanned == name) {
      return incompatible("its function '" + name + "' cannot run on the reference kernels: " +
                          why);
    }
  }
  for (size_t f = 0; f < functions.size(); ++f) {
    if (functions[f].info.name != name) continue;
    for (const runtime::StepPlan& step : functions[f].steps) {
      if (step.op == OpCode::kDelegateCall) {
        return invalid_argument("its function '" + name +
                                "' calls delegates; a reference variant's function must not");
      }
    }
    // Every call of the delegate must fit the function, so that the
    // mismatch is a refusal at load (the next candidate, or an error naming
    // it), not a surprise when a session is made.
    for (const runtime::FunctionPlan& caller : functions) {
      for (const runtime::StepPlan& step : caller.steps) {
        if (step.op == OpCode::kDelegateCall && step.delegate == static_cast<int32_t>(index)) {
          LOOM_RETURN_IF_ERROR(
              runtime::check_reference_call(caller, step, functions[f], delegate.name));
        }
      }
    }
    runtime::LoadedDelegate d;
    d.name = delegate.name;
    d.loader_key = std::string(kReferenceLoaderKey);
    d.device_uri = "reference";
    d.host_execute = true;
    d.reference_function = static_cast<int32_t>(f);
    return d;
  }
  return invalid_argument("it names function '" + name + "', which the program does not have");
}

Result<std::shared_ptr<const runtime::LoadedDelegate>> Program::State::fall_back(
    size_t index, const runtime::LoadedDelegate* failed, const Status& why) {
  FallbackEvent event;
  std::shared_ptr<const runtime::LoadedDelegate> next;
  {
    std::lock_guard<std::mutex> lock(placement_mutex);
    if (delegates[index].get() != failed) return delegates[index];  // moved by another session
    const DelegateDef& def = reader->program().delegates[index];
    std::vector<runtime::Alternative>& queue = alternatives[index];
    std::string refusals;
    while (!queue.empty() && next == nullptr) {
      runtime::Alternative alternative = std::move(queue.front());
      queue.erase(queue.begin());
      if (alternative.reference) {
        auto loaded = load_reference(static_cast<uint32_t>(index), alternative.artifact);
        if (!loaded.ok()) {
          refusals += "; reference: " + loaded.status().message();
          continue;
        }
        next = std::make_shared<runtime::LoadedDelegate>(std::move(*loaded));
        continue;
      }
      // The failed device is out for every variant.
      if (alternative.device.plugin.get() == failed->plugin.get() &&
          alternative.device.index == failed->device_index) {
        continue;
      }
      auto loaded = runtime::load_delegate(reader->program(), registry, def, alternative.artifact,
                                           alternative.device);
      if (!loaded.ok()) {
        refusals += "; " + alternative.device.info().uri + ": " + loaded.status().message();
        continue;
      }
      next = std::make_shared<runtime::LoadedDelegate>(std::move(*loaded));
    }
    if (next == nullptr) {
      return unavailable("no other device can take delegate '" + def.name + "'" +
                         (refusals.empty() ? std::string(" (its placement has no candidate left)")
                                           : refusals));
    }
    event = {def.name, failed->device_uri, next->device_uri, next->loader_key, why};
    delegates[index] = next;
    placements[index] = {next->name, next->loader_key, next->device_uri};
    fallback_events.push_back(event);
    placement_generation.fetch_add(1, std::memory_order_release);
  }
  if (on_fallback) on_fallback(event);
  return next;
}
const PlacementExplanation& Program::explain() const { return state_->explanation; }

std::vector<FunctionInfo> Program::functions() const {
  std::vector<FunctionInfo> out;
  for (const auto& plan : state_->functions) out.push_back(plan.info);
  return out;
}

Result<FunctionInfo> Program::function(std::string_view name) const {
  for (const auto& plan : state_->functions) {
    if (plan.info.name == name) return plan.info;
  }
  std::string names;
  for (const auto& plan : state_->functions) {
    names += (names.empty() ? "" : ", ") + plan.info.name;
  }
  return not_found("no function '" + std::string(name) + "' in the program (functions: " +
                   (names.empty() ? "none" : names) + ")");
}

Result<std::vector<NamedTensor>> Program::run(std::string_view function,
                                              std::span<const NamedTensor> inputs) {
  LOOM_ASSIGN_OR_RETURN(auto session, create_session(function));
  for (const NamedTensor& input : inputs) {
    LOOM_RETURN_IF_ERROR(session->set_input(input.name, input.tensor));
  }
  LOOM_RETURN_IF_ERROR(session->run());
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < session->output_count(); ++i) {
    out.push_back({session->function().outputs[i].name, session->output(i)});
  }
  return out;
}

}  // namespace loom
