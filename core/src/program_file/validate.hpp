// Index and range checks on a decoded program, shared by the writer (before
// it writes) and the reader (after it decodes: a hand-crafted file can hold
// any number).
#pragma once

#include <cstdint>
#include <span>

#include "loom/program.hpp"

namespace loom::container {

// Checks every cross reference of `program` against itself and against the
// segments, whose sizes are `segment_sizes`: artifact content segments,
// delegate variants, value and instruction indices, enum values, inline
// parameters inside their segment, memory slots inside their arena. The
// error (invalid_argument) names the table, the item index and the field,
// e.g. "functions[0].instructions[3].inputs[1]: value 9 out of range
// (function 'main' has 4 values)".
Status validate_program(const ProgramDef& program, std::span<const uint64_t> segment_sizes);

}  // namespace loom::container
