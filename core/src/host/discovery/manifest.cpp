// Reading plugin manifests (<name>.loom-plugin.json, written by loom-manifest).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/hash.hpp"
#include "common/text.hpp"
#include "host/plugin_host.hpp"

namespace loom::host {
namespace {

constexpr int kManifestVersion = 1;
constexpr size_t kMaxLoaderKeys = 64;

Status field_error(const std::filesystem::path& path, std::string_view field,
                   std::string_view problem) {
  return invalid_argument("manifest " + path.string() + ": field '" + std::string(field) + "' " +
                          std::string(problem));
}

// Whether `text` is printable ASCII (no control characters, no bytes past
// 0x7e), so that printing it cannot break a line or drive a terminal.
Result<std::string> string_field(const nlohmann::json& object, const std::filesystem::path& path,
                                 std::string_view field, size_t max_length = 255) {
  auto it = object.find(field);
  if (it == object.end()) return field_error(path, field, "is missing");
  if (!it->is_string()) return field_error(path, field, "must be a string");
  std::string value = it->get<std::string>();
  if (value.empty()) return field_error(path, field, "is empty");
  if (value.size() > max_length) {
    return field_error(path, field, "is " + std::to_string(value.size()) +
                                        " characters long; at most " + std::to_string(max_length));
  }
  if (!printable_ascii(value)) {
    return field_error(path, field, "holds a control character or a non-ASCII byte");
  }
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

std::string format_abi_range(uint32_t min, uint32_t max) {
  return format_abi_version(min) + "-" + format_abi_version(max);
}

Result<std::string> hash_file(const std::filesystem::path& path) {
  return hash_file_xxh3_128(path);
}

Result<PluginManifest> parse_manifest(const std::filesystem::path& path) {
  // Opened once without blocking (a FIFO named like a manifest must not hang
  // discovery), checked to be a regular file of a sensible size, then read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return not_found("cannot read manifest " + path.string() +
                     (errno == ENOENT ? std::string(": no such file") : ": " + std::string(std::strerror(errno))));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_found("cannot read manifest " + path.string() + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxManifestBytes) {
    ::close(fd);
    return invalid_argument("manifest " + path.string() + " is " + std::to_string(st.st_size) +
                            " bytes; a manifest is at most " + std::to_string(kMaxManifestBytes));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != bytes.size()) return not_found("cannot read manifest " + path.string());
  // nlohmann::json reports parse errors by exception; this is the edge where
  // they become a Status.
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(bytes);
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
  LOOM_ASSIGN_OR_RETURN(m.name, string_field(json, path, "name", 64));
  if (!std::all_of(m.name.begin(), m.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      })) {
    return field_error(path, "name", "may hold only letters, digits, '-', '_' and '.' (it starts "
                                     "device URIs)");
  }
  LOOM_ASSIGN_OR_RETURN(m.version, string_field(json, path, "version", 64));

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
  if (keys->size() > kMaxLoaderKeys) {
    return field_error(path, "loader_keys", "lists " + std::to_string(keys->size()) +
                                                " keys; at most " + std::to_string(kMaxLoaderKeys));
  }
  for (size_t i = 0; i < keys->size(); ++i) {
    const auto& key = (*keys)[i];
    const std::string where = "loader_keys[" + std::to_string(i) + "]";
    if (!key.is_string() || key.get<std::string>().empty()) {
      return field_error(path, where, "must be a non-empty string");
    }
    if (key.get<std::string>().size() > 128 || !printable_ascii(key.get<std::string>())) {
      return field_error(path, where, "must be at most 128 printable ASCII characters");
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
  // Optional: where the plugin runs (a host can still isolate any plugin).
  if (auto isolation = json.find("isolation"); isolation != json.end()) {
    if (!isolation->is_string() ||
        (*isolation != "process" && *isolation != "in-process")) {
      return field_error(path, "isolation", "must be \"process\" or \"in-process\"");
    }
    m.isolated = *isolation == "process";
  }
  return m;
}

}  // namespace loom::host
