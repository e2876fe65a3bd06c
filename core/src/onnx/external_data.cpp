#include "onnx/external_data.hpp"

#include <charconv>
#include <fstream>
#include <system_error>

#include "onnx/onnx_pb.h"

namespace loom::onnx_io::detail {

namespace fs = std::filesystem;

namespace {

Result<uint64_t> parse_decimal(const std::string& key, const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return invalid_argument("external_data '" + key + "' is '" + text +
                            "', not a decimal number below 2^64");
  }
  return value;
}

}  // namespace

Result<ExternalRef> parse_external_ref(const ::onnx::TensorProto& tensor) {
  ExternalRef ref;
  bool has_location = false, has_offset = false;
  for (const auto& kv : tensor.external_data()) {
    const std::string& key = kv.key();
    if (key == "location") {
      if (has_location) return invalid_argument("external_data has two 'location' keys");
      has_location = true;
      ref.location = kv.value();
    } else if (key == "offset") {
      if (has_offset) return invalid_argument("external_data has two 'offset' keys");
      has_offset = true;
      LOOM_ASSIGN_OR_RETURN(ref.offset, parse_decimal(key, kv.value()));
    } else if (key == "length") {
      if (ref.length) return invalid_argument("external_data has two 'length' keys");
      LOOM_ASSIGN_OR_RETURN(ref.length, parse_decimal(key, kv.value()));
    }
  }
  if (!has_location) return invalid_argument("external_data has no 'location' key");
  return ref;
}

Result<fs::path> resolve_external_path(const fs::path& base_dir, const std::string& location) {
  const std::string quoted = "external_data location '" + location + "'";
  if (location.empty()) return invalid_argument("external_data location is empty");
  if (location.find('\0') != std::string::npos) {
    return invalid_argument(quoted + " contains a NUL byte");
  }
  if (base_dir.empty()) {
    return failed_precondition(quoted + ": the model was not read from a file, so external "
                               "data has no folder to be resolved against");
  }
  fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_directory() || rel.has_root_name()) {
    return invalid_argument(quoted + " is absolute; it must be relative to the model's folder");
  }
  for (const fs::path& part : rel) {
    if (part == "..") return invalid_argument(quoted + " contains '..'");
  }
  std::error_code ec;
  fs::path root = fs::canonical(base_dir, ec);
  if (ec) return not_found("model folder '" + base_dir.string() + "': " + ec.message());
  fs::path target = fs::canonical(root / rel, ec);
  if (ec) return not_found(quoted + ": cannot open '" + (root / rel).string() + "': " +
                           ec.message());
  // A symlink inside the folder may still point outside it.
  fs::path inside = target.lexically_relative(root);
  if (inside.empty() || *inside.begin() == "..") {
    return invalid_argument(quoted + " leaves the model's folder through a symlink (to '" +
                            target.string() + "')");
  }
  if (!fs::is_regular_file(target, ec)) {
    return invalid_argument(quoted + " is not a regular file");
  }
  return target;
}

Result<std::vector<std::byte>> read_external(const fs::path& base_dir, const ExternalRef& ref,
                                             uint64_t byte_size) {
  LOOM_ASSIGN_OR_RETURN(fs::path path, resolve_external_path(base_dir, ref.location));
  const std::string where = "external file '" + ref.location + "'";
  std::error_code ec;
  uint64_t file_size = fs::file_size(path, ec);
  if (ec) return unavailable(where + ": cannot get the size: " + ec.message());
  if (ref.offset > file_size) {
    return out_of_range(where + ": offset " + std::to_string(ref.offset) + " is past its end (" +
                        std::to_string(file_size) + " bytes)");
  }
  uint64_t available = file_size - ref.offset;
  uint64_t length = ref.length.value_or(available);
  if (length > available) {
    return out_of_range(where + ": range [" + std::to_string(ref.offset) + ", +" +
                        std::to_string(length) + ") runs past its end (" +
                        std::to_string(file_size) + " bytes)");
  }
  if (length != byte_size) {
    return invalid_argument(where + ": " + (ref.length ? "length " : "the rest of the file, ") +
                            std::to_string(length) + " bytes, does not match the tensor's " +
                            std::to_string(byte_size) + " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return unavailable(where + ": cannot open for reading");
  // byte_size <= file_size here, so the allocation is bounded by the file.
  std::vector<std::byte> bytes(static_cast<size_t>(byte_size));
  in.seekg(static_cast<std::streamoff>(ref.offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(byte_size));
  if (!in || static_cast<uint64_t>(in.gcount()) != byte_size) {
    return data_loss(where + ": read " + std::to_string(in.gcount()) + " of " +
                     std::to_string(byte_size) + " bytes at offset " + std::to_string(ref.offset));
  }
  return bytes;
}

}  // namespace loom::onnx_io::detail
