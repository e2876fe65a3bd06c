// CheckContext and the helpers the checks share.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "check_context.hpp"
#include "loom/compiler.hpp"
#include "loom/conformance/onnx_cases.hpp"
#include "loom/conformance/onnx_runner.hpp"
#include "loom/program.hpp"
#include "loom/runtime.hpp"

namespace loom::conformance::detail {

namespace fs = std::filesystem;

std::string_view code_name(loom_status_code_t code) {
  switch (code) {
    case LOOM_STATUS_OK: return "OK";
    case LOOM_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case LOOM_STATUS_NOT_FOUND: return "NOT_FOUND";
    case LOOM_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case LOOM_STATUS_INCOMPATIBLE: return "INCOMPATIBLE";
    case LOOM_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case LOOM_STATUS_DEVICE_LOST: return "DEVICE_LOST";
    case LOOM_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case LOOM_STATUS_INTERNAL: return "INTERNAL";
    case LOOM_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case LOOM_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case LOOM_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    default: break;
  }
  return "UNKNOWN_CODE";
}

std::string take(const loom_plugin_api_t& api, loom_status_t* status) {
  if (status == nullptr) return "";
  const loom_status_code_t code = api.status_code(status);
  const char* message = api.status_message(status);
  std::string text = std::string(code_name(code)) + ": " +
                     (message == nullptr ? "(NULL message)"
                      : message[0] == '\0' ? "(empty message)"
                                           : std::string(message).substr(0, 300));
  if (code == LOOM_STATUS_OK) text = "a status object with code OK (NULL means OK): " + text;
  api.status_destroy(status);
  return text;
}

Result<std::shared_ptr<host::LoadedPlugin>> CheckContext::load(
    const std::vector<std::pair<std::string, std::string>>& extra) const {
  host::HostOptions options;
  options.plugin_options = options_.plugin_options;
  for (const auto& kv : extra) options.plugin_options.push_back(kv);
  options.probe = false;
  auto log = log_;
  options.log_sink = [log](loom_log_level_t level, std::string_view line) {
    if (level < LOOM_LOG_WARNING) return;
    std::lock_guard<std::mutex> lock(log->mutex);
    if (log->lines.size() < 100) log->lines.emplace_back(line);
  };
  note("loading the plugin");
  auto plugin = host::LoadedPlugin::open_in_this_process(manifest_, options);
  if (!plugin.ok()) {
    return Status(plugin.status().code(),
                  "the host refused the plugin: " + plugin.status().message());
  }
  return plugin;
}

Result<size_t> CheckContext::device_index(const host::LoadedPlugin& plugin) const {
  const auto& devices = plugin.devices();
  if (devices.empty()) return not_found("no device: the plugin lists none");
  if (options_.device.empty()) return size_t{0};
  std::string known;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].uri == options_.device) return i;
    known += (known.empty() ? "" : ", ") + devices[i].uri;
  }
  return not_found("no device '" + options_.device + "' in plugin '" + manifest_.name +
                   "' (its devices: " + known + ")");
}

std::vector<std::string> CheckContext::take_log() const {
  std::lock_guard<std::mutex> lock(log_->mutex);
  std::vector<std::string> out;
  out.swap(log_->lines);
  return out;
}

Result<loom_device_info_t> device_info(const host::LoadedPlugin& plugin, size_t index) {
  loom_device_info_t info{};
  info.struct_size = sizeof info;
  std::string err = take(plugin.api(), plugin.api().device_info(plugin.device_handle(index), &info));
  if (!err.empty()) return internal_error("device_info failed: " + err);
  return info;
}

DeviceUnderTest open_device(CheckContext& ctx) {
  DeviceUnderTest t;
  auto plugin = ctx.load();
  if (!plugin.ok()) {
    t.error = plugin.status().message();
    return t;
  }
  auto index = ctx.device_index(**plugin);
  if (!index.ok()) {
    t.error = index.status().message();
    return t;
  }
  auto info = device_info(**plugin, *index);
  if (!info.ok()) {
    t.error = info.status().message();
    return t;
  }
  t.plugin = *plugin;
  t.api = &(*plugin)->api();
  t.device = (*plugin)->device_handle(*index);
  t.info = *info;
  t.capabilities = info->capabilities;
  return t;
}

