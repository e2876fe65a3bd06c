// The .npy container layout: preamble, header dict, dtype descriptors.
// Internal to loom_tensor_files; npy.hpp is the public face. Shared by the in-memory
// and the file readers so both accept and refuse exactly the same inputs.
//
// Layout (numpy's format.py, versions 1.0, 2.0, 3.0):
//   "\x93NUMPY" major minor  header_len (u16 LE in 1.0, u32 LE in 2.0/3.0)
//   header: a Python dict literal, space-padded, ending in '\n'
//   data: shape product * itemsize bytes, row-major
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::io::detail {

// Bytes a reader needs from the file's start to find the header's end.
inline constexpr size_t kNpyPreambleMax = 12;

// An element type as a .npy descr names it.
struct NpyDescr {
  DType dtype = DType::kInvalid;
  bool swap_bytes = false;  // stored in the other byte order than this host's
};

// Maps a descr such as "<f4", "|b1", ">i8", "=u2" to a DType. Unknown types
// are invalid_argument; real numpy types Loom lacks (complex, strings,
// objects, datetimes) are unimplemented.
Result<NpyDescr> parse_npy_descr(std::string_view descr);

// The descr this host writes for `dtype` ("<f4" on little-endian hosts,
// "|u1" for bytes); empty when .npy has no such type (bf16, kInvalid).
std::string npy_descr_for(DType dtype);

// What the header says about the data that follows it.
struct NpyLayout {
  DType dtype = DType::kInvalid;
  Shape shape;
  bool swap_bytes = false;
  uint64_t data_offset = 0;  // where the data starts in the file
  uint64_t data_bytes = 0;   // equals file_size - data_offset
};

// From the first min(file_size, kNpyPreambleMax) bytes (`lead`), checks the
// magic and version and returns where the header ends (= data_offset).
// Fails when the header would run past `file_size`.
Result<uint64_t> npy_header_end(std::span<const std::byte> lead,
                                uint64_t file_size);

// Parses bytes [0, header_end) of a file of `file_size` bytes and checks that
// the data section holds exactly what the header describes.
Result<NpyLayout> parse_npy_layout(std::span<const std::byte> head,
                                   uint64_t file_size);

// The preamble and padded header for a tensor of `dtype` and `shape`, in
// numpy's own style (so numpy can later grow the first axis in place); the
// data starts right after it, at a multiple of 64. Empty when
// npy_descr_for(dtype) is empty.
std::vector<std::byte> build_npy_header(DType dtype,
                                        std::span<const int64_t> shape);

// Reverses the byte order of each `item_size`-byte element of `bytes`.
void swap_element_bytes(std::span<std::byte> bytes, size_t item_size);

}  // namespace loom::io::detail
