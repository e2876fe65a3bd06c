// Oracles for the cpu-simd blob fuzz tests, written independently of the
// decoder so that a decoder which stops checking something is caught:
// a mutated blob must either be refused with a message that says where the
// problem is, or decode to a graph that passes structural_problem().
#pragma once

#include <cmath>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd::testing {

// Builds a BlobGraph by hand for the format tests.
struct BlobBuilder {
  BlobGraph g;
  uint32_t t(std::vector<int64_t> shape, loom_dtype_t dtype = LOOM_DTYPE_F32) {
    BlobTensor bt;
    bt.dtype = dtype;
    bt.shape = std::move(shape);
    g.tensors.push_back(std::move(bt));
    return static_cast<uint32_t>(g.tensors.size() - 1);
  }
  uint32_t constant(std::vector<int64_t> shape, std::vector<float> data) {
    const uint32_t i = t(std::move(shape));
    g.tensors[i].constant = true;
    g.tensors[i].data = std::move(data);
    return i;
  }
  BlobNode& node(Op op, std::vector<uint32_t> in, uint32_t out) {
    BlobNode n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
};

// The decoder's error for `bytes` (failing the test if they decode).
inline std::string decode_error(const std::vector<std::byte>& bytes) {
  BlobGraph g;
  std::string error;
  EXPECT_FALSE(decode(bytes.data(), bytes.size(), &g, &error));
  return error;
}

// The error for `g` once encoded.
inline std::string validate_error(const BlobGraph& g) { return decode_error(encode(g)); }

// Empty when `g` is structurally sound: every index in range, tensors
// written once in topological order, dtype f32, bool, i32 or i64 (constants
// f32), ranks <= 8, dimensions >= 0 and element counts below 2^60, constants
// sized by their shape, operators known with their arity, attributes in
// range, and each operator's dtype rule (Equal: operands alike, bool out;
// Where: bool, f32, f32 -> f32; Cast: out as `to`; the rest f32). Otherwise
// what is wrong. Shape rules are not re-derived here (the decoder's own
// tests cover them).
inline std::string structural_problem(const BlobGraph& g) {
  const size_t n = g.tensors.size();
  std::vector<int> state(n, 0);  // 0 undefined, 1 graph input, 2 node output, 3 constant
  for (size_t t = 0; t < n; ++t) {
    const BlobTensor& bt = g.tensors[t];
    const std::string where = "tensor " + std::to_string(t);
    const int dt = static_cast<int>(bt.dtype);
    if (dt != 1 && dt != 7 && dt != 8 && dt != 13 && dt != 5 && dt != 9) {
      return where + ": dtype is not f32, i32, i64, bool, i8 or u8";
    }
    // Format 6: u8 (9), i8 (5) and i32 (7) constants hold bytes.
    const bool int_constant = dt == 5 || dt == 9 || dt == 7;
    if (bt.constant && dt != 1 && !int_constant) return where + ": a constant that is not f32, u8, i8 or i32";
    if (bt.shape.size() > 8) return where + ": rank above 8";
    uint64_t elements = 1;
    for (int64_t d : bt.shape) {
      // Format 5: -1 is an open dimension, never in a constant or parameter.
      if (d == -1 && !bt.constant && !bt.parameter) continue;
      if (d < 0) return where + ": negative dimension";
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements) ||
          elements >= (uint64_t{1} << 60)) {
        return where + ": element count overflows";
      }
    }
    if (bt.constant && dt != 1 && (bt.bytes.size() != elements * dtype_size(bt.dtype) || !bt.data.empty())) {
      return where + ": integer constant of the wrong size";
    }
    if (bt.constant && dt == 1 && bt.data.size() != elements) return where + ": constant of the wrong size";
    if ((!bt.constant || dt == 1) && !bt.bytes.empty()) return where + ": bytes on a tensor that is no integer constant";
    if (!bt.constant && !bt.data.empty()) return where + ": data on a non-constant";
    if (bt.constant) state[t] = 3;
  }
  for (uint32_t t : g.inputs) {
    if (t >= n) return "graph input index out of range";
    if (state[t] != 0) return "graph input is a constant or listed twice";
    state[t] = 1;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const BlobNode& node = g.nodes[i];
    const std::string where = "node " + std::to_string(i);
    const uint32_t op = static_cast<uint32_t>(node.op);
    if (op < 1 || op > 58) return where + ": operator out of range";
    size_t min_in = 1, max_in = 1;
    if ((op >= 6 && op <= 12) || op == 1 || op == 3) min_in = max_in = 2;  // binary, MatMul
    if (op == 2 || op == 35 || op == 46 || op == 47) min_in = 2, max_in = 3;  // Gemm, Conv(Transpose), LN
    if (op == 33) max_in = SIZE_MAX;                                       // Concat
    if (op == 39) min_in = max_in = 5;                                     // BatchNorm
    if (op == 51) min_in = max_in = 2;                                     // Equal
    if (op == 50) min_in = max_in = 3;                                     // Where
    if (op == 49) max_in = 2;                                              // Pad: X[, value]
    if (op == 53 || op == 54) min_in = 2, max_in = 3;                      // (De)QuantizeLinear
    if (op == 55) min_in = 8, max_in = 9;                                  // QLinearConv
    if (op == 56) min_in = max_in = 8;                                     // QLinearMatMul
    if (op == 57 || op == 58) {                                            // Conv/MatMulInteger: mask
      if (node.trans_a < 0 || node.trans_a > 3) return where + ": present mask";
      min_in = max_in = 2 + static_cast<size_t>((node.trans_a & 1) + ((node.trans_a >> 1) & 1));
    }
    if (node.inputs.size() < min_in || node.inputs.size() > max_in) return where + ": arity";
    if (node.outputs.size() != 1) return where + ": not one output";
    for (uint32_t t : node.inputs) {
      if (t >= n) return where + ": input index out of range";
      if (state[t] == 0) return where + ": reads a tensor nobody wrote yet";
    }
    const uint32_t o = node.outputs[0];
    if (o >= n) return where + ": output index out of range";
    if (state[o] != 0) return where + ": output written twice";
    state[o] = 2;
    if (!node.floats.empty() && op != 45) return where + ": floats on an operator without them";
    const std::vector<int64_t>& x = g.tensors[node.inputs[0]].shape;
    const int64_t rank = static_cast<int64_t>(x.size());
    const std::vector<int64_t>& v = node.ints;
    if (op == 2 && (node.trans_a < 0 || node.trans_a > 1 || node.trans_b < 0 || node.trans_b > 1)) {
      return where + ": Gemm transpose flag not 0 or 1";
    }
    if ((op == 5 || op == 32 || op == 33) && (node.axis < -rank || node.axis >= rank)) {
      return where + ": axis out of range";
    }
    if ((op == 5 || op == 32) && (v.size() > 1 || (v.size() == 1 && v[0] != 0 && v[0] != 1))) {
      return where + ": bad coerce_2d";
    }
    if (op == 34) {
      std::vector<bool> seen(static_cast<size_t>(rank), false);
      if (static_cast<int64_t>(v.size()) != rank) return where + ": perm of the wrong length";
      for (int64_t p : v) {
        if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return where + ": not a permutation";
        seen[static_cast<size_t>(p)] = true;
      }
    }
    if (op == 35 || op == 36 || op == 37 || op == 46 || op == 55 || op == 57) {
      const bool conv = op == 35 || op == 46 || op == 55 || op == 57;
      const size_t head = conv ? 2 : 3;
      if (v.empty() || v[0] < 1 || v[0] > 3) return where + ": spatial rank";
      const size_t k = static_cast<size_t>(v[0]);
      if (v.size() != head + (op == 46 ? 6 : 5) * k) return where + ": window attribute count";
      if (conv && (v[1] < 1 || v[1] > (int64_t{1} << 31))) return where + ": group";
      if (!conv && ((v[1] != 0 && v[1] != 1) || (v[2] != 0 && v[2] != 1))) {
        return where + ": pooling flags";
      }
      for (size_t j = head; j < head + 5 * k; ++j) {
        const int64_t lowest = j < head + 3 * k ? 1 : 0;  // kernel, stride, dilation >= 1; pads >= 0
        if (v[j] < lowest || v[j] > (int64_t{1} << 31)) return where + ": window value out of range";
      }
      for (size_t j = head + 5 * k; j < v.size(); ++j) {  // ConvTranspose output_padding
        if (v[j] < 0 || v[j] >= v[head + k + (j - head - 5 * k)]) return where + ": output_padding";
      }
    }
    if (op >= 40 && op <= 43) {  // reductions: [keepdims, ascending axes]
      if (v.size() < 2 || (v[0] != 0 && v[0] != 1)) return where + ": reduction ints";
      for (size_t j = 1; j < v.size(); ++j) {
        if (v[j] < 0 || v[j] >= rank || (j > 1 && v[j] <= v[j - 1])) return where + ": reduction axes";
        if (x[static_cast<size_t>(v[j])] == 0) return where + ": empty reduced axis";
      }
    }
    if (op == 44) {  // Gather: [r, shape, values] within the axis
      if (node.axis < 0 || node.axis >= rank) return where + ": gather axis";
      if (v.empty() || v[0] < 0 || v[0] + rank > 9 || v.size() < 1 + static_cast<size_t>(v[0])) {
        return where + ": gather ints";
      }
      uint64_t count = 1;
      for (int64_t j = 0; j < v[0]; ++j) {
        if (v[1 + j] < 0 || v[1 + j] > (int64_t{1} << 31)) return where + ": gather shape";
        count *= static_cast<uint64_t>(v[1 + j]);
      }
      if (v.size() != 1 + static_cast<size_t>(v[0]) + count) return where + ": gather count";
      for (size_t j = 1 + static_cast<size_t>(v[0]); j < v.size(); ++j) {
        if (v[j] < 0 || v[j] >= x[static_cast<size_t>(node.axis)]) return where + ": gather index";
      }
    }
    if (op == 45 && !v.empty() && (v[0] == 2 || v[0] == 3)) {
      // Resize's open form (format 8): [2 + linear, coordinate mode 0-4,
      // rounding 0-3], a positive scale per axis, only of an open input.
      bool open_x = false;
      for (int64_t d : x) open_x = open_x || d == -1;
      if (!open_x) return where + ": open-form resize of a static input";
      if (v.size() != 3 || v[1] < 0 || v[1] > 4 || v[2] < 0 || v[2] > 3) return where + ": open resize ints";
      if (node.floats.size() != x.size()) return where + ": open resize scales";
      for (float f : node.floats) {
        if (!(f > 0.0f) || !std::isfinite(f)) return where + ": open resize scale";
      }
    } else if (op == 45) {  // Resize: [linear, dims, taps], weights in [0, 1]
      if (rank == 0 || v.size() < 1 + x.size() || (v[0] != 0 && v[0] != 1)) return where + ": resize ints";
      uint64_t positions = 0;
      for (size_t a = 0; a < x.size(); ++a) {
        if (v[1 + a] < 1 || v[1 + a] > (int64_t{1} << 31) || x[a] < 1) return where + ": resize dims";
        positions += static_cast<uint64_t>(v[1 + a]);
      }
      if (v.size() != 1 + x.size() + 2 * positions || node.floats.size() != (v[0] ? positions : 0)) {
        return where + ": resize table size";
      }
      size_t at = 1 + x.size();
      for (size_t a = 0; a < x.size(); ++a) {
        for (int64_t o = 0; o < v[1 + a]; ++o, at += 2) {
          if (v[at] < 0 || v[at] >= x[a] || v[at + 1] < 0 || v[at + 1] >= x[a]) return where + ": resize tap";
          if (v[0] == 0 && v[at] != v[at + 1]) return where + ": nearest taps differ";
        }
      }
      for (float f : node.floats) {
        if (!(f >= 0.0f && f <= 1.0f)) return where + ": resize weight";
      }
    }
    if (op == 47 && (node.axis < 0 || node.axis >= rank || !(node.alpha >= 0.0f) || node.alpha > 1.0f)) {
      return where + ": LayerNormalization axis or epsilon";
    }
    if (op == 48) {  // Slice: [starts, steps, dims], every index read inside the input
      if (rank == 0 || v.size() != 3 * x.size()) return where + ": slice ints";
      for (size_t d = 0; d < x.size(); ++d) {
        const int64_t start = v[d], step = v[x.size() + d], n = v[2 * x.size() + d];
        if (step == 0 || step < -(int64_t{1} << 31) || step > (int64_t{1} << 31) || n < 0 || n > x[d]) {
          return where + ": slice step or count";
        }
        if (n > 0) {
          const __int128 last = static_cast<__int128>(start) + static_cast<__int128>(n - 1) * step;
          if (start < 0 || start >= x[d] || last < 0 || last >= x[d]) return where + ": slice range";
        }
      }
    }
    if (op == 49) {  // Pad: [mode, begins, ends], pads 0 to 2^31
      if (v.size() != 1 + 2 * x.size() || v[0] < 0 || v[0] > 3) return where + ": pad ints";
      for (size_t d = 0; d < x.size(); ++d) {
        const int64_t b = v[1 + d], e = v[1 + x.size() + d];
        if (b < 0 || e < 0 || b > (int64_t{1} << 31) || e > (int64_t{1} << 31)) return where + ": pad range";
        if (v[0] != 0 && x[d] == 0 && b + e > 0) return where + ": edge pad of an empty axis";
      }
    }
    const auto dtype = [&](uint32_t t) { return static_cast<int>(g.tensors[t].dtype); };
    if (op == 51) {
      if (dtype(node.inputs[1]) != dtype(node.inputs[0]) || dtype(o) != 13) return where + ": Equal dtypes";
    } else if (op == 50) {
      if (dtype(node.inputs[0]) != 13 || dtype(node.inputs[1]) != 1 || dtype(node.inputs[2]) != 1 ||
          dtype(o) != 1) {
        return where + ": Where dtypes";
      }
    } else if (op == 52) {
      if (v.size() != 1 || v[0] != dtype(o)) return where + ": Cast ints or output dtype";
    } else if (op >= 53) {  // format 6: 8-bit data, f32 scales
      const auto is8 = [&](uint32_t t) { return dtype(t) == 5 || dtype(t) == 9; };
      const uint32_t x = node.inputs[0];
      if (op == 53 && (dtype(x) != 1 || !is8(o) || dtype(node.inputs[1]) != 1)) return where + ": Quantize dtypes";
      if (op == 54 && ((!is8(x) && dtype(x) != 7) || dtype(o) != 1 || dtype(node.inputs[1]) != 1)) {
        return where + ": Dequantize dtypes";
      }
      if ((op == 55 || op == 56) && (!is8(x) || !is8(node.inputs[3]) || !is8(o) || dtype(node.inputs[1]) != 1 ||
                                     dtype(node.inputs[4]) != 1 || dtype(node.inputs[6]) != 1)) {
        return where + ": QLinear dtypes";
      }
      if ((op == 57 || op == 58) && (!is8(x) || !is8(node.inputs[1]) || dtype(o) != 7)) return where + ": Integer dtypes";
    } else {
      for (uint32_t t : node.inputs) {
        if (dtype(t) != 1) return where + ": reads a tensor that is not f32";
      }
      if (dtype(o) != 1) return where + ": writes a tensor that is not f32";
    }
    if (op != 5 && op != 32 && op != 34 && op != 35 && op != 36 && op != 37 &&
        (op < 40 || op > 46) && op != 48 && op != 49 && op != 52 && op != 55 && op != 57 && !v.empty()) {
      return where + ": ints on an operator without them";
    }
  }
  std::vector<bool> listed(n, false);
  for (uint32_t t : g.outputs) {
    if (t >= n) return "graph output index out of range";
    if (state[t] != 2) return "graph output not written by a node";
    if (listed[t]) return "graph output listed twice";
    listed[t] = true;
  }
  return "";
}

