// A versioned container for a plugin's own blobs: a 32-byte header (magic,
// format version, payload size, checksum) before the plugin's payload, a
// writer for compile and a validating reader for executable_check/load.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp). Using
// it is optional: the host treats blobs as opaque bytes. It exists because a
// blob reaches executable_load from a file the plugin never saw being
// written: it may be truncated, come from another plugin or another version,
// or be corrupted, and each case deserves a clear refusal instead of a crash.
//
// Layout (all integers little-endian):
//   offset  0  char[8]  magic, chosen by the plugin ("TINYACC1")
//   offset  8  u32      format version of the payload
//   offset 12  u32      header size (32; lets a later header grow)
//   offset 16  u64      payload size in bytes
//   offset 24  u64      FNV-1a 64 checksum of the payload
//   offset 32  payload
// The checksum catches corruption, not tampering: it is not cryptographic.
// Every type here is a plain value; use one object from one thread.
#ifndef LOOM_SDK_BLOB_HPP_
#define LOOM_SDK_BLOB_HPP_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "loom/sdk/calls.hpp"
#include "loom/sdk/status.hpp"

namespace loom::sdk {

inline constexpr size_t kBlobMagicSize = 8;
inline constexpr size_t kBlobHeaderSize = 32;

// FNV-1a, 64 bits, of `size` bytes (the blob checksum). Continue a running
// hash by passing the previous result as `hash`.
inline uint64_t fnv1a64(const void* data, size_t size,
                        uint64_t hash = UINT64_C(0xcbf29ce484222325)) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= UINT64_C(0x100000001b3);
  }
  return hash;
}

// Builds one blob: append the payload, then finish(). Appends never fail
// (they grow a std::vector, which throws std::bad_alloc when memory runs out;
// the thunks turn that into RESOURCE_EXHAUSTED).
class BlobWriter {
 public:
  // `magic` is exactly 8 characters (checked at compile time), the same the
  // reader expects; `format_version` is the payload's version, the one the
  // plugin also reports as CompiledBlob::format_version.
  BlobWriter(const char (&magic)[kBlobMagicSize + 1], uint32_t format_version)
      : format_version_(format_version) {
    std::memcpy(magic_, magic, kBlobMagicSize);
  }

  void u8(uint8_t v) { payload_.push_back(v); }
  void u32(uint32_t v) { put_le(v, 4); }
  void u64(uint64_t v) { put_le(v, 8); }
  void i32(int32_t v) { put_le(static_cast<uint32_t>(v), 4); }
  void i64(int64_t v) { put_le(static_cast<uint64_t>(v), 8); }
  void f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put_le(bits, 4);
  }
  void bytes(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    payload_.insert(payload_.end(), p, p + size);
  }
  // A string as u32 length + bytes (no NUL); BlobReader::str reads it back.
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  // Pads the payload with zeros to a multiple of `alignment` (a power of
  // two). Payload offsets are relative to the payload start, which is 32
  // bytes into the blob, so alignments up to 32 hold in the blob too.
  void align(size_t alignment) {
    while (payload_.size() % alignment != 0) payload_.push_back(0);
  }

  size_t payload_size() const { return payload_.size(); }

  // Header + payload, ready for CompiledBlob::bytes. The writer keeps its
  // payload: finish may be called again after more appends.
  std::vector<uint8_t> finish() const {
    std::vector<uint8_t> out(kBlobHeaderSize + payload_.size());
    std::memcpy(out.data(), magic_, kBlobMagicSize);
    store_le(out.data() + 8, format_version_, 4);
    store_le(out.data() + 12, kBlobHeaderSize, 4);
    store_le(out.data() + 16, payload_.size(), 8);
    store_le(out.data() + 24, fnv1a64(payload_.data(), payload_.size()), 8);
    if (!payload_.empty()) {
      std::memcpy(out.data() + kBlobHeaderSize, payload_.data(), payload_.size());
    }
    return out;
  }

 private:
  static void store_le(uint8_t* p, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
  void put_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) payload_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }

  char magic_[kBlobMagicSize];
  uint32_t format_version_;
  std::vector<uint8_t> payload_;
};

