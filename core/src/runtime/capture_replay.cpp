// Replaying a capture (loom/capture.hpp): each recorded executable is loaded
// again on the plugin replayed against (its recorded blob when that plugin
// serves the blob's loader key, else the recorded graph compiled by that
// plugin), each recorded execution runs on the recorded inputs in buffers
// of the device, and each output is compared with the recorded one.
#include <chrono>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "host/compile_entries.hpp"
#include "runtime/capture_replay.hpp"

namespace loom {

namespace runtime {

namespace hc = host::capture;

uint32_t replay_source_plugin(const hc::Capture& c) {
  std::vector<uint64_t> counts(c.plugins.size());
  for (const auto& r : c.calls) {
    if (r.kind == hc::CallKind::kExecute) ++counts[r.plugin];
  }
  uint32_t best = 0;
  for (uint32_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > counts[best]) best = i;
  }
  return best;
}

namespace {

std::string replay_device_index_text(const std::string& uri) {
  const size_t at = uri.rfind("://");
  return at == std::string::npos ? std::string() : uri.substr(at + 3);
}

}  // namespace

Result<ReplayTarget> open_replay_target(const hc::Capture& c, uint32_t source,
                                        const ReplayOptions& options, ReplayReport* report) {
  host::HostOptions host_options;
  host_options.search_paths = options.runtime.plugin_paths;
  host_options.use_environment = options.runtime.use_environment;
  host_options.use_default_folder = options.runtime.use_default_folder;
  host_options.use_user_folder = options.runtime.use_user_folder;
  host_options.plugin_options = options.runtime.plugin_options;
  if (options.runtime.threads != 0) {
    host_options.plugin_options.emplace_back(LOOM_OPTION_THREADS,
                                             std::to_string(options.runtime.threads));
  }
  std::string name = options.plugin.empty() ? c.plugins[source].name : options.plugin;
  if (host::is_manifest_file_name(std::filesystem::path(name).filename().string()) ||
      name.find('/') != std::string::npos) {
    LOOM_ASSIGN_OR_RETURN(host::PluginManifest manifest, host::parse_manifest(name));
    host_options.search_paths.insert(host_options.search_paths.begin(),
                                     manifest.manifest_path.parent_path());
    name = manifest.name;
  }
  report->plugin = name;
  if (options.isolate) host_options.isolated_plugins = {name};
  ReplayTarget target;
  target.name = name;
  target.restart_options = host_options;
  LOOM_ASSIGN_OR_RETURN(target.host, host::PluginHost::create(std::move(host_options)));
  LOOM_ASSIGN_OR_RETURN(target.plugin, target.host->load(name));
  const auto& devices = target.plugin->devices();
  if (devices.empty()) return unavailable("plugin '" + name + "' has no device to replay on");

  // The device: the one asked for, else the recorded device's index.
  if (!options.device.empty()) {
    bool found = false;
    for (size_t i = 0; i < devices.size(); ++i) {
      if (devices[i].uri == options.device) {
        target.device_index = i;
        found = true;
      }
    }
    if (!found) {
      std::string list;
      for (const auto& d : devices) list += (list.empty() ? "" : ", ") + d.uri;
      return not_found("device " + options.device + " is not one of plugin '" + name + "' (" +
                       list + ")");
    }
  } else {
    for (const auto& r : c.calls) {
      if (r.kind != hc::CallKind::kExecutableLoad || r.plugin != source || r.device < 0) continue;
      const std::string index = replay_device_index_text(c.devices[r.device].uri);
      for (size_t i = 0; i < devices.size(); ++i) {
        if (replay_device_index_text(devices[i].uri) == index) target.device_index = i;
      }
      break;
    }
  }
  report->device = devices[target.device_index].uri;
  return target;
}

Status restart_replay_target(ReplayTarget* target) {
  if (target->restarts >= kReplayMaxRestarts) {
    return unavailable("not started again: " + std::to_string(kReplayMaxRestarts) +
                       " restarts already");
  }
  ++target->restarts;
  target->plugin.reset();
  auto fresh_host = host::PluginHost::create(target->restart_options);
  if (!fresh_host.ok()) {
    target->restarts = kReplayMaxRestarts;
    return fresh_host.status().with_context("restarting it failed");
  }
  auto fresh = (*fresh_host)->load(target->name);
  if (!fresh.ok() || target->device_index >= (*fresh)->devices().size()) {
    target->restarts = kReplayMaxRestarts;
    return unavailable("restarting it failed: " +
                       (fresh.ok() ? std::string("device missing") : fresh.status().to_string()));
  }
  target->host = std::move(*fresh_host);
  target->plugin = std::move(*fresh);
  return Status();
}

Result<std::unique_ptr<host::Executable>> replay_load(
    const hc::Capture& c, const hc::CallRecord& r, const std::shared_ptr<host::LoadedPlugin>& plugin,
    size_t device_index) {
  const std::vector<std::byte>& blob = c.payloads[r.payload].bytes;
  if (plugin->serves(r.loader_key)) {
    auto owner = std::make_shared<std::vector<std::byte>>(blob);
    return host::Executable::load(plugin, device_index, r.loader_key, r.format_version, *owner,
                                  r.options, owner);
  }
  // Another plugin: compile the graph whose compile gave this blob.
  for (const hc::CallRecord& compile : c.calls) {
    if (compile.kind != hc::CallKind::kCompile || compile.result_payload < 0 ||
        compile.payload < 0 || compile.status_code != 0 ||
        c.payloads[compile.result_payload].hash != c.payloads[r.payload].hash) {
      continue;
    }
    if (!host::has_compile_entries(*plugin)) {
      return failed_precondition("plugin '" + plugin->name() + "' does not serve loader key '" +
                                 r.loader_key + "' and cannot compile the recorded graph");
    }
    LOOM_ASSIGN_OR_RETURN(host::CompiledBlob compiled,
                          host::compile(*plugin, c.payloads[compile.payload].bytes, compile.options));
    auto owner = std::make_shared<std::vector<std::byte>>(std::move(compiled.bytes));
    return host::Executable::load(plugin, device_index, compiled.loader_key,
                                  compiled.format_version, *owner, r.options, owner);
  }
  return failed_precondition("plugin '" + plugin->name() + "' does not serve loader key '" +
                             r.loader_key + "' and the capture holds no graph that compiled to "
                             "this blob (record the compile too: loom run MODEL.onnx --record)");
}

bool replay_compare(DType dtype, const void* recorded, const void* replayed, uint64_t byte_size,
                    const ReplayOptions& options, std::string_view what, size_t output,
                    ReplayedCall* out) {
  const auto tol = options.tolerances.find(dtype);
  auto diff = compare_tensor(dtype, recorded, replayed, byte_size,
                             tol != options.tolerances.end() ? tol->second : FloatTolerance{});
  if (!diff) return false;
  diff->output = output;
  out->outcome = "differs";
  out->dtype = std::string(dtype_name(dtype));
  std::ostringstream text;
  text.precision(9);
  text << what << " (" << out->dtype << ", " << byte_size / dtype_size(dtype)
       << " elements): " << diff->elements_differing << " differ; worst at index " << diff->index
       << ": recorded " << diff->recorded << ", replayed " << diff->replayed << " (|diff| "
       << diff->abs_diff;
  if (dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
      dtype == DType::kF64) {
    text << ", " << diff->ulps << " ulps";
  }
  text << ")";
  out->detail = text.str();
  out->difference = diff;
  return true;
}

void replay_add(ReplayReport* report, ReplayedCall&& out) {
  if (out.outcome == "match") {
    ++report->matched;
  } else if (out.outcome == "differs") {
    ++report->differed;
  } else if (out.outcome == "skipped") {
    ++report->skipped;
  } else {
    ++report->failed;
  }
  if (out.outcome != "match" && out.outcome != "skipped" && !report->first_difference) {
    report->first_difference = report->calls.size();
  }
  report->calls.push_back(std::move(out));
}

}  // namespace runtime

