#include "kernels/ops.hpp"
#include "kernels/registry_families.hpp"

namespace loom::kernels {

void register_reduce_kernels(KernelRegistry& r) {
  r.add({"Softmax", &ops::softmax_run, &ops::softmax_infer});
}

}  // namespace loom::kernels
