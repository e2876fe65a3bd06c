// Typed tensors and opset-aware calls for the reduce family's tests.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::reduce_testing {

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, double>) return DType::kF64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kU8;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kI8;
  if constexpr (std::is_same_v<T, Half>) return DType::kF16;
  return DType::kInvalid;
}

// An owned tensor of any dtype.
struct Tens {
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<std::byte> bytes;

  TensorRef ref() const {
    return TensorRef{dtype, shape, const_cast<std::byte*>(bytes.data()), bytes.size()};
  }
  template <typename T>
  std::vector<T> values() const {
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

template <typename T>
Tens make(Shape shape, const std::vector<T>& v) {
  Tens t{dtype_of<T>(), std::move(shape), std::vector<std::byte>(v.size() * sizeof(T))};
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

inline Tens bools(Shape shape, const std::vector<uint8_t>& v) {
  Tens t = make<uint8_t>(std::move(shape), v);
  t.dtype = DType::kBool;
  return t;
}

inline Tens f32(Shape shape, const std::vector<float>& v) { return make<float>(std::move(shape), v); }
inline Tens i64(Shape shape, const std::vector<int64_t>& v) {
  return make<int64_t>(std::move(shape), v);
}

inline Tens empty_like(DType dtype, Shape shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return Tens{dtype, std::move(shape), std::vector<std::byte>(n * dtype_size(dtype))};
}

inline Tens absent() { return Tens{}; }

inline AttributeDef iattr(std::string name, int64_t v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}

inline AttributeDef ints_attr(std::string name, std::vector<int64_t> v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInts;
  a.ints = std::move(v);
  return a;
}

inline AttributeDef str_attr(std::string name, std::string v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kString;
  a.s = std::move(v);
  return a;
}

inline const KernelRegistry& registry() {
  static const KernelRegistry r = KernelRegistry::reference();
  return r;
}

// Infers the outputs (every input a known constant), allocates them, runs.
struct Call {
  Status status;
  std::vector<Tens> out;
};

inline Call call(std::string_view op, const std::vector<Tens>& in,
                 const std::vector<AttributeDef>& attrs = {}, int32_t opset = 0) {
  const KernelInfo* k = registry().find(op);
  if (k == nullptr) return {not_found(std::string(op)), {}};
  Attributes a(attrs, opset);
  std::vector<TensorRef> refs;
  for (const Tens& t : in) refs.push_back(t.ref());
  std::vector<TensorType> types;
  for (size_t i = 0; i < in.size(); ++i) {
    types.push_back({in[i].dtype, in[i].shape, in[i].dtype == DType::kInvalid ? nullptr : &refs[i]});
  }
  auto inferred = k->infer(types, a);
  if (!inferred.ok()) return {inferred.status(), {}};
  Call c;
  std::vector<TensorRef> outs;
  for (const TensorType& t : *inferred) c.out.push_back(empty_like(t.dtype, t.shape));
  for (const Tens& t : c.out) outs.push_back(t.ref());
  c.status = k->run(refs, outs, a);
  return c;
}

// Runs with caller-made outputs (to test run()'s own checks).
inline Status run_with(std::string_view op, const std::vector<Tens>& in,
                       const std::vector<Tens>& out, const std::vector<AttributeDef>& attrs = {},
                       int32_t opset = 0) {
  const KernelInfo* k = registry().find(op);
  if (k == nullptr) return not_found(std::string(op));
  std::vector<TensorRef> refs, outs;
  for (const Tens& t : in) refs.push_back(t.ref());
  for (const Tens& t : out) outs.push_back(t.ref());
  return k->run(refs, outs, Attributes(attrs, opset));
}

inline Result<std::vector<TensorType>> infer_types(std::string_view op,
                                                   const std::vector<TensorType>& in,
                                                   const std::vector<AttributeDef>& attrs = {},
                                                   int32_t opset = 0) {
  const KernelInfo* k = registry().find(op);
  if (k == nullptr) return not_found(std::string(op));
  return k->infer(in, Attributes(attrs, opset));
}

// Every element of `got` within `tol` of `want`'s.
inline void expect_near_all(const std::vector<float>& got, const std::vector<float>& want,
                     float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// Whether the status message contains `text`.
inline bool contains(const Status& s, std::string_view text) {
  return s.message().find(text) != std::string::npos;
}

}  // namespace loom::kernels::reduce_testing
