// The host side of a plugin's compile entries (compile_supported / compile in
// sdk/include/loom/plugin.h): calls them, checks what the plugin returns and
// turns it into owned C++ values. Both entries are optional: a plugin whose
// entries are NULL compiles nothing (has_compile_entries() is false and the
// calls below fail with failed_precondition).
//
// Used by the compiler (loom_compiler); the runtime never calls them.
// Every error names the plugin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/plugin_host.hpp"
#include "loom/status.hpp"

namespace loom::host {

// Whether the plugin offers both compile entries.
bool has_compile_entries(const LoadedPlugin& plugin);

// The plugin `name` of `host`, loaded, as a compile target: NOT_FOUND
// listing the plugins found when there is no such plugin, the load error
// when it is rejected, FAILED_PRECONDITION when it has no compile entries.
// Errors start with "target '<name>'".
Result<std::shared_ptr<LoadedPlugin>> load_compile_target(PluginHost& host, std::string_view name);

// Asks which of the `node_count` nodes of `graph` (a graph.fbs buffer) the
// plugin can compile; one entry per node, in the graph's order.
Result<std::vector<bool>> compile_supported(const LoadedPlugin& plugin,
                                            std::span<const std::byte> graph, size_t node_count);

// A compiled blob, copied out of the plugin's allocation (which is freed).
struct CompiledBlob {
  std::string loader_key;      // one the plugin serves (checked)
  uint32_t format_version = 0; // within the key's advertised range (checked)
  std::vector<std::byte> bytes;
};

// Compiles `graph` (a graph.fbs buffer) with the compile `options`.
Result<CompiledBlob> compile(const LoadedPlugin& plugin, std::span<const std::byte> graph,
                             const std::vector<std::pair<std::string, std::string>>& options = {});

}  // namespace loom::host
