// tiny-accel's blob: encode, decode and validate a Program (program.hpp).
#include <string>

#include "program.hpp"

namespace tiny_accel {
namespace {

using loom::sdk::incompatible;

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Status check_op(const Program& p, size_t index, const Op& op) {
  const std::string where = "op " + std::to_string(index);
  const size_t n = p.tensors.size();
  const bool unary = op.code == OpCode::kRelu;
  if (op.code < OpCode::kAdd || op.code > OpCode::kMatMul) {
    return incompatible(where + ": unknown opcode " + std::to_string(static_cast<int>(op.code)));
  }
  if (op.a >= n || op.out >= n || (unary ? op.b != kNoTensor : op.b >= n)) {
    return incompatible(where + ": a tensor id is out of range (" + std::to_string(n) +
                        " tensors)");
  }
  const auto& a = p.tensors[op.a].dims;
  const auto& out = p.tensors[op.out].dims;
  std::vector<int64_t> expected;
  if (op.code == OpCode::kRelu) {
    expected = a;
  } else if (op.code == OpCode::kMatMul) {
    const auto& b = p.tensors[op.b].dims;
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0]) {
      return incompatible(where + ": MatMul of " + shape_string(a) + " and " + shape_string(b));
    }
    expected = {a[0], b[1]};
  } else if (!broadcast_shape(a, p.tensors[op.b].dims, &expected)) {
    return incompatible(where + ": " + shape_string(a) + " and " +
                        shape_string(p.tensors[op.b].dims) + " do not broadcast");
  }
  if (expected != out) {
    return incompatible(where + ": writes " + shape_string(out) + ", its operands give " +
                        shape_string(expected));
  }
  return Status();
}

}  // namespace

bool broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>* out) {
  const size_t rank = a.size() > b.size() ? a.size() : b.size();
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

Status validate(const Program& p) {
  const size_t n = p.tensors.size();
  std::vector<bool> ready(n, false);  // readable at this point of the program
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = p.tensors[i];
    const std::string where = "tensor " + std::to_string(i);
    if (t.kind > Kind::kValue) return incompatible(where + ": unknown kind");
    if (t.dims.size() > kMaxRank) return incompatible(where + ": rank above " + std::to_string(kMaxRank));
    uint64_t elements = 1;
    for (int64_t d : t.dims) {
      if (d < 0 || (d != 0 && elements > kMaxElements / static_cast<uint64_t>(d))) {
        return incompatible(where + ": shape " + shape_string(t.dims) + " is negative or too large");
      }
      elements *= static_cast<uint64_t>(d);
    }
    if (t.kind == Kind::kConstant && t.data.size() != elements) {
      return incompatible(where + ": " + std::to_string(t.data.size()) + " values for " +
                          std::to_string(elements) + " elements");
    }
    ready[i] = t.kind == Kind::kConstant;
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const uint32_t t = p.inputs[i];
    if (t >= n || p.tensors[t].kind != Kind::kInput || ready[t]) {
      return incompatible("input " + std::to_string(i) + ": not a distinct input tensor");
    }
    ready[t] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (p.tensors[i].kind == Kind::kInput && !ready[i]) {
      return incompatible("tensor " + std::to_string(i) + " is an input no execute input fills");
    }
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (Status s = check_op(p, i, op); !s.ok()) return s;
    if (!ready[op.a] || (op.b != kNoTensor && !ready[op.b])) {
      return incompatible("op " + std::to_string(i) + " reads a value no earlier op wrote");
    }
    if (p.tensors[op.out].kind != Kind::kValue || ready[op.out]) {
      return incompatible("op " + std::to_string(i) + " writes tensor " + std::to_string(op.out) +
                          ", which is not a value or is written twice");
    }
    ready[op.out] = true;
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const uint32_t t = p.outputs[i];
    if (t >= n || p.tensors[t].kind != Kind::kValue || !ready[t]) {
      return incompatible("output " + std::to_string(i) + ": not a value an op writes");
    }
  }
  return Status();
}

