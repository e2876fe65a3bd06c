#include "tensor_files/irpa_format.hpp"

#include <cstdio>

namespace loom::io::irpa {

std::string_view entry_type_name(EntryType type) {
  switch (type) {
    case EntryType::kSkip: return "skip";
    case EntryType::kSplat: return "splat";
    case EntryType::kData: return "data";
    case EntryType::kExternal: return "external";
  }
  return "unknown";
}

namespace format {

std::string quote(std::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'') {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

Status check_external_path(std::string_view path) {
  if (path.empty()) return invalid_argument("external path is empty");
  if (path.find('\0') != std::string_view::npos) {
    return invalid_argument("external path " + quote(path) + " contains a NUL byte");
  }
  if (path.front() == '/') {
    return invalid_argument("external path " + quote(path) +
                            " is absolute; only paths relative to the archive's folder are allowed");
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") {
      return invalid_argument("external path " + quote(path) +
                              " has a '..' component; it must stay inside the archive's folder");
    }
    start = end + 1;
  }
  return Status();
}

}  // namespace format
}  // namespace loom::io::irpa
