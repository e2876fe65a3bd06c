// The log sink shared by a PluginHost and every plugin it loaded. Plugins may
// outlive the host, so the channel is reference-counted and owns a copy of
// the sink.
#pragma once

#include <mutex>
#include <string_view>

#include "host/plugin_host.hpp"

namespace loom::host {

struct LogChannel {
  explicit LogChannel(LogSink sink_in) : sink(std::move(sink_in)) {}

  // Writes one line from plugin `plugin`; calls are serialized.
  void write(loom_log_level_t level, std::string_view plugin, std::string_view message);

  std::mutex mutex;
  LogSink sink;  // empty: warnings and errors go to stderr
};

}  // namespace loom::host
