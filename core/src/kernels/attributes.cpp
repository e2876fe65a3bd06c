#include "kernels/kernel.hpp"

namespace loom::kernels {

const AttributeDef* Attributes::find(std::string_view name) const {
  for (const AttributeDef& a : attrs_) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

int64_t Attributes::get_int(std::string_view name, int64_t fallback) const {
  const AttributeDef* a = find(name);
  return a != nullptr && a->kind == AttributeKind::kInt ? a->i : fallback;
}

float Attributes::get_float(std::string_view name, float fallback) const {
  const AttributeDef* a = find(name);
  if (a == nullptr) return fallback;
  if (a->kind == AttributeKind::kFloat) return a->f;
  // Writers sometimes store an integral float as an int.
  if (a->kind == AttributeKind::kInt) return static_cast<float>(a->i);
  return fallback;
}

std::vector<int64_t> Attributes::get_ints(std::string_view name) const {
  const AttributeDef* a = find(name);
  return a != nullptr && a->kind == AttributeKind::kInts ? a->ints : std::vector<int64_t>{};
}

std::string_view Attributes::get_string(std::string_view name,
                                        std::string_view fallback) const {
  const AttributeDef* a = find(name);
  return a != nullptr && a->kind == AttributeKind::kString ? std::string_view(a->s)
                                                            : fallback;
}

std::vector<float> Attributes::get_floats(std::string_view name) const {
  const AttributeDef* a = find(name);
  return a != nullptr && a->kind == AttributeKind::kFloats ? a->floats : std::vector<float>{};
}

TensorRef Attributes::get_tensor(std::string_view name) const {
  const AttributeDef* a = find(name);
  if (a == nullptr || a->kind != AttributeKind::kTensor) return TensorRef{};
  // The attribute outlives the kernel call; kernels only read through `data`.
  return TensorRef{a->t_dtype, a->t_shape,
                   const_cast<std::byte*>(a->t_data.data()), a->t_data.size()};
}

Status needs_constant(std::string_view op, size_t index, std::string_view name) {
  return Status(StatusCode::kFailedPrecondition,
                std::string(op) + ": operand " + std::to_string(index) + " ('" +
                    std::string(name) + "') must be a constant: its values decide the output shape");
}

}  // namespace loom::kernels
