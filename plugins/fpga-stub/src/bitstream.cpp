#include "bitstream.hpp"
#include "node_check.hpp"

#include <cstring>

namespace loom::fpga_stub {
namespace {

uint64_t fnv1a(const std::byte* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint8_t>(p[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  template <typename T>
  void put_at(size_t at, T v) {
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void bytes(const std::byte* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  std::vector<std::byte>& out() { return out_; }

 private:
  std::vector<std::byte> out_;
};

// Reads little-endian fields, never past `size`; the first failure sticks.
class Reader {
 public:
  Reader(const std::byte* data, size_t size, size_t at) : data_(data), size_(size), at_(at) {}
  template <typename T>
  bool get(T* v) {
    if (size_ - at_ < sizeof(T)) return false;
    std::memcpy(v, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  size_t at() const { return at_; }
  size_t left() const { return size_ - at_; }
  const std::byte* here() const { return data_ + at_; }
  void skip(size_t n) { at_ += n; }

 private:
  const std::byte* data_;
  size_t size_;
  size_t at_;
};

Status bad(const std::string& what) { return sdk::incompatible("fpga-stub bitstream: " + what); }
Status bad_at(size_t at, const std::string& what) {
  return bad(what + " (at byte " + std::to_string(at) + ")");
}

}  // namespace

const char* op_name(Op op) {
  static constexpr const char* kNames[] = {
      "?", "Conv", "MatMul", "Gemm", "Add", "Mul", "Relu", "Clip", "MaxPool", "AveragePool",
      "GlobalAveragePool", "Concat", "Reshape", "Flatten", "QLinearConv", "QLinearMatMul",
      "MatMulInteger", "ConvInteger", "QuantizeLinear", "DequantizeLinear"};
  const auto i = static_cast<size_t>(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

size_t dtype_size(loom_dtype_t dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32: return 4;
    case LOOM_DTYPE_I32: return 4;
    case LOOM_DTYPE_I8: return 1;
    case LOOM_DTYPE_U8: return 1;
    default: return 0;
  }
}

const char* dtype_label(loom_dtype_t dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32: return "f32";
    case LOOM_DTYPE_I32: return "i32";
    case LOOM_DTYPE_I8: return "i8";
    case LOOM_DTYPE_U8: return "u8";
    default: return "an unsupported dtype";
  }
}

std::string shape_label(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t element_count(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return kMaxElements + 1;
    if (d != 0 && n > kMaxElements / static_cast<uint64_t>(d)) return kMaxElements + 1;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

bool is_open(const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d == -1) return true;
  }
  return false;
}

bool Bitstream::has_open_dims() const {
  for (const BsTensor& t : tensors) {
    if (is_open(t.shape)) return true;
  }
  return false;
}

Status validate(const Bitstream& bs) {
  const size_t nt = bs.tensors.size();
  std::vector<bool> open(nt, false);
  for (size_t i = 0; i < nt; ++i) {
    const BsTensor& t = bs.tensors[i];
    const std::string where = "tensor " + std::to_string(i);
    const size_t es = dtype_size(t.dtype);
    if (es == 0) return bad(where + " has dtype " + std::to_string(t.dtype) + ", not f32/i32/i8/u8");
    if (t.shape.size() > LOOM_MAX_RANK) return bad(where + " has rank " + std::to_string(t.shape.size()));
    open[i] = is_open(t.shape);
    if (open[i]) {
      for (size_t d = 0; d < t.shape.size(); ++d) {
        if (t.shape[d] < -1) {
          return bad(where + " has shape " + shape_label(t.shape) + ": dimension " + std::to_string(d) +
                     " is neither open (-1) nor a size");
        }
      }
      if (t.storage == Storage::kConst) return bad(where + " is a constant with open shape " + shape_label(t.shape));
      if (t.bytes != 0 || t.offset != 0) {
        return bad(where + " has open shape " + shape_label(t.shape) + " but records " + std::to_string(t.bytes) +
                   " bytes at offset " + std::to_string(t.offset) + " (an open tensor records 0 and 0)");
      }
      continue;
    }
    const uint64_t n = element_count(t.shape);
    if (n > kMaxElements) return bad(where + " has shape " + shape_label(t.shape) + ": too many elements");
    if (t.bytes != n * es) {
      return bad(where + " declares " + std::to_string(t.bytes) + " bytes, its shape " +
                 shape_label(t.shape) + " of " + dtype_label(t.dtype) + " needs " + std::to_string(n * es));
    }
    const uint64_t limit = t.storage == Storage::kConst     ? bs.weights.size()
                           : t.storage == Storage::kScratch ? bs.activation_bytes
                                                            : UINT64_MAX;
    if (t.storage != Storage::kIo && (t.offset > limit || t.bytes > limit - t.offset)) {
      return bad(where + " at [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) +
                 ") exceeds its region of " + std::to_string(limit) + " bytes");
    }
  }
  // 0 unbound, 1 graph input, 2 graph output, 3 written (scratch or output).
  std::vector<uint8_t> role(nt, 0);
  std::vector<bool> ready(nt, false);
  for (size_t i = 0; i < nt; ++i) ready[i] = bs.tensors[i].storage == Storage::kConst;
  for (int pass = 0; pass < 2; ++pass) {
    const auto& list = pass == 0 ? bs.inputs : bs.outputs;
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string where = std::string(pass == 0 ? "input " : "output ") + std::to_string(k);
      if (list[k] >= nt) return bad(where + " names tensor " + std::to_string(list[k]) + " of " + std::to_string(nt));
      if (bs.tensors[list[k]].storage != Storage::kIo) return bad(where + " is not an I/O tensor");
      if (role[list[k]] != 0) return bad(where + " names tensor " + std::to_string(list[k]) + " twice");
      role[list[k]] = static_cast<uint8_t>(pass + 1);
      if (pass == 0) ready[list[k]] = true;
    }
  }
  for (size_t i = 0; i < nt; ++i) {
    if (bs.tensors[i].storage == Storage::kIo && role[i] == 0) {
      return bad("I/O tensor " + std::to_string(i) + " is neither an input nor an output");
    }
  }
  for (size_t n = 0; n < bs.nodes.size(); ++n) {
    const BsNode& node = bs.nodes[n];
    const std::string where = "node " + std::to_string(n) + " (" + op_name(node.op) + ")";
    if (node.op < Op::kConv || node.op > Op::kLast) {
      return bad("node " + std::to_string(n) + " has unknown op code " +
                 std::to_string(static_cast<int>(node.op)));
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int32_t t = node.inputs[k];
      if (t == -1) continue;
      if (t < 0 || static_cast<size_t>(t) >= nt) {
        return bad(where + " input " + std::to_string(k) + " names tensor " + std::to_string(t));
      }
      if (!ready[t]) return bad(where + " reads tensor " + std::to_string(t) + " before it is written");
    }
    const int32_t o = node.output;
    if (o < 0 || static_cast<size_t>(o) >= nt) return bad(where + " writes tensor " + std::to_string(o));
    const BsTensor& out = bs.tensors[o];
    if (out.storage == Storage::kConst || role[o] == 1 || role[o] == 3 ||
        (out.storage == Storage::kScratch && ready[o])) {
      return bad(where + " writes tensor " + std::to_string(o) + ", which is a constant, an input or already written");
    }
    if (role[o] == 2) role[o] = 3;
    ready[o] = true;
    bool touches_open = open[static_cast<size_t>(o)];
    for (int32_t t : node.inputs) touches_open = touches_open || (t >= 0 && open[static_cast<size_t>(t)]);
    if (touches_open) {
      // Its shapes are checked per binding (bind_shapes); here only what
      // does not depend on them.
      if (node.inputs.size() > kMaxNodeInputs || node.params.size() > kMaxParams) {
        return bad(where + " has too many inputs or parameters");
      }
      continue;
    }
    Status s = check_node(bs, n);
    if (!s.ok()) return bad(s.message());
  }
  for (size_t k = 0; k < bs.outputs.size(); ++k) {
    if (role[bs.outputs[k]] != 3) return bad("output " + std::to_string(k) + " is not written by any node");
  }
  return Status();
}

std::vector<std::byte> encode(const Bitstream& bs) {
  Writer w;
  for (char c : kMagic) w.put<char>(c);
  w.put<uint32_t>(bs.format_version());
  w.put<uint32_t>(0);  // flags
  w.put<uint64_t>(0);  // total size, patched below
  w.put<uint64_t>(bs.weights.size());
  w.put<uint64_t>(bs.activation_bytes);
  w.put<uint32_t>(static_cast<uint32_t>(bs.tensors.size()));
  w.put<uint32_t>(static_cast<uint32_t>(bs.nodes.size()));
  w.put<uint32_t>(static_cast<uint32_t>(bs.inputs.size()));
  w.put<uint32_t>(static_cast<uint32_t>(bs.outputs.size()));
  w.put<uint64_t>(0);  // checksum, patched below
  for (const BsTensor& t : bs.tensors) {
    w.put<uint8_t>(static_cast<uint8_t>(t.dtype));
    w.put<uint8_t>(static_cast<uint8_t>(t.storage));
    w.put<uint8_t>(static_cast<uint8_t>(t.shape.size()));
    w.put<uint8_t>(0);
    w.put<uint64_t>(t.offset);
    w.put<uint64_t>(t.bytes);
    for (int64_t d : t.shape) w.put<int64_t>(d);
  }
  for (const BsNode& n : bs.nodes) {
    w.put<uint16_t>(static_cast<uint16_t>(n.op));
    w.put<uint8_t>(static_cast<uint8_t>(n.inputs.size()));
    w.put<uint8_t>(static_cast<uint8_t>(n.params.size()));
    w.put<int32_t>(n.output);
    for (int32_t i : n.inputs) w.put<int32_t>(i);
    for (int64_t p : n.params) w.put<int64_t>(p);
  }
  for (uint32_t i : bs.inputs) w.put<uint32_t>(i);
  for (uint32_t i : bs.outputs) w.put<uint32_t>(i);
  w.bytes(bs.weights.data(), bs.weights.size());
  std::vector<std::byte>& out = w.out();
  w.put_at<uint64_t>(16, out.size());
  w.put_at<uint64_t>(56, fnv1a(out.data() + kHeaderSize, out.size() - kHeaderSize));
  return std::move(out);
}

Status decode(const void* data, size_t size, Bitstream* out) {
  const auto* p = static_cast<const std::byte*>(data);
  if (p == nullptr || size < kHeaderSize) {
    return bad("the blob has " + std::to_string(size) + " bytes, the header alone needs " +
               std::to_string(kHeaderSize));
  }
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0) return bad_at(0, "magic is not \"LOOMFPGA\"");
  Reader r(p, size, 8);
  uint32_t version = 0, flags = 0, nt = 0, nn = 0, ni = 0, no = 0;
  uint64_t total = 0, weight_bytes = 0, activation = 0, checksum = 0;
  r.get(&version);
  r.get(&flags);
  r.get(&total);
  r.get(&weight_bytes);
  r.get(&activation);
  r.get(&nt);
  r.get(&nn);
  r.get(&ni);
  r.get(&no);
  r.get(&checksum);
  if (version < kMinFormatVersion || version > kFormatVersion) {
    return bad_at(8, "format version " + std::to_string(version) + ", this device reads versions " +
                         std::to_string(kMinFormatVersion) + " to " + std::to_string(kFormatVersion));
  }
  if (flags != 0) return bad_at(12, "unknown flags " + std::to_string(flags));
  if (total != size) {
    return bad_at(16, "the header records " + std::to_string(total) + " bytes, the blob has " +
                          std::to_string(size));
  }
  if (fnv1a(p + kHeaderSize, size - kHeaderSize) != checksum) {
    return bad_at(56, "checksum mismatch: the blob is corrupt");
  }
  if (nt > kMaxTensors || nn > kMaxNodes || ni > nt || no > nt) {
    return bad_at(40, "counts out of range: " + std::to_string(nt) + " tensors, " + std::to_string(nn) +
                          " nodes, " + std::to_string(ni) + " inputs, " + std::to_string(no) + " outputs");
  }
  Bitstream bs;
  bs.activation_bytes = activation;
  // Each record is at least 20 (tensor) or 8 (node) bytes: no reserve beyond the blob.
  if (r.left() / 20 < nt) return bad_at(r.at(), std::to_string(nt) + " tensors do not fit the blob");
  bs.tensors.resize(nt);
  for (uint32_t i = 0; i < nt; ++i) {
    BsTensor& t = bs.tensors[i];
    uint8_t dtype = 0, storage = 0, rank = 0, pad = 0;
    const size_t at = r.at();
    if (!r.get(&dtype) || !r.get(&storage) || !r.get(&rank) || !r.get(&pad) || !r.get(&t.offset) ||
        !r.get(&t.bytes)) {
      return bad_at(at, "tensor " + std::to_string(i) + " is truncated");
    }
    if (storage > 2 || rank > LOOM_MAX_RANK || pad != 0) {
      return bad_at(at, "tensor " + std::to_string(i) + " has storage " + std::to_string(storage) +
                            ", rank " + std::to_string(rank));
    }
    // Checked as a number first: a code outside loom_dtype_t's range must
    // never be converted to it.
    if (dtype != LOOM_DTYPE_F32 && dtype != LOOM_DTYPE_I32 && dtype != LOOM_DTYPE_I8 &&
        dtype != LOOM_DTYPE_U8) {
      return bad_at(at, "tensor " + std::to_string(i) + " has dtype " + std::to_string(dtype) +
                            ", not f32/i32/i8/u8");
    }
    t.dtype = static_cast<loom_dtype_t>(dtype);
    t.storage = static_cast<Storage>(storage);
    t.shape.resize(rank);
    for (uint8_t d = 0; d < rank; ++d) {
      if (!r.get(&t.shape[d])) return bad_at(r.at(), "tensor " + std::to_string(i) + " is truncated");
    }
  }
  if (r.left() / 8 < nn) return bad_at(r.at(), std::to_string(nn) + " nodes do not fit the blob");
  bs.nodes.resize(nn);
  for (uint32_t i = 0; i < nn; ++i) {
    BsNode& n = bs.nodes[i];
    uint16_t op = 0;
    uint8_t inputs = 0, params = 0;
    const size_t at = r.at();
    if (!r.get(&op) || !r.get(&inputs) || !r.get(&params) || !r.get(&n.output)) {
      return bad_at(at, "node " + std::to_string(i) + " is truncated");
    }
    if (inputs > kMaxNodeInputs || params > kMaxParams) {
      return bad_at(at, "node " + std::to_string(i) + " has " + std::to_string(inputs) + " inputs and " +
                            std::to_string(params) + " parameters");
    }
    n.op = static_cast<Op>(op);
    n.inputs.resize(inputs);
    n.params.resize(params);
    for (auto& v : n.inputs) {
      if (!r.get(&v)) return bad_at(r.at(), "node " + std::to_string(i) + " is truncated");
    }
    for (auto& v : n.params) {
      if (!r.get(&v)) return bad_at(r.at(), "node " + std::to_string(i) + " is truncated");
    }
  }
  bs.inputs.resize(ni);
  bs.outputs.resize(no);
  for (auto& v : bs.inputs) {
    if (!r.get(&v)) return bad_at(r.at(), "the input list is truncated");
  }
  for (auto& v : bs.outputs) {
    if (!r.get(&v)) return bad_at(r.at(), "the output list is truncated");
  }
  if (r.left() != weight_bytes) {
    return bad_at(r.at(), "the weights take " + std::to_string(r.left()) + " bytes, the header records " +
                              std::to_string(weight_bytes));
  }
  bs.weights.assign(r.here(), r.here() + r.left());
  LOOM_SDK_RETURN_IF_ERROR(validate(bs));
  if (version == kStaticFormatVersion && bs.has_open_dims()) {
    return bad_at(8, "format version 1 has no open dimensions, but a tensor has one (format 2 carries them)");
  }
  *out = std::move(bs);
  return Status();
}

}  // namespace loom::fpga_stub
