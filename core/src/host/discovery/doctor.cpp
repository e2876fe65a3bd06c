// `loom doctor`: each reason the host rejects a plugin, checked from files
// alone (no dlopen, no plugin code), with the fix for each problem.
#include "host/discovery/doctor.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/hash.hpp"
#include "common/mapped_file.hpp"
#include "host/discovery/conformance_stamp.hpp"
#include "host/discovery/elf_file.hpp"

namespace loom {

std::string_view doctor_outcome_name(DoctorCheck::Outcome outcome) {
  switch (outcome) {
    case DoctorCheck::Outcome::kOk: return "OK";
    case DoctorCheck::Outcome::kProblem: return "PROBLEM";
    case DoctorCheck::Outcome::kNote: return "NOTE";
    case DoctorCheck::Outcome::kSkipped: return "SKIP";
  }
  return "?";
}

bool PluginDiagnosis::accepted() const {
  return std::none_of(checks.begin(), checks.end(), [](const DoctorCheck& c) {
    return c.outcome == DoctorCheck::Outcome::kProblem;
  });
}

std::string PluginDiagnosis::to_string() const {
  std::string out = "plugin " + escape_control(plugin);
  if (!manifest_path.empty()) out += " (" + escape_control(manifest_path.string()) + ")";
  out += "\n";
  for (const DoctorCheck& c : checks) {
    std::string outcome(doctor_outcome_name(c.outcome));
    outcome.resize(8, ' ');
    out += "  " + outcome + c.name + ": " + escape_control(c.detail) + "\n";
    if (!c.fix.empty() && c.outcome != DoctorCheck::Outcome::kOk) {
      out += "          fix: " + escape_control(c.fix) + "\n";
    }
  }
  out += accepted() ? "  => would be accepted\n" : "  => would be rejected\n";
  return out;
}

namespace host {
namespace {

namespace fs = std::filesystem;
using Outcome = DoctorCheck::Outcome;


void add(PluginDiagnosis& d, std::string name, Outcome outcome, std::string detail,
         std::string fix = {}) {
  d.checks.push_back({std::move(name), outcome, std::move(detail), std::move(fix)});
}

void skip_rest(PluginDiagnosis& d, const std::vector<std::string>& names, const std::string& why) {
  for (const auto& name : names) add(d, name, Outcome::kSkipped, why);
}

std::string join(const std::vector<std::string>& items, size_t max = 8) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max; ++i) out += (i == 0 ? "" : ", ") + items[i];
  if (items.size() > max) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out;
}

// The checks of the library file itself: present, ELF of this host, needed
// libraries, entry point. Returns whether the library could be read.
void check_library(PluginDiagnosis& d, const fs::path& library, const LibrarySearchPath& search,
                   bool* readable) {
  *readable = false;
  const std::vector<std::string> later = {"ELF", "dependencies", "entry point"};
  const std::string where = library.string();
  struct stat st {};
  if (::stat(library.c_str(), &st) != 0) {
    const bool absent = errno == ENOENT;
    add(d, "library", Outcome::kProblem,
        where + (absent ? " does not exist" : ": " + std::string(std::strerror(errno))),
        absent ? "build the plugin, or put its library beside the manifest under the name the "
                 "manifest's \"library\" field gives"
               : "make the file and its folders readable by this user");
    return skip_rest(d, later, "no library");
  }
  if (!S_ISREG(st.st_mode)) {
    add(d, "library", Outcome::kProblem, where + " is not a regular file",
        "the manifest's \"library\" must name the plugin's shared library file");
    return skip_rest(d, later, "no library");
  }
  auto file = MappedFile::open(library);
  if (!file.ok()) {
    add(d, "library", Outcome::kProblem, file.status().message(),
        "make the file readable by this user (chmod a+r)");
    return skip_rest(d, later, "library unreadable");
  }
  *readable = true;
  add(d, "library", Outcome::kOk, where + " (" + std::to_string(file->size()) + " bytes)");

  const ElfIdentity host = host_elf_identity();
  const std::string host_text = elf_class_name(host.elf_class) + " " +
                                elf_machine_name(host.machine);
  auto id = read_elf_identity(file->bytes(), where);
  if (!id.ok()) {
    add(d, "ELF", Outcome::kProblem, id.status().message(),
        "the manifest must name the plugin's shared library; rebuild or reinstall it");
    return skip_rest(d, {"dependencies", "entry point"}, "not a readable ELF file");
  }
  std::vector<std::string> wrong;
  if (id->elf_class != host.elf_class) {
    wrong.push_back("class " + elf_class_name(id->elf_class) + ", this host loads " +
                    elf_class_name(host.elf_class));
  }
  if (id->data != host.data) {
    wrong.push_back(std::string(id->data == ELFDATA2LSB ? "little" : "big") +
                    "-endian, this host is the other");
  }
  if (id->machine != host.machine) {
    wrong.push_back("machine " + elf_machine_name(id->machine) + ", this host is " +
                    elf_machine_name(host.machine));
  }
  if (id->type != ET_DYN) {
    wrong.push_back("a " + elf_type_name(id->type) + ", not a shared object (ET_DYN)");
  }
  if (!wrong.empty()) {
    add(d, "ELF", Outcome::kProblem, join(wrong),
        id->type != ET_DYN && wrong.size() == 1
            ? "link the plugin as a shared library (loom_add_plugin builds a MODULE library; "
              "by hand: -shared -fPIC)"
            : "rebuild the plugin for this host (" + host_text + "), or use a build made for it");
    return skip_rest(d, {"dependencies", "entry point"}, "wrong ELF object");
  }
  auto dynamic = read_elf_dynamic(file->bytes(), where);
  if (!dynamic.ok()) {
    add(d, "ELF", Outcome::kProblem, dynamic.status().message(),
        "the file is truncated or corrupt: rebuild or reinstall the plugin");
    return skip_rest(d, {"dependencies", "entry point"}, "ELF structure unreadable");
  }
  add(d, "ELF", Outcome::kOk, host_text + " shared object");

  const DependencyReport deps = resolve_dependencies(library, *dynamic, search);
  if (!deps.missing.empty()) {
    std::vector<std::string> names;
    for (const auto& m : deps.missing) {
      names.push_back(m.name + (m.needed_by == where ? "" : " (needed by " + m.needed_by + ")"));
    }
    std::string detail = "not found: " + join(names);
    if (!deps.notes.empty()) detail += "; " + join(deps.notes, 3);
    if (!search.cache_note.empty()) detail += "; " + search.cache_note;
    add(d, "dependencies", Outcome::kProblem, detail,
        "install the package that ships " + deps.missing.front().name + " (`apt-file search " +
            deps.missing.front().name + "` names it), or add the folder holding it to "
            "LD_LIBRARY_PATH");
  } else {
    add(d, "dependencies", Outcome::kOk,
        std::to_string(dynamic->needed.size()) + " needed (" + join(dynamic->needed) + "), " +
            std::to_string(deps.found.size()) + " libraries in all with theirs, all found");
  }

  const std::string entry = LOOM_PLUGIN_ENTRY_POINT_NAME;
  if (!dynamic->symbols_known) {
    add(d, "entry point", Outcome::kNote,
        "cannot tell whether " + entry + " is exported: the library has no section headers to "
        "find its dynamic symbol table");
  } else if (dynamic->exports_function(entry)) {
    add(d, "entry point", Outcome::kOk, entry + " exported");
  } else {
    std::string seen;
    for (const ElfSymbol& s : dynamic->symbols) {
      if (s.name != entry) continue;
      seen = !s.defined ? " (it is named, but undefined)"
             : s.type != STT_FUNC ? " (it is exported, but not as a function)"
                                  : " (it is present, but hidden or local)";
    }
    add(d, "entry point", Outcome::kProblem, entry + " is not exported" + seen,
        "define it as extern \"C\" LOOM_PLUGIN_EXPORT loom_status_code_t " + entry +
            "(loom_plugin_query_t*) (plugin.hpp's LOOM_SDK_DEFINE_ENTRY does), and keep the "
            "symbol out of any version script that hides it");
  }
}

void check_against_manifest(PluginDiagnosis& d, const PluginManifest& m, const HostOptions& options,
                            bool library_readable) {
  if (m.abi_max < options.abi_min || m.abi_min > options.abi_max) {
    add(d, "ABI", Outcome::kProblem,
        "the manifest says the plugin speaks ABI " + format_abi_range(m.abi_min, m.abi_max) +
            ", this host speaks " + format_abi_range(options.abi_min, options.abi_max),
        m.abi_max < options.abi_min
            ? "rebuild the plugin against this Loom's SDK (sdk/include/loom/plugin.h)"
            : "use a newer Loom, or build the plugin for ABI " +
                  format_abi_range(options.abi_min, options.abi_max));
  } else {
    add(d, "ABI", Outcome::kOk,
        "plugin " + format_abi_range(m.abi_min, m.abi_max) + ", host " +
            format_abi_range(options.abi_min, options.abi_max));
  }

  std::string hash = m.library_hash;
  if (!library_readable) {
    add(d, "library hash", Outcome::kSkipped, "no library");
  } else if (auto actual = hash_file(m.library); !actual.ok()) {
    add(d, "library hash", Outcome::kProblem, actual.status().message(),
        "make the library readable");
  } else if (*actual != m.library_hash) {
    hash = *actual;
    add(d, "library hash", Outcome::kProblem,
        "the library hashes to " + *actual + ", the manifest records " + m.library_hash,
        "the library changed after its manifest was written: rebuild the plugin (loom_add_plugin "
        "rewrites the manifest), or run loom-manifest --library " + m.library.string() +
            " ... again if this library is the one to ship");
  } else {
    add(d, "library hash", Outcome::kOk, "matches the manifest (" + m.library_hash + ")");
  }

  const StampStatus stamp = stamp_status(m, hash);
  const std::string fix = "run `loom conformance " + m.name + " --stamp` (it writes " +
                          stamp_path_for(m).filename().string() + " beside the manifest)";
  if (stamp.valid()) {
    add(d, "conformance", Outcome::kOk, stamp.summary);
  } else if (options.require_conformance) {
    add(d, "conformance", Outcome::kProblem, stamp.summary + "; this host requires a valid stamp", fix);
  } else {
    add(d, "conformance", Outcome::kNote, stamp.summary + "; not required by this host", fix);
  }
}

}  // namespace

