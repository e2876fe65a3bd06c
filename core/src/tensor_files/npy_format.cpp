#include "tensor_files/npy_format.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "tensor_files/py_literal.hpp"

namespace loom::io::detail {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kArrayAlign = 64;
// numpy leaves room after the dict so the first axis can grow to this many
// digits without moving the data; we follow it so numpy can append in place.
constexpr size_t kGrowthAxisMaxDigits = 21;

constexpr bool kHostLittle = std::endian::native == std::endian::little;

std::string num(uint64_t v) { return std::to_string(v); }

uint64_t read_le(std::span<const std::byte> bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) {
    v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  }
  return v;
}

// kInvalid when numpy has no such kind/size pair that Loom reads.
DType dtype_for_kind(char kind, size_t size) {
  switch (kind) {
    case 'f':
      if (size == 2) return DType::kF16;
      if (size == 4) return DType::kF32;
      if (size == 8) return DType::kF64;
      break;
    case 'i':
      if (size == 1) return DType::kI8;
      if (size == 2) return DType::kI16;
      if (size == 4) return DType::kI32;
      if (size == 8) return DType::kI64;
      break;
    case 'u':
      if (size == 1) return DType::kU8;
      if (size == 2) return DType::kU16;
      if (size == 4) return DType::kU32;
      if (size == 8) return DType::kU64;
      break;
    case 'b':
      if (size == 1) return DType::kBool;
      break;
    default:
      break;
  }
  return DType::kInvalid;
}

std::string_view unsupported_kind(char kind) {
  switch (kind) {
    case 'c': return "complex";
    case 'O': return "Python object";
    case 'U': case 'S': case 'a': return "string";
    case 'V': return "raw void";
    case 'M': case 'm': return "datetime";
    default: return {};
  }
}

std::string shape_repr(std::span<const int64_t> shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ',';
  return out + ")";
}

Result<NpyDescr> layout_descr(const PyValue& v) {
  if (v.kind == PyValue::Kind::kList) {
    return unimplemented(
        "'descr' is a list: structured dtypes are not supported");
  }
  if (v.kind != PyValue::Kind::kString) {
    return invalid_argument("'descr' is " + std::string(py_kind_name(v.kind)) +
                            ", expected a string such as '<f4'");
  }
  return parse_npy_descr(v.text);
}

Result<Shape> layout_shape(const PyValue& v) {
  if (v.kind != PyValue::Kind::kTuple) {
    return invalid_argument("'shape' is " + std::string(py_kind_name(v.kind)) +
                            ", expected a tuple of ints");
  }
  Shape shape;
  shape.reserve(v.items.size());
  for (size_t i = 0; i < v.items.size(); ++i) {
    const PyValue& item = v.items[i];
    if (item.kind != PyValue::Kind::kInt) {
      return invalid_argument("'shape' element " + num(i) + " is " +
                              std::string(py_kind_name(item.kind)) +
                              ", expected an int");
    }
    shape.push_back(item.integer);
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return invalid_argument("'shape' " + shape_repr(shape) + ": dimension " +
                              num(i) + " is negative (" +
                              std::to_string(shape[i]) + ")");
    }
  }
  return shape;
}

}  // namespace

Result<NpyDescr> parse_npy_descr(std::string_view descr) {
  std::string quoted = "'" + std::string(descr) + "'";
  std::string_view body = descr;
  char order = '=';
  if (!body.empty() && std::string_view("<>=|").find(body[0]) !=
                           std::string_view::npos) {
    order = body[0];
    body.remove_prefix(1);
  }
  if (body.empty()) return invalid_argument("unknown dtype descr " + quoted);
  char kind = body[0];
  if (std::string_view what = unsupported_kind(kind); !what.empty()) {
    return unimplemented("dtype " + quoted + " (" + std::string(what) +
                         ") is not supported");
  }
  std::string_view digits = body.substr(1);
  bool numeric = !digits.empty() && digits.size() <= 2 &&
                 std::all_of(digits.begin(), digits.end(),
                             [](char c) { return c >= '0' && c <= '9'; });
  if (!numeric) return invalid_argument("unknown dtype descr " + quoted);
  size_t size = 0;
  for (char c : digits) size = size * 10 + static_cast<size_t>(c - '0');
  NpyDescr out;
  out.dtype = dtype_for_kind(kind, size);
  if (out.dtype == DType::kInvalid) {
    return invalid_argument("unknown dtype descr " + quoted);
  }
  if (size > 1) {
    out.swap_bytes = (order == '<' && !kHostLittle) ||
                     (order == '>' && kHostLittle);
  }
  return out;
}

