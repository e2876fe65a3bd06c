// The cpu-simd delegate blob: a small graph of f32 operators, versioned, in
// its own byte format. Header-only so that tools can build blobs without
// linking the plugin; includes only plugin.h and the standard library.
//
// Byte layout, all integers little-endian (see plugins/cpu-simd/README.md):
//   header   "LCPU" u32 version u32 tensor_count u32 input_count
//            u32 output_count u32 node_count                     (24 bytes)
//   tensors  tensor_count x { u32 dtype, u32 rank, rank x i64 dim }
//   inputs   input_count x u32 tensor index
//   outputs  output_count x u32 tensor index
//   nodes    node_count x { u32 op, u32 input_count, u32 output_count,
//                           i64 axis, f32 alpha, f32 beta, i32 trans_a,
//                           i32 trans_b, input_count x u32, output_count x u32 }
// Nothing may follow the last node.
//
// decode() checks everything it reads with bounded work and never allocates
// more than the blob's size justifies: the version, every count against the
// bytes that remain, every index, every shape (rank <= 8, dims >= 0, byte
// size fits in 62 bits), each operator's arity and attributes, each node's
// declared output shapes against the operator's shape rule, and that nodes
// come in topological order (a node reads only graph inputs or outputs of
// earlier nodes, and every tensor is written once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loom/plugin.h"

namespace loom::cpu_simd {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr char kMagic[4] = {'L', 'C', 'P', 'U'};
inline constexpr size_t kHeaderSize = 24;
inline constexpr uint32_t kMaxRank = LOOM_MAX_RANK;

enum class Op : uint32_t { kMatMul = 1, kGemm = 2, kAdd = 3, kRelu = 4, kSoftmax = 5 };

struct BlobTensor {
  loom_dtype_t dtype;
  std::vector<int64_t> shape;
};

struct BlobNode {
  Op op;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  int64_t axis = -1;               // Softmax
  float alpha = 1, beta = 1;       // Gemm
  int32_t trans_a = 0, trans_b = 0;  // Gemm
};

struct BlobGraph {
  std::vector<BlobTensor> tensors;
  std::vector<uint32_t> inputs, outputs;
  std::vector<BlobNode> nodes;
};

// The ONNX name of an operator, or "unknown".
inline const char* op_name(Op op) {
  switch (op) {
    case Op::kMatMul: return "MatMul";
    case Op::kGemm: return "Gemm";
    case Op::kAdd: return "Add";
    case Op::kRelu: return "Relu";
    case Op::kSoftmax: return "Softmax";
  }
  return "unknown";
}

namespace detail {

inline std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

inline void put_u32(std::vector<std::byte>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}
inline void put_u64(std::vector<std::byte>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}
inline void put_f32(std::vector<std::byte>& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  put_u32(out, bits);
}

// A bounds-checked little-endian cursor; every failed read names the byte
// offset and the field.
class Reader {
 public:
  Reader(const void* data, size_t size) : p_(static_cast<const unsigned char*>(data)), size_(size) {}
  size_t offset() const { return pos_; }
  // Moves past `n` bytes the caller has already checked.
  void skip(size_t n) { pos_ += n; }
  size_t remaining() const { return size_ - pos_; }

  bool u32(const char* field, uint32_t* v, std::string* error) {
    if (!need(4, field, error)) return false;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>(p_[pos_ + i]) << (8 * i);
    pos_ += 4;
    *v = r;
    return true;
  }
  bool u64(const char* field, uint64_t* v, std::string* error) {
    if (!need(8, field, error)) return false;
    uint64_t r = 0;
    for (int i = 0; i < 8; ++i) r |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += 8;
    *v = r;
    return true;
  }
  bool i64(const char* field, int64_t* v, std::string* error) {
    uint64_t u;
    if (!u64(field, &u, error)) return false;
    std::memcpy(v, &u, sizeof u);
    return true;
  }
  bool i32(const char* field, int32_t* v, std::string* error) {
    uint32_t u;
    if (!u32(field, &u, error)) return false;
    std::memcpy(v, &u, sizeof u);
    return true;
  }
  bool f32(const char* field, float* v, std::string* error) {
    uint32_t u;
    if (!u32(field, &u, error)) return false;
    std::memcpy(v, &u, sizeof u);
    return true;
  }
  // Fails unless `count` records of at least `min_bytes` each can still fit.
  bool fits(uint64_t count, size_t min_bytes, const char* what, std::string* error) const {
    if (count > remaining() / min_bytes) {
      *error = "byte " + std::to_string(pos_) + ": " + what + " count " + std::to_string(count) +
               " needs at least " + std::to_string(min_bytes) + " bytes each, " +
               std::to_string(remaining()) + " bytes remain";
      return false;
    }
    return true;
  }

