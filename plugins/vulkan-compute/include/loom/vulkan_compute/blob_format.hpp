// The vulkan-compute blob format, header-only so that tools and tests can
// build blobs without the plugin.
//
// Layout (little-endian, every field 4 or 8 bytes, no padding):
//   head      magic "LMVK", format version u32, tensor count u32,
//             dispatch count u32, input count u32, output count u32,
//             constant data bytes u64
//   tensors   per tensor: kind u32, rank u32, dims i64[8], data offset u64,
//             alias u32 (tensor index for kind alias, else 0), dtype u32
//             (format 4; 0 in formats 1 and 2, where every tensor is f32)
//   inputs    u32 tensor index per input, in call order
//   outputs   u32 tensor index per output, in call order
//   dispatches per dispatch: kernel u32, binding count u32, bindings u32[4],
//             workgroups u32[3], push count u32, push u32[32]
//   data      the constant tensors' bytes
// Every tensor is dense row-major, f32 unless its dtype says otherwise
// (format 4: u8, i8 or i32 for the int8 kernels). A dispatch binds tensors as storage
// buffers 0..binding count-1 and passes `push` as push constants. decode()
// checks every count, index, range and each kernel's push constants against
// the shapes of its bound tensors, so a blob that decodes runs without
// touching memory outside its tensors.
//
// Format 4 (2026-11-28) is format 2's layout with tensor dtypes and the int8
// kernels (quantize, dequantize, qconv); encode() writes it only for a
// program that uses either, so f32 programs stay format 2 byte for byte.
//
// Format 3, written only for a graph with open dimensions (ABI 1.2,
// LOOM_PLUGIN_CAP_OPEN_SHAPES), carries the graph itself, lowered per
// binding at execute (static graphs are still written as format 2, byte for
// byte as before):
//   head      magic "LMVK", format version u32 (3), reserved u32 (0),
//             graph bytes u32
//   graph     the graph.fbs buffer compile received (open dimensions -1)
// decode_open() checks the head and sizes; the plugin then verifies the
// graph (sdk::GraphView::open) and checks every node at a probe binding.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace loom::vulkan {

inline constexpr const char* kLoaderKey = "vulkan-compute";
// Format 2 (2026-11-27): split-K convolutions (an 18th conv push constant),
// reduce op 3 (sum then Relu) and the direct_conv kernel; format 1 blobs
// load unchanged. encode() writes it.
inline constexpr uint32_t kStaticFormatVersion = 2;
// Format 3 (2026-11-27): an open graph (encode_open, decode_open).
inline constexpr uint32_t kOpenFormatVersion = 3;
// Format 4 (2026-11-28): format 2 plus tensor dtypes (u8, i8, i32) and the
// int8 kernels; written only for programs that use them.
inline constexpr uint32_t kInt8FormatVersion = 4;
// Format 5 (2026-11-28): format 4 plus qconv's kQConvRoundFirst flag (the
// fused DequantizeLinear -> Conv / MatMul / Gemm -> QuantizeLinear form,
// which adds the output zero point after rounding, as QuantizeLinear does)
// and the qbinary kernel (DequantizeLinear x 2 -> Add / Mul ->
// QuantizeLinear fused); written only for programs that use them.
inline constexpr uint32_t kQdqFormatVersion = 5;
// Format 6 (2026-11-29): format 5 plus qconv's kQConvTransposed flag (the
// fused DequantizeLinear -> ConvTranspose -> QuantizeLinear form); written
// only for programs that use it.
inline constexpr uint32_t kQDeconvFormatVersion = 6;
// The newest format this plugin reads (the loader key's maximum).
inline constexpr uint32_t kFormatVersion = kQDeconvFormatVersion;
// qconv's types push constant (int8_kernels.hpp): round half to even, then
// add the output zero point (QuantizeLinear's order; QLinearConv adds it
// first). Format 5.
inline constexpr uint32_t kQConvRoundFirst = 1u << 13;
// qconv's types push constant: a transposed convolution (ConvTranspose's
// geometry and push constants, w as [C, M / group, KH, KW]). Format 6.
inline constexpr uint32_t kQConvTransposed = 1u << 14;
inline constexpr uint32_t kQConvTypesPush = 18;  // the types push constant's index
inline constexpr uint32_t kMinFormatVersion = 1;
// Format 3's head: magic, version, reserved, graph bytes.
inline constexpr size_t kOpenHeadBytes = 16;
// The largest graph a format-3 blob carries (big weights are execute
// inputs, not part of it).
inline constexpr uint64_t kMaxOpenGraphBytes = uint64_t{1} << 30;
inline constexpr char kMagic[4] = {'L', 'M', 'V', 'K'};
inline constexpr uint32_t kMaxRank = 8;
inline constexpr uint32_t kMaxBindings = 4;
inline constexpr uint32_t kMaxPush = 32;
inline constexpr uint32_t kMaxTensors = 1u << 16;
inline constexpr uint32_t kMaxDispatches = 1u << 16;

