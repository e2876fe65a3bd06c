// Conformance stamps: the record `loom conformance --stamp` leaves beside a
// plugin's manifest, <manifest dir>/<plugin name>.loom-conformance.json
// (docs/conformance-stamp.md describes the format).
//
// A stamp says which suite version checked which library (by the manifest's
// library hash) at which level, and with what result. A host that requires
// conformance (HostOptions::require_conformance) refuses a plugin whose stamp
// is missing, unreadable, for another library or plugin, or records a failure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"

namespace loom::host {

struct PluginManifest;

// The stamp format this code reads and writes.
inline constexpr int kConformanceStampFormat = 1;
// The largest stamp file read (a stamp lists failed check ids, a few KiB).
inline constexpr uint64_t kMaxStampBytes = 1024 * 1024;

enum class ConformanceLevel : uint8_t { kBasic = 0, kFull = 1 };

// "basic" or "full".
std::string_view conformance_level_name(ConformanceLevel level);

// What a stamp file holds.
struct ConformanceStamp {
  int format = kConformanceStampFormat;
  std::string suite_version;  // the conformance suite's version, e.g. "1.0"
  ConformanceLevel level = ConformanceLevel::kBasic;
  std::string plugin;          // the manifest's name
  std::string plugin_version;  // the manifest's version
  // The manifest's library_hash when the suite ran ("xxh3-128:<32 hex>").
  std::string library_hash;
  // When the suite ran, ISO-8601 UTC: "2026-11-25T14:03:07Z" (fractional
  // seconds allowed).
  std::string stamped_at;
  uint64_t passed = 0;
  uint64_t failed = 0;
  uint64_t skipped = 0;
  std::vector<std::string> failed_checks;  // ids of the checks that failed
};

// Where the stamp of `manifest` lives: beside the manifest, named after the
// plugin.
std::filesystem::path stamp_path_for(const PluginManifest& manifest);

// The current time as a stamp's stamped_at ("YYYY-MM-DDTHH:MM:SSZ").
std::string stamp_time_now();

// Parses stamp text; `name` (usually the file's path) starts every error,
// which names the field at fault.
Result<ConformanceStamp> parse_stamp(std::string_view text, const std::string& name);
// Reads and parses a stamp file. NOT_FOUND when there is none.
Result<ConformanceStamp> read_stamp(const std::filesystem::path& path);
// Writes `stamp` to `path` (through a temporary file renamed into place, so a
// reader never sees half a stamp). The stamp is validated first: what
// write_stamp writes, read_stamp reads back.
Status write_stamp(const std::filesystem::path& path, const ConformanceStamp& stamp);

// Whether `stamp` vouches for the plugin of `manifest` whose library hashes to
// `library_hash` (pass manifest.library_hash when the library is checked
// against the manifest elsewhere, as the host does when loading). The error
// (FAILED_PRECONDITION) says what does not match, or which checks failed.
Status check_stamp(const ConformanceStamp& stamp, const PluginManifest& manifest,
                   std::string_view library_hash);

// The stamp status of a plugin in one line, for listings.
struct StampStatus {
  enum class State : uint8_t {
    kValid = 0,     // stamped, matching, nothing failed
    kMissing = 1,   // no stamp file
    kInvalid = 2,   // unreadable or malformed
    kMismatch = 3,  // for another library or plugin, or records failures
  };
  State state = State::kMissing;
  // kValid: "basic, suite 1.0, 2026-11-25, 41 passed"; otherwise the reason:
  // "not stamped", "stamp does not match the library (rebuilt since?): ...".
  std::string summary;
  bool valid() const { return state == State::kValid; }
};

// Reads the stamp beside `manifest` and checks it against `library_hash`
// (see check_stamp).
StampStatus stamp_status(const PluginManifest& manifest, std::string_view library_hash);

}  // namespace loom::host
