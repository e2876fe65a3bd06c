// Remembered probe verdicts (probe_cache.hpp).
#include "host/discovery/probe_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hash.hpp"
#include "common/mapped_file.hpp"
#include "common/text.hpp"
#include "common/write_file.hpp"
#include "host/plugin_host.hpp"
#include "loom/version.hpp"

extern char** environ;

namespace loom::host {
namespace {

Status field_error(const std::string& name, std::string_view field, std::string_view problem) {
  return invalid_argument("probe verdict " + name + ": field '" + std::string(field) + "' " +
                          std::string(problem));
}

bool hex_digits(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Appends what identifies `path` now: "path dev inode size mtime_ns".
Status append_file_identity(std::string& out, std::string_view what,
                            const std::filesystem::path& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    return not_found("cannot examine " + std::string(what) + " " + path.string());
  }
  out += std::string(what) + "=" + path.string() + " " + std::to_string(st.st_dev) + " " +
         std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "\n";
  return Status();
}

bool ignored_variable(std::string_view name) {
  return std::find(std::begin(kIgnoredEnvironment), std::end(kIgnoredEnvironment), name) !=
         std::end(kIgnoredEnvironment);
}

Result<std::string> text_field(const nlohmann::json& json, const std::string& name,
                               std::string_view field, size_t max_length, bool may_be_empty) {
  auto it = json.find(field);
  if (it == json.end()) return field_error(name, field, "is missing");
  if (!it->is_string()) return field_error(name, field, "must be a string");
  std::string value = it->get<std::string>();
  if (value.empty() && !may_be_empty) return field_error(name, field, "is empty");
  if (value.size() > max_length) {
    return field_error(name, field, "is " + std::to_string(value.size()) +
                                        " characters long; at most " + std::to_string(max_length));
  }
  if (!printable_ascii(value)) {
    return field_error(name, field, "holds a control character or a non-ASCII byte");
  }
  return value;
}

std::optional<StatusCode> code_named(std::string_view text) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kAlreadyExists); ++c) {
    if (status_code_name(static_cast<StatusCode>(c)) == text) return static_cast<StatusCode>(c);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::filesystem::path> default_probe_cache_folder() {
  if (const char* env = std::getenv("LOOM_PROBE_CACHE"); env != nullptr && env[0] != '\0') {
    const std::string_view value(env);
    if (value == "off" || value == "0") return std::nullopt;
    if (value[0] == '/') return std::filesystem::path(value);
  }
  // The XDG base directory rule: a relative $XDG_CACHE_HOME is ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::filesystem::path(xdg) / "loom" / "probes";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return std::filesystem::path(home) / ".cache" / "loom" / "probes";
  }
  return std::nullopt;
}

Result<std::string> probe_key(const PluginManifest& manifest, const HostOptions& options,
                              const std::filesystem::path& plugin_host) {
  std::string material = "loom probe key 1\nversion=" LOOM_VERSION_STRING "\n";
  LOOM_RETURN_IF_ERROR(append_file_identity(material, "manifest", manifest.manifest_path));
  material += "declared_hash=" + manifest.library_hash + "\n";
  std::error_code ec;
  const std::filesystem::path library = std::filesystem::canonical(manifest.library, ec);
  if (ec) return not_found("cannot examine library " + manifest.library.string());
  LOOM_RETURN_IF_ERROR(append_file_identity(material, "library", library));
  LOOM_RETURN_IF_ERROR(append_file_identity(material, "plugin_host", plugin_host));
  material += "abi=" + std::to_string(options.abi_min) + "-" + std::to_string(options.abi_max) +
              "\ntimeout_ms=" + std::to_string(options.probe_timeout.count()) + "\n";
  for (const auto& [key, value] : options.plugin_options) {
    material += "option=" + std::to_string(key.size()) + ":" + key + "=" + value + "\n";
  }
  std::vector<std::string_view> variables;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!ignored_variable(entry.substr(0, entry.find('=')))) variables.push_back(entry);
  }
  std::sort(variables.begin(), variables.end());
  for (std::string_view v : variables) {
    material += "env=" + std::to_string(v.size()) + ":";
    material += v;
    material += "\n";
  }
  return xxh3_128_hex(std::as_bytes(std::span(material.data(), material.size())));
}

std::filesystem::path probe_verdict_path(const std::filesystem::path& folder,
                                         std::string_view name, std::string_view key) {
  return folder / (std::string(name) + "-" + std::string(key) + ".json");
}

Result<ProbeVerdict> parse_probe_verdict(std::string_view text, const std::string& name) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return invalid_argument("probe verdict " + name + " is not JSON");
  if (!json.is_object()) return invalid_argument("probe verdict " + name + " is not a JSON object");
  ProbeVerdict v;
  auto format = json.find("format");
  if (format == json.end()) return field_error(name, "format", "is missing");
  if (!format->is_number_integer() || format->get<int64_t>() != kProbeVerdictFormat) {
    return field_error(name, "format", "must be " + std::to_string(kProbeVerdictFormat));
  }
  LOOM_ASSIGN_OR_RETURN(v.key, text_field(json, name, "key", 32, false));
  if (v.key.size() != 32 || !hex_digits(v.key)) {
    return field_error(name, "key", "must be 32 lower-case hex digits");
  }
  LOOM_ASSIGN_OR_RETURN(v.plugin, text_field(json, name, "plugin", 64, false));
  LOOM_ASSIGN_OR_RETURN(v.library, text_field(json, name, "library", 4096, false));
  LOOM_ASSIGN_OR_RETURN(v.probed_at, text_field(json, name, "probed_at", 64, false));
  LOOM_ASSIGN_OR_RETURN(std::string code, text_field(json, name, "code", 32, false));
  auto parsed = code_named(code);
  if (!parsed) return field_error(name, "code", "is '" + code + "', not a status code name");
  v.code = *parsed;
  LOOM_ASSIGN_OR_RETURN(v.message, text_field(json, name, "message", 4096, true));
  if (v.code != StatusCode::kOk && v.message.empty()) {
    return field_error(name, "message", "is empty for a rejection");
  }
  return v;
}

std::string format_probe_verdict(const ProbeVerdict& verdict) {
  const nlohmann::json json = {{"format", verdict.format},
                               {"key", verdict.key},
                               {"plugin", verdict.plugin},
                               {"library", verdict.library},
                               {"probed_at", verdict.probed_at},
                               {"code", std::string(status_code_name(verdict.code))},
                               {"message", verdict.message}};
  // Non-ASCII bytes are escaped, so the file reads back as printable text.
  return json.dump(2, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace) + "\n";
}

std::optional<ProbeVerdict> recall_probe(const std::filesystem::path& folder,
                                         std::string_view name, std::string_view key) {
  const std::filesystem::path path = probe_verdict_path(folder, name, key);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxProbeVerdictBytes || !std::filesystem::is_regular_file(path, ec)) {
    return std::nullopt;
  }
  auto file = MappedFile::open(path);
  if (!file.ok()) return std::nullopt;
  const auto bytes = file->bytes();
  auto verdict = parse_probe_verdict(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
  if (!verdict.ok() || verdict->key != key || verdict->plugin != name) return std::nullopt;
  return std::move(*verdict);
}

Status remember_probe(const std::filesystem::path& folder, const ProbeVerdict& verdict) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    return unavailable("cannot create the probe cache folder " + folder.string() + ": " +
                       ec.message());
  }
  return write_file_atomically(probe_verdict_path(folder, verdict.plugin, verdict.key),
                               format_probe_verdict(verdict), "probe verdict");
}

}  // namespace loom::host
