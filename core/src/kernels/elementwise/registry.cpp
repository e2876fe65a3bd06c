#include "kernels/elementwise/common.hpp"
#include "kernels/registry_families.hpp"

namespace loom::kernels {

void register_elementwise_kernels(KernelRegistry& r) {
  elementwise::register_unary(r);
  elementwise::register_binary(r);
  elementwise::register_misc(r);
}

}  // namespace loom::kernels