 private:
  bool need(size_t n, const char* field, std::string* error) {
    if (remaining() < n) {
      *error = "byte " + std::to_string(pos_) + ": blob truncated reading " + field + " (" +
               std::to_string(n) + " bytes needed, " + std::to_string(remaining()) + " remain)";
      return false;
    }
    return true;
  }

  const unsigned char* p_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace detail

// Numpy broadcast of two shapes; false when they do not broadcast.
inline bool broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                             std::vector<int64_t>* out) {
  const size_t rank = a.size() > b.size() ? a.size() : b.size();
  out->assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    const size_t from_end = rank - d;
    const int64_t da = from_end <= a.size() ? a[a.size() - from_end] : 1;
    const int64_t db = from_end <= b.size() ? b[b.size() - from_end] : 1;
    if (da != db && da != 1 && db != 1) return false;
    (*out)[d] = da == 1 ? db : da;
  }
  return true;
}

// The output shape of `node` given its input shapes (ONNX rules); false with
// `*error` naming the operator and the mismatch.
inline bool infer_output_shape(const BlobNode& node,
                               const std::vector<const std::vector<int64_t>*>& in,
                               std::vector<int64_t>* out, std::string* error) {
  using detail::shape_string;
  const std::string op = op_name(node.op);
  switch (node.op) {
    case Op::kRelu:
    case Op::kSoftmax: {
      const std::vector<int64_t>& x = *in[0];
      if (node.op == Op::kSoftmax) {
        const int64_t rank = static_cast<int64_t>(x.size());
        if (node.axis < -rank || node.axis >= rank) {
          *error = op + ": axis " + std::to_string(node.axis) + " is out of range for input " +
                   shape_string(x);
          return false;
        }
      }
      *out = x;
      return true;
    }
    case Op::kAdd:
      if (!broadcast_shapes(*in[0], *in[1], out)) {
        *error = op + ": shapes do not broadcast: A is " + shape_string(*in[0]) + ", B is " +
                 shape_string(*in[1]);
        return false;
      }
      return true;
    case Op::kMatMul: {
      const std::vector<int64_t>& a = *in[0];
      const std::vector<int64_t>& b = *in[1];
      const std::string both = "A is " + shape_string(a) + ", B is " + shape_string(b);
      if (a.empty() || b.empty()) {
        *error = op + ": operands must have rank >= 1: " + both;
        return false;
      }
      const int64_t ka = a.back();
      const int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
      if (ka != kb) {
        *error = op + ": inner dimensions differ: " + both;
        return false;
      }
      std::vector<int64_t> ba(a.begin(), a.end() - (a.size() >= 2 ? 2 : a.size()));
      std::vector<int64_t> bb(b.begin(), b.end() - (b.size() >= 2 ? 2 : b.size()));
      if (!broadcast_shapes(ba, bb, out)) {
        *error = op + ": batch dimensions do not broadcast: " + both;
        return false;
      }
      if (a.size() >= 2) out->push_back(a[a.size() - 2]);
      if (b.size() >= 2) out->push_back(b.back());
      return true;
    }
    case Op::kGemm: {
      const std::vector<int64_t>& a = *in[0];
      const std::vector<int64_t>& b = *in[1];
      if (a.size() != 2 || b.size() != 2) {
        *error = op + ": A and B must be 2-D: A is " + shape_string(a) + ", B is " + shape_string(b);
        return false;
      }
      const int64_t m = node.trans_a ? a[1] : a[0];
      const int64_t k = node.trans_a ? a[0] : a[1];
      const int64_t kb = node.trans_b ? b[1] : b[0];
      const int64_t n = node.trans_b ? b[0] : b[1];
      if (k != kb) {
        *error = op + ": inner dimensions differ: A is " + shape_string(a) + ", B is " +
                 shape_string(b) + " (trans_a " + std::to_string(node.trans_a) + ", trans_b " +
                 std::to_string(node.trans_b) + ")";
        return false;
      }
      *out = {m, n};
      if (in.size() == 3) {
        std::vector<int64_t> c_out;
        if (!broadcast_shapes(*in[2], *out, &c_out) || c_out != *out) {
          *error = op + ": C is " + shape_string(*in[2]) + ", does not broadcast to " +
                   shape_string(*out);
          return false;
        }
      }
      return true;
    }
  }
  *error = "unknown operator " + std::to_string(static_cast<uint32_t>(node.op));
  return false;
}

// Checks a decoded or hand-built graph (everything listed in the header
// comment after the byte-level checks); false with `*error` naming the
// tensor, node or field.
inline bool validate(const BlobGraph& g, std::string* error) {
  const size_t tensor_count = g.tensors.size();
  for (size_t t = 0; t < tensor_count; ++t) {
    const BlobTensor& bt = g.tensors[t];
    const std::string where = "tensor " + std::to_string(t);
    if (bt.dtype != LOOM_DTYPE_F32) {
      *error = where + ": dtype " + std::to_string(static_cast<int>(bt.dtype)) +
               " is not supported (cpu-simd format 1 holds f32 only)";
      return false;
    }
    if (bt.shape.size() > kMaxRank) {
      *error = where + ": rank " + std::to_string(bt.shape.size()) + " exceeds " +
               std::to_string(kMaxRank);
      return false;
    }
    uint64_t elements = 1;
    for (size_t d = 0; d < bt.shape.size(); ++d) {
      const int64_t dim = bt.shape[d];
      if (dim < 0) {
        *error = where + ": dimension " + std::to_string(d) + " is " + std::to_string(dim);
        return false;
      }
      // Keep byte sizes below 2^62 so that every later product is safe.
      const uint64_t limit = (uint64_t{1} << 60);
      if (dim != 0 && elements > limit / static_cast<uint64_t>(dim)) {
        *error = where + ": shape " + detail::shape_string(bt.shape) + " is too large";
        return false;
      }
      elements *= static_cast<uint64_t>(dim);
    }
  }
  // 0: undefined, 1: graph input, 2: written by a node.
  std::vector<uint8_t> defined(tensor_count, 0);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const uint32_t t = g.inputs[i];
    if (t >= tensor_count) {
      *error = "graph input " + std::to_string(i) + ": tensor index " + std::to_string(t) +
               " out of range (" + std::to_string(tensor_count) + " tensors)";
      return false;
    }
    if (defined[t]) {
      *error = "graph input " + std::to_string(i) + ": tensor " + std::to_string(t) +
               " is listed twice";
      return false;
    }
    defined[t] = 1;
  }
  std::vector<const std::vector<int64_t>*> in_shapes;
  std::vector<int64_t> inferred;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const BlobNode& node = g.nodes[n];
    std::string where = "node " + std::to_string(n);
    size_t min_in = 0, max_in = 0;
    switch (node.op) {
      case Op::kMatMul: case Op::kAdd: min_in = max_in = 2; break;
      case Op::kGemm: min_in = 2; max_in = 3; break;
      case Op::kRelu: case Op::kSoftmax: min_in = max_in = 1; break;
      default:
        *error = where + ": unknown operator " + std::to_string(static_cast<uint32_t>(node.op));
        return false;
    }
    where += " (" + std::string(op_name(node.op)) + ")";
    if (node.inputs.size() < min_in || node.inputs.size() > max_in) {
      *error = where + ": has " + std::to_string(node.inputs.size()) + " inputs, needs " +
               std::to_string(min_in) + (min_in == max_in ? "" : " to " + std::to_string(max_in));
      return false;
    }
    if (node.outputs.size() != 1) {
      *error = where + ": has " + std::to_string(node.outputs.size()) + " outputs, needs 1";
      return false;
    }
    if (node.op == Op::kGemm &&
        (node.trans_a < 0 || node.trans_a > 1 || node.trans_b < 0 || node.trans_b > 1)) {
      *error = where + ": trans_a and trans_b must be 0 or 1, got " +
               std::to_string(node.trans_a) + " and " + std::to_string(node.trans_b);
      return false;
    }
    in_shapes.clear();
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const uint32_t t = node.inputs[i];
      if (t >= tensor_count) {
        *error = where + ": input " + std::to_string(i) + " tensor index " + std::to_string(t) +
                 " out of range (" + std::to_string(tensor_count) + " tensors)";
        return false;
      }
      if (!defined[t]) {
        *error = where + ": input " + std::to_string(i) + " reads tensor " + std::to_string(t) +
                 ", which is neither a graph input nor written by an earlier node";
        return false;
      }
      in_shapes.push_back(&g.tensors[t].shape);
    }
    const uint32_t o = node.outputs[0];
    if (o >= tensor_count) {
      *error = where + ": output tensor index " + std::to_string(o) + " out of range (" +
               std::to_string(tensor_count) + " tensors)";
      return false;
    }
    if (defined[o]) {
      *error = where + ": output tensor " + std::to_string(o) + " is already " +
               (defined[o] == 1 ? "a graph input" : "written by an earlier node");
      return false;
    }
    std::string why;
    if (!infer_output_shape(node, in_shapes, &inferred, &why)) {
      *error = where + ": " + why;
      return false;
    }
    if (inferred != g.tensors[o].shape) {
      *error = where + ": output tensor " + std::to_string(o) + " is declared " +
               detail::shape_string(g.tensors[o].shape) + " but the operator produces " +
               detail::shape_string(inferred);
      return false;
    }
    defined[o] = 2;
  }
  std::vector<uint8_t> listed(tensor_count, 0);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const uint32_t t = g.outputs[i];
    if (t >= tensor_count) {
      *error = "graph output " + std::to_string(i) + ": tensor index " + std::to_string(t) +
               " out of range (" + std::to_string(tensor_count) + " tensors)";
      return false;
    }
    if (defined[t] != 2) {
      *error = "graph output " + std::to_string(i) + ": tensor " + std::to_string(t) +
               " is not written by any node";
      return false;
    }
    if (listed[t]) {
      *error = "graph output " + std::to_string(i) + ": tensor " + std::to_string(t) +
               " is listed twice";
      return false;
    }
    listed[t] = 1;
  }
  return true;
}