std::vector<uint8_t> encode(const Program& p) {
  loom::sdk::BlobWriter w(kMagic, kFormatVersion);
  w.u32(static_cast<uint32_t>(p.tensors.size()));
  for (const Tensor& t : p.tensors) {
    w.u8(static_cast<uint8_t>(t.kind));
    w.u32(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) w.i64(d);
    if (t.kind == Kind::kConstant) {
      for (float v : t.data) w.f32(v);
    }
  }
  for (const auto* list : {&p.inputs, &p.outputs}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (uint32_t id : *list) w.u32(id);
  }
  w.u32(static_cast<uint32_t>(p.ops.size()));
  for (const Op& op : p.ops) {
    w.u8(static_cast<uint8_t>(op.code));
    w.u32(op.a);
    w.u32(op.b);
    w.u32(op.out);
  }
  return w.finish();
}

Status decode(const loom::sdk::Blob& blob, Program* out) {
  if (std::string(blob.loader_key) != kLoaderKey) {
    return incompatible(std::string("tiny-accel serves loader key \"") + kLoaderKey + "\", not \"" +
                        blob.loader_key + "\"");
  }
  loom::sdk::BlobHeader header;
  LOOM_SDK_RETURN_IF_ERROR(
      loom::sdk::read_blob_header(blob, kMagic, kFormatVersion, kFormatVersion, &header));
  loom::sdk::BlobReader r(header);
  Program p;
  // Every count is checked against the bytes left before anything is
  // allocated for it, so a corrupt count cannot ask for more memory than
  // the blob's own size.
  auto count = [&](uint32_t* n, size_t min_bytes_each) {
    return r.u32(n) && *n <= r.remaining() / min_bytes_each;
  };
  uint32_t tensors = 0;
  if (!count(&tensors, 5)) return r.ok() ? incompatible("blob: tensor count too large") : r.status();
  p.tensors.resize(tensors);
  for (Tensor& t : p.tensors) {
    uint8_t kind = 0;
    uint32_t rank = 0;
    if (!r.u8(&kind) || !r.u32(&rank)) return r.status();
    if (rank > kMaxRank) return incompatible("blob: a tensor of rank " + std::to_string(rank));
    t.kind = static_cast<Kind>(kind);
    t.dims.resize(rank);
    for (int64_t& d : t.dims) r.i64(&d);
    if (!r.ok()) return r.status();
    if (t.kind == Kind::kConstant) {
      uint64_t elements = 1;
      for (int64_t d : t.dims) {
        if (d < 0 || (d != 0 && elements > (r.remaining() / 4) / static_cast<uint64_t>(d))) {
          return incompatible("blob: a constant larger than the blob");
        }
        elements *= static_cast<uint64_t>(d);
      }
      t.data.resize(elements);
      for (float& v : t.data) r.f32(&v);
    }
  }
  for (auto* list : {&p.inputs, &p.outputs}) {
    uint32_t n = 0;
    if (!count(&n, 4)) return r.ok() ? incompatible("blob: id list too long") : r.status();
    list->resize(n);
    for (uint32_t& id : *list) r.u32(&id);
  }
  uint32_t ops = 0;
  if (!count(&ops, 13)) return r.ok() ? incompatible("blob: op count too large") : r.status();
  p.ops.resize(ops);
  for (Op& op : p.ops) {
    uint8_t code = 0;
    r.u8(&code);
    r.u32(&op.a);
    r.u32(&op.b);
    r.u32(&op.out);
    op.code = static_cast<OpCode>(code);
  }
  if (!r.ok()) return r.status();
  if (r.remaining() != 0) {
    return incompatible("blob: " + std::to_string(r.remaining()) + " bytes after the program");
  }
  LOOM_SDK_RETURN_IF_ERROR(validate(p));
  *out = std::move(p);
  return Status();
}

}  // namespace tiny_accel
