#include "loom/npy.hpp"

#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "tensor_files/npy_format.hpp"
#include "loom/file_type.hpp"

namespace loom::io {

namespace fs = std::filesystem;
using detail::NpyLayout;

namespace {

Status with_what(const Status& status, std::string_view what) {
  return status.with_context(what);
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

Status unsupported_dtype(DType dtype) {
  return invalid_argument("dtype " + std::string(dtype_name(dtype)) +
                          " has no .npy equivalent (convert to f32 first)");
}

// Reads exactly `out.size()` bytes or reports how far it got.
Status read_exact(std::ifstream& in, std::span<std::byte> out,
                  uint64_t offset) {
  if (out.empty()) return Status();
  in.read(reinterpret_cast<char*>(out.data()),
          static_cast<std::streamsize>(out.size()));
  auto got = static_cast<uint64_t>(in.gcount());
  if (got != out.size()) {
    return data_loss("read " + std::to_string(got) + " of " +
                     std::to_string(out.size()) + " bytes at offset " +
                     std::to_string(offset) +
                     " (did the file change while being read?)");
  }
  return Status();
}

Result<Tensor> read_file(const fs::path& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return not_found("cannot open: " +
                     (ec ? ec.message() : std::string("no such file")));
  }
  if (!fs::is_regular_file(st)) {
    return invalid_argument(std::string(file_type_name(st.type())) + ", not a regular file");
  }
  uint64_t size = fs::file_size(path, ec);
  if (ec) return unavailable("cannot get the file size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return unavailable("cannot open for reading");

  std::byte lead[detail::kNpyPreambleMax];
  size_t lead_size = static_cast<size_t>(
      std::min<uint64_t>(size, detail::kNpyPreambleMax));
  LOOM_RETURN_IF_ERROR(read_exact(in, {lead, lead_size}, 0));
  LOOM_ASSIGN_OR_RETURN(uint64_t header_end,
                        detail::npy_header_end({lead, lead_size}, size));

  // header_end <= size was checked above, so this is bounded by the file.
  std::vector<std::byte> head(static_cast<size_t>(header_end));
  std::memcpy(head.data(), lead, std::min<size_t>(lead_size, head.size()));
  if (head.size() > lead_size) {
    LOOM_RETURN_IF_ERROR(read_exact(
        in, std::span(head).subspan(lead_size), lead_size));
  }
  LOOM_ASSIGN_OR_RETURN(NpyLayout layout,
                        detail::parse_npy_layout(head, size));

  LOOM_ASSIGN_OR_RETURN(Tensor tensor,
                        Tensor::zeros(layout.dtype, std::move(layout.shape)));
  std::span<std::byte> data(static_cast<std::byte*>(tensor.data()),
                            tensor.byte_size());
  LOOM_RETURN_IF_ERROR(read_exact(in, data, header_end));
  if (layout.swap_bytes) {
    detail::swap_element_bytes(data, dtype_size(layout.dtype));
  }
  return tensor;
}

}  // namespace

Result<Tensor> read_npy(const fs::path& path) {
  Result<Tensor> tensor = read_file(path);
  if (!tensor.ok()) return with_what(tensor.status(), path.string());
  return tensor;
}

Result<Tensor> parse_npy(std::span<const std::byte> bytes,
                         std::string_view what) {
  auto parse = [&]() -> Result<Tensor> {
    size_t lead = std::min(bytes.size(), detail::kNpyPreambleMax);
    LOOM_ASSIGN_OR_RETURN(
        uint64_t header_end,
        detail::npy_header_end(bytes.first(lead), bytes.size()));
    LOOM_ASSIGN_OR_RETURN(
        NpyLayout layout,
        detail::parse_npy_layout(bytes.first(static_cast<size_t>(header_end)),
                                 bytes.size()));
    LOOM_ASSIGN_OR_RETURN(
        Tensor tensor,
        Tensor::copy_of(layout.dtype, std::move(layout.shape),
                        bytes.subspan(static_cast<size_t>(header_end))));
    if (layout.swap_bytes) {
      detail::swap_element_bytes(
          {static_cast<std::byte*>(tensor.data()), tensor.byte_size()},
          dtype_size(layout.dtype));
    }
    return tensor;
  };
  Result<Tensor> tensor = parse();
  if (!tensor.ok()) return with_what(tensor.status(), what);
  return tensor;
}

std::vector<std::byte> encode_npy(const Tensor& tensor) {
  std::vector<std::byte> out =
      detail::build_npy_header(tensor.dtype(), tensor.shape());
  if (out.empty()) return out;
  std::span<const std::byte> data = tensor.bytes();
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status write_npy(const fs::path& path, const Tensor& tensor) {
  std::vector<std::byte> header =
      detail::build_npy_header(tensor.dtype(), tensor.shape());
  if (header.empty()) {
    return with_what(unsupported_dtype(tensor.dtype()), path.string());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return unavailable("cannot open " + quoted(path) + " for writing");
  }
  std::span<const std::byte> data = tensor.bytes();
  out.write(reinterpret_cast<const char*>(header.data()),
            static_cast<std::streamsize>(header.size()));
  if (!data.empty()) {
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
  }
  out.close();
  if (!out) {
    return unavailable("writing " + std::to_string(header.size() + data.size()) +
                       " bytes to " + quoted(path) + " failed");
  }
  return Status();
}

std::string npy_file_stem(std::string_view name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

}  // namespace loom::io
