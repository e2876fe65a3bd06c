// Finding the shared libraries an object needs the way the dynamic linker
// would, without loading anything: DT_RPATH (when there is no DT_RUNPATH),
// $LD_LIBRARY_PATH, DT_RUNPATH, the ld.so cache, then the default folders.
// $ORIGIN is expanded; a candidate of another class or machine is skipped,
// as ld.so skips it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loom/status.hpp"

namespace loom::host {

struct ElfDynamicInfo;

// One library name and its path from the ld.so cache.
struct LdCacheEntry {
  std::string name;  // "libc.so.6"
  std::string path;  // "/lib/x86_64-linux-gnu/libc.so.6"
};

// Parses an ld.so cache in glibc's "glibc-ld.so.cache1.1" format (also when
// it follows the old "ld.so-1.7.0" one). Every count and string offset is
// checked; errors name `name` and what is wrong.
Result<std::vector<LdCacheEntry>> parse_ld_cache(std::span<const std::byte> bytes,
                                                 const std::string& name);

// Where and how to look.
struct LibrarySearchPath {
  std::vector<std::string> ld_library_path;  // $LD_LIBRARY_PATH, split
  std::vector<LdCacheEntry> cache;           // parse_ld_cache of /etc/ld.so.cache
  std::vector<std::filesystem::path> default_dirs;
  // What became of /etc/ld.so.cache, for reports (empty when it was read).
  std::string cache_note;

  // This system's: $LD_LIBRARY_PATH, /etc/ld.so.cache when it parses
  // (else a note, and the default folders alone), and the default folders
  // /lib/<multiarch>, /usr/lib/<multiarch>, /lib, /usr/lib.
  static LibrarySearchPath from_system();
};

// A needed library that was not found, and which object needs it.
struct MissingLibrary {
  std::string name;     // as DT_NEEDED names it
  std::string needed_by;  // path of the object whose DT_NEEDED it is
};

// The outcome of resolving an object's needed libraries, transitively.
struct DependencyReport {
  // Every library found, name and path, in the order found.
  std::vector<std::pair<std::string, std::string>> found;
  std::vector<MissingLibrary> missing;
  // Libraries found but not read (unreadable, malformed), with why; their
  // own dependencies are not followed.
  std::vector<std::string> notes;
};

// Resolves the DT_NEEDED entries of the object at `object_path` (whose
// dynamic section is `object`) and, transitively, of every library found, up
// to `max_libraries` of them.
DependencyReport resolve_dependencies(const std::filesystem::path& object_path,
                                      const ElfDynamicInfo& object,
                                      const LibrarySearchPath& search,
                                      size_t max_libraries = 512);

}  // namespace loom::host