namespace {

namespace hc = host::capture;

// The executable of a recorded load, on the plugin replayed against.
struct ReplayLoaded {
  std::unique_ptr<host::Executable> executable;
  std::string error;  // why it could not be loaded (calls on it are skipped)
};

// Runs one recorded execution; fills `out` with the outcome.
void replay_execute(const hc::Capture& c, const hc::CallRecord& r, host::Executable& exe,
                    const std::shared_ptr<host::LoadedPlugin>& plugin, size_t device_index,
                    const ReplayOptions& options, ReplayedCall* out) {
  std::vector<host::PreparedCall::Operand> operands;
  const size_t n_in = r.inputs.size();
  std::vector<const hc::TensorRecord*> all;
  for (const auto& t : r.inputs) all.push_back(&t);
  for (const auto& t : r.outputs) all.push_back(&t);
  for (size_t i = 0; i < all.size(); ++i) {
    host::PreparedCall::Operand o;
    o.name = i < n_in ? "input" : "output";
    o.dtype = static_cast<DType>(all[i]->dtype);
    o.shape = all[i]->shape;
    o.bytes = all[i]->byte_size;
    operands.push_back(o);
  }
  auto fail = [&](const Status& st) {
    out->outcome = st.code() == StatusCode::kDeviceLost ? "crashed" : "failed";
    out->detail = st.to_string();
  };
  // Nothing to compare is not a match: an execution whose bytes were not
  // recorded (it failed, or its fence never reported) is skipped.
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i]->payload < 0 && r.status_code == 0) {
      out->outcome = "skipped";
      out->detail = (i < n_in ? "input " + std::to_string(i) : "output " + std::to_string(i - n_in)) +
                    " has no recorded bytes";
      return;
    }
  }
  auto call = host::PreparedCall::make(exe, operands, n_in);
  if (!call.ok()) return fail(call.status());
  std::vector<std::unique_ptr<host::DeviceBuffer>> buffers;
  for (size_t i = 0; i < all.size(); ++i) {
    auto buffer = host::DeviceBuffer::allocate(plugin, device_index,
                                               std::max<uint64_t>(all[i]->byte_size, 1));
    if (!buffer.ok()) return fail(buffer.status());
    if (i < n_in) {
      const auto& bytes = c.payloads[r.inputs[i].payload].bytes;
      if (Status st = (*buffer)->copy_from_host(0, bytes.data(), bytes.size()); !st.ok()) {
        return fail(st);
      }
    }
    (*call)->place_in_buffer(i, **buffer);
    buffers.push_back(std::move(*buffer));
  }
  const auto start = std::chrono::steady_clock::now();
  Status st = (*call)->execute(nullptr);
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (st.code() == StatusCode::kDeviceLost) return fail(st);
  if (static_cast<uint32_t>(st.code()) != r.status_code) {
    out->outcome = "failed";
    out->detail = "recorded " +
                  std::string(status_code_name(static_cast<StatusCode>(r.status_code))) +
                  ", replayed " + (st.ok() ? std::string("ok") : st.to_string());
    return;
  }
  out->outcome = "match";
  if (!st.ok()) return;
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    const hc::TensorRecord& t = r.outputs[o];
    std::vector<std::byte> got(t.byte_size);
    if (Status copy = buffers[n_in + o]->copy_to_host(0, got.data(), got.size()); !copy.ok()) {
      return fail(copy);
    }
    if (runtime::replay_compare(static_cast<DType>(t.dtype), c.payloads[t.payload].bytes.data(),
                                got.data(), t.byte_size, options, "output " + std::to_string(o), o,
                                out)) {
      return;
    }
  }
}