// Serializes `g` in format kFormatVersion. Does not validate: decode() does.
inline std::vector<std::byte> encode(const BlobGraph& g) {
  using detail::put_u32;
  std::vector<std::byte> out;
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  put_u32(out, kFormatVersion);
  put_u32(out, static_cast<uint32_t>(g.tensors.size()));
  put_u32(out, static_cast<uint32_t>(g.inputs.size()));
  put_u32(out, static_cast<uint32_t>(g.outputs.size()));
  put_u32(out, static_cast<uint32_t>(g.nodes.size()));
  for (const BlobTensor& t : g.tensors) {
    put_u32(out, static_cast<uint32_t>(t.dtype));
    put_u32(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) detail::put_u64(out, static_cast<uint64_t>(d));
  }
  for (uint32_t i : g.inputs) put_u32(out, i);
  for (uint32_t o : g.outputs) put_u32(out, o);
  for (const BlobNode& n : g.nodes) {
    put_u32(out, static_cast<uint32_t>(n.op));
    put_u32(out, static_cast<uint32_t>(n.inputs.size()));
    put_u32(out, static_cast<uint32_t>(n.outputs.size()));
    detail::put_u64(out, static_cast<uint64_t>(n.axis));
    detail::put_f32(out, n.alpha);
    detail::put_f32(out, n.beta);
    put_u32(out, static_cast<uint32_t>(n.trans_a));
    put_u32(out, static_cast<uint32_t>(n.trans_b));
    for (uint32_t i : n.inputs) put_u32(out, i);
    for (uint32_t o : n.outputs) put_u32(out, o);
  }
  return out;
}

