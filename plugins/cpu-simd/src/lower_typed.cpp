// Lowering of Split (one Slice per output) and of the format-4 operators:
// Pad, and Where, Equal and Cast, the first whose tensors may be bool, i32
// or i64. Same rules as lower.cpp: claim only what runs exactly as the ONNX
// operator of that opset specifies, refuse the rest with why.
#include <string>

#include "lowering.hpp"

namespace loom::cpu_simd::lowering {

// Split from opset 2: `split` an attribute before 13 and an inline i64
// input from 13, `num_outputs` from 18 (the last part smaller when the axis
// does not divide evenly); without either, equal parts that must divide the
// axis. The importer records every Split's output count as `num_outputs`
// (the opset-18 spelling) whatever the opset: accepted at any opset when it
// equals the output count, and before 18 it changes nothing. Each output
// becomes a Slice of the input along `axis`.
bool lower_split(Lowering& l) {
  if (l.opset() < 2) return l.fail("Split-1 is not supported");
  const bool split_input = l.opset() >= 13;
  int64_t axis = 0, num_outputs = 0;
  Shape split;
  if (!l.check_attributes({{"axis", 1}, {"split", 1}, {"num_outputs", 1}}) ||
      !l.check_inputs(1, split_input ? 2 : 1) || !l.get_int("axis", 0, &axis) ||
      !l.get_int("num_outputs", 0, &num_outputs) || !l.get_ints("split", &split)) {
    return false;
  }
  if (split_input && l.has("split")) return l.fail("attribute 'split' is an input from opset 13");
  if (split_input && l.present(1) && !l.constant_i64s(1, &split)) return false;
  const bool given = !split.empty();  // an empty split is no split
  const size_t outputs = l.output_count();
  if (outputs == 0 || outputs > (size_t{1} << 16)) return l.fail("has " + std::to_string(outputs) + " outputs");
  const int64_t n = static_cast<int64_t>(outputs);
  if (l.has("num_outputs") && num_outputs != n) {
    return l.fail("num_outputs is " + std::to_string(num_outputs) + ", the node has " + std::to_string(n) +
                  " outputs");
  }
  if (l.opset() >= 18 && !given && !l.has("num_outputs")) {
    return l.fail("neither 'split' nor 'num_outputs' is given");
  }
  if (!l.moved(0)) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0 && l.opset() < 11) return l.fail("negative axis before opset 11");
  if (axis < 0) axis += rank;
  const int64_t dim = x[static_cast<size_t>(axis)];
  if (!given && l.opset() >= 18) {
    const int64_t part = (dim + n - 1) / n;
    split.assign(outputs, part);
    split.back() = dim - part * (n - 1);
    if (split.back() < 1 && dim % n != 0) {
      return l.fail("axis " + std::to_string(axis) + " of extent " + std::to_string(dim) + " leaves no last part for " +
                    std::to_string(n) + " outputs");
    }
  } else if (!given) {
    if (dim % n != 0) {
      return l.fail("axis " + std::to_string(axis) + " of extent " + std::to_string(dim) + " does not split into " +
                    std::to_string(n) + " equal parts");
    }
    split.assign(outputs, dim / n);
  }
  if (split.size() != outputs) {
    return l.fail("split has " + std::to_string(split.size()) + " entries, the node has " + std::to_string(n) +
                  " outputs");
  }
  int64_t total = 0;
  for (int64_t s : split) {
    if (s < 0 || s > dim) return l.fail("split entry " + std::to_string(s) + " is negative or too large");
    total += s;
  }
  if (total != dim) {
    return l.fail("split sums to " + std::to_string(total) + ", axis " + std::to_string(axis) + " has " +
                  std::to_string(dim));
  }
  const uint32_t input = l.node().inputs[0];
  int64_t start = 0;
  for (size_t k = 0; k < outputs; ++k) {
    if (!l.output_ok(k, l.dtype_of(0))) return false;
    BlobNode& s = k == 0 ? l.node() : l.add_node();
    s.op = Op::kSlice;
    s.inputs = {input};
    s.outputs = {static_cast<uint32_t>(l.output_index(k))};
    Shape first(x.size(), 0), step(x.size(), 1), count = x;
    first[static_cast<size_t>(axis)] = split[k] == 0 ? 0 : start;
    count[static_cast<size_t>(axis)] = split[k];
    s.ints = first;
    s.ints.insert(s.ints.end(), step.begin(), step.end());
    s.ints.insert(s.ints.end(), count.begin(), count.end());
    start += split[k];
  }
  return true;
}