// The executions mode: each recorded execution on fresh buffers.
void replay_executions(const hc::Capture& c, uint32_t source, runtime::ReplayTarget& target,
                       const ReplayOptions& options, ReplayReport* report) {
  std::unordered_map<int64_t, ReplayLoaded> executables;
  std::unordered_map<int64_t, size_t> load_calls;  // executable id -> its load call
  // Set when the plugin's process died; the next execution starts a fresh
  // one (at most kReplayMaxRestarts times) and loads again what it needs.
  std::string lost;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    const hc::CallRecord& r = c.calls[i];
    if (r.plugin != source) continue;
    if (r.kind == hc::CallKind::kExecutableLoad && r.status_code == 0 && r.object >= 0) {
      load_calls[r.object] = i;
      if (!lost.empty()) continue;  // loaded when an execution needs it
      ReplayLoaded& slot = executables[r.object];
      auto loaded = runtime::replay_load(c, r, target.plugin, target.device_index);
      if (loaded.ok()) {
        slot.executable = std::move(*loaded);
        continue;  // a load that works is not reported on its own
      }
      ReplayedCall out;
      out.call = i;
      out.kind = "executable_load";
      out.object = r.object;
      slot.error = "its load (call " + std::to_string(i) + ") failed";
      out.outcome = loaded.status().code() == StatusCode::kDeviceLost ? "crashed" : "failed";
      out.detail = loaded.status().to_string();
      if (out.outcome == "crashed") lost = "the plugin was lost at call " + std::to_string(i);
      runtime::replay_add(report, std::move(out));
    } else if (r.kind == hc::CallKind::kExecutableDestroy) {
      executables.erase(r.object);
      load_calls.erase(r.object);
    } else if (r.kind == hc::CallKind::kExecute) {
      ++report->executions;
      ReplayedCall out;
      out.call = i;
      out.kind = "execute";
      out.object = r.object;
      if (!lost.empty() && target.restarts < runtime::kReplayMaxRestarts) {
        // A fresh plugin (a new child process when isolated).
        executables.clear();
        if (Status st = runtime::restart_replay_target(&target); st.ok()) {
          lost.clear();
        } else {
          lost += "; " + st.message();
        }
      }
      auto it = executables.find(r.object);
      if (lost.empty() && it == executables.end() && load_calls.count(r.object) != 0) {
        const size_t load_index = load_calls[r.object];
        auto loaded = runtime::replay_load(c, c.calls[load_index], target.plugin, target.device_index);
        ReplayLoaded& slot = executables[r.object];
        if (loaded.ok()) {
          slot.executable = std::move(*loaded);
        } else {
          slot.error = "loading it again (call " + std::to_string(load_index) +
                       ") failed: " + loaded.status().to_string();
        }
        it = executables.find(r.object);
      }
      if (!lost.empty()) {
        out.outcome = "skipped";
        out.detail = lost;
      } else if (it == executables.end() || it->second.executable == nullptr) {
        out.outcome = "skipped";
        out.detail = "executable " + std::to_string(r.object) + " is not loaded" +
                     (it != executables.end() ? ": " + it->second.error : std::string());
      } else {
        replay_execute(c, r, *it->second.executable, target.plugin, target.device_index, options,
                       &out);
        if (out.outcome == "crashed") lost = "the plugin was lost at call " + std::to_string(i);
      }
      runtime::replay_add(report, std::move(out));
    }
  }
}

}  // namespace

