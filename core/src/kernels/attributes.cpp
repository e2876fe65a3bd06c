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

}  // namespace loom::kernels
