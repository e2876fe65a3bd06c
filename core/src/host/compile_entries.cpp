#include "host/compile_entries.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace loom::host {

namespace {

bool table_has(const loom_plugin_api_t& api, size_t end_of_field) {
  return api.struct_size >= end_of_field;
}

bool has_supported(const loom_plugin_api_t& api) {
  return table_has(api, offsetof(loom_plugin_api_t, compile_supported) + sizeof(void*)) &&
         api.compile_supported != nullptr;
}

bool has_compile(const loom_plugin_api_t& api) {
  return table_has(api, offsetof(loom_plugin_api_t, compile) + sizeof(void*)) && api.compile != nullptr;
}

std::string who(const LoadedPlugin& plugin) { return "plugin '" + plugin.name() + "'"; }

// The advertised format version range of `key`, from plugin_info.
bool key_range(const LoadedPlugin& plugin, std::string_view key, uint32_t* min, uint32_t* max) {
  for (const auto& k : plugin.loader_key_ranges()) {
    if (k.key != key) continue;
    *min = k.format_min;
    *max = k.format_max;
    return true;
  }
  return false;
}

// The host's `free` service is std::free (loaded_plugin.cpp); blobs the
// plugin allocated through `allocate` are released with it.
struct BlobFree {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

bool has_compile_entries(const LoadedPlugin& plugin) {
  return has_supported(plugin.api()) && has_compile(plugin.api());
}

Result<std::shared_ptr<LoadedPlugin>> load_compile_target(PluginHost& host, std::string_view name) {
  const std::string target = "target '" + std::string(name) + "'";
  std::vector<PluginRecord> found = host.plugins();
  const bool known = std::any_of(found.begin(), found.end(), [&](const PluginRecord& r) { return r.name == name; });
  if (!known) {
    std::string list;
    for (const PluginRecord& r : found) list += (list.empty() ? "" : ", ") + r.name;
    return Status(StatusCode::kNotFound,
                  target + ": no such plugin (found: " + (list.empty() ? "none" : list) + ")");
  }
  auto plugin = host.load(name);
  if (!plugin.ok()) return plugin.status().with_context(target);
  if (!has_compile_entries(**plugin)) {
    return Status(StatusCode::kFailedPrecondition,
                  target + ": plugin '" + std::string(name) + "' cannot compile (it has no compile entries)");
  }
  return *plugin;
}

Result<std::vector<bool>> compile_supported(const LoadedPlugin& plugin,
                                            std::span<const std::byte> graph, size_t node_count) {
  if (!has_supported(plugin.api())) {
    return Status(StatusCode::kFailedPrecondition, who(plugin) + " has no compile entries");
  }
  // std::vector<bool> is packed; the ABI wants a bool array.
  std::unique_ptr<bool[]> flags(new bool[node_count == 0 ? 1 : node_count]());
  loom_compile_supported_args_t args{};
  args.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE;
  args.plugin = plugin.instance();
  args.graph = graph.data();
  args.graph_size = graph.size();
  args.node_count = node_count;
  args.out_supported = flags.get();
  Status st = plugin.take(plugin.api().compile_supported(&args));
  if (!st.ok()) return st.with_context(who(plugin) + ": compile_supported");
  return std::vector<bool>(flags.get(), flags.get() + node_count);
}

Result<CompiledBlob> compile(const LoadedPlugin& plugin, std::span<const std::byte> graph,
                             const std::vector<std::pair<std::string, std::string>>& options) {
  if (!has_compile(plugin.api())) {
    return Status(StatusCode::kFailedPrecondition, who(plugin) + " has no compile entries");
  }
  std::vector<loom_option_t> opts;
  opts.reserve(options.size());
  for (const auto& [k, v] : options) {
    opts.push_back(loom_option_t{LOOM_OPTION_STRUCT_SIZE, k.c_str(), v.c_str()});
  }
  std::vector<const loom_option_t*> opt_ptrs;
  for (const loom_option_t& o : opts) opt_ptrs.push_back(&o);
  loom_compile_args_t args{};
  args.struct_size = LOOM_COMPILE_ARGS_STRUCT_SIZE;
  args.plugin = plugin.instance();
  args.graph = graph.data();
  args.graph_size = graph.size();
  args.option_count = opt_ptrs.size();
  args.options = opt_ptrs.empty() ? nullptr : opt_ptrs.data();
  Status st = plugin.take(plugin.api().compile(&args));
  // A blob the plugin did not get from the host's allocate service (new[],
  // its own malloc, a static buffer) must not reach std::free: it is left
  // alone, and the compile fails naming the mistake.
  if (args.out_blob != nullptr && !plugin.isolated() && !plugin.take_host_allocation(args.out_blob)) {
    return Status(StatusCode::kInternal,
                  who(plugin) + ": compile returned a blob that was not allocated with the host's "
                                "allocate service (the host frees it with its free service); "
                                "allocate it with host->allocate");
  }
  // Owned from here, whatever else the plugin got wrong.
  std::unique_ptr<void, BlobFree> blob(args.out_blob);
  if (!st.ok()) return st.with_context(who(plugin) + ": compile");
  if (args.out_blob_size > 0 && blob == nullptr) {
    return Status(StatusCode::kInternal, who(plugin) + ": compile returned a NULL blob of " +
                                             std::to_string(args.out_blob_size) + " bytes");
  }
  if (args.out_loader_key == nullptr) {
    return Status(StatusCode::kInternal, who(plugin) + ": compile returned no loader key");
  }
  CompiledBlob out;
  out.loader_key = args.out_loader_key;
  out.format_version = args.out_format_version;
  if (!plugin.serves(out.loader_key)) {
    return Status(StatusCode::kInternal, who(plugin) + ": compile returned loader key '" +
                                             out.loader_key + "', which the plugin does not serve");
  }
  uint32_t min = 0, max = 0;
  if (key_range(plugin, out.loader_key, &min, &max) &&
      (out.format_version < min || out.format_version > max)) {
    return Status(StatusCode::kInternal,
                  who(plugin) + ": compile returned format version " + std::to_string(out.format_version) +
                      " for loader key '" + out.loader_key + "', outside its range " +
                      std::to_string(min) + "-" + std::to_string(max));
  }
  const auto* p = static_cast<const std::byte*>(blob.get());
  if (args.out_blob_size > 0) out.bytes.assign(p, p + args.out_blob_size);
  return out;
}

}  // namespace loom::host