// True when `error` says where the problem is: it starts with the byte
// offset (within the blob) or the graph element, and names a field or
// structure of the format.
inline bool names_its_place(const std::string& error, size_t blob_size) {
  static const std::regex kPlace(
      R"(^(byte ([0-9]+)|tensor [0-9]+|graph (input|output) [0-9]+|node [0-9]+( \([A-Za-z]+\))?): .{8,})");
  std::smatch m;
  if (!std::regex_search(error, m, kPlace)) return false;
  if (m[2].matched && std::stoull(m[2].str()) > blob_size) return false;
  static const std::regex kField(
      R"(header|magic|version|tensor|node|graph (input|output)|constant|dimension|rank|dtype|shape|operator|axis|ints|attribute|input|output|trans_|after the last)");
  return std::regex_search(error, kField);
}

// Each byte of `bytes` XORed with 0x01, 0x80 and 0xff, and set to 0x00.
inline std::vector<std::pair<size_t, std::vector<std::byte>>> byte_mutations(
    const std::vector<std::byte>& bytes) {
  std::vector<std::pair<size_t, std::vector<std::byte>>> out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const std::byte originals[] = {bytes[i] ^ std::byte{0x01}, bytes[i] ^ std::byte{0x80},
                                   bytes[i] ^ std::byte{0xff}, std::byte{0x00}};
    for (std::byte b : originals) {
      if (b == bytes[i]) continue;
      out.emplace_back(i, bytes);
      out.back().second[i] = b;
    }
  }
  return out;
}

// Decodes every mutation of `bytes`: each is refused with a message that
// names its place, or decodes to a structurally sound graph. Returns how
// many decoded, so a caller can check the fuzz reached past the header.
inline size_t expect_every_mutation_refused_by_name_or_sound(const std::vector<std::byte>& bytes) {
  size_t decoded = 0;
  for (const auto& [at, bad] : byte_mutations(bytes)) {
    BlobGraph g;
    std::string error;
    if (decode(bad.data(), bad.size(), &g, &error)) {
      ++decoded;
      const std::string problem = structural_problem(g);
      EXPECT_EQ(problem, "") << "byte " << at << " mutated: decoded to an unsound graph";
    } else {
      EXPECT_TRUE(names_its_place(error, bad.size()))
          << "byte " << at << " mutated: refused with a vague message: " << error;
    }
  }
  return decoded;
}

}  // namespace loom::cpu_simd::testing
