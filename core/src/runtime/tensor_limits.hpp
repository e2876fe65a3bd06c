// The memory bound a program is loaded under when LoadOptions leaves it to
// the runtime. Private to the core (the conformance tools bind open graphs
// under the same bound).
#pragma once

#include <cstdint>

namespace loom {

// LoadOptions::max_tensor_bytes when left at zero: half of this machine's
// physical memory (1 TiB where the memory size is unknown).
uint64_t default_max_tensor_bytes();

}  // namespace loom
