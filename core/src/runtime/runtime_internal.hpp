// What Loom's own compile side and tests reach inside a Runtime: its plugin
// host (host/plugin_host.hpp). Applications use loom/runtime.hpp only.
#pragma once

#include "host/plugin_host.hpp"
#include "loom/runtime.hpp"

namespace loom {

// The plugin host of `runtime`; lives as long as the runtime.
host::PluginHost& runtime_internal_host(Runtime& runtime);

}  // namespace loom
