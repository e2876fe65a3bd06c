// Small helpers for calling reference kernels on owned test data.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel.hpp"

namespace loom::kernels::testing {

struct Buf {
  Shape shape;
  std::vector<float> data;
  DType dtype = DType::kF32;

  TensorRef ref() const {
    return TensorRef{dtype, shape, const_cast<float*>(data.data()), data.size() * sizeof(float)};
  }
};

inline Buf buf(Shape shape, std::vector<float> data) { return Buf{std::move(shape), std::move(data)}; }

inline Buf zeros(Shape shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return Buf{std::move(shape), std::vector<float>(n, 0.0f)};
}

inline AttributeDef int_attr(std::string name, int64_t v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}

inline AttributeDef float_attr(std::string name, float v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kFloat;
  a.f = v;
  return a;
}

// Runs `op` from the reference registry.
inline Status run(std::string_view op, const std::vector<const Buf*>& in,
                  const std::vector<Buf*>& out, const std::vector<AttributeDef>& attrs = {}) {
  static const KernelRegistry registry = KernelRegistry::reference();
  const KernelInfo* k = registry.find(op);
  if (k == nullptr) return not_found(std::string(op));
  std::vector<TensorRef> ins, outs;
  for (const Buf* b : in) ins.push_back(b->ref());
  for (Buf* b : out) outs.push_back(b->ref());
  return k->run(ins, outs, Attributes(attrs));
}

inline Result<std::vector<TensorType>> infer(std::string_view op, const std::vector<TensorType>& in,
                                             const std::vector<AttributeDef>& attrs = {}) {
  const KernelRegistry registry = KernelRegistry::reference();
  const KernelInfo* k = registry.find(op);
  if (k == nullptr) return not_found(std::string(op));
  return k->infer(in, Attributes(attrs));
}

}  // namespace loom::kernels::testing
