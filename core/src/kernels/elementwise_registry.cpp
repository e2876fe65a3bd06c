#include "kernels/ops.hpp"
#include "kernels/registry_families.hpp"

namespace loom::kernels {

void register_elementwise_kernels(KernelRegistry& r) {
  r.add({"Add", &ops::add_run, &ops::add_infer});
  r.add({"Relu", &ops::relu_run, &ops::relu_infer});
}

}  // namespace loom::kernels
