// Which cpu-simd blob format a graph needs (format_version_for: the oldest
// that holds it, so that older plugins keep reading what they can), and the
// range this build reads. The formats themselves are described in
// blob_format.hpp.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/cpu_simd/blob_dtype_rules.hpp"
#include "loom/cpu_simd/blob_ops.hpp"
#include "loom/cpu_simd/blob_shape_rules.hpp"

namespace loom::cpu_simd {

inline constexpr uint32_t kFormatVersion = 12;
inline constexpr uint32_t kMinFormatVersion = 1;

// Whether `shape` has an open dimension (-1, format 5).
inline bool is_open(const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d < 0) return true;
  }
  return false;
}

// Whether any tensor of `g` has an open dimension: such a graph is
// executed through bind_shapes, one concrete graph per binding.
inline bool has_open_dims(const BlobGraph& g) {
  for (const BlobTensor& t : g.tensors) {
    if (is_open(t.shape)) return true;
  }
  return false;
}

// The oldest format that holds `g`: 5 when a tensor has an open dimension or
// a Copy carries a shape spec, 4 otherwise (so static blobs stay readable by
// plugins that know formats 1 to 4).
inline uint32_t format_version_for(const BlobGraph& g) {
  for (const BlobNode& n : g.nodes) {
    if (n.op == Op::kQLinearConvTranspose) return 12;
  }
  for (const BlobNode& n : g.nodes) {
    if (!n.outputs.empty() && n.outputs[0] < g.tensors.size() && uses_format11(n, g.tensors[n.outputs[0]].dtype)) {
      return 11;
    }
  }
  for (const BlobNode& n : g.nodes) {
    if (uses_format10(n) || requantizes_round_first(n)) return 10;
    if (n.op == Op::kCast && !n.inputs.empty() && n.inputs[0] < g.tensors.size() &&
        quant_dtype_code(g.tensors[n.inputs[0]].dtype)) {
      return 10;
    }
  }
  for (const BlobNode& n : g.nodes) {
    if (uses_format9(n)) return 9;
  }
  for (const BlobNode& n : g.nodes) {
    if (is_open_resize(n)) return 8;
  }
  for (const BlobNode& n : g.nodes) {
    if (uses_format7(n)) return 7;
  }
  for (const BlobTensor& t : g.tensors) {
    if (quant_dtype_code(t.dtype) || (t.constant && t.dtype == LOOM_DTYPE_I32)) return 6;
  }
  for (const BlobNode& n : g.nodes) {
    if (static_cast<uint32_t>(n.op) > kLastOpV5) return 6;
  }
  if (has_open_dims(g)) return 5;
  for (const BlobNode& n : g.nodes) {
    if (n.op == Op::kCopy && !n.ints.empty()) return 5;
  }
  return 4;
}

}  // namespace loom::cpu_simd
