// The compile entries of the function table (NULL until the compile side
// exists).
#pragma once

#include "loom/plugin.h"

namespace loom::vulkan {

using CompileSupportedFn = loom_status_t* (*)(loom_compile_supported_args_t*);
using CompileFn = loom_status_t* (*)(loom_compile_args_t*);

inline CompileSupportedFn compile_supported_entry() { return nullptr; }
inline CompileFn compile_entry() { return nullptr; }

}  // namespace loom::vulkan