std::string check_blob(const host::LoadedPlugin& plugin, loom_device_t* device, const TestBlob& blob,
                       std::span<const std::byte> bytes) {
  loom_executable_check_args_t args{};
  args.struct_size = sizeof args;
  args.device = device;
  args.loader_key = blob.loader_key.c_str();
  args.format_version = blob.format_version;
  args.blob = bytes.data();
  args.blob_size = bytes.size();
  return take(plugin.api(), plugin.api().executable_check(&args));
}

std::string load_blob(const host::LoadedPlugin& plugin, loom_device_t* device, const TestBlob& blob,
                      std::span<const std::byte> bytes, loom_executable_t** out) {
  loom_executable_load_args_t args{};
  args.struct_size = sizeof args;
  args.device = device;
  args.loader_key = blob.loader_key.c_str();
  args.format_version = blob.format_version;
  args.blob = bytes.data();
  args.blob_size = bytes.size();
  *out = nullptr;
  std::string err = take(plugin.api(), plugin.api().executable_load(&args));
  if (err.empty() && args.out_executable == nullptr) {
    return "executable_load returned OK without an executable";
  }
  if (!err.empty() && args.out_executable != nullptr) {
    plugin.api().executable_destroy(args.out_executable);
  }
  *out = err.empty() ? args.out_executable : nullptr;
  return err;
}

namespace {

// Small, quick node tests first: their blobs make the executable checks'
// mutations cheap. The rest follow in name order.
constexpr const char* kPreferredCases[] = {
    "test_add", "test_relu", "test_mul", "test_matmul_2d", "test_sigmoid", "test_sub",
    "test_abs", "test_exp", "test_conv_with_strides_padding", "test_softmax_example"};

// The tensor specs of the delegate call that uses artifact `artifact`.
void add_specs(const ProgramDef& def, uint32_t artifact, TestBlob* blob) {
  for (const FunctionDef& f : def.functions) {
    for (const InstructionDef& ins : f.instructions) {
      if (ins.op != OpCode::kDelegateCall || ins.delegate < 0 ||
          static_cast<size_t>(ins.delegate) >= def.delegates.size()) {
        continue;
      }
      const auto& variants = def.delegates[ins.delegate].variants;
      if (std::find(variants.begin(), variants.end(), artifact) == variants.end()) continue;
      auto specs = [&](const std::vector<uint32_t>& ids, std::vector<TestBlob::Spec>* out) {
        for (uint32_t id : ids) {
          if (id >= f.values.size()) return false;
          const ValueDef& v = f.values[id];
          if (v.kind != ValueKind::kTensor) return false;
          TestBlob::Spec s;
          s.dtype = static_cast<loom_dtype_t>(v.dtype);
          uint64_t n = dtype_size(v.dtype);
          for (int64_t d : v.shape) {
            if (d < 0) return false;
            s.shape.push_back(d);
            n *= static_cast<uint64_t>(d);
          }
          s.byte_size = n;
          out->push_back(std::move(s));
        }
        return true;
      };
      if (!specs(ins.inputs, &blob->inputs) || !specs(ins.outputs, &blob->outputs)) {
        blob->inputs.clear();
        blob->outputs.clear();
      }
      return;
    }
  }
}

}  // namespace

