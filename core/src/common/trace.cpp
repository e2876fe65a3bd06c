#include "loom/trace.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <tuple>

namespace loom {
namespace {

// A JSON string literal of `s`: quotes, backslashes and control characters
// escaped, so names from programs and plugins cannot break the document.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Microseconds with nanosecond precision, as Chrome's "ts" and "dur" take.
std::string micros(uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
  return buf;
}

}  // namespace

void Trace::record(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, added] = threads_.try_emplace(std::this_thread::get_id(),
                                          static_cast<uint32_t>(threads_.size() + 1));
  event.thread = it->second;
  events_.push_back(std::move(event));
}

std::vector<Trace::Event> Trace::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

std::vector<Trace::Event> Trace::take_events() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

size_t Trace::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

std::string Trace::to_chrome_json() const {
  const std::vector<Event> events = this->events();
  // Tracks become Chrome "threads" of one process: the host is tid 1, the
  // others follow in order of their first event. A plugin's own worker
  // threads share their device's track; begin/end pairs nest per track.
  std::vector<std::string> tracks = {kHostTrack};
  const auto tid_of = [&tracks](const std::string& track) {
    auto it = std::find(tracks.begin(), tracks.end(), track);
    if (it == tracks.end()) {
      tracks.push_back(track);
      return tracks.size();
    }
    return static_cast<size_t>(it - tracks.begin()) + 1;
  };
  uint64_t origin = UINT64_MAX;
  for (const Event& e : events) origin = std::min(origin, e.timestamp_ns);
  if (events.empty()) origin = 0;
  std::string body;
  for (const Event& e : events) {
    const size_t tid = tid_of(e.track);
    const char* ph = e.phase == Phase::kComplete ? "X"
                     : e.phase == Phase::kBegin  ? "B"
                     : e.phase == Phase::kEnd    ? "E"
                                                 : "i";
    body += ",\n{\"name\":" + json_string(e.name) + ",\"cat\":" + json_string(e.category) +
            ",\"ph\":\"" + ph + "\",\"ts\":" + micros(e.timestamp_ns - origin) +
            ",\"pid\":1,\"tid\":" + std::to_string(tid);
    if (e.phase == Phase::kComplete) body += ",\"dur\":" + micros(e.duration_ns);
    if (e.phase == Phase::kInstant) body += ",\"s\":\"t\"";
    body += ",\"args\":{\"thread\":" + std::to_string(e.thread) + "}}";
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"loom\"}}";
  for (size_t i = 0; i < tracks.size(); ++i) {
    const std::string tid = std::to_string(i + 1);
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
           ",\"args\":{\"name\":" + json_string(tracks[i]) + "}}";
    out += ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + tid + "}}";
  }
  out += body + "\n]}\n";
  return out;
}

std::vector<Trace::ProfileRow> Trace::profile() const {
  const std::vector<Event> events = this->events();
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, ProfileRow> rows;
  uint64_t run_ns = 0;
  const auto add = [&rows](const Event& e, uint64_t ns) {
    ProfileRow& row = rows[Key{e.track, e.category, e.name}];
    row.track = e.track;
    row.category = e.category;
    row.name = e.name;
    ++row.calls;
    row.total_ns += ns;
  };
  // Open begin events per (track, thread), innermost last.
  std::map<std::pair<std::string, uint32_t>, std::vector<const Event*>> open;
  for (const Event& e : events) {
    if (e.phase == Phase::kComplete) {
      if (e.category == "run") run_ns += e.duration_ns;
      else add(e, e.duration_ns);
    } else if (e.phase == Phase::kBegin) {
      open[{e.track, e.thread}].push_back(&e);
    } else if (e.phase == Phase::kEnd) {
      auto& stack = open[{e.track, e.thread}];
      if (stack.empty()) continue;  // an end without its begin: nothing to measure
      const Event& begin = *stack.back();
      stack.pop_back();
      add(begin, e.timestamp_ns >= begin.timestamp_ns ? e.timestamp_ns - begin.timestamp_ns : 0);
    }
  }
  std::vector<ProfileRow> out;
  for (auto& [key, row] : rows) {
    row.mean_ns = static_cast<double>(row.total_ns) / static_cast<double>(row.calls);
    row.share = run_ns == 0 ? 0 : static_cast<double>(row.total_ns) / static_cast<double>(run_ns);
    out.push_back(std::move(row));
  }
  std::stable_sort(out.begin(), out.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return a.total_ns > b.total_ns;
  });
  return out;
}

std::string Trace::format_profile(const std::vector<ProfileRow>& rows) {
  size_t track_w = 6, name_w = 4;
  for (const ProfileRow& r : rows) {
    track_w = std::max(track_w, r.track.size());
    name_w = std::max(name_w, r.category.size() + 1 + r.name.size());
  }
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-*s  %8s  %10s  %10s  %6s\n", static_cast<int>(track_w),
                "device", static_cast<int>(name_w), "what", "calls", "total ms", "mean us",
                "share");
  out += line;
  for (const ProfileRow& r : rows) {
    const std::string what = r.category + " " + r.name;
    std::snprintf(line, sizeof line, "%-*s  %-*s  %8" PRIu64 "  %10.3f  %10.3f  %5.1f%%\n",
                  static_cast<int>(track_w), r.track.c_str(), static_cast<int>(name_w),
                  what.c_str(), r.calls, static_cast<double>(r.total_ns) / 1e6, r.mean_ns / 1e3,
                  r.share * 100.0);
    out += line;
  }
  return out;
}

}  // namespace loom