// Parses and validates a blob. Returns false and fills `*error` (naming the
// byte offset or the graph element) on bad input; bounded, never crashes.
inline bool decode(const void* data, size_t size, BlobGraph* out, std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  if (out == nullptr || (data == nullptr && size != 0)) {
    *error = "decode: null argument";
    return false;
  }
  if (size < kHeaderSize) {
    *error = "byte 0: blob of " + std::to_string(size) + " bytes is shorter than the " +
             std::to_string(kHeaderSize) + "-byte header";
    return false;
  }
  if (std::memcmp(data, kMagic, 4) != 0) {
    *error = "byte 0: bad magic, expected \"LCPU\"";
    return false;
  }
  detail::Reader r(data, size);
  r.skip(sizeof kMagic);
  auto at = [](size_t offset) { return "byte " + std::to_string(offset); };
  uint32_t version = 0, tensors = 0, inputs = 0, outputs = 0, nodes = 0;
  if (!r.u32("version", &version, error)) return false;
  if (version != kFormatVersion) {
    *error = "byte 4: format version " + std::to_string(version) + " is not supported (this "
             "reader handles " + std::to_string(kFormatVersion) + ")";
    return false;
  }
  if (!r.u32("tensor_count", &tensors, error) || !r.u32("input_count", &inputs, error) ||
      !r.u32("output_count", &outputs, error) || !r.u32("node_count", &nodes, error)) {
    return false;
  }
  BlobGraph g;
  if (!r.fits(tensors, 8, "tensor", error)) return false;
  g.tensors.resize(tensors);
  for (uint32_t t = 0; t < tensors; ++t) {
    const size_t start = r.offset();
    uint32_t dtype = 0, rank = 0;
    if (!r.u32("tensor dtype", &dtype, error) || !r.u32("tensor rank", &rank, error)) return false;
    if (rank > kMaxRank) {
      *error = at(start) + ": tensor " + std::to_string(t) + ": rank " + std::to_string(rank) +
               " exceeds " + std::to_string(kMaxRank);
      return false;
    }
    if (dtype != LOOM_DTYPE_F32) {
      *error = at(start) + ": tensor " + std::to_string(t) + ": dtype " + std::to_string(dtype) +
               " is not supported (cpu-simd format 1 holds f32 only)";
      return false;
    }
    g.tensors[t].dtype = static_cast<loom_dtype_t>(dtype);
    g.tensors[t].shape.resize(rank);
    for (uint32_t d = 0; d < rank; ++d) {
      if (!r.i64("tensor dimension", &g.tensors[t].shape[d], error)) return false;
    }
  }
  if (!r.fits(inputs, 4, "graph input", error)) return false;
  g.inputs.resize(inputs);
  for (uint32_t& i : g.inputs) {
    if (!r.u32("graph input", &i, error)) return false;
  }
  if (!r.fits(outputs, 4, "graph output", error)) return false;
  g.outputs.resize(outputs);
  for (uint32_t& o : g.outputs) {
    if (!r.u32("graph output", &o, error)) return false;
  }
  constexpr size_t kNodeFixedBytes = 40;
  if (!r.fits(nodes, kNodeFixedBytes, "node", error)) return false;
  g.nodes.resize(nodes);
  for (uint32_t n = 0; n < nodes; ++n) {
    BlobNode& node = g.nodes[n];
    const size_t start = r.offset();
    uint32_t op = 0, n_in = 0, n_out = 0;
    if (!r.u32("node op", &op, error) || !r.u32("node input_count", &n_in, error) ||
        !r.u32("node output_count", &n_out, error) || !r.i64("node axis", &node.axis, error) ||
        !r.f32("node alpha", &node.alpha, error) || !r.f32("node beta", &node.beta, error) ||
        !r.i32("node trans_a", &node.trans_a, error) ||
        !r.i32("node trans_b", &node.trans_b, error)) {
      return false;
    }
    if (op < static_cast<uint32_t>(Op::kMatMul) || op > static_cast<uint32_t>(Op::kSoftmax)) {
      *error = at(start) + ": node " + std::to_string(n) + ": unknown operator " +
               std::to_string(op);
      return false;
    }
    node.op = static_cast<Op>(op);
    if (!r.fits(uint64_t{n_in} + n_out, 4, "node operand", error)) return false;
    node.inputs.resize(n_in);
    node.outputs.resize(n_out);
    for (uint32_t& i : node.inputs) {
      if (!r.u32("node input", &i, error)) return false;
    }
    for (uint32_t& o : node.outputs) {
      if (!r.u32("node output", &o, error)) return false;
    }
  }
  if (r.remaining() != 0) {
    *error = at(r.offset()) + ": " + std::to_string(r.remaining()) +
             " unexpected bytes after the last node";
    return false;
  }
  if (!validate(g, error)) return false;
  *out = std::move(g);
  return true;
}

}  // namespace loom::cpu_simd
