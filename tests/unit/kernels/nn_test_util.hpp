// Typed test buffers and call helpers for the nn family's tests: operands of
// any dtype, absent optional operands (nullptr), attributes of every kind and
// an explicit opset.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"

namespace loom::kernels::nntest {

struct TBuf {
  DType dtype = DType::kF32;
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
TBuf typed(DType dtype, Shape shape, const std::vector<T>& values) {
  TBuf b{dtype, std::move(shape), std::vector<std::byte>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(b.bytes.data(), values.data(), b.bytes.size());
  return b;
}

inline TBuf f32(Shape shape, const std::vector<float>& v) { return typed(DType::kF32, std::move(shape), v); }

// A zero-filled output of `dtype`.
inline TBuf out(DType dtype, Shape shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return TBuf{dtype, std::move(shape), std::vector<std::byte>(n * dtype_size(dtype))};
}
inline TBuf out(Shape shape) { return out(DType::kF32, std::move(shape)); }

inline AttributeDef iattr(std::string name, int64_t v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}
inline AttributeDef fattr(std::string name, float v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kFloat;
  a.f = v;
  return a;
}
inline AttributeDef ints(std::string name, std::vector<int64_t> v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInts;
  a.ints = std::move(v);
  return a;
}
inline AttributeDef sattr(std::string name, std::string v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kString;
  a.s = std::move(v);
  return a;
}

inline const KernelInfo& kernel(std::string_view op) {
  static const KernelRegistry registry = KernelRegistry::reference();
  const KernelInfo* k = registry.find(op);
  if (k == nullptr) {
    ADD_FAILURE() << "no kernel " << op;
    static const KernelInfo none{};
    return none;
  }
  return *k;
}

// Runs `op`; a nullptr input or output is a left-out optional operand.
inline Status run(std::string_view op, const std::vector<const TBuf*>& in,
                  const std::vector<TBuf*>& outs, const std::vector<AttributeDef>& attrs = {},
                  int32_t opset = 0) {
  std::vector<TensorRef> ins, os;
  for (const TBuf* b : in) ins.push_back(b ? b->ref() : TensorRef{});
  for (TBuf* b : outs) os.push_back(b ? b->ref() : TensorRef{});
  const KernelInfo& k = kernel(op);
  if (k.run == nullptr) return not_found(std::string(op));
  return k.run(ins, os, Attributes(attrs, opset));
}

inline Result<std::vector<TensorType>> infer(std::string_view op,
                                             const std::vector<TensorType>& in,
                                             const std::vector<AttributeDef>& attrs = {},
                                             int32_t opset = 0) {
  const KernelInfo& k = kernel(op);
  if (k.infer == nullptr) return not_found(std::string(op));
  return k.infer(in, Attributes(attrs, opset));
}

// Infers the output shape of `op` from the buffers' types, checks it is
// `want`, and runs into a fresh output of that shape: the infer/run
// agreement every test relies on.
inline TBuf infer_and_run(std::string_view op, const std::vector<const TBuf*>& in,
                          const Shape& want, const std::vector<AttributeDef>& attrs = {},
                          int32_t opset = 0) {
  std::vector<TensorType> types;
  for (const TBuf* b : in) types.push_back(b ? TensorType{b->dtype, b->shape} : TensorType{});
  auto t = infer(op, types, attrs, opset);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return TBuf{};
  EXPECT_EQ((*t)[0].shape, want);
  TBuf y = out((*t)[0].dtype, (*t)[0].shape);
  Status s = run(op, in, {&y}, attrs, opset);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return y;
}

inline void expect_near(const std::vector<float>& got, const std::vector<float>& want,
                        float tol = 1e-4f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "element " << i;
  }
}

// The message of a failed status, or "" when it succeeded.
inline std::string message(const Status& s) { return s.ok() ? "" : std::string(s.message()); }
inline bool contains(const Status& s, std::string_view part) {
  return !s.ok() && std::string(s.message()).find(part) != std::string::npos;
}

// 1, 2, ..., n.
inline std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

}  // namespace loom::kernels::nntest
