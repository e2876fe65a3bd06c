// Helpers shared by the `loom params` subcommands (cmd_params.cpp,
// params_dump.cpp): the entry metadata Loom writes, splat patterns as hex,
// and copying the entries of an archive chain into a new archive.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/irpa.hpp"
#include "loom/tensor_metadata.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::cli::params {

namespace irpa = loom::io::irpa;

// Entry metadata is io::encode_tensor_metadata's {"dtype":"f32","shape":[64,128]},
// enough to rebuild a .npy.
using TensorLayout = io::TensorMetadata;
// The dtype and shape in `metadata` when it is Loom's JSON; nullopt when the
// metadata is empty or something else (archives from other tools). An error
// when it is Loom's JSON but disagrees with the entry's `length` in bytes.
Result<std::optional<TensorLayout>> layout_from_metadata(std::string_view metadata,
                                                         uint64_t length);

// A splat pattern: "0x3f800000" is 4 bytes, stored little-endian (00 00 80
// 3f). The number of hex digits sets the width: 2, 4, 8, 16 or 32.
struct Pattern {
  std::array<std::byte, 16> bytes{};
  uint8_t length = 0;
};
Result<Pattern> parse_pattern(std::string_view text);
// The inverse: "0x" and the pattern as one little-endian number.
std::string format_pattern(const std::array<std::byte, 16>& bytes, uint8_t length);

// Splits "LEFT=RIGHT" (at the first '='); `expected` names the form in the
// error ("NAME=FILE.npy").
Result<std::pair<std::string, std::string>> split_pair(const std::string& text,
                                                       std::string_view expected);

// Opens an archive; errors start with its path.
Result<std::unique_ptr<irpa::ArchiveReader>> open_archive(const std::string& path);

// "no entry 'x' in FILE; its entries: a, b, c" (at most 20 names listed).
Status unknown_key(const irpa::ArchiveReader& reader, const std::string& path,
                   const std::string& key);

// Copies entries into a new archive, keeping their kind, metadata and
// alignment. EXTERNAL entries stay external only when the output lies in
// the input's folder (their paths are relative to it); elsewhere they are
// refused unless `inline_external` copies their bytes in as DATA.
class ArchiveCopier {
 public:
  ArchiveCopier(const irpa::ArchiveReader& reader, const std::string& input,
                const std::string& output, bool inline_external);

  Status copy(const irpa::Entry& entry, const std::string& name);
  Status add_splat(const irpa::Entry& entry, const std::string& name, const Pattern& pattern);
  Status write() const;

 private:
  const irpa::ArchiveReader& reader_;
  std::string output_;
  bool same_folder_;
  bool inline_external_;
  irpa::ArchiveBuilder builder_;
};

}  // namespace loom::cli::params