std::string execute_blob(const host::LoadedPlugin& plugin, loom_device_t* device,
                         uint64_t capabilities, loom_executable_t* exe, const TestBlob& blob,
                         std::vector<std::vector<std::byte>>& inputs,
                         std::vector<std::vector<std::byte>>& outputs, loom_fence_t* signal,
                         uint64_t wait_ns) {
  const loom_plugin_api_t& api = plugin.api();
  const bool host_pointers = (capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE) != 0;
  inputs.resize(blob.inputs.size());
  outputs.resize(blob.outputs.size());
  std::vector<BufferGuard> buffers;
  buffers.reserve(blob.inputs.size() + blob.outputs.size());
  std::vector<loom_tensor_t> tensors;
  tensors.reserve(blob.inputs.size() + blob.outputs.size());
  auto add = [&](const TestBlob::Spec& spec, std::vector<std::byte>& data, bool input) -> std::string {
    data.resize(spec.byte_size);
    loom_tensor_t t{};
    t.struct_size = sizeof t;
    t.dtype = spec.dtype;
    t.rank = static_cast<uint32_t>(spec.shape.size());
    t.shape = spec.shape.data();
    t.byte_size = spec.byte_size;
    if (host_pointers) {
      t.host_data = data.data();
    } else {
      loom_buffer_allocate_args_t a{};
      a.struct_size = sizeof a;
      a.device = device;
      a.size = std::max<uint64_t>(spec.byte_size, 1);
      std::string err = take(api, api.buffer_allocate(&a));
      if (!err.empty()) return "buffer_allocate: " + err;
      buffers.emplace_back(&api, a.out_buffer);
      t.buffer = a.out_buffer;
      if (input && spec.byte_size > 0) {
        loom_buffer_copy_args_t c{sizeof(loom_buffer_copy_args_t), a.out_buffer, 0, data.data(), spec.byte_size};
        err = take(api, api.buffer_copy_from_host(&c));
        if (!err.empty()) return "buffer_copy_from_host: " + err;
      }
    }
    tensors.push_back(t);
    return "";
  };
  for (size_t i = 0; i < blob.inputs.size(); ++i) {
    if (std::string err = add(blob.inputs[i], inputs[i], true); !err.empty()) return err;
  }
  for (size_t i = 0; i < blob.outputs.size(); ++i) {
    if (std::string err = add(blob.outputs[i], outputs[i], false); !err.empty()) return err;
  }
  std::vector<const loom_tensor_t*> in, out;
  for (size_t i = 0; i < tensors.size(); ++i) (i < blob.inputs.size() ? in : out).push_back(&tensors[i]);
  loom_execute_args_t args{};
  args.struct_size = sizeof args;
  args.executable = exe;
  args.input_count = in.size();
  args.inputs = in.data();
  args.output_count = out.size();
  args.outputs = out.data();
  args.signal_fence = signal;
  if (std::string err = take(api, api.execute(&args)); !err.empty()) return err;
  if (signal != nullptr) {
    if (std::string err = take(api, api.fence_wait(signal, wait_ns)); !err.empty()) {
      return "the execution's signal fence: " + err;
    }
  }
  if (!host_pointers) {
    for (size_t i = 0; i < blob.outputs.size(); ++i) {
      if (blob.outputs[i].byte_size == 0) continue;
      loom_buffer_copy_args_t c{sizeof(loom_buffer_copy_args_t), buffers[blob.inputs.size() + i].buffer, 0,
                                outputs[i].data(), blob.outputs[i].byte_size};
      if (std::string err = take(api, api.buffer_copy_to_host(&c)); !err.empty()) {
        return "buffer_copy_to_host: " + err;
      }
    }
  }
  return "";
}

fs::path default_onnx_dir() { return "/usr/share/libonnx-testdata/data/node"; }

