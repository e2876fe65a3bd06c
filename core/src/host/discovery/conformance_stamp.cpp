// Conformance stamps: reading, writing and checking them.
#include "host/discovery/conformance_stamp.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "common/mapped_file.hpp"
#include "common/text.hpp"
#include "common/write_file.hpp"
#include "host/plugin_host.hpp"
#include "loom/file_type.hpp"

namespace loom::host {
namespace {

constexpr std::string_view kStampSuffix = ".loom-conformance.json";
// A stamp lists at most this many failed check ids (the suite has a few
// hundred checks at most).
constexpr size_t kMaxFailedChecks = 10'000;

Status field_error(const std::string& name, std::string_view field, std::string_view problem) {
  return invalid_argument("conformance stamp " + name + ": field '" + std::string(field) + "' " +
                          std::string(problem));
}

bool digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
}

// "YYYY-MM-DDTHH:MM:SS[.fraction]Z" with plausible field values.
bool iso8601_utc(std::string_view t) {
  if (t.size() < 20 || t.back() != 'Z') return false;
  if (t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':') return false;
  if (!digits(t.substr(0, 4)) || !digits(t.substr(5, 2)) || !digits(t.substr(8, 2)) ||
      !digits(t.substr(11, 2)) || !digits(t.substr(14, 2)) || !digits(t.substr(17, 2))) {
    return false;
  }
  const std::string_view rest = t.substr(19, t.size() - 20);
  if (!rest.empty() && (rest[0] != '.' || !digits(rest.substr(1)))) return false;
  auto num = [&](size_t at, size_t n) { return std::stoi(std::string(t.substr(at, n))); };
  const int month = num(5, 2), day = num(8, 2), hour = num(11, 2), minute = num(14, 2),
            second = num(17, 2);
  return month >= 1 && month <= 12 && day >= 1 && day <= 31 && hour <= 23 && minute <= 59 &&
         second <= 60;
}

Result<std::string> text_field(const nlohmann::json& json, const std::string& name,
                               std::string_view field, size_t max_length) {
  auto it = json.find(field);
  if (it == json.end()) return field_error(name, field, "is missing");
  if (!it->is_string()) return field_error(name, field, "must be a string");
  std::string value = it->get<std::string>();
  if (value.empty()) return field_error(name, field, "is empty");
  if (value.size() > max_length) {
    return field_error(name, field, "is " + std::to_string(value.size()) +
                                        " characters long; at most " + std::to_string(max_length));
  }
  if (!printable_ascii(value)) {
    return field_error(name, field, "holds a control character or a non-ASCII byte");
  }
  return value;
}

Result<uint64_t> count_field(const nlohmann::json& totals, const std::string& name,
                             std::string_view field) {
  const std::string where = "totals." + std::string(field);
  auto it = totals.find(field);
  if (it == totals.end()) return field_error(name, where, "is missing");
  if (!it->is_number_unsigned()) {
    return field_error(name, where, "must be a non-negative integer");
  }
  return it->get<uint64_t>();
}

// The checks parse_stamp makes on field values, for a stamp built in memory.
Status validate(const ConformanceStamp& s, const std::string& name) {
  if (s.format != kConformanceStampFormat) {
    return field_error(name, "format", "is " + std::to_string(s.format) +
                                           "; this host reads format " +
                                           std::to_string(kConformanceStampFormat));
  }
  const std::pair<std::string_view, const std::string*> texts[] = {
      {"suite_version", &s.suite_version}, {"plugin", &s.plugin},
      {"plugin_version", &s.plugin_version}, {"library_hash", &s.library_hash},
      {"stamped_at", &s.stamped_at}};
  for (const auto& [field, value] : texts) {
    if (value->empty() || value->size() > 255 || !printable_ascii(*value)) {
      return field_error(name, field, "must be 1 to 255 printable ASCII characters");
    }
  }
  if (s.library_hash.rfind("xxh3-128:", 0) != 0) {
    return field_error(name, "library_hash", "must start with 'xxh3-128:' (the manifest's format)");
  }
  if (!iso8601_utc(s.stamped_at)) {
    return field_error(name, "stamped_at",
                       "is '" + s.stamped_at + "'; expected ISO-8601 UTC such as "
                       "2026-11-25T14:03:07Z");
  }
  if (s.failed_checks.size() > kMaxFailedChecks) {
    return field_error(name, "failed_checks", "lists " + std::to_string(s.failed_checks.size()) +
                                                  " ids; at most " +
                                                  std::to_string(kMaxFailedChecks));
  }
  for (size_t i = 0; i < s.failed_checks.size(); ++i) {
    const std::string& id = s.failed_checks[i];
    if (id.empty() || id.size() > 255 || !printable_ascii(id)) {
      return field_error(name, "failed_checks[" + std::to_string(i) + "]",
                         "must be 1 to 255 printable ASCII characters");
    }
  }
  return Status();
}

std::string date_of(const std::string& stamped_at) { return stamped_at.substr(0, 10); }

}  // namespace

