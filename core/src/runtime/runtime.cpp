// Runtime and Program: plugin discovery, device selection per delegate, and
// loading of executables.
#include "loom/runtime.hpp"

#include <algorithm>
#include <charconv>

#include "runtime/program_state.hpp"

namespace loom {
namespace {

// Levenshtein distance, for "did you mean" suggestions on device URIs.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

struct DeviceRef {
  std::shared_ptr<host::LoadedPlugin> plugin;
  size_t index = 0;
};

std::string list_devices(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) return "no devices are available";
  std::string out = "available: ";
  for (size_t i = 0; i < devices.size(); ++i) {
    out += (i ? ", " : "") + devices[i].uri;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Runtime>> Runtime::create(const RuntimeOptions& options) {
  host::HostOptions host_options;
  host_options.search_paths = options.plugin_paths;
  host_options.use_environment = options.use_environment;
  host_options.use_default_folder = options.use_default_folder;
  if (options.threads != 0) {
    host_options.plugin_options.emplace_back(LOOM_OPTION_THREADS,
                                             std::to_string(options.threads));
  }
  for (const auto& option : options.plugin_options) {
    host_options.plugin_options.push_back(option);
  }
  LOOM_ASSIGN_OR_RETURN(auto host, host::PluginHost::create(std::move(host_options)));
  std::unique_ptr<Runtime> runtime(new Runtime());
  runtime->host_ = std::move(host);
  return runtime;
}

Runtime::~Runtime() = default;

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

Result<std::shared_ptr<Program>> Runtime::load_program(const std::filesystem::path& path,
                                                       const LoadOptions& options) {
  auto reader = ProgramReader::open_file(path);
  if (!reader.ok()) return reader.status().with_context(path.string());
  // External parameters are found relative to the program's folder.
  std::error_code ec;
  std::filesystem::path folder = std::filesystem::absolute(path, ec).parent_path();
  if (ec || folder.empty()) folder = path.parent_path().empty() ? "." : path.parent_path();
  auto program = prepare(std::move(*reader), folder, options);
  if (!program.ok()) return program.status().with_context(path.string());
  return program;
}

Result<std::shared_ptr<Program>> Runtime::load_program(std::span<const std::byte> bytes,
                                                       const LoadOptions& options) {
  LOOM_ASSIGN_OR_RETURN(auto reader, ProgramReader::open_buffer(bytes));
  return prepare(std::move(reader), {}, options);
}

Result<std::shared_ptr<Program>> Runtime::prepare(std::unique_ptr<ProgramReader> reader,
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

  // An explicit device: resolve it before looking at any delegate, so a typo
  // is reported as such even for a program without delegates.
  std::optional<DeviceRef> forced;
  if (!options.device.empty()) {
    std::string_view uri = options.device;
    size_t sep = uri.find("://");
    std::string plugin_name(uri.substr(0, sep));
    auto plugin = sep == std::string_view::npos ? Result<std::shared_ptr<host::LoadedPlugin>>(
                                                      not_found("not a device URI"))
                                                : host_->load(plugin_name);
    bool found = false;
    if (plugin.ok()) {
      const auto& devs = (*plugin)->devices();
      for (size_t i = 0; i < devs.size(); ++i) {
        if (devs[i].uri == uri) {
          forced = DeviceRef{*plugin, i};
          found = true;
        }
      }
    }
    if (!found) {
      std::vector<DeviceInfo> all = devices();
      std::string message = "no device '" + options.device + "'";
      if (sep == std::string_view::npos) {
        message += " (a device URI looks like 'cpu-simd://0')";
      } else if (!plugin.ok()) {
        message += " (" + plugin.status().message() + ")";
      }
      const DeviceInfo* best = nullptr;
      size_t best_distance = 4;
      for (const DeviceInfo& d : all) {
        size_t dist = edit_distance(options.device, d.uri);
        if (dist < best_distance) {
          best_distance = dist;
          best = &d;
        }
      }
      if (best != nullptr) message += "; did you mean '" + best->uri + "'?";
      message += "; " + list_devices(all);
      return not_found(message);
    }
  }

  // Place each delegate: the first variant that a device can load.
  for (uint32_t d = 0; d < def.delegates.size(); ++d) {
    const DelegateDef& delegate = def.delegates[d];
    std::string reasons;
    runtime::LoadedDelegate loaded;
    const ArtifactDef* chosen = nullptr;
    uint32_t chosen_index = 0;
    for (uint32_t variant : delegate.variants) {
      const ArtifactDef& artifact = def.artifacts[variant];
      auto content = state->reader->artifact_content(variant);
      if (!content.ok()) return content.status();
      std::vector<DeviceRef> candidates;
      if (forced) {
        if (forced->plugin->serves(artifact.loader_key)) candidates.push_back(*forced);
        else reasons += "; variant '" + artifact.loader_key + "': device " +
                        options.device + " does not serve this loader key";
      } else {
        auto plugin = host_->plugin_for_key(artifact.loader_key);
        if (!plugin.ok()) {
          reasons += "; variant '" + artifact.loader_key + "': " + plugin.status().message();
          continue;
        }
        if ((*plugin)->devices().empty()) {
          reasons += "; variant '" + artifact.loader_key + "': plugin '" +
                     (*plugin)->manifest().name + "' has no devices";
        }
        for (size_t i = 0; i < (*plugin)->devices().size(); ++i) {
          candidates.push_back(DeviceRef{*plugin, i});
        }
      }
      for (const DeviceRef& ref : candidates) {
        Status check = host::check_blob(*ref.plugin, ref.index, artifact.loader_key,
                                        artifact.format_version, *content);
        if (!check.ok()) {
          reasons += "; variant '" + artifact.loader_key + "' on " +
                     ref.plugin->devices()[ref.index].uri + ": " + check.message();
          continue;
        }
        loaded.plugin = ref.plugin;
        loaded.device_index = ref.index;
        chosen = &artifact;
        chosen_index = variant;
        break;
      }
      if (chosen != nullptr) break;
    }
    if (chosen == nullptr) {
      std::string target = forced ? "device " + options.device : "any device";
      return incompatible("delegate '" + delegate.name + "' cannot run on " + target +
                          (reasons.empty() ? ": it has no variants" : reasons));
    }
    const DeviceInfo& device = loaded.plugin->devices()[loaded.device_index];
    loaded.name = delegate.name;
    loaded.loader_key = chosen->loader_key;
    loaded.device_uri = device.uri;
    loaded.host_execute = (device.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE) != 0;
    loaded.async = (device.capabilities & LOOM_DEVICE_CAP_ASYNC) != 0;
    std::vector<std::pair<std::string, std::string>> specs;
    for (const KeyValue& kv : delegate.compile_specs) specs.emplace_back(kv.key, kv.value);
    auto content = state->reader->artifact_content(chosen_index);
    if (!content.ok()) return content.status();
    auto executable = host::Executable::load(loaded.plugin, loaded.device_index,
                                             chosen->loader_key, chosen->format_version,
                                             *content, specs);
    if (!executable.ok()) {
      return executable.status().with_context("delegate '" + delegate.name + "' on " +
                                              device.uri);
    }
    loaded.executable = std::move(*executable);
    state->placements.push_back({loaded.name, loaded.loader_key, loaded.device_uri});
    state->delegates.push_back(std::move(loaded));
  }

  for (const FunctionDef& function : def.functions) {
    LOOM_ASSIGN_OR_RETURN(auto plan,
                          runtime::build_function_plan(*state->reader, state->parameters,
                                                       function,
                                                       state->kernels, def.delegates.size()));
    state->functions.push_back(std::move(plan));
  }
  return std::shared_ptr<Program>(new Program(std::move(state)));
}

// ---------------------------------------------------------------------------

Program::Program(std::unique_ptr<State> state) : state_(std::move(state)) {}
Program::~Program() = default;

const ProgramReader& Program::reader() const { return *state_->reader; }
const ArtifactRegistry& Program::artifacts() const { return state_->registry; }
const std::vector<DelegatePlacement>& Program::placements() const {
  return state_->placements;
}

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
