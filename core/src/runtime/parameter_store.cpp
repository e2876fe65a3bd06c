#include "runtime/parameter_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "common/hash.hpp"
#include "loom/file_type.hpp"
#include "loom/irpa.hpp"
#include "loom/tensor_metadata.hpp"

namespace loom::runtime {
namespace {

namespace irpa = io::irpa;

constexpr size_t kKeysListed = 5;
constexpr uint64_t kOwnedAlignment = 64;

std::string label(const ParameterDef& p) {
  return "parameter '" + p.name + "' (scope '" + p.scope + "')";
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

std::string type_text(const ParameterDef& p) {
  return std::string(dtype_name(p.dtype)) + " " + shape_to_string(p.shape);
}

// "it has 12 entries: 'a', 'b', 'c', 'd', 'e', ...": enough to spot a
// misspelt name or the wrong archive.
std::string some_keys(const irpa::ArchiveReader& archive) {
  const auto& entries = archive.entries();
  if (entries.empty()) return "it has no entries";
  std::string out = "it has " + std::to_string(entries.size()) +
                    (entries.size() == 1 ? " entry: " : " entries: ");
  for (size_t i = 0; i < entries.size() && i < kKeysListed; ++i) {
    out += (i ? ", '" : "'") + entries[i].name.substr(0, 64) + "'";
  }
  if (entries.size() > kKeysListed) out += ", ...";
  return out;
}

std::string scopes_of(const ProgramDef& program) {
  std::vector<std::string> scopes;
  for (const ParameterDef& p : program.parameters) {
    if (!p.archive.empty() && std::find(scopes.begin(), scopes.end(), p.scope) == scopes.end()) {
      scopes.push_back(p.scope);
    }
  }
  if (scopes.empty()) return "it has no external parameters";
  std::string out = "its scopes: ";
  for (size_t i = 0; i < scopes.size(); ++i) out += (i ? ", '" : "'") + scopes[i] + "'";
  return out;
}

// Copies of parameter bytes (splats) are bounded by the machine's memory,
// not by what a program and a few-byte archive may declare.
uint64_t physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 40;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

Status check_overrides(const ProgramDef& program,
                       std::span<const std::pair<std::string, std::filesystem::path>> overrides) {
  for (size_t i = 0; i < overrides.size(); ++i) {
    // Named references, not a structured binding: the lambda below
    // captures `scope` (clang before 16 refuses to capture a binding).
    const std::string& scope = overrides[i].first;
    const std::filesystem::path& path = overrides[i].second;
    for (size_t j = 0; j < i; ++j) {
      if (overrides[j].first == scope) {
        return invalid_argument("parameter archives: scope '" + scope + "' is given twice (" +
                                overrides[j].second.string() + " and " + path.string() + ")");
      }
    }
    if (path.empty()) {
      return invalid_argument("parameter archives: scope '" + scope + "' is given an empty path");
    }
    bool used = std::any_of(program.parameters.begin(), program.parameters.end(),
                            [&](const ParameterDef& p) {
                              return !p.archive.empty() && p.scope == scope;
                            });
    if (!used) {
      return not_found("parameter archives: the program has no external parameters in scope '" +
                       scope + "' (" + scopes_of(program) + ")");
    }
  }
  return Status();
}

// Whether `path`, where the program's record puts `p`'s archive, resolved
// (symlinks included) lies inside the program's folder, as the .irpa
// reader checks its external paths: a symlink may lead to a file elsewhere in
// the folder, never out of it. A file outside is only taken when the host
// names it (LoadOptions::parameter_archives). `canonical_dir` caches the
// folder's own resolution. A missing file is reported by the caller.
Status check_inside_folder(const ParameterDef& p, const std::filesystem::path& program_dir,
                           const std::filesystem::path& path,
                           std::filesystem::path& canonical_dir) {
  std::error_code ec;
  if (canonical_dir.empty()) {
    canonical_dir = std::filesystem::canonical(program_dir, ec);
    if (ec) {
      return not_found(label(p) + ": program folder " + program_dir.string() + ": " +
                       ec.message());
    }
  }
  std::filesystem::path canonical = std::filesystem::canonical(path, ec);
  if (ec) return not_found(label(p) + ": archive " + path.string() + ": " + ec.message());
  auto [dir_end, path_it] =
      std::mismatch(canonical_dir.begin(), canonical_dir.end(), canonical.begin(), canonical.end());
  if (dir_end != canonical_dir.end() || path_it == canonical.end()) {
    return invalid_argument(label(p) + ": archive '" + p.archive + "' resolves to " +
                            canonical.string() + ", outside the program's folder " +
                            canonical_dir.string() + "; to use that file, give its path for "
                            "scope '" + p.scope + "' in LoadOptions::parameter_archives (loom "
                            "run: --params " + p.scope + "=FILE.irpa)");
  }
  return Status();
}

}  // namespace

ParameterStore::ParameterStore() = default;
ParameterStore::~ParameterStore() = default;
ParameterStore::ParameterStore(ParameterStore&&) noexcept = default;
ParameterStore& ParameterStore::operator=(ParameterStore&&) noexcept = default;

Result<ParameterStore> ParameterStore::open(
    const ProgramReader& reader, const std::filesystem::path& program_dir,
    std::span<const std::pair<std::string, std::filesystem::path>> overrides,
    bool check_checksums) {
  const ProgramDef& program = reader.program();
  LOOM_RETURN_IF_ERROR(check_overrides(program, overrides));

  ParameterStore store;
  store.bytes_.resize(program.parameters.size());
  std::map<std::string, size_t> opened;  // normalized path -> index in archives_
  uint64_t owned_total = 0;
  const uint64_t owned_limit = physical_memory();
  std::filesystem::path canonical_dir;  // program_dir resolved, on first use

  for (uint32_t i = 0; i < program.parameters.size(); ++i) {
    const ParameterDef& p = program.parameters[i];
    if (p.archive.empty()) {
      auto bytes = reader.parameter_bytes(i);
      if (!bytes.ok()) return bytes.status().with_context("parameter '" + p.name + "'");
      store.bytes_[i] = *bytes;
      continue;
    }

    auto given = std::find_if(overrides.begin(), overrides.end(),
                              [&](const auto& o) { return o.first == p.scope; });
    std::filesystem::path path;
    if (given != overrides.end()) {
      path = given->second;
    } else if (program_dir.empty()) {
      return failed_precondition(label(p) + ": the program was loaded from memory, so there is "
                                 "no folder to find its archive '" + p.archive +
                                 "' in; give the archive's path for scope '" + p.scope +
                                 "' in LoadOptions::parameter_archives");
    } else {
      path = program_dir / p.archive;
    }

    auto found = opened.find(path.lexically_normal().string());
    if (found == opened.end()) {
      // Only a clean "does not exist" gets this message; other trouble
      // (permissions, ...) is reported by the reader.
      std::error_code ec;
      if (!std::filesystem::exists(path, ec) && !ec) {
        std::string how = given != overrides.end()
                              ? " (the path given for scope '" + p.scope + "')"
                              : "; to use another file, give its path for scope '" + p.scope +
                                    "' in LoadOptions::parameter_archives (loom run: --params " +
                                    p.scope + "=FILE.irpa)";
        return not_found(label(p) + ": archive '" + p.archive + "' not found at " +
                         path.string() + how);
      }
      // Recorded paths stay in the program's folder; a path the host gives
      // is taken as it is. Either must be a regular file: checked before
      // opening, so that a FIFO is not waited on. (The archive is opened by
      // the path as given, so that its own external files are found beside
      // it and errors name it as the user knows it.)
      if (given == overrides.end()) {
        LOOM_RETURN_IF_ERROR(check_inside_folder(p, program_dir, path, canonical_dir));
      }
      Status regular = check_regular_file(path, "");
      if (!regular.ok()) return regular.with_context(label(p));
      auto archive = irpa::ArchiveReader::open_file(path);
      // The reader's errors start with the path.
      if (!archive.ok()) return archive.status().with_context(label(p));
      found = opened.emplace(path.lexically_normal().string(), store.archives_.size()).first;
      store.archives_.push_back(std::move(*archive));
      store.archive_paths_.push_back(path);
    }
    const irpa::ArchiveReader& archive = *store.archives_[found->second];
    const std::string where = label(p) + " in archive " + path.string();

    const irpa::Entry* entry = archive.find(p.name);
    if (entry == nullptr) {
      return not_found(label(p) + ": archive " + path.string() + " has no entry '" + p.name +
                       "' (" + some_keys(archive) + ")");
    }
    if (entry->length != p.size) {
      return invalid_argument(where + ": the entry holds " + std::to_string(entry->length) +
                              " bytes, the program expects " + std::to_string(p.size) + " (" +
                              type_text(p) + ")");
    }
    Status metadata = io::check_tensor_metadata(entry->metadata, p.dtype, p.shape);
    if (!metadata.ok()) return metadata.with_context(where);

    // Views stay zero-copy unless the kernels could not read them in place.
    std::span<const std::byte> bytes;
    bool copy = entry->type == irpa::EntryType::kSplat;
    if (!copy) {
      auto view = archive.view(*entry);
      if (!view.ok()) return view.status().with_context(where);
      bytes = *view;
      uint64_t element = std::max<uint64_t>(dtype_size(p.dtype), 1);
      copy = reinterpret_cast<uintptr_t>(bytes.data()) % element != 0;
    }
    if (copy) {
      if (p.size > owned_limit - owned_total) {
        return resource_exhausted(where + ": " + std::string(irpa::entry_type_name(entry->type)) +
                                  " entry of " + std::to_string(p.size) +
                                  " bytes would take the program's own parameter memory past "
                                  "this machine's " + std::to_string(owned_limit) + " bytes");
      }
      auto owned = allocate_aligned(p.size, kOwnedAlignment);
      if (!owned.ok()) return owned.status().with_context(where);
      std::span<std::byte> out(owned->get(), static_cast<size_t>(p.size));
      Status read = archive.read(*entry, 0, out);
      if (!read.ok()) return read.with_context(where);
      bytes = out;
      owned_total += p.size;
      store.owned_.push_back(std::move(*owned));
    }

    if (check_checksums && p.checksum != 0) {
      uint64_t actual = xxh3_64(bytes);
      if (actual != p.checksum) {
        return data_loss(where + ": checksum mismatch: the program records xxh3 " +
                         hex(p.checksum) + ", the archive's bytes hash to " + hex(actual) +
                         " (other weights? to run with them anyway, turn off "
                         "LoadOptions::check_parameter_checksums; loom run: "
                         "--no-param-checksums)");
      }
    }
    store.bytes_[i] = bytes;
  }
  return store;
}

}  // namespace loom::runtime