// A validated header; `payload` points into the blob it was read from and
// lives as long as that blob.
struct BlobHeader {
  uint32_t format_version = 0;
  uint64_t payload_size = 0;
  uint64_t checksum = 0;
  const uint8_t* payload = nullptr;
};

namespace detail {

inline uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// "TINYACC1", with anything unprintable as \xNN.
inline std::string printable(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\') {
      s += static_cast<char>(p[i]);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", p[i]);
      s += buf;
    }
  }
  return s;
}

inline std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace detail

// Validates the header of a blob written by BlobWriter: magic, a format
// version in [min_version, max_version], header size, that the payload is
// exactly the bytes after the header, and its checksum. INCOMPATIBLE (what
// executable_check answers for a blob it cannot load) with a message saying
// which check failed and the values involved:
//   "blob: bad magic: expected \"TINYACC1\", found \"CPUSIMD\\x00\""
//   "blob: format version 3 is not supported: this plugin reads versions 1 to 2"
//   "blob: truncated: 12 bytes, the header alone needs 32"
//   "blob: truncated: the header promises 400 payload bytes, 100 follow it"
//   "blob: checksum mismatch: the header says 0x..., the payload hashes to 0x..."
// Reads `size` bytes at most, in O(size). Thread-safe (reads only).
inline Status read_blob_header(const void* data, size_t size,
                               const char (&magic)[kBlobMagicSize + 1], uint32_t min_version,
                               uint32_t max_version, BlobHeader* out) {
  *out = BlobHeader();
  const auto* p = static_cast<const uint8_t*>(data);
  if (p == nullptr || size < kBlobHeaderSize) {
    return incompatible("blob: truncated: " + std::to_string(p == nullptr ? 0 : size) +
                        " bytes, the header alone needs " + std::to_string(kBlobHeaderSize));
  }
  if (std::memcmp(p, magic, kBlobMagicSize) != 0) {
    return incompatible("blob: bad magic: expected \"" +
                        detail::printable(reinterpret_cast<const uint8_t*>(magic), kBlobMagicSize) +
                        "\", found \"" + detail::printable(p, kBlobMagicSize) +
                        "\" (not a blob of this plugin)");
  }
  const auto version = static_cast<uint32_t>(detail::load_le(p + 8, 4));
  if (version < min_version || version > max_version) {
    return incompatible("blob: format version " + std::to_string(version) +
                        " is not supported: this plugin reads versions " +
                        std::to_string(min_version) + " to " + std::to_string(max_version));
  }
  const uint64_t header_size = detail::load_le(p + 12, 4);
  if (header_size != kBlobHeaderSize) {
    return incompatible("blob: header size " + std::to_string(header_size) + ", expected " +
                        std::to_string(kBlobHeaderSize));
  }
  const uint64_t payload_size = detail::load_le(p + 16, 8);
  const uint64_t available = size - kBlobHeaderSize;
  if (payload_size > available) {
    return incompatible("blob: truncated: the header promises " + std::to_string(payload_size) +
                        " payload bytes, " + std::to_string(available) + " follow it");
  }
  if (payload_size < available) {
    return incompatible("blob: " + std::to_string(available - payload_size) +
                        " bytes follow the payload of " + std::to_string(payload_size) +
                        " bytes the header announces");
  }
  const uint64_t checksum = detail::load_le(p + 24, 8);
  const uint64_t actual = fnv1a64(p + kBlobHeaderSize, static_cast<size_t>(payload_size));
  if (checksum != actual) {
    return incompatible("blob: checksum mismatch: the header says " + detail::hex64(checksum) +
                        ", the payload hashes to " + detail::hex64(actual) + " (corrupted)");
  }
  out->format_version = version;
  out->payload_size = payload_size;
  out->checksum = checksum;
  out->payload = p + kBlobHeaderSize;
  return Status();
}

