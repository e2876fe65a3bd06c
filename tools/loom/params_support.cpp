#include "params_support.hpp"

#include <cstdio>
#include <limits>
#include <system_error>

namespace loom::cli::params {

namespace fs = std::filesystem;

Result<std::optional<TensorLayout>> layout_from_metadata(std::string_view metadata,
                                                         uint64_t length) {
  auto decoded = io::decode_tensor_metadata(metadata);
  if (!decoded.ok()) return decoded.status().with_context("metadata " + std::string(metadata));
  if (!decoded->has_value()) return std::optional<TensorLayout>();
  TensorLayout layout = std::move(**decoded);
  auto bad = [&](const std::string& why) {
    return invalid_argument("metadata " + std::string(metadata) + ": " + why);
  };
  auto count = element_count(layout.shape);
  if (!count.ok()) return bad(count.status().message());
  uint64_t width = dtype_size(layout.dtype);
  if (*count > std::numeric_limits<uint64_t>::max() / width || *count * width != length) {
    return bad("it describes " + std::string(dtype_name(layout.dtype)) +
               shape_to_string(layout.shape) + ", but the entry has " + std::to_string(length) +
               " bytes (extract it with --raw)");
  }
  return std::optional<TensorLayout>(std::move(layout));
}

Result<Pattern> parse_pattern(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("--pattern '" + std::string(text) + "': " + why);
  };
  if (text.size() < 2 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) {
    return bad("not a hex number such as 0x3f800000 (f32 1.0)");
  }
  std::string_view digits = text.substr(2);
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (char c : digits) {
    if (nibble(c) < 0) return bad(std::string("'") + c + "' is not a hex digit");
  }
  size_t n = digits.size();
  if (n != 2 && n != 4 && n != 8 && n != 16 && n != 32) {
    return bad(std::to_string(n) + " hex digits; the width must be 1, 2, 4, 8 or 16 bytes "
               "(2, 4, 8, 16 or 32 digits, leading zeros included)");
  }
  Pattern p;
  p.length = static_cast<uint8_t>(n / 2);
  for (size_t i = 0; i < p.length; ++i) {
    size_t hi = n - 2 - 2 * i;  // byte i is the i-th least significant
    p.bytes[i] = static_cast<std::byte>(nibble(digits[hi]) * 16 + nibble(digits[hi + 1]));
  }
  return p;
}

std::string format_pattern(const std::array<std::byte, 16>& bytes, uint8_t length) {
  std::string out = "0x";
  for (size_t i = std::min<size_t>(length, bytes.size()); i-- > 0;) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(bytes[i]));
    out += buf;
  }
  return out;
}

Result<std::pair<std::string, std::string>> split_pair(const std::string& text,
                                                       std::string_view expected) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return invalid_argument("'" + text + "' is not " + std::string(expected));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Result<std::unique_ptr<irpa::ArchiveReader>> open_archive(const std::string& path) {
  auto reader = irpa::ArchiveReader::open_file(path);
  if (!reader.ok()) return reader.status().with_context(path);
  return std::move(reader).value();
}

Status unknown_key(const irpa::ArchiveReader& reader, const std::string& path,
                   const std::string& key) {
  constexpr size_t kMaxListed = 20;
  const auto& entries = reader.entries();
  std::string list;
  for (size_t i = 0; i < entries.size() && i < kMaxListed; ++i) {
    list += (i ? ", " : "") + entries[i].name;
  }
  if (entries.size() > kMaxListed) {
    list += ", ... (" + std::to_string(entries.size() - kMaxListed) + " more)";
  }
  if (entries.empty()) list = "(none)";
  return not_found("no entry '" + key + "' in " + path + "; its entries: " + list);
}

namespace {

bool in_same_folder(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  fs::path pa = fs::weakly_canonical(fs::absolute(a), ec1).parent_path();
  fs::path pb = fs::weakly_canonical(fs::absolute(b), ec2).parent_path();
  return !ec1 && !ec2 && pa == pb;
}

uint64_t alignment_of(const irpa::Entry& entry) {
  uint64_t a = entry.minimum_alignment;
  return (a != 0 && (a & (a - 1)) == 0) ? a : 0;  // 0: the builder's default
}

}  // namespace

ArchiveCopier::ArchiveCopier(const irpa::ArchiveReader& reader, const std::string& input,
                             const std::string& output, bool inline_external)
    : reader_(reader),
      output_(output),
      same_folder_(in_same_folder(input, output)),
      inline_external_(inline_external) {}

Status ArchiveCopier::copy(const irpa::Entry& entry, const std::string& name) {
  switch (entry.type) {
    case irpa::EntryType::kSplat:
      return builder_.add_splat(name, entry.length,
                                std::span(entry.pattern).first(entry.pattern_length),
                                entry.metadata);
    case irpa::EntryType::kExternal:
      if (!inline_external_) {
        if (!same_folder_) {
          return invalid_argument("entry '" + entry.name + "' refers to the external file '" +
                                  entry.external_path + "', relative to the input's folder; "
                                  "write the output there, or pass --inline-external to copy "
                                  "its bytes in");
        }
        return builder_.add_external(name, entry.external_path, entry.external_offset,
                                     entry.length, entry.metadata);
      }
      [[fallthrough]];
    case irpa::EntryType::kData: {
      LOOM_ASSIGN_OR_RETURN(auto bytes, reader_.view(entry));
      return builder_.add_data(name, bytes, entry.metadata, alignment_of(entry));
    }
    case irpa::EntryType::kSkip:
      return Status();
  }
  return invalid_argument("entry '" + entry.name + "' has an unknown type");
}

Status ArchiveCopier::add_splat(const irpa::Entry& entry, const std::string& name,
                                const Pattern& pattern) {
  if (entry.length % pattern.length != 0) {
    return invalid_argument("entry '" + entry.name + "' is " + std::to_string(entry.length) +
                            " bytes, not a multiple of the " + std::to_string(pattern.length) +
                            "-byte pattern");
  }
  return builder_.add_splat(name, entry.length, std::span(pattern.bytes).first(pattern.length),
                            entry.metadata);
}

Status ArchiveCopier::write() const { return builder_.write_file(output_); }

}  // namespace loom::cli::params
