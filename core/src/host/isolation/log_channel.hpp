// The log sink and the active trace shared by a PluginHost, every plugin it
// loaded and the programs it loaded. Plugins may outlive the host, so the
// channel is reference-counted and owns a copy of the sink.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string_view>

#include "host/plugin_host.hpp"
#include "loom/trace.hpp"

namespace loom::host {

struct LogChannel {
  explicit LogChannel(LogSink sink_in) : sink(std::move(sink_in)) {}

  // Writes one line from plugin `plugin`; calls are serialized.
  void write(loom_log_level_t level, std::string_view plugin, std::string_view message);

  // The trace being recorded, or nullptr. tracing() is the cheap check a run
  // makes; active_trace() keeps the trace alive while it is written to.
  bool tracing() const { return tracing_flag.load(std::memory_order_relaxed); }
  std::shared_ptr<Trace> active_trace() const {
    if (!tracing()) return nullptr;
    std::lock_guard<std::mutex> lock(trace_mutex);
    return trace;
  }
  void set_trace(std::shared_ptr<Trace> next) {
    std::lock_guard<std::mutex> lock(trace_mutex);
    trace = std::move(next);
    tracing_flag.store(trace != nullptr, std::memory_order_relaxed);
  }

  std::mutex mutex;
  LogSink sink;  // empty: warnings and errors go to stderr
  mutable std::mutex trace_mutex;
  std::shared_ptr<Trace> trace;
  std::atomic<bool> tracing_flag{false};
};

}  // namespace loom::host
