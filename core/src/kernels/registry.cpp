#include <algorithm>

#include "kernels/kernel.hpp"
#include "kernels/ops.hpp"

namespace loom::kernels {

KernelRegistry KernelRegistry::reference() {
  KernelRegistry r;
  r.add({"Add", &ops::add_run, &ops::add_infer});
  r.add({"Gemm", &ops::gemm_run, &ops::gemm_infer});
  r.add({"MatMul", &ops::matmul_run, &ops::matmul_infer});
  r.add({"Relu", &ops::relu_run, &ops::relu_infer});
  r.add({"Softmax", &ops::softmax_run, &ops::softmax_infer});
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