std::string_view conformance_level_name(ConformanceLevel level) {
  return level == ConformanceLevel::kFull ? "full" : "basic";
}

std::filesystem::path stamp_path_for(const PluginManifest& manifest) {
  return manifest.manifest_path.parent_path() / (manifest.name + std::string(kStampSuffix));
}

std::string stamp_time_now() {
  const std::time_t now =
      std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Result<ConformanceStamp> parse_stamp(std::string_view text, const std::string& name) {
  // nlohmann::json reports parse errors by exception; they become a Status here.
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("conformance stamp " + name + " is not valid JSON: " + e.what());
  }
  if (!json.is_object()) {
    return invalid_argument("conformance stamp " + name + " must hold a JSON object");
  }
  ConformanceStamp s;
  auto format = json.find("format");
  if (format == json.end()) return field_error(name, "format", "is missing");
  if (!format->is_number_integer()) return field_error(name, "format", "must be an integer");
  if (format->get<int64_t>() != kConformanceStampFormat) {
    return field_error(name, "format",
                       "is " + std::to_string(format->get<int64_t>()) +
                           ", a format this host does not know; it reads format " +
                           std::to_string(kConformanceStampFormat));
  }
  LOOM_ASSIGN_OR_RETURN(s.suite_version, text_field(json, name, "suite_version", 64));
  LOOM_ASSIGN_OR_RETURN(std::string level, text_field(json, name, "level", 16));
  if (level == "basic") {
    s.level = ConformanceLevel::kBasic;
  } else if (level == "full") {
    s.level = ConformanceLevel::kFull;
  } else {
    return field_error(name, "level", "is '" + level + "'; expected \"basic\" or \"full\"");
  }
  LOOM_ASSIGN_OR_RETURN(s.plugin, text_field(json, name, "plugin", 64));
  LOOM_ASSIGN_OR_RETURN(s.plugin_version, text_field(json, name, "plugin_version", 64));
  LOOM_ASSIGN_OR_RETURN(s.library_hash, text_field(json, name, "library_hash", 128));
  LOOM_ASSIGN_OR_RETURN(s.stamped_at, text_field(json, name, "stamped_at", 64));

  auto totals = json.find("totals");
  if (totals == json.end()) return field_error(name, "totals", "is missing");
  if (!totals->is_object()) {
    return field_error(name, "totals", "must be an object {passed, failed, skipped}");
  }
  LOOM_ASSIGN_OR_RETURN(s.passed, count_field(*totals, name, "passed"));
  LOOM_ASSIGN_OR_RETURN(s.failed, count_field(*totals, name, "failed"));
  LOOM_ASSIGN_OR_RETURN(s.skipped, count_field(*totals, name, "skipped"));

  auto failed = json.find("failed_checks");
  if (failed == json.end()) return field_error(name, "failed_checks", "is missing");
  if (!failed->is_array()) return field_error(name, "failed_checks", "must be an array of strings");
  if (failed->size() > kMaxFailedChecks) {
    return field_error(name, "failed_checks", "lists " + std::to_string(failed->size()) +
                                                  " ids; at most " +
                                                  std::to_string(kMaxFailedChecks));
  }
  for (size_t i = 0; i < failed->size(); ++i) {
    if (!(*failed)[i].is_string()) {
      return field_error(name, "failed_checks[" + std::to_string(i) + "]", "must be a string");
    }
    s.failed_checks.push_back((*failed)[i].get<std::string>());
  }
  LOOM_RETURN_IF_ERROR(validate(s, name));
  return s;
}