// read_blob_header for a blob as executable_check/load receive it; also
// refuses a blob whose header disagrees with the format version the program
// recorded for it (blob.format_version, when not 0).
inline Status read_blob_header(const Blob& blob, const char (&magic)[kBlobMagicSize + 1],
                               uint32_t min_version, uint32_t max_version, BlobHeader* out) {
  LOOM_SDK_RETURN_IF_ERROR(
      read_blob_header(blob.data, blob.size, magic, min_version, max_version, out));
  if (blob.format_version != 0 && blob.format_version != out->format_version) {
    const uint32_t found = out->format_version;
    *out = BlobHeader();
    return incompatible("blob: the program records format version " +
                        std::to_string(blob.format_version) + ", the blob's header says " +
                        std::to_string(found));
  }
  return Status();
}

// Reads a payload written by BlobWriter, front to back, with bounds checks.
// The first read past the end fails, and so does every read after it, so a
// decoder may read a whole record and check ok() once. Borrows the payload.
class BlobReader {
 public:
  BlobReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  explicit BlobReader(const BlobHeader& h)
      : data_(h.payload), size_(static_cast<size_t>(h.payload_size)) {}

  bool u8(uint8_t* v) {
    const uint8_t* p = take(1);
    if (p != nullptr) *v = *p;
    return p != nullptr;
  }
  bool u32(uint32_t* v) { return get_le(v, 4); }
  bool u64(uint64_t* v) { return get_le(v, 8); }
  bool i32(int32_t* v) {
    uint32_t u = 0;
    if (!get_le(&u, 4)) return false;
    *v = static_cast<int32_t>(u);
    return true;
  }
  bool i64(int64_t* v) {
    uint64_t u = 0;
    if (!get_le(&u, 8)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool f32(float* v) {
    uint32_t bits = 0;
    if (!get_le(&bits, 4)) return false;
    std::memcpy(v, &bits, 4);
    return true;
  }
  // Copies `size` bytes out.
  bool bytes(void* dst, size_t size) {
    const uint8_t* p = take(size);
    if (p != nullptr && size != 0) std::memcpy(dst, p, size);
    return p != nullptr;
  }
  // Points `*out` at the next `size` bytes inside the payload (no copy).
  bool view(size_t size, const uint8_t** out) {
    *out = take(size);
    return *out != nullptr;
  }
  bool str(std::string* s) {
    uint32_t n = 0;
    const uint8_t* p = nullptr;
    if (!u32(&n) || !view(n, &p)) return false;
    s->assign(reinterpret_cast<const char*>(p), n);
    return true;
  }
  // Skips the zeros BlobWriter::align wrote.
  bool align(size_t alignment) {
    const size_t pad = (alignment - offset_ % alignment) % alignment;
    return take(pad) != nullptr;
  }

  size_t offset() const { return offset_; }
  size_t remaining() const { return size_ - offset_; }
  bool ok() const { return error_.empty(); }
  // OK, or INCOMPATIBLE naming the first read that ran past the end:
  // "blob: payload truncated: reading 8 bytes at offset 40 of 44".
  Status status() const { return ok() ? Status() : incompatible(error_); }

 private:
  const uint8_t* take(size_t n) {
    if (!ok()) return nullptr;
    if (n > size_ - offset_) {
      error_ = "blob: payload truncated: reading " + std::to_string(n) + " bytes at offset " +
               std::to_string(offset_) + " of " + std::to_string(size_);
      return nullptr;
    }
    const uint8_t* p = data_ + offset_;
    offset_ += n;
    return p;
  }
  template <typename T>
  bool get_le(T* v, int n) {
    const uint8_t* p = take(static_cast<size_t>(n));
    if (p == nullptr) return false;
    *v = static_cast<T>(detail::load_le(p, n));
    return true;
  }

  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  std::string error_;
};

}  // namespace loom::sdk

#endif  // LOOM_SDK_BLOB_HPP_