enum class TensorKind : uint32_t {
  kInput = 0,         // bound to an execute input
  kOutput = 1,        // bound to an execute output
  kIntermediate = 2,  // device memory owned by the executable
  kConstant = 3,      // uploaded from the data section at load
  kAlias = 4,         // the same bytes as tensor `alias` (reshape without copy)
};

// Kernels: one compute shader each. The push-constant layouts are listed in
// kernels.hpp next to the validators.
enum class Kernel : uint32_t {
  kUnary = 0,
  kBinary = 1,
  kMatMul = 2,
  kSoftmax = 3,
  kConv = 4,
  kPool = 5,
  kReduce = 6,
  kLayerNorm = 7,
  kCopy = 8,
  kResize = 9,
  kConvTranspose = 10,
  kDirectConv = 11,  // format 2
  kQuantize = 12,    // format 4: QuantizeLinear
  kDequantize = 13,  // format 4: DequantizeLinear
  kQConv = 14,       // format 4: QLinearConv and ConvInteger (format 6: transposed too)
  kQBinary = 15,     // format 5: a quantized Add / Mul (the fused QDQ form)
  // Never in a blob: the plugin's own rewrite of kQConv when it loads a blob
  // on a device with shaderIntegerDotProduct (src/int8_dot.hpp).
  kQPack = 16,
  kQConvDot = 17,
  kCount = 18,
};

// The kernels a blob may name: 0 .. kBlobKernels - 1.
inline constexpr uint32_t kBlobKernels = 16;

// A kernel of format 4 (the int8 kernels).
inline bool is_int8_kernel(Kernel k) {
  return k == Kernel::kQuantize || k == Kernel::kDequantize || k == Kernel::kQConv || k == Kernel::kQBinary;
}

// Element types of tensors (format 4; 0 is f32, the only type before).
enum class DType : uint32_t { kF32 = 0, kU8 = 1, kI8 = 2, kI32 = 3, kCount = 4 };

inline uint64_t dtype_size(DType d) { return d == DType::kU8 || d == DType::kI8 ? 1 : 4; }
inline const char* dtype_text(DType d) {
  switch (d) {
    case DType::kF32: return "f32";
    case DType::kU8: return "u8";
    case DType::kI8: return "i8";
    case DType::kI32: return "i32";
    case DType::kCount: break;
  }
  return "?";
}

struct BlobTensor {
  TensorKind kind = TensorKind::kIntermediate;
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;  // kConstant: offset in the data section
  uint32_t alias = 0;        // kAlias: the tensor it aliases
  DType dtype = DType::kF32;  // format 4

  uint64_t elements() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
  uint64_t bytes() const { return elements() * dtype_size(dtype); }
};

struct BlobDispatch {
  Kernel kernel = Kernel::kUnary;
  std::vector<uint32_t> bindings;
  uint32_t groups[3] = {1, 1, 1};
  std::vector<uint32_t> push;
};

struct BlobProgram {
  std::vector<BlobTensor> tensors;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<BlobDispatch> dispatches;
  std::vector<uint8_t> data;  // encode: the data section
  // decode: where the data section lies inside the decoded blob
  const uint8_t* data_view = nullptr;
  uint64_t data_size = 0;
};