Result<ReplayReport> replay_capture(const std::filesystem::path& path,
                                    const ReplayOptions& options) {
  LOOM_ASSIGN_OR_RETURN(hc::Capture c, hc::read_capture_file(path));
  ReplayReport report;
  report.capture = path.string();
  report.all_calls = options.all_calls;
  if (c.plugins.empty()) return invalid_argument("capture " + path.string() + " records no plugin");
  const uint32_t source = runtime::replay_source_plugin(c);
  report.recorded_plugin = c.plugins[source].name;
  if (options.all_calls) {
    // Bad input is found before the plugin is started.
    LOOM_RETURN_IF_ERROR(runtime::check_all_calls(c, source, "capture " + path.string()));
  }
  LOOM_ASSIGN_OR_RETURN(runtime::ReplayTarget target,
                        runtime::open_replay_target(c, source, options, &report));
  if (options.all_calls) {
    LOOM_RETURN_IF_ERROR(runtime::replay_all_calls(c, source, target, options, &report));
  } else {
    replay_executions(c, source, target, options, &report);
  }
  return report;
}

std::string_view replay_object_noun(std::string_view kind) {
  if (kind.starts_with("fence")) return "fence";
  if (kind.starts_with("buffer") || kind.starts_with("copy")) return "buffer";
  return "executable";
}