std::string npy_descr_for(DType dtype) {
  std::string body;
  switch (dtype) {
    case DType::kF16: body = "f2"; break;
    case DType::kF32: body = "f4"; break;
    case DType::kF64: body = "f8"; break;
    case DType::kI8: return "|i1";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    case DType::kI16: body = "i2"; break;
    case DType::kI32: body = "i4"; break;
    case DType::kI64: body = "i8"; break;
    case DType::kU16: body = "u2"; break;
    case DType::kU32: body = "u4"; break;
    case DType::kU64: body = "u8"; break;
    case DType::kBF16:
    case DType::kInvalid:
      return {};
  }
  if (body.empty()) return {};
  return (kHostLittle ? "<" : ">") + body;
}

Result<uint64_t> npy_header_end(std::span<const std::byte> lead,
                                uint64_t file_size) {
  size_t magic_seen = std::min(lead.size(), kMagicSize);
  if (magic_seen > 0 && std::memcmp(lead.data(), kMagic, magic_seen) != 0) {
    return invalid_argument(
        "bad magic: not a .npy file (it must start with \\x93NUMPY)");
  }
  if (lead.size() < kMagicSize + 2) {
    return invalid_argument("truncated: the file has " + num(file_size) +
                            " bytes, the magic and version need 8");
  }
  auto major = static_cast<uint8_t>(lead[6]);
  auto minor = static_cast<uint8_t>(lead[7]);
  if (minor != 0 || major < 1 || major > 3) {
    return unimplemented("unsupported .npy format version " + num(major) +
                         "." + num(minor) + " (1.0, 2.0 and 3.0 are read)");
  }
  size_t len_size = major == 1 ? 2 : 4;
  size_t preamble = kMagicSize + 2 + len_size;
  if (lead.size() < preamble) {
    return invalid_argument("truncated: the file has " + num(file_size) +
                            " bytes, the version " + num(major) +
                            ".0 preamble needs " + num(preamble));
  }
  uint64_t header_len = read_le(lead.subspan(kMagicSize + 2, len_size));
  uint64_t end = preamble + header_len;
  if (end > file_size) {
    return invalid_argument("header length " + num(header_len) +
                            " ends at byte " + num(end) +
                            ", past the end of the " + num(file_size) +
                            "-byte file");
  }
  return end;
}