PluginDiagnosis diagnose_manifest(const fs::path& manifest_path, const HostOptions& options,
                                  const LibrarySearchPath& search) {
  PluginDiagnosis d;
  d.manifest_path = manifest_path;
  const std::string file = manifest_path.filename().string();
  d.plugin = is_manifest_file_name(manifest_path.filename().string())
                 ? file.substr(0, file.size() - kManifestSuffix.size())
                 : file;
  auto manifest = parse_manifest(manifest_path);
  if (!manifest.ok()) {
    add(d, "manifest", Outcome::kProblem, manifest.status().message(),
        "correct the field named, or write the manifest again with loom-manifest (loom_add_plugin "
        "does at build time)");
    skip_rest(d, {"library", "ELF", "dependencies", "entry point", "ABI", "library hash",
                  "conformance"},
              "no valid manifest");
    return d;
  }
  d.plugin = manifest->name;
  d.library = manifest->library;
  add(d, "manifest", Outcome::kOk,
      manifest->name + " " + manifest->version + ", ABI " +
          format_abi_range(manifest->abi_min, manifest->abi_max) + ", loader keys " +
          join(manifest->loader_keys));
  bool readable = false;
  check_library(d, manifest->library, search, &readable);
  check_against_manifest(d, *manifest, options, readable);
  return d;
}

