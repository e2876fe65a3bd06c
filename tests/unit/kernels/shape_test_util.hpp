// Typed test tensors and a call helper for the shape family's tests: infer
// with every operand constant, allocate the outputs, run.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"

namespace loom::kernels::shape_testing {

struct Tensor {
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<std::byte> bytes;

  TensorRef ref() const {
    return TensorRef{dtype, shape, const_cast<std::byte*>(bytes.data()), bytes.size()};
  }
  template <typename V>
  std::vector<V> values() const {
    std::vector<V> v(bytes.size() / sizeof(V));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

template <typename V>
Tensor make(DType dtype, Shape shape, const std::vector<V>& v) {
  Tensor t{dtype, std::move(shape), std::vector<std::byte>(v.size() * sizeof(V))};
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
inline Tensor f32(Shape s, const std::vector<float>& v) { return make(DType::kF32, std::move(s), v); }
inline Tensor i64(Shape s, const std::vector<int64_t>& v) { return make(DType::kI64, std::move(s), v); }
inline Tensor i32(Shape s, const std::vector<int32_t>& v) { return make(DType::kI32, std::move(s), v); }
inline Tensor ints(const std::vector<int64_t>& v) {
  return i64(Shape{static_cast<int64_t>(v.size())}, v);
}
inline Tensor absent() { return Tensor{}; }
inline std::vector<float> iota(size_t n, float start = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

inline AttributeDef attr_int(std::string name, int64_t v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}
inline AttributeDef attr_float(std::string name, float v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kFloat;
  a.f = v;
  return a;
}
inline AttributeDef attr_ints(std::string name, std::vector<int64_t> v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInts;
  a.ints = std::move(v);
  return a;
}
inline AttributeDef attr_floats(std::string name, std::vector<float> v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kFloats;
  a.floats = std::move(v);
  return a;
}
inline AttributeDef attr_str(std::string name, std::string v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kString;
  a.s = std::move(v);
  return a;
}
inline AttributeDef attr_tensor(std::string name, const Tensor& t) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kTensor;
  a.t_dtype = t.dtype;
  a.t_shape = t.shape;
  a.t_data = t.bytes;
  return a;
}

inline const KernelInfo& kernel(std::string_view op) {
  static const KernelRegistry registry = KernelRegistry::reference();
  return *registry.find(op);
}

// infer with every operand's contents known.
inline Result<std::vector<TensorType>> infer_all(std::string_view op, const std::vector<Tensor>& in,
                                                 const std::vector<AttributeDef>& attrs,
                                                 int32_t opset = 0) {
  std::vector<TensorRef> refs(in.size());
  std::vector<TensorType> types(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dtype == DType::kInvalid) continue;
    refs[i] = in[i].ref();
    types[i] = {in[i].dtype, in[i].shape, &refs[i]};
  }
  return kernel(op).infer(types, Attributes(attrs, opset));
}

// Runs with outputs of the given types (zero-filled).
inline Result<std::vector<Tensor>> run_with(std::string_view op, const std::vector<Tensor>& in,
                                            const std::vector<TensorType>& out_types,
                                            const std::vector<AttributeDef>& attrs,
                                            int32_t opset = 0) {
  std::vector<Tensor> outs;
  for (const TensorType& t : out_types) {
    auto n = element_count(t.shape);
    if (!n.ok()) return n.status();
    outs.push_back(Tensor{t.dtype, t.shape, std::vector<std::byte>(*n * dtype_size(t.dtype))});
  }
  std::vector<TensorRef> in_refs, out_refs;
  for (const Tensor& t : in) in_refs.push_back(t.ref());
  for (const Tensor& t : outs) out_refs.push_back(t.ref());
  Status st = kernel(op).run(in_refs, out_refs, Attributes(attrs, opset));
  if (!st.ok()) return st;
  return outs;
}

// infer then run.
inline Result<std::vector<Tensor>> call(std::string_view op, const std::vector<Tensor>& in,
                                        const std::vector<AttributeDef>& attrs = {},
                                        int32_t opset = 0) {
  LOOM_ASSIGN_OR_RETURN(std::vector<TensorType> types, infer_all(op, in, attrs, opset));
  return run_with(op, in, types, attrs, opset);
}

}  // namespace loom::kernels::shape_testing