// Pad: pads (and the constant value) as attributes from opset 2; from 11
// pads an inline i64 constant and constant_value an f32 scalar read at run
// time (any tensor of one element), axes (inline i64 or i32) from 18; modes
// constant, edge, reflect, and wrap from 19.
// Refused: opset 1 (`paddings`), negative pads (cropping), reflect pads
// that reach the axis' extent and wrap pads beyond it (where implementations
// disagree), edge/reflect/wrap pads of an empty axis.
bool lower_pad(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kPad;
  if (l.opset() < 2) return l.fail("Pad-1 is not supported");
  const bool inputs = l.opset() >= 11;
  std::string mode;
  Shape pads, axes;
  n.alpha = 0.0f;
  if (!inputs) {
    if (!l.check_attributes({{"mode", 2}, {"pads", 2}, {"value", 2}}) || !l.check_inputs(1, 1) ||
        !l.get_ints("pads", &pads) || !l.get_float("value", 0.0f, &n.alpha)) {
      return false;
    }
    if (!l.has("pads")) return l.fail("attribute 'pads' is required");
  } else {
    if (!l.check_attributes({{"mode", 11}}) || !l.check_inputs(2, l.opset() >= 18 ? 4 : 3)) return false;
    if (!l.present(1) || !l.constant_i64s(1, &pads)) return l.present(1) ? false : l.fail("the pads input is missing");
    if (l.present(3)) {
      Shape ignored;
      if (!l.constant_indices(3, &axes, &ignored)) return false;
      if (ignored.size() != 1) return l.fail("axes must be 1-D");
    }
  }
  if (!l.get_string("mode", "constant", &mode)) return false;
  PadMode pm;
  if (mode == "constant") pm = PadMode::kConstant;
  else if (mode == "reflect") pm = PadMode::kReflect;
  else if (mode == "edge") pm = PadMode::kEdge;
  else if (mode == "wrap" && l.opset() >= 19) pm = PadMode::kWrap;
  else return l.fail("mode '" + mode + "' is not supported at opset " + std::to_string(l.opset()));
  if (!l.data(0)) return false;
  if (inputs && l.present(2)) {
    const Shape v = l.shape_of(2);
    if (v.size() > 1 || (v.size() == 1 && v[0] != 1)) return l.fail("constant_value must be a scalar");
    if (!l.data(2)) return false;
  }
  if (!l.output(1)) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) {
    return l.fail("pads has " + std::to_string(pads.size()) + " entries, expected " +
                  std::to_string(2 * axes.size()));
  }
  Shape begin(x.size(), 0), end(x.size(), 0);
  std::vector<bool> named(x.size(), false);
  const size_t k = axes.size();
  for (size_t i = 0; i < k; ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (named[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    named[static_cast<size_t>(a)] = true;
    const int64_t b = pads[i], e = pads[k + i], dim = x[static_cast<size_t>(a)];
    if (b < 0 || e < 0) return l.fail("negative pads (cropping) are not supported");
    if (b > kMaxAttr || e > kMaxAttr) return l.fail("pads beyond 2^31 are not supported");
    if (pm != PadMode::kConstant && dim == 0 && b + e > 0) {
      return l.fail("axis " + std::to_string(a) + " is empty and mode is " + mode);
    }
    if (pm == PadMode::kReflect && (b >= dim || e >= dim) && b + e > 0) {
      return l.fail("reflect pads " + std::to_string(b) + " and " + std::to_string(e) + " reach axis " +
                    std::to_string(a) + "'s extent " + std::to_string(dim));
    }
    if (pm == PadMode::kWrap && (b > dim || e > dim)) {
      return l.fail("wrap pads " + std::to_string(b) + " and " + std::to_string(e) + " exceed axis " +
                    std::to_string(a) + "'s extent " + std::to_string(dim));
    }
    begin[static_cast<size_t>(a)] = b;
    end[static_cast<size_t>(a)] = e;
  }
  n.ints = {static_cast<int64_t>(pm)};
  n.ints.insert(n.ints.end(), begin.begin(), begin.end());
  n.ints.insert(n.ints.end(), end.begin(), end.end());
  return true;
}

// Where from opset 9 (the opset-16 change only adds bfloat16): a bool
// condition and f32 X and Y, multidirectional broadcasting.
bool lower_where(Lowering& l) {
  l.node().op = Op::kWhere;
  if (l.opset() < 9) return l.fail("opset " + std::to_string(l.opset()) + " has no Where");
  if (!l.check_attributes({}) || !l.check_inputs(3, 3)) return false;
  if (l.dtype_of(0) != gfb::DType::bool_) return l.fail("the condition is not bool");
  return l.data(0, true) && l.data(1) && l.data(2) && l.output(1);
}

// Equal from opset 7 (broadcasting): two operands of one dtype (f32, bool,
// i32, i64; bool from 11), a bool output.
bool lower_equal(Lowering& l) {
  l.node().op = Op::kEqual;
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " uses legacy broadcasting");
  if (!l.check_attributes({}) || !l.check_inputs(2, 2) || !l.data(0, true) || !l.data(1, true)) return false;
  const gfb::DType a = l.dtype_of(0);
  if (l.dtype_of(1) != a) return l.fail("the operands' dtypes differ");
  // Opsets 7 to 10 take bool, i32 and i64; f32 comes with 11.
  if (a == gfb::DType::f32 && l.opset() < 11) return l.fail("f32 operands before opset 11");
  return l.output(1, gfb::DType::bool_);
}

