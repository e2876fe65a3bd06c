// Two finishing steps every program producer needs for a function: its
// memory plan and its ABI reflection. Shared by the compiler's emitter and
// tools/program_builder's ProgramBuilder so that both write the same layout.
#pragma once

#include <string>

#include "loom/program.hpp"

namespace loom {

// Places every intermediate (a value an instruction writes that is not an
// input, a result or a parameter) in one arena: liveness-based first fit,
// 64-byte aligned slots, a freed slot split when a smaller value reuses it.
// Replaces function.memory_plan.
void plan_function_memory(FunctionDef& function);

// The IREE-style reflection JSON of `function`: {"v":1, "a": argument type
// records such as ["ndarray","f32",2,1,784], "r": results, "names":
// {"a": [...], "r": [...]}}. An open dimension is null in its type record
// (IREE's notation, ["ndarray","f32",2,null,784]); when a function has any,
// "dims": {"a": [...], "r": [...]} gives per argument and dimension null
// (fixed) or {"symbol": "batch", "range": [1, 8]} (both keys optional).
std::string function_reflection(const FunctionDef& function);

}  // namespace loom
