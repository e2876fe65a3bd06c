// Conversion between ProgramDef and the flatbuffer of schemas/program.fbs.
// The generated code is included only by fb_encode.cpp / fb_decode.cpp.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "loom/program.hpp"

namespace loom::container {

// Upper bounds handed to flatbuffers::Verifier, so that verifying a hostile
// flatbuffer costs work bounded by its size and these limits.
inline constexpr uint32_t kVerifierMaxDepth = 64;
inline constexpr uint32_t kVerifierMaxTables = 1'000'000;

// Serializes `program` (file identifier "LOOM"). Checks nothing: callers
// validate first.
std::vector<std::byte> encode_program(const ProgramDef& program);

// Verifies `flatbuffer` (identifier, bounds, depth, table count) and decodes
// it. Indices are not checked here: see validate_program. The bytes may sit
// at any address; misaligned input is copied before it is read.
Result<ProgramDef> decode_program(std::span<const std::byte> flatbuffer);

}  // namespace loom::container
