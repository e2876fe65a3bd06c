// Traces: what the runtime and its plugins did, and when. A Trace records
// spans from Session::run (each run, reference kernel, delegate execution and
// cross-device copy) and the events plugins send through the host's trace
// service, and turns them into a Chrome trace-event timeline (Perfetto,
// chrome://tracing) with one track per device plus the host, or a profile.
//
//   auto trace = runtime->start_trace();
//   session->run();
//   runtime->stop_trace();
//   std::ofstream("run.json") << trace->to_chrome_json();
//   std::cout << Trace::format_profile(trace->profile());
//
// Thread-safe. While no trace is active, a run checks one atomic flag and
// records nothing; while one is, recording allocates.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loom {

class Trace {
 public:
  enum class Phase : uint8_t {
    kComplete = 0,  // a span with its duration
    kBegin = 1,     // a span's start (plugins' events); ended by kEnd on the same thread
    kEnd = 2,
    kInstant = 3,
  };

  struct Event {
    std::string track;     // "host", a device URI, or a plugin's name
    std::string category;  // "run", "kernel", "delegate", "copy", or a plugin's own
    std::string name;
    Phase phase = Phase::kComplete;
    uint64_t timestamp_ns = 0;  // steady clock
    uint64_t duration_ns = 0;   // kComplete
    uint32_t thread = 0;        // set by record(): 1, 2, ... per OS thread, in order of first event
  };

  // One line of a profile: the complete spans of one (track, category, name).
  struct ProfileRow {
    std::string track;
    std::string category;
    std::string name;
    uint64_t calls = 0;
    uint64_t total_ns = 0;
    double mean_ns = 0;
    double share = 0;  // total_ns over the time of all runs (0..1); 0 when no run was traced
  };

  // The name of the host's track.
  static constexpr const char* kHostTrack = "host";

  // Records `event` from the calling thread.
  void record(Event event);
  std::vector<Event> events() const;
  // Removes and returns the events recorded so far (for a process that
  // forwards them to another's trace, as an isolated plugin's does).
  std::vector<Event> take_events();
  size_t size() const;

  // The trace as Chrome trace-event JSON: one process, one track per device
  // (the host's first), spans as complete ("X") or begin/end ("B"/"E")
  // events in microseconds.
  std::string to_chrome_json() const;
  // Spans grouped by (track, category, name), runs excluded, the costliest first.
  // Plugins' begin/end pairs count as spans.
  std::vector<ProfileRow> profile() const;
  // A table of `rows`: track, category, name, calls, total ms, mean us, share.
  static std::string format_profile(const std::vector<ProfileRow>& rows);

 private:
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::map<std::thread::id, uint32_t> threads_;
};

}  // namespace loom