Result<NpyLayout> parse_npy_layout(std::span<const std::byte> head,
                                   uint64_t file_size) {
  LOOM_ASSIGN_OR_RETURN(
      uint64_t end,
      npy_header_end(head.first(std::min(head.size(), kNpyPreambleMax)),
                     file_size));
  if (end != head.size()) {
    return internal_error("parse_npy_layout given " + num(head.size()) +
                          " header bytes, the header ends at " + num(end));
  }
  size_t preamble = static_cast<uint8_t>(head[6]) == 1 ? 10 : 12;
  std::string_view text(reinterpret_cast<const char*>(head.data()) + preamble,
                        head.size() - preamble);

  Result<PyValue> parsed = parse_py_literal(text);
  if (!parsed.ok()) return parsed.status().with_context("header");
  const PyValue& dict = *parsed;
  if (dict.kind != PyValue::Kind::kDict) {
    return invalid_argument("header is " + std::string(py_kind_name(dict.kind)) +
                            ", expected a dict");
  }

  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const PyValue& key = dict.items[i];
    if (key.kind != PyValue::Kind::kString) {
      return invalid_argument("header key at column " + num(key.column) +
                              " is " + std::string(py_kind_name(key.kind)) +
                              ", expected a string");
    }
    const PyValue** slot = key.text == "descr"           ? &descr
                           : key.text == "fortran_order" ? &fortran
                           : key.text == "shape"         ? &shape
                                                         : nullptr;
    if (slot == nullptr) {
      return invalid_argument("unexpected key '" + key.text +
                              "' in header (expected descr, fortran_order, "
                              "shape)");
    }
    if (*slot != nullptr) {
      return invalid_argument("duplicate key '" + key.text + "' in header");
    }
    *slot = &dict.items[i + 1];
  }
  for (auto [value, name] : {std::pair{descr, "descr"},
                             std::pair{fortran, "fortran_order"},
                             std::pair{shape, "shape"}}) {
    if (value == nullptr) {
      return invalid_argument("header has no '" + std::string(name) + "' key");
    }
  }

  NpyLayout layout;
  LOOM_ASSIGN_OR_RETURN(NpyDescr element, layout_descr(*descr));
  layout.dtype = element.dtype;
  layout.swap_bytes = element.swap_bytes;
  if (fortran->kind != PyValue::Kind::kBool) {
    return invalid_argument("'fortran_order' must be True or False, found " +
                            std::string(py_kind_name(fortran->kind)));
  }
  if (fortran->boolean) {
    return unimplemented(
        "fortran_order is True: column-major data is not supported "
        "(save a C-ordered array)");
  }
  LOOM_ASSIGN_OR_RETURN(layout.shape, layout_shape(*shape));

  Result<uint64_t> count = element_count(layout.shape);
  if (!count.ok()) return count.status().with_context("'shape'");
  uint64_t item = dtype_size(layout.dtype);
  if (*count > UINT64_MAX / item) {
    return invalid_argument("'shape' " + shape_repr(layout.shape) + " of " +
                            std::string(dtype_name(layout.dtype)) +
                            " needs more bytes than fit in 64 bits");
  }
  uint64_t expected = *count * item;
  layout.data_offset = end;
  layout.data_bytes = file_size - end;
  if (layout.data_bytes != expected) {
    std::string what = layout.data_bytes < expected ? "data too short: "
                                                    : "trailing bytes: ";
    return invalid_argument(what + "the data section has " +
                            num(layout.data_bytes) + " bytes, shape " +
                            shape_repr(layout.shape) + " of " +
                            std::string(dtype_name(layout.dtype)) + " needs " +
                            num(expected));
  }
  return layout;
}

std::vector<std::byte> build_npy_header(DType dtype,
                                        std::span<const int64_t> shape) {
  std::string descr = npy_descr_for(dtype);
  if (descr.empty()) return {};
  // Keys sorted, each followed by ", ", as numpy's repr-based writer does.
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': False, 'shape': " +
                     shape_repr(shape) + ", }";
  if (!shape.empty()) {
    size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) {
      dict.append(kGrowthAxisMaxDigits - digits, ' ');
    }
  }
  // Version 1.0 stores the length in 16 bits; 2.0 is only for huge ranks.
  uint8_t major = 1;
  size_t preamble = 10;
  size_t padded = 0;
  for (;;) {
    size_t with_newline = dict.size() + 1;
    // Always at least one space, as numpy does: 1..64, never 0.
    size_t pad = kArrayAlign - (preamble + with_newline) % kArrayAlign;
    padded = with_newline + pad;
    if (major == 1 && padded > 0xffff) {
      major = 2;
      preamble = 12;
      continue;
    }
    break;
  }
  std::vector<std::byte> out;
  out.reserve(preamble + padded);
  auto put = [&out](uint8_t b) { out.push_back(static_cast<std::byte>(b)); };
  for (size_t i = 0; i < kMagicSize; ++i) put(static_cast<uint8_t>(kMagic[i]));
  put(major);
  put(0);
  for (size_t i = 0; i < preamble - 8; ++i) {
    put(static_cast<uint8_t>((padded >> (8 * i)) & 0xff));
  }
  for (char c : dict) put(static_cast<uint8_t>(c));
  while (out.size() < preamble + padded - 1) put(' ');
  put('\n');
  return out;
}

void swap_element_bytes(std::span<std::byte> bytes, size_t item_size) {
  if (item_size < 2) return;
  for (size_t i = 0; i + item_size <= bytes.size(); i += item_size) {
    std::reverse(bytes.begin() + static_cast<ptrdiff_t>(i),
                 bytes.begin() + static_cast<ptrdiff_t>(i + item_size));
  }
}

}  // namespace loom::io::detail