std::vector<TestBlob> CheckContext::blobs(size_t max, std::string* why) const {
  std::vector<TestBlob> out;
  for (const SuiteOptions::BlobFile& file : options_.blobs) {
    auto bytes = read_bounded(file.path, uint64_t{1} << 30);
    if (!bytes.ok()) {
      *why = bytes.status().message();
      return {};
    }
    TestBlob b{"file " + file.path.string(),
               file.loader_key.empty() && !manifest_.loader_keys.empty() ? manifest_.loader_keys[0]
                                                                         : file.loader_key,
               file.format_version, std::move(*bytes), {}, {}};
    out.push_back(std::move(b));
    if (out.size() >= max) return out;
  }
  auto runtime = Runtime::create(plugin_runtime_options(manifest_, options_.plugin_options));
  if (!runtime.ok()) {
    *why = "cannot start a runtime with the plugin: " + runtime.status().message();
    return out;
  }
  std::vector<fs::path> roots = options_.onnx_dirs;
  if (roots.empty()) roots.push_back(default_onnx_dir());
  std::error_code ec;
  for (const fs::path& r : roots) {
    if (!fs::is_directory(r, ec)) {
      *why = "no ONNX test cases to compile blobs from (" + r.string() +
             " does not exist; install libonnx-testdata or give --onnx-dir)";
      return out;
    }
  }
  auto cases = discover_cases(roots);
  if (!cases.ok()) {
    *why = cases.status().message();
    return out;
  }
  std::stable_partition(cases->begin(), cases->end(), [](const TestCase& c) {
    return std::find(std::begin(kPreferredCases), std::end(kPreferredCases), c.name) !=
           std::end(kPreferredCases);
  });
  auto scratch = make_scratch_dir("conformance");
  if (!scratch.ok()) {
    *why = scratch.status().message();
    return out;
  }
  size_t tried = 0;
  for (const TestCase& test : *cases) {
    if (out.size() >= max || tried >= 200) break;
    ++tried;
    auto summary = summarize_model(test.dir / "model.onnx");
    if (!summary.ok() || !summary->non_tensor.empty() || !summary->values.empty() || !summary->out_of_scope.empty()) {
      continue;  // tensors only here
    }
    auto data = read_data_set(test.data_sets[0], summary->inputs, summary->outputs);
    if (!data.ok()) continue;
    compiler::CompileOptions compile;
    compile.targets = {manifest_.name};
    for (const NamedTensor& in : data->inputs) compile.input_shapes.emplace_back(in.name, in.tensor.shape());
    compile.input_value = [&data](std::string_view name) -> const Tensor* {
      for (const NamedTensor& in : data->inputs) {
        if (in.name == name) return &in.tensor;
      }
      return nullptr;
    };
    const fs::path program = *scratch / (test.name + ".loom");
    note("compiling " + test.name);
    auto report = compiler::compile_onnx_file((*runtime)->plugin_host(), test.dir / "model.onnx", program, compile);
    if (!report.ok() || report->targets.empty() || report->targets[0].nodes == 0) continue;
    auto reader = ProgramReader::open_file(program);
    if (!reader.ok()) continue;
    const ProgramDef& def = (*reader)->program();
    for (uint32_t i = 0; i < def.artifacts.size() && out.size() < max; ++i) {
      const ArtifactDef& a = def.artifacts[i];
      if (std::find(manifest_.loader_keys.begin(), manifest_.loader_keys.end(), a.loader_key) ==
          manifest_.loader_keys.end()) {
        continue;
      }
      auto content = (*reader)->artifact_content(i);
      if (!content.ok()) continue;
      TestBlob blob{"compiled from " + test.name, a.loader_key, a.format_version,
                    std::vector<std::byte>(content->begin(), content->end()), {}, {}};
      add_specs(def, i, &blob);
      out.push_back(std::move(blob));
    }
  }
  fs::remove_all(*scratch, ec);
  if (out.empty()) {
    *why = "the plugin compiled none of the first " + std::to_string(tried) +
           " ONNX node tests, and no blob was given (--blob FILE)";
  }
  return out;
}

RuntimeOptions plugin_runtime_options(const host::PluginManifest& manifest,
                                      const std::vector<std::pair<std::string, std::string>>& plugin_options) {
  RuntimeOptions options;
  options.plugin_paths = {manifest.manifest_path.parent_path()};
  options.use_environment = false;
  options.use_default_folder = false;
  options.probe_plugins = false;
  options.plugin_options = plugin_options;
  options.log_sink = [](LogLevel, std::string_view) {};
  return options;
}

Result<std::vector<NamedTensor>> run_session_once(Session& session, const std::vector<NamedTensor>& inputs) {
  for (const NamedTensor& in : inputs) {
    if (Status st = session.set_input(in.name, in.tensor); !st.ok()) return st;
  }
  if (Status st = session.run(); !st.ok()) return st;
  std::vector<NamedTensor> out;
  for (const ArgumentInfo& arg : session.function().outputs) {
    auto t = session.output(arg.name);
    if (!t.ok()) return t.status();
    out.push_back({arg.name, **t});
  }
  return out;
}

}  // namespace loom::conformance::detail
