#include "loom/file_type.hpp"

#include <string>

namespace loom {

std::string_view file_type_name(std::filesystem::file_type type) {
  using std::filesystem::file_type;
  switch (type) {
    case file_type::directory: return "a directory";
    case file_type::fifo: return "a FIFO";
    case file_type::character: return "a character device";
    case file_type::block: return "a block device";
    case file_type::socket: return "a socket";
    default: return "a special file";
  }
}

Status check_regular_file(const std::filesystem::path& path, std::string_view what) {
  const std::string name = what.empty() ? path.string() : std::string(what) + " " + path.string();
  std::error_code ec;
  const std::filesystem::file_type type = std::filesystem::status(path, ec).type();
  if (type == std::filesystem::file_type::not_found) return not_found(name + ": no such file");
  if (ec) return unavailable(name + ": " + ec.message());
  if (type != std::filesystem::file_type::regular) {
    return invalid_argument(name + " is " + std::string(file_type_name(type)) +
                            ", not a regular file");
  }
  return Status();
}

}  // namespace loom