PluginDiagnosis diagnose_library(const fs::path& library, const HostOptions& options,
                                 const LibrarySearchPath& search) {
  std::error_code ec;
  const fs::path wanted = fs::weakly_canonical(library, ec);
  const fs::path folder = (ec ? library : wanted).parent_path();
  std::vector<fs::path> manifests;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_manifest_file_name(it->path().filename().string())) manifests.push_back(it->path());
  }
  std::sort(manifests.begin(), manifests.end());
  for (const fs::path& m : manifests) {
    auto parsed = parse_manifest(m);
    if (!parsed.ok()) continue;
    std::error_code ec2;
    if (fs::weakly_canonical(parsed->library, ec2) == wanted && !ec2) {
      return diagnose_manifest(m, options, search);
    }
  }
  PluginDiagnosis d;
  d.plugin = library.filename().string();
  d.library = library;
  add(d, "manifest", Outcome::kProblem,
      "no *" + std::string(kManifestSuffix) + " in " + folder.string() + " names " +
          library.filename().string(),
      "write a manifest beside the library with loom-manifest --library " + library.string() +
          " --name NAME --version V --loader-key KEY --output " +
          (folder / ("NAME" + std::string(kManifestSuffix))).string());
  bool readable = false;
  check_library(d, library, search, &readable);
  return d;
}

Result<std::vector<PluginDiagnosis>> diagnose(const HostOptions& options, std::string_view plugin,
                                              const LibrarySearchPath& search) {
  std::vector<PluginDiagnosis> out;
  const fs::path as_path(plugin);
  std::error_code ec;
  const bool looks_like_path = plugin.find('/') != std::string_view::npos ||
                               is_manifest_file_name(as_path.filename().string()) ||
                               as_path.extension() == ".so";
  if (!plugin.empty() && looks_like_path) {
    if (!fs::exists(as_path, ec)) {
      return not_found("no file " + std::string(plugin) + " (give a manifest, a library or a "
                       "plugin name)");
    }
    out.push_back(is_manifest_file_name(as_path.filename().string()) ? diagnose_manifest(as_path, options, search)
                                            : diagnose_library(as_path, options, search));
    return out;
  }
  // Names: the manifests the host finds, in its order. Creating the host
  // reads manifests only; nothing is loaded.
  HostOptions scan = options;
  scan.isolated_plugins.clear();
  scan.probe = false;
  scan.require_conformance = false;
  LOOM_ASSIGN_OR_RETURN(auto host, PluginHost::create(std::move(scan)));
  std::vector<std::string> names;
  for (const PluginRecord& record : host->plugins()) {
    names.push_back(record.name);
    if (!plugin.empty() && record.name != plugin) continue;
    out.push_back(diagnose_manifest(record.manifest_path, options, search));
  }
  if (out.empty() && !plugin.empty()) {
    return not_found("no plugin named '" + std::string(plugin) + "' in the folders searched; "
                     "found: " + (names.empty() ? std::string("none") : join(names, 32)));
  }
  return out;
}

}  // namespace host
}  // namespace loom
