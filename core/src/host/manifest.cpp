// Reading plugin manifests (<name>.loom-plugin.json, written by loom-manifest).
#include <charconv>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/hash.hpp"
#include "host/plugin_host.hpp"

namespace loom::host {
namespace {

constexpr int kManifestVersion = 1;

Status field_error(const std::filesystem::path& path, std::string_view field,
                   std::string_view problem) {
  return invalid_argument("manifest " + path.string() + ": field '" + std::string(field) + "' " +
                          std::string(problem));
}

Result<std::string> string_field(const nlohmann::json& object, const std::filesystem::path& path,
                                 std::string_view field) {
  auto it = object.find(field);
  if (it == object.end()) return field_error(path, field, "is missing");
  if (!it->is_string()) return field_error(path, field, "must be a string");
  std::string value = it->get<std::string>();
  if (value.empty()) return field_error(path, field, "is empty");
  return value;
}

Result<uint32_t> abi_field(const nlohmann::json& abi, const std::filesystem::path& path,
                           std::string_view field) {
  std::string name = "abi." + std::string(field);
  auto it = abi.find(field);
  if (it == abi.end()) return field_error(path, name, "is missing");
  if (!it->is_string()) return field_error(path, name, "must be a string \"major.minor\"");
  auto version = parse_abi_version(it->get<std::string>());
  if (!version.ok()) return field_error(path, name, version.status().message());
  return *version;
}

}  // namespace

Result<uint32_t> parse_abi_version(std::string_view text) {
  size_t dot = text.find('.');
  auto bad = [&] {
    return invalid_argument("'" + std::string(text) + "' is not a version major.minor");
  };
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == text.size()) return bad();
  uint32_t major = 0, minor = 0;
  const char* end = text.data() + text.size();
  auto r1 = std::from_chars(text.data(), text.data() + dot, major);
  auto r2 = std::from_chars(text.data() + dot + 1, end, minor);
  if (r1.ec != std::errc() || r1.ptr != text.data() + dot || r2.ec != std::errc() ||
      r2.ptr != end || major > 0xffff || minor > 0xffff) {
    return bad();
  }
  return LOOM_ABI_VERSION(major, minor);
}

std::string format_abi_version(uint32_t version) {
  return std::to_string(LOOM_ABI_VERSION_MAJOR_OF(version)) + "." +
         std::to_string(LOOM_ABI_VERSION_MINOR_OF(version));
}

Result<std::string> hash_file(const std::filesystem::path& path) {
  return hash_file_xxh3_128(path);
}

Result<PluginManifest> parse_manifest(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return not_found("cannot read manifest " + path.string() +
                     (std::filesystem::exists(path, ec) ? ": not a regular file"
                                                        : ": no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) return not_found("cannot read manifest " + path.string());
  // nlohmann::json reports parse errors by exception; this is the edge where
  // they become a Status.
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("manifest " + path.string() + " is not valid JSON: " + e.what());
  }
  if (!json.is_object()) {
    return invalid_argument("manifest " + path.string() + " must hold a JSON object");
  }

  auto version_it = json.find("manifest_version");
  if (version_it == json.end()) return field_error(path, "manifest_version", "is missing");
  if (!version_it->is_number_integer()) {
    return field_error(path, "manifest_version", "must be an integer");
  }
  if (version_it->get<int64_t>() != kManifestVersion) {
    return field_error(path, "manifest_version",
                       "is " + std::to_string(version_it->get<int64_t>()) +
                           "; this host reads version " + std::to_string(kManifestVersion));
  }

  PluginManifest m;
  m.manifest_path = path;
  LOOM_ASSIGN_OR_RETURN(m.name, string_field(json, path, "name"));
  LOOM_ASSIGN_OR_RETURN(m.version, string_field(json, path, "version"));

  auto abi = json.find("abi");
  if (abi == json.end()) return field_error(path, "abi", "is missing");
  if (!abi->is_object()) return field_error(path, "abi", "must be an object {min, max}");
  LOOM_ASSIGN_OR_RETURN(m.abi_min, abi_field(*abi, path, "min"));
  LOOM_ASSIGN_OR_RETURN(m.abi_max, abi_field(*abi, path, "max"));
  if (m.abi_min > m.abi_max) {
    return field_error(path, "abi",
                       "has min " + format_abi_version(m.abi_min) + " above max " +
                           format_abi_version(m.abi_max));
  }

  auto keys = json.find("loader_keys");
  if (keys == json.end()) return field_error(path, "loader_keys", "is missing");
  if (!keys->is_array()) return field_error(path, "loader_keys", "must be an array of strings");
  for (size_t i = 0; i < keys->size(); ++i) {
    const auto& key = (*keys)[i];
    if (!key.is_string() || key.get<std::string>().empty()) {
      return field_error(path, "loader_keys[" + std::to_string(i) + "]",
                         "must be a non-empty string");
    }
    m.loader_keys.push_back(key.get<std::string>());
  }

  // The library lies beside its manifest: a file name, never a path, so a
  // manifest cannot point the host at a library elsewhere (its hash is a
  // check against stale builds, not a signature).
  LOOM_ASSIGN_OR_RETURN(std::string library, string_field(json, path, "library"));
  if (library.empty() || library == "." || library == ".." ||
      library.find_first_of(std::string("/\0", 2)) != std::string::npos) {
    return field_error(path, "library",
                       "must be the file name of a library in the manifest's folder (no '/')");
  }
  m.library = path.parent_path() / library;
  LOOM_ASSIGN_OR_RETURN(m.library_hash, string_field(json, path, "library_hash"));
  if (m.library_hash.rfind("xxh3-128:", 0) != 0) {
    return field_error(path, "library_hash", "must start with 'xxh3-128:'");
  }
  return m;
}

}  // namespace loom::host
