#include "kernels/ops.hpp"
#include "kernels/registry_families.hpp"

namespace loom::kernels {

void register_nn_kernels(KernelRegistry& r) {
  r.add({"Gemm", &ops::gemm_run, &ops::gemm_infer});
  r.add({"MatMul", &ops::matmul_run, &ops::matmul_infer});
}

}  // namespace loom::kernels
