// Dependency resolution for `loom doctor`: the ld.so cache reader and the
// dynamic linker's search order, on files only.
#include "host/discovery/library_search.hpp"

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <deque>
#include <optional>
#include <set>

#include "common/mapped_file.hpp"
#include "host/discovery/elf_file.hpp"

namespace loom::host {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
constexpr std::string_view kOldMagic = "ld.so-1.7.0";
constexpr size_t kNewHeaderBytes = 48;  // magic 20, nlibs, len_strings, flags+pad, ext, 3 unused
constexpr size_t kNewEntryBytes = 24;   // flags, key, value, osversion, hwcap (8)
constexpr size_t kOldHeaderBytes = 16;  // magic 11, pad 1, nlibs
constexpr size_t kOldEntryBytes = 12;   // flags, key, value
constexpr uint32_t kMaxCacheEntries = 1 << 20;

#if defined(__x86_64__)
constexpr const char* kMultiarch = "x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
#else
constexpr const char* kMultiarch = "";
#endif

uint32_t u32_at(std::span<const std::byte> bytes, size_t offset) {
  uint32_t v = 0;
  std::memcpy(&v, bytes.data() + offset, 4);
  return v;
}

std::vector<std::string> split_colons(const char* text) {
  std::vector<std::string> out;
  if (text == nullptr) return out;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    if (colon != 0) out.emplace_back(rest.substr(0, colon));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return out;
}

// $ORIGIN / ${ORIGIN} replaced by the folder of the object that names it.
std::string expand_origin(std::string dir, const fs::path& object_path) {
  const std::string origin = object_path.parent_path().string();
  for (const char* token : {"${ORIGIN}", "$ORIGIN"}) {
    for (size_t at = dir.find(token); at != std::string::npos; at = dir.find(token, at)) {
      dir.replace(at, std::strlen(token), origin);
      at += origin.size();
    }
  }
  return dir;
}

// Whether `path` is a regular file holding an ELF object this process could
// load (its class and machine); `note` says why not when it exists.
bool loadable(const fs::path& path, std::string* note) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  auto file = MappedFile::open(path);
  if (!file.ok()) {
    *note = file.status().message();
    return false;
  }
  auto id = read_elf_identity(file->bytes(), path.string());
  const ElfIdentity host = host_elf_identity();
  if (!id.ok()) {
    *note = id.status().message();
    return false;
  }
  if (id->elf_class != host.elf_class || id->machine != host.machine || id->data != host.data) {
    *note = path.string() + " is " + elf_class_name(id->elf_class) + " " +
            elf_machine_name(id->machine) + " (skipped, as ld.so skips it)";
    return false;
  }
  return true;
}

}  // namespace

Result<std::vector<LdCacheEntry>> parse_ld_cache(std::span<const std::byte> bytes,
                                                 const std::string& name) {
  size_t base = 0;
  auto starts_with = [&](size_t at, std::string_view magic) {
    return bytes.size() >= at + magic.size() &&
           std::memcmp(bytes.data() + at, magic.data(), magic.size()) == 0;
  };
  if (starts_with(0, kOldMagic)) {
    if (bytes.size() < kOldHeaderBytes) {
      return data_loss(name + ": the old-format header is truncated");
    }
    const uint64_t old_count = u32_at(bytes, 12);
    const uint64_t old_end = kOldHeaderBytes + old_count * kOldEntryBytes;
    base = static_cast<size_t>(std::min<uint64_t>((old_end + 7) & ~uint64_t{7}, bytes.size()));
  }
  if (!starts_with(base, kNewMagic)) {
    return invalid_argument(name + " is not an ld.so cache in the \"glibc-ld.so.cache1.1\" format");
  }
  if (bytes.size() - base < kNewHeaderBytes) {
    return data_loss(name + ": the cache header is truncated (" + std::to_string(bytes.size()) +
                     " bytes)");
  }
  const uint32_t count = u32_at(bytes, base + 20);
  if (count > kMaxCacheEntries) {
    return data_loss(name + ": the cache claims " + std::to_string(count) + " libraries");
  }
  const uint64_t entries_end = base + kNewHeaderBytes + uint64_t{count} * kNewEntryBytes;
  if (entries_end > bytes.size()) {
    return data_loss(name + ": " + std::to_string(count) + " entries run past the end of the file (" +
                     std::to_string(bytes.size()) + " bytes)");
  }
  // Strings are offsets from the start of the new-format header.
  auto string_at = [&](uint32_t offset, size_t entry) -> Result<std::string> {
    const uint64_t at = base + uint64_t{offset};
    if (at >= bytes.size()) {
      return data_loss(name + ": entry " + std::to_string(entry) + " names string offset " +
                       std::to_string(offset) + ", past the end of the file");
    }
    const char* begin = reinterpret_cast<const char*>(bytes.data() + at);
    const void* nul = std::memchr(begin, '\0', bytes.size() - at);
    if (nul == nullptr) {
      return data_loss(name + ": entry " + std::to_string(entry) + "'s string is not terminated");
    }
    return std::string(begin, static_cast<const char*>(nul));
  };
  std::vector<LdCacheEntry> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = base + kNewHeaderBytes + size_t{i} * kNewEntryBytes;
    LdCacheEntry e;
    LOOM_ASSIGN_OR_RETURN(e.name, string_at(u32_at(bytes, at + 4), i));
    LOOM_ASSIGN_OR_RETURN(e.path, string_at(u32_at(bytes, at + 8), i));
    out.push_back(std::move(e));
  }
  return out;
}