std::string replay_report_json(const ReplayReport& report) {
  using nlohmann::json;
  json j;
  j["capture"] = report.capture;
  j["plugin"] = report.plugin;
  j["recorded_plugin"] = report.recorded_plugin;
  j["device"] = report.device;
  j["mode"] = report.all_calls ? "calls" : "executions";
  if (report.all_calls) j["replayed_calls"] = report.replayed_calls;
  j["executions"] = report.executions;
  j["matched"] = report.matched;
  j["differed"] = report.differed;
  j["failed"] = report.failed;
  j["skipped"] = report.skipped;
  j["passed"] = report.passed();
  j["first_difference"] = nullptr;
  json calls = json::array();
  for (const ReplayedCall& c : report.calls) {
    json e = {{"call", c.call}, {"kind", c.kind}, {"object", c.object}, {"outcome", c.outcome},
              {"seconds", c.seconds}};
    if (!c.detail.empty()) e["detail"] = c.detail;
    if (c.difference) {
      e["difference"] = {{"output", c.difference->output},
                         {"dtype", c.dtype},
                         {"index", c.difference->index},
                         {"elements_differing", c.difference->elements_differing},
                         {"recorded", c.difference->recorded},
                         {"replayed", c.difference->replayed},
                         {"abs_diff", c.difference->abs_diff},
                         {"ulps", c.difference->ulps}};
    }
    calls.push_back(std::move(e));
  }
  if (report.first_difference) j["first_difference"] = calls[*report.first_difference];
  j["calls"] = calls;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {
std::string replay_xml_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') {
          out += ' ';
        } else {
          out += ch;
        }
    }
  }
  return out;
}
}  // namespace

std::string replay_report_junit(const ReplayReport& report) {
  std::ostringstream x;
  const std::string suite = "replay " + report.capture + " on " + report.device;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuite name=\"" << replay_xml_escape(suite) << "\" tests=\"" << report.calls.size()
    << "\" failures=\"" << report.differed << "\" errors=\"" << report.failed << "\" skipped=\""
    << report.skipped << "\">\n";
  for (const ReplayedCall& c : report.calls) {
    x << "  <testcase classname=\"" << replay_xml_escape(report.plugin) << "\" name=\"call "
      << c.call << " " << c.kind << " " << replay_object_noun(c.kind) << " " << c.object
      << "\" time=\"" << c.seconds
      << "\">";
    if (c.outcome == "differs") {
      x << "<failure message=\"" << replay_xml_escape(c.detail) << "\"/>";
    } else if (c.outcome == "failed" || c.outcome == "crashed") {
      x << "<error message=\"" << replay_xml_escape(c.outcome + ": " + c.detail) << "\"/>";
    } else if (c.outcome == "skipped") {
      x << "<skipped message=\"" << replay_xml_escape(c.detail) << "\"/>";
    }
    x << "</testcase>\n";
  }
  x << "</testsuite>\n";
  return x.str();
}

}  // namespace loom