namespace blob_detail {

inline constexpr size_t kHeadBytes = 4 + 4 * 5 + 8;
inline constexpr size_t kTensorBytes = 4 + 4 + 8 * kMaxRank + 8 + 4 + 4;
inline constexpr size_t kDispatchBytes = 4 + 4 + 4 * kMaxBindings + 4 * 3 + 4 + 4 * kMaxPush;

inline void put32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put64(std::vector<uint8_t>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A bounds-checked little-endian reader.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool has(size_t bytes) const { return bytes <= n_ - pos_; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

}  // namespace blob_detail

// Whether `d` is a qconv that rounds before adding the zero point (format 5).
inline bool rounds_first(const BlobDispatch& d) {
  return d.kernel == Kernel::kQConv && d.push.size() > kQConvTypesPush &&
         (d.push[kQConvTypesPush] & kQConvRoundFirst) != 0;
}

// Whether `d` is a transposed qconv (format 6).
inline bool qconv_transposed(const BlobDispatch& d) {
  return d.kernel == Kernel::kQConv && d.push.size() > kQConvTypesPush &&
         (d.push[kQConvTypesPush] & kQConvTransposed) != 0;
}

// The format encode() writes for `program`: 6 when a qconv is transposed,
// 5 when a qconv rounds first or a qbinary runs, 4 when a tensor is not f32
// or a dispatch runs an int8 kernel, else 2.
inline uint32_t program_format(const BlobProgram& program) {
  for (const BlobDispatch& d : program.dispatches) {
    if (qconv_transposed(d)) return kQDeconvFormatVersion;
  }
  for (const BlobDispatch& d : program.dispatches) {
    if (rounds_first(d) || d.kernel == Kernel::kQBinary) return kQdqFormatVersion;
  }
  for (const BlobTensor& t : program.tensors) {
    if (t.dtype != DType::kF32) return kInt8FormatVersion;
  }
  for (const BlobDispatch& d : program.dispatches) {
    if (is_int8_kernel(d.kernel)) return kInt8FormatVersion;
  }
  return kStaticFormatVersion;
}

// Serializes `program` (tensors, io lists, dispatches, `data`) in
// program_format(program). Does not validate; decode() does.
inline std::vector<uint8_t> encode(const BlobProgram& program) {
  using namespace blob_detail;
  std::vector<uint8_t> out;
  out.reserve(kHeadBytes + program.tensors.size() * kTensorBytes +
              program.dispatches.size() * kDispatchBytes + program.data.size() + 64);
  for (char c : kMagic) out.push_back(static_cast<uint8_t>(c));
  put32(&out, program_format(program));
  put32(&out, static_cast<uint32_t>(program.tensors.size()));
  put32(&out, static_cast<uint32_t>(program.dispatches.size()));
  put32(&out, static_cast<uint32_t>(program.inputs.size()));
  put32(&out, static_cast<uint32_t>(program.outputs.size()));
  put64(&out, program.data.size());
  for (const BlobTensor& t : program.tensors) {
    put32(&out, static_cast<uint32_t>(t.kind));
    put32(&out, static_cast<uint32_t>(t.shape.size()));
    for (uint32_t i = 0; i < kMaxRank; ++i) {
      put64(&out, i < t.shape.size() ? static_cast<uint64_t>(t.shape[i]) : 0);
    }
    put64(&out, t.data_offset);
    put32(&out, t.alias);
    put32(&out, static_cast<uint32_t>(t.dtype));
  }
  for (uint32_t i : program.inputs) put32(&out, i);
  for (uint32_t o : program.outputs) put32(&out, o);
  for (const BlobDispatch& d : program.dispatches) {
    put32(&out, static_cast<uint32_t>(d.kernel));
    put32(&out, static_cast<uint32_t>(d.bindings.size()));
    for (uint32_t i = 0; i < kMaxBindings; ++i) put32(&out, i < d.bindings.size() ? d.bindings[i] : 0);
    for (uint32_t g : d.groups) put32(&out, g);
    put32(&out, static_cast<uint32_t>(d.push.size()));
    for (uint32_t i = 0; i < kMaxPush; ++i) put32(&out, i < d.push.size() ? d.push[i] : 0);
  }
  out.insert(out.end(), program.data.begin(), program.data.end());
  return out;
}

// The format version a blob's head names (0 when it is too short or its
// magic is wrong: decode() says why).
inline uint32_t blob_version(const void* blob, size_t size) {
  if (blob == nullptr || size < 8 || std::memcmp(blob, kMagic, 4) != 0) return 0;
  blob_detail::Reader r(static_cast<const uint8_t*>(blob) + 4, 4);
  return r.u32();
}

// A format-3 blob of the graph.fbs buffer `graph` (`size` bytes).
inline std::vector<uint8_t> encode_open(const void* graph, size_t size) {
  using namespace blob_detail;
  std::vector<uint8_t> out;
  out.reserve(kOpenHeadBytes + size);
  for (char c : kMagic) out.push_back(static_cast<uint8_t>(c));
  put32(&out, kOpenFormatVersion);
  put32(&out, 0);
  put32(&out, static_cast<uint32_t>(size));
  const auto* p = static_cast<const uint8_t*>(graph);
  out.insert(out.end(), p, p + size);
  return out;
}

// Reads a format-3 blob's head: `*graph` and `*graph_size` locate the
// graph.fbs buffer inside `blob` (not yet verified: sdk::GraphView::open
// does that). False with `*error` ("format-3 blob of 20 bytes: its head
// names a graph of 64 bytes") otherwise.
inline bool decode_open(const void* blob, size_t size, const uint8_t** graph, size_t* graph_size,
                        std::string* error) {
  using namespace blob_detail;
  if (blob == nullptr || size < kOpenHeadBytes) {
    *error = "blob of " + std::to_string(size) + " bytes is shorter than the 16-byte head of format 3";
    return false;
  }
  const uint8_t* p = static_cast<const uint8_t*>(blob);
  if (std::memcmp(p, kMagic, 4) != 0) {
    *error = "bad magic (want \"LMVK\")";
    return false;
  }
  Reader r(p + 4, size - 4);
  const uint32_t version = r.u32(), reserved = r.u32(), bytes = r.u32();
  if (version != kOpenFormatVersion) {
    *error = "format version " + std::to_string(version) + " is not format 3 (an open graph)";
    return false;
  }
  if (reserved != 0) {
    *error = "format-3 head: reserved field is " + std::to_string(reserved) + ", not 0";
    return false;
  }
  if (bytes == 0 || bytes > kMaxOpenGraphBytes || bytes != size - kOpenHeadBytes) {
    *error = "format-3 blob of " + std::to_string(size) + " bytes: its head names a graph of " +
             std::to_string(bytes) + " bytes (want " + std::to_string(size - kOpenHeadBytes) + ", at least 1)";
    return false;
  }
  *graph = p + kOpenHeadBytes;
  *graph_size = bytes;
  return true;
}

// Decodes the structure of a blob: head, counts, tensor records (ranks,
// dims, f32 sizes, constant ranges, aliases), io lists and dispatch records
// (kernel ids, binding indices, push counts). Kernel-specific checks of the
// push constants are in kernels.hpp (validate_dispatch). False with `*error`
// ("tensor 3: constant bytes [96, 160) exceed the data section of 128")
// otherwise. `data_view` points into `blob`.
inline bool decode_structure(const void* blob, size_t size, BlobProgram* out, std::string* error) {
  using namespace blob_detail;
  auto fail = [&](std::string m) {
    *error = std::move(m);
    return false;
  };
  if (blob_version(blob, size) == kOpenFormatVersion) {
    return fail("format version 3 carries an open graph, not a program (decode_open reads it)");
  }
  if (blob == nullptr || size < kHeadBytes) {
    return fail("blob of " + std::to_string(size) + " bytes is shorter than the " +
                std::to_string(kHeadBytes) + "-byte head");
  }
  const uint8_t* p = static_cast<const uint8_t*>(blob);
  if (std::memcmp(p, kMagic, 4) != 0) return fail("bad magic (want \"LMVK\")");
  Reader r(p + 4, size - 4);
  BlobProgram prog;
  const uint32_t version = r.u32();
  if (version < kMinFormatVersion || version > kFormatVersion) {
    return fail("format version " + std::to_string(version) + ", this plugin reads " +
                std::to_string(kMinFormatVersion) + " to " + std::to_string(kFormatVersion));
  }
  const uint32_t tensors = r.u32(), dispatches = r.u32(), inputs = r.u32(), outputs = r.u32();
  const uint64_t data_bytes = r.u64();
  if (tensors > kMaxTensors || dispatches > kMaxDispatches || inputs > tensors || outputs > tensors) {
    return fail("counts out of range: " + std::to_string(tensors) + " tensors, " +
                std::to_string(dispatches) + " dispatches, " + std::to_string(inputs) +
                " inputs, " + std::to_string(outputs) + " outputs");
  }
  const uint64_t body = uint64_t{tensors} * kTensorBytes + 4ull * (inputs + outputs) +
                        uint64_t{dispatches} * kDispatchBytes;
  if (data_bytes > size || body + data_bytes != size - kHeadBytes) {
    return fail("blob is " + std::to_string(size) + " bytes; its head describes " +
                std::to_string(kHeadBytes + body) + " bytes of records plus " +
                std::to_string(data_bytes) + " bytes of data");
  }
  prog.tensors.resize(tensors);
  for (uint32_t t = 0; t < tensors; ++t) {
    const std::string where = "tensor " + std::to_string(t) + ": ";
    BlobTensor& bt = prog.tensors[t];
    const uint32_t kind = r.u32();
    const uint32_t rank = r.u32();
    if (kind > static_cast<uint32_t>(TensorKind::kAlias)) {
      return fail(where + "unknown kind " + std::to_string(kind));
    }
    if (rank > kMaxRank) return fail(where + "rank " + std::to_string(rank) + " exceeds 8");
    bt.kind = static_cast<TensorKind>(kind);
    uint64_t elements = 1;
    for (uint32_t i = 0; i < kMaxRank; ++i) {
      const int64_t d = static_cast<int64_t>(r.u64());
      if (i >= rank) {
        if (d != 0) return fail(where + "dimension " + std::to_string(i) + " past rank is not 0");
        continue;
      }
      if (d < 0 || d > (int64_t{1} << 40)) {
        return fail(where + "dimension " + std::to_string(i) + " is " + std::to_string(d));
      }
      bt.shape.push_back(d);
      if (d != 0 && elements > (uint64_t{1} << 40) / static_cast<uint64_t>(d)) {
        return fail(where + "more than 2^40 elements");
      }
      elements *= static_cast<uint64_t>(d);
    }
    bt.data_offset = r.u64();
    bt.alias = r.u32();
    const uint32_t dtype = r.u32();
    if (version < kInt8FormatVersion && dtype != 0) return fail(where + "reserved field is not 0");
    if (dtype >= static_cast<uint32_t>(DType::kCount)) return fail(where + "unknown dtype " + std::to_string(dtype));
    bt.dtype = static_cast<DType>(dtype);
    if ((bt.kind != TensorKind::kConstant && bt.data_offset != 0) ||
        (bt.kind != TensorKind::kAlias && bt.alias != 0)) {
      return fail(where + "data offset or alias set on a tensor of another kind");
    }
    if (bt.kind == TensorKind::kConstant &&
        (bt.data_offset > data_bytes || bt.bytes() > data_bytes - bt.data_offset)) {
      return fail(where + "constant bytes [" + std::to_string(bt.data_offset) + ", +" +
                  std::to_string(bt.bytes()) + ") exceed the data section of " +
                  std::to_string(data_bytes));
    }
  }
  for (uint32_t t = 0; t < tensors; ++t) {
    const BlobTensor& bt = prog.tensors[t];
    if (bt.kind != TensorKind::kAlias) continue;
    const std::string where = "tensor " + std::to_string(t) + ": ";
    if (bt.alias >= tensors || prog.tensors[bt.alias].kind == TensorKind::kAlias) {
      return fail(where + "aliases tensor " + std::to_string(bt.alias) +
                  ", which is out of range or an alias itself");
    }
    if (prog.tensors[bt.alias].bytes() != bt.bytes() || prog.tensors[bt.alias].dtype != bt.dtype) {
      return fail(where + "has " + std::to_string(bt.bytes()) + " bytes of " + dtype_text(bt.dtype) +
                  ", the tensor it aliases " + std::to_string(prog.tensors[bt.alias].bytes()) + " of " +
                  dtype_text(prog.tensors[bt.alias].dtype));
    }
  }
  auto io = [&](uint32_t count, TensorKind kind, const char* what, std::vector<uint32_t>* list) {
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t t = r.u32();
      if (t >= tensors || prog.tensors[t].kind != kind) {
        *error = std::string(what) + " " + std::to_string(i) + " names tensor " + std::to_string(t) +
                 ", which is out of range or not of kind " + what;
        return false;
      }
      for (uint32_t seen : *list) {
        if (seen == t) {
          *error = std::string(what) + " " + std::to_string(i) + " repeats tensor " + std::to_string(t);
          return false;
        }
      }
      list->push_back(t);
    }
    return true;
  };
  if (!io(inputs, TensorKind::kInput, "input", &prog.inputs)) return false;
  if (!io(outputs, TensorKind::kOutput, "output", &prog.outputs)) return false;
  for (uint32_t t = 0; t < tensors; ++t) {
    const TensorKind k = prog.tensors[t].kind;
    const auto& list = k == TensorKind::kInput ? prog.inputs : prog.outputs;
    if ((k == TensorKind::kInput || k == TensorKind::kOutput) &&
        std::find(list.begin(), list.end(), t) == list.end()) {
      return fail("tensor " + std::to_string(t) + " is an input or output but not listed as one");
    }
  }
  prog.dispatches.resize(dispatches);
  for (uint32_t d = 0; d < dispatches; ++d) {
    const std::string where = "dispatch " + std::to_string(d) + ": ";
    BlobDispatch& bd = prog.dispatches[d];
    const uint32_t kernel = r.u32();
    const uint32_t bindings = r.u32();
    if (kernel >= kBlobKernels) {
      return fail(where + "unknown kernel " + std::to_string(kernel));
    }
    if (bindings > kMaxBindings) return fail(where + std::to_string(bindings) + " bindings");
    bd.kernel = static_cast<Kernel>(kernel);
    if (is_int8_kernel(bd.kernel) && version < kInt8FormatVersion) {
      return fail(where + "kernel " + std::to_string(kernel) + " is an int8 kernel of format 4, the blob is format " +
                  std::to_string(version));
    }
    for (uint32_t i = 0; i < kMaxBindings; ++i) {
      const uint32_t b = r.u32();
      if (i >= bindings) {
        if (b != 0) return fail(where + "unused binding " + std::to_string(i) + " is not 0");
        continue;
      }
      if (b >= tensors) {
        return fail(where + "binding " + std::to_string(i) + " names tensor " + std::to_string(b) +
                    " of " + std::to_string(tensors));
      }
      bd.bindings.push_back(b);
    }
    for (uint32_t& g : bd.groups) g = r.u32();
    const uint32_t push = r.u32();
    if (push > kMaxPush) return fail(where + std::to_string(push) + " push constants (max 32)");
    for (uint32_t i = 0; i < kMaxPush; ++i) {
      const uint32_t v = r.u32();
      if (i < push) {
        bd.push.push_back(v);
      } else if (v != 0) {
        return fail(where + "unused push constant " + std::to_string(i) + " is not 0");
      }
    }
    if (rounds_first(bd) && version < kQdqFormatVersion) {
      return fail(where + "qconv's round-first flag is format 5, the blob is format " + std::to_string(version));
    }
    if (qconv_transposed(bd) && version < kQDeconvFormatVersion) {
      return fail(where + "qconv's transposed flag is format 6, the blob is format " + std::to_string(version));
    }
    if (bd.kernel == Kernel::kQBinary && version < kQdqFormatVersion) {
      return fail(where + "kernel 15 (qbinary) is format 5, the blob is format " + std::to_string(version));
    }
  }
  prog.data_view = p + size - data_bytes;
  prog.data_size = data_bytes;
  *out = std::move(prog);
  return true;
}

}  // namespace loom::vulkan