// Cast from opset 6 (`to` an integer) between f32, bool, i32, i64 and
// (blob format 10) u8 and i8: floats truncate toward zero into integers
// (NaN to 0, out of range saturated: ONNX leaves both undefined), integers
// wrap, anything becomes bool as != 0. `saturate` (19) only concerns float
// 8 types. A u8 / i8 input is a graph input or an earlier node's output
// (the blob embeds no inline constants of theirs from ONNX).
bool lower_cast(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kCast;
  if (l.opset() < 6) return l.fail("Cast before opset 6 names `to` by string");
  int64_t to = 0, saturate = 1;
  if (!l.check_attributes({{"to", 6}, {"saturate", 19}}) || !l.check_inputs(1, 1) ||
      !l.get_int("to", 0, &to) || !l.get_int("saturate", 1, &saturate)) {
    return false;
  }
  if (!l.has("to")) return l.fail("attribute 'to' is required");
  // ONNX TensorProto codes: FLOAT 1, INT32 6, INT64 7, BOOL 9.
  gfb::DType target;
  switch (to) {
    case 1: target = gfb::DType::f32; break;
    case 6: target = gfb::DType::i32; break;
    case 7: target = gfb::DType::i64; break;
    case 9: target = gfb::DType::bool_; break;
    case 2: target = gfb::DType::u8; break;
    case 3: target = gfb::DType::i8; break;
    default: return l.fail("to = " + std::to_string(to) + " is not f32, i32, i64, bool, u8 or i8");
  }
  const gfb::DType from = l.present(0) ? l.dtype_of(0) : gfb::DType::f32;
  if (from == gfb::DType::u8 || from == gfb::DType::i8) {
    const sdk::TensorView t = l.view().input(0);
    if (t.has_data() && !t.is_graph_input()) {
      return l.fail(std::string("input 0 is an inline ") + gfb::EnumNameDType(from) +
                    " constant; cpu-simd embeds f32 constants only");
    }
    if (!l.shape_ok(t.shape(), "input 0")) return false;
    n.inputs.push_back(static_cast<uint32_t>(t.index()));
  } else if (!l.data(0, true)) {
    return false;
  }
  if (!l.output(1, target)) return false;
  n.ints = {static_cast<int64_t>(blob_dtype(target))};
  if (l.output_shape() != l.shape_of(0)) return l.fail("output shape differs from the input's");
  return true;
}

}  // namespace loom::cpu_simd::lowering
