// Reading and writing NumPy .npy files as loom::Tensor.
//
// Reads format versions 1.0, 2.0 and 3.0 with dtypes f2 f4 f8, i1 i2 i4 i8,
// u1 u2 u4 u8 and b1 in any byte order: big-endian ('>') data is byte-swapped
// to this host's order on read. Refused, with a status that says why:
// fortran_order True, structured/complex/string/object dtypes, and any
// malformed or truncated input. Writes version 1.0 (2.0 when the header
// does not fit in 64 KiB) in numpy's own header style, data 64-byte aligned.
//
// All functions are thread-safe (no shared state) and never throw.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::io {

// Reads a whole .npy file into an owned tensor. Never allocates more than
// the file's size: the header is checked against the file length before the
// data buffer is made. Errors start with the path.
Result<Tensor> read_npy(const std::filesystem::path& path);

// Parses .npy bytes into an owned tensor (the bytes are copied). `what`
// names the source in error messages ("<what>: header: column 12: ...").
Result<Tensor> parse_npy(std::span<const std::byte> bytes,
                         std::string_view what = "buffer");

// Writes `tensor` to `path`, replacing it. Fails for dtypes .npy lacks
// (bf16), leaving `path` untouched, and on I/O errors, which may leave a
// partial file; the message names the path.
Status write_npy(const std::filesystem::path& path, const Tensor& tensor);

// The complete .npy encoding of `tensor`; empty when its dtype has no .npy
// equivalent (bf16, kInvalid) — write_npy reports that case as an error.
std::vector<std::byte> encode_npy(const Tensor& tensor);

// A file name stem for a tensor named `name` (an ONNX value name may hold
// '/', ':' and the like): characters other than letters, digits, '.', '-'
// and '_' become '_'; "", "." and ".." get a leading '_'.
std::string npy_file_stem(std::string_view name);

}  // namespace loom::io
