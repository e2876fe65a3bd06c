// The bytes of every parameter of a loaded program. Inline parameters are
// views into the program file; external ones are found by name in the .irpa
// archive of their scope, which is opened once per program and kept open
// here: DATA and EXTERNAL entries are zero-copy views of the mapped archive,
// SPLAT entries (and entries not aligned to their element size) are copied
// into memory this store owns.
//
// Where a scope's archive is: the path given for the scope in
// LoadOptions::parameter_archives if any; otherwise the path the program
// records, relative to the program file's folder (a program loaded from
// memory has none, so each of its scopes must be given). The recorded path
// must stay inside that folder, by the rules the .irpa reader applies to its
// external paths: the container refuses '..' and absolute paths, and a
// symlink is followed only when it resolves inside the folder (programs in
// one folder may share an archive through one; an archive elsewhere must be
// named by the host). The archive must be a regular file.
//
// Each external parameter is checked against its entry: size, the dtype and
// shape the entry's metadata records (when it records them), and the xxh3
// checksum the program records (when not 0). Errors name the parameter, its
// scope and the archive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loom/program.hpp"
#include "loom/status.hpp"
#include "runtime/aligned_bytes.hpp"

namespace loom::io::irpa {
class ArchiveReader;
}

namespace loom::runtime {

class ParameterStore {
 public:
  // Resolves every parameter of `reader`'s program. `program_dir` is the
  // folder of the program file, empty for a program in memory. `overrides`
  // maps scopes to archive paths; a scope the program does not use, or one
  // given twice, is an error. With `check_checksums` false the recorded
  // checksums of external parameters are not compared.
  static Result<ParameterStore> open(
      const ProgramReader& reader, const std::filesystem::path& program_dir,
      std::span<const std::pair<std::string, std::filesystem::path>> overrides,
      bool check_checksums = true);

  ParameterStore();
  ~ParameterStore();
  ParameterStore(ParameterStore&&) noexcept;
  ParameterStore& operator=(ParameterStore&&) noexcept;

  // The bytes of parameter `index` (< the program's parameter count); valid
  // while the store lives.
  std::span<const std::byte> bytes(uint32_t index) const { return bytes_[index]; }
  size_t size() const { return bytes_.size(); }
  // The archive files opened, in order of first use.
  const std::vector<std::filesystem::path>& archive_paths() const { return archive_paths_; }

 private:
  std::vector<std::unique_ptr<io::irpa::ArchiveReader>> archives_;
  std::vector<std::filesystem::path> archive_paths_;
  std::vector<AlignedBytes> owned_;
  std::vector<std::span<const std::byte>> bytes_;
};

}  // namespace loom::runtime
