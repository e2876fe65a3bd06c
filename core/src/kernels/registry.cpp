#include <algorithm>

#include "kernels/kernel.hpp"
#include "kernels/registry_families.hpp"

namespace loom::kernels {

KernelRegistry KernelRegistry::reference() {
  KernelRegistry r;
  register_elementwise_kernels(r);
  register_nn_kernels(r);
  register_shape_kernels(r);
  register_reduce_kernels(r);
  return r;
}

const KernelInfo* KernelRegistry::find(std::string_view op) const {
  for (const KernelInfo& k : kernels_) {
    if (k.op == op) return &k;
  }
  return nullptr;
}

std::vector<std::string_view> KernelRegistry::ops() const {
  std::vector<std::string_view> names;
  names.reserve(kernels_.size());
  for (const KernelInfo& k : kernels_) names.push_back(k.op);
  std::sort(names.begin(), names.end());
  return names;
}

void KernelRegistry::add(KernelInfo info) {
  // A later entry for the same operator replaces the earlier one, so callers
  // can override a reference kernel.
  for (KernelInfo& k : kernels_) {
    if (k.op == info.op) {
      k = info;
      return;
    }
  }
  kernels_.push_back(info);
}

}  // namespace loom::kernels