LibrarySearchPath LibrarySearchPath::from_system() {
  LibrarySearchPath s;
  s.ld_library_path = split_colons(std::getenv("LD_LIBRARY_PATH"));
  const fs::path cache_path = "/etc/ld.so.cache";
  auto file = MappedFile::open(cache_path);
  if (!file.ok()) {
    s.cache_note = "no ld.so cache read (" + file.status().message() + ")";
  } else if (auto cache = parse_ld_cache(file->bytes(), cache_path.string()); !cache.ok()) {
    s.cache_note = "ld.so cache not used: " + cache.status().message();
  } else {
    s.cache = std::move(*cache);
  }
  if (*kMultiarch != '\0') {
    s.default_dirs.push_back(fs::path("/lib") / kMultiarch);
    s.default_dirs.push_back(fs::path("/usr/lib") / kMultiarch);
  }
  s.default_dirs.emplace_back("/lib");
  s.default_dirs.emplace_back("/usr/lib");
  return s;
}

DependencyReport resolve_dependencies(const fs::path& object_path, const ElfDynamicInfo& object,
                                      const LibrarySearchPath& search, size_t max_libraries) {
  DependencyReport report;
  struct Pending {
    std::string name;
    fs::path needed_by;
    std::vector<std::string> rpath, runpath;
    bool has_runpath = false;
  };
  std::deque<Pending> queue;
  auto enqueue = [&](const fs::path& by, const ElfDynamicInfo& info) {
    for (const std::string& n : info.needed) {
      queue.push_back({n, by, info.rpath, info.runpath, info.has_runpath});
    }
  };
  enqueue(object_path, object);
  std::set<std::string> seen;
  while (!queue.empty() && report.found.size() < max_libraries) {
    Pending p = std::move(queue.front());
    queue.pop_front();
    if (!seen.insert(p.name).second) continue;
    std::string note;
    std::optional<fs::path> hit;
    auto try_dir = [&](const std::string& dir) {
      if (hit || dir.empty()) return;
      fs::path candidate = fs::path(expand_origin(dir, p.needed_by)) / p.name;
      if (loadable(candidate, &note)) hit = candidate;
    };
    if (p.name.find('/') != std::string::npos) {
      // A name with a slash is a path, taken as it is.
      if (loadable(p.name, &note)) hit = fs::path(p.name);
    } else {
      if (!p.has_runpath) {
        for (const auto& dir : p.rpath) try_dir(dir);
      }
      for (const auto& dir : search.ld_library_path) try_dir(dir);
      for (const auto& dir : p.runpath) try_dir(dir);
      for (const auto& entry : search.cache) {
        if (hit) break;
        if (entry.name == p.name && loadable(entry.path, &note)) hit = fs::path(entry.path);
      }
      for (const auto& dir : search.default_dirs) try_dir(dir.string());
    }
    if (!hit) {
      report.missing.push_back({p.name, p.needed_by.string()});
      if (!note.empty()) report.notes.push_back(note);
      continue;
    }
    report.found.emplace_back(p.name, hit->string());
    auto file = MappedFile::open(*hit);
    if (!file.ok()) {
      report.notes.push_back(file.status().message());
      continue;
    }
    auto info = read_elf_dynamic(file->bytes(), hit->string());
    if (!info.ok()) {
      report.notes.push_back(info.status().message());
      continue;
    }
    enqueue(*hit, *info);
  }
  return report;
}

}  // namespace loom::host