Result<ConformanceStamp> read_stamp(const std::filesystem::path& path) {
  LOOM_RETURN_IF_ERROR(check_regular_file(path, "conformance stamp"));
  LOOM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  if (file.size() > kMaxStampBytes) {
    return invalid_argument("conformance stamp " + path.string() + " is " +
                            std::to_string(file.size()) + " bytes; a stamp is at most " +
                            std::to_string(kMaxStampBytes));
  }
  const auto bytes = file.bytes();
  return parse_stamp(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                     path.string());
}

Status write_stamp(const std::filesystem::path& path, const ConformanceStamp& stamp) {
  LOOM_RETURN_IF_ERROR(validate(stamp, path.string()));
  nlohmann::json json = {
      {"format", stamp.format},
      {"suite_version", stamp.suite_version},
      {"level", std::string(conformance_level_name(stamp.level))},
      {"plugin", stamp.plugin},
      {"plugin_version", stamp.plugin_version},
      {"library_hash", stamp.library_hash},
      {"stamped_at", stamp.stamped_at},
      {"totals", {{"passed", stamp.passed}, {"failed", stamp.failed}, {"skipped", stamp.skipped}}},
      {"failed_checks", stamp.failed_checks}};
  return write_file_atomically(path, json.dump(2) + "\n", "conformance stamp");
}

Status check_stamp(const ConformanceStamp& stamp, const PluginManifest& manifest,
                   std::string_view library_hash) {
  if (stamp.plugin != manifest.name) {
    return failed_precondition("the stamp is for plugin '" + stamp.plugin +
                               "', the manifest names '" + manifest.name + "'");
  }
  if (stamp.library_hash != library_hash) {
    return failed_precondition("stamp does not match the library (rebuilt since?): the stamp "
                               "records " + stamp.library_hash + ", the library has " +
                               std::string(library_hash));
  }
  if (stamp.plugin_version != manifest.version) {
    return failed_precondition("the stamp is for version " + stamp.plugin_version +
                               ", the manifest says " + manifest.version);
  }
  if (stamp.failed != 0 || !stamp.failed_checks.empty()) {
    std::string ids;
    for (size_t i = 0; i < stamp.failed_checks.size() && i < 5; ++i) {
      ids += (i == 0 ? "" : ", ") + stamp.failed_checks[i];
    }
    if (stamp.failed_checks.size() > 5) {
      ids += ", ... (" + std::to_string(stamp.failed_checks.size()) + " in all)";
    }
    const uint64_t count = std::max<uint64_t>(stamp.failed, stamp.failed_checks.size());
    return failed_precondition("the stamp records " + std::to_string(count) + " failed check" +
                               (count == 1 ? "" : "s") + (ids.empty() ? "" : ": " + ids));
  }
  return Status();
}

StampStatus stamp_status(const PluginManifest& manifest, std::string_view library_hash) {
  StampStatus out;
  const std::filesystem::path path = stamp_path_for(manifest);
  auto stamp = read_stamp(path);
  if (!stamp.ok()) {
    if (stamp.status().code() == StatusCode::kNotFound) {
      out.state = StampStatus::State::kMissing;
      out.summary = "not stamped (no " + path.filename().string() + ")";
    } else {
      out.state = StampStatus::State::kInvalid;
      out.summary = "unreadable stamp: " + stamp.status().message();
    }
    return out;
  }
  if (Status st = check_stamp(*stamp, manifest, library_hash); !st.ok()) {
    out.state = StampStatus::State::kMismatch;
    out.summary = st.message();
    return out;
  }
  out.state = StampStatus::State::kValid;
  out.summary = std::string(conformance_level_name(stamp->level)) + ", suite " +
                stamp->suite_version + ", " + date_of(stamp->stamped_at) + ", " +
                std::to_string(stamp->passed) + " passed";
  if (stamp->skipped != 0) out.summary += ", " + std::to_string(stamp->skipped) + " skipped";
  return out;
}

}  // namespace loom::host
