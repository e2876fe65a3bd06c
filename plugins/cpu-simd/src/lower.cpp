// Node-by-node lowering of graph.fbs to the cpu-simd blob. A node is claimed
// only when every input it sees (op type, domain, opset, each attribute and
// its value, dtypes, constant operands, shapes) is one cpu-simd runs exactly
// as the ONNX operator of that opset specifies; anything else is refused with
// the reason, so the partitioner can place the node elsewhere. The format-3
// operators are in lower_data.cpp, Split and the format-4 ones in
// lower_typed.cpp; the Lowering helper in lowering.hpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "lowering.hpp"

namespace loom::cpu_simd {
namespace lowering {
namespace {

// --------------------------------------------------------------- op lowering

bool lower_binary(Lowering& l, Op op, int64_t min_opset) {
  if (l.opset() < min_opset) return l.fail("opset " + std::to_string(l.opset()) + " uses legacy broadcasting");
  l.node().op = op;
  return l.check_attributes({}) && l.check_inputs(2, 2) && l.data(0) && l.data(1) && l.output(1);
}

bool lower_max_min(Lowering& l, Op op) {
  if (l.opset() < 8) return l.fail("opset " + std::to_string(l.opset()) + " has no broadcasting");
  if (!l.check_attributes({}) || !l.check_inputs(1, 2)) return false;
  if (l.input_count() == 1) {
    l.node().op = Op::kCopy;
    return l.data(0) && l.output(1) && (l.output_shape() == l.shape_of(0) || l.fail("output shape differs from the input's"));
  }
  l.node().op = op;
  return l.data(0) && l.data(1) && l.output(1);
}

bool lower_unary(Lowering& l, Op op, int64_t min_opset, AllowList attrs = {}) {
  if (l.opset() < min_opset) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  l.node().op = op;
  return l.check_attributes(attrs) && l.check_inputs(1, 1) && l.data(0) && l.output(1);
}

bool lower_copy_same(Lowering& l) {
  l.node().op = Op::kCopy;
  if (!l.check_attributes({}) || !l.check_inputs(1, 1) || !l.moved(0) || !l.moved_output(1)) return false;
  if (l.output_shape() != l.shape_of(0)) return l.fail("output shape differs from the input's");
  return true;
}

bool lower_clip(Lowering& l) {
  if (l.opset() < 6) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  BlobNode& n = l.node();
  n.op = Op::kClip;
  if (l.opset() < 11) {
    if (!l.check_attributes({{"min", 6}, {"max", 6}}) || !l.check_inputs(1, 1)) return false;
    if (!l.get_float("min", std::numeric_limits<float>::lowest(), &n.alpha) ||
        !l.get_float("max", std::numeric_limits<float>::max(), &n.beta)) {
      return false;
    }
  } else {
    if (!l.check_attributes({}) || !l.check_inputs(1, 3)) return false;
    n.alpha = -std::numeric_limits<float>::infinity();
    n.beta = std::numeric_limits<float>::infinity();
    if (l.present(1) && !l.constant_f32_scalar(1, &n.alpha)) return false;
    if (l.present(2) && !l.constant_f32_scalar(2, &n.beta)) return false;
  }
  return l.data(0) && l.output(1);
}

bool lower_dropout(Lowering& l) {
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  l.node().op = Op::kCopy;
  if (!l.check_attributes({{"ratio", 7}, {"seed", 12}})) return false;
  if (l.opset() >= 12 && l.has("ratio")) return l.fail("attribute 'ratio' is an input from opset 12");
  if (!l.check_inputs(1, l.opset() >= 12 ? 3 : 1)) return false;
  if (l.present(2)) {
    bool training = true;
    if (!l.constant_bool(2, &training)) return false;
    if (training) return l.fail("training_mode is true");
  }
  // The ratio only matters in training mode.
  return l.data(0) && l.output(2) &&
         (l.output_shape() == l.shape_of(0) || l.fail("output shape differs from the input's"));
}

bool lower_softmax(Lowering& l, Op op) {
  BlobNode& n = l.node();
  n.op = op;
  if (!l.check_attributes({{"axis", 1}}) || !l.check_inputs(1, 1)) return false;
  const bool legacy = l.opset() < 13;
  if (!l.get_int("axis", legacy ? 1 : -1, &n.axis)) return false;
  if (legacy) n.ints = {1};
  return l.data(0) && l.output(1);
}

bool lower_concat(Lowering& l) {
  if (l.opset() < 4) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  BlobNode& n = l.node();
  n.op = Op::kConcat;
  if (!l.check_attributes({{"axis", 4}}) || !l.check_inputs(1, 1u << 16)) return false;
  if (!l.has("axis")) return l.fail("attribute 'axis' is required");
  if (!l.get_int("axis", 0, &n.axis)) return false;
  if (n.axis < 0 && l.opset() < 11) return l.fail("negative axis before opset 11");
  for (size_t i = 0; i < l.input_count(); ++i) {
    if (!l.moved(i)) return false;
  }
  return l.moved_output(1);
}

bool lower_reshape(Lowering& l) {
  if (l.opset() < 5) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  l.node().op = Op::kCopy;
  int64_t allowzero = 0;
  if (!l.check_attributes({{"allowzero", 14}}) || !l.check_inputs(2, 2) ||
      !l.get_int("allowzero", 0, &allowzero)) {
    return false;
  }
  Shape spec;
  if (!l.present(1) || !l.constant_i64s(1, &spec)) {
    return l.present(1) ? false : l.fail("the shape input is missing");
  }
  if (!l.moved(0) || !l.moved_output(1)) return false;
  const Shape x = l.shape_of(0);
  if (l.open_shapes()) {
    // The target per binding: the blob's shape spec says the same as ONNX's
    // (0 copies the input's dimension, -1 is inferred), checked per binding.
    Shape blob_spec(spec.size());
    bool inferred = false;
    for (size_t d = 0; d < spec.size(); ++d) {
      const int64_t v = spec[d];
      if (v == -1 && inferred) return l.fail("shape has more than one -1");
      inferred = inferred || v == -1;
      if (v == 0 && allowzero == 0 && d >= x.size()) {
        return l.fail("shape copies dimension " + std::to_string(d) + " the input lacks");
      }
      if (v < -1 || v > kMaxAttr) return l.fail("shape has the dimension " + std::to_string(v));
      blob_spec[d] = v == 0 && allowzero == 0 ? -2 - static_cast<int64_t>(d) : v;
    }
    l.node().ints = std::move(blob_spec);
    return true;
  }
  uint64_t total = 0;
  element_count(x, &total);
  Shape target(spec.size());
  int64_t infer = -1;
  uint64_t known = 1;
  for (size_t d = 0; d < spec.size(); ++d) {
    int64_t v = spec[d];
    if (v == -1) {
      if (infer >= 0) return l.fail("shape has more than one -1");
      infer = static_cast<int64_t>(d);
      continue;
    }
    if (v == 0 && allowzero == 0) {
      if (d >= x.size()) return l.fail("shape copies dimension " + std::to_string(d) + " the input lacks");
      v = x[d];
    }
    if (v < 0) return l.fail("shape has the negative dimension " + std::to_string(v));
    target[d] = v;
    if (v != 0 && known > (uint64_t{1} << 60) / static_cast<uint64_t>(v)) return l.fail("shape is too large");
    known *= static_cast<uint64_t>(v);
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return l.fail("shape's -1 cannot be inferred");
    target[static_cast<size_t>(infer)] = static_cast<int64_t>(total / known);
  }
  if (target != l.output_shape()) {
    return l.fail("the shape input gives " + detail::shape_string(target) + ", the output is declared " +
                  detail::shape_string(l.output_shape()));
  }
  return true;
}

bool lower_flatten(Lowering& l) {
  l.node().op = Op::kCopy;
  int64_t axis = 1;
  if (!l.check_attributes({{"axis", 1}}) || !l.check_inputs(1, 1) || !l.get_int("axis", 1, &axis) ||
      !l.moved(0) || !l.moved_output(1)) {
    return false;
  }
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < 0 && l.opset() < 11) return l.fail("negative axis before opset 11");
  if (axis < -rank || axis > rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  bool outer_open = false, inner_open = false;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t v = x[static_cast<size_t>(d)];
    (d < axis ? outer_open : inner_open) |= v < 0;
    (d < axis ? outer : inner) *= v < 0 ? 1 : v;
  }
  if (l.open_shapes()) {
    if (outer_open && inner_open) {
      return l.fail("input " + detail::shape_string(x) + " has open dimensions on both sides of axis " +
                    std::to_string(axis) + ": the output cannot be expressed per binding");
    }
    l.node().ints = {outer_open ? -1 : outer, outer_open ? inner : -1};
    if (!outer_open && !inner_open) l.node().ints = {outer, inner};
    return true;
  }
  if (l.output_shape() != Shape{outer, inner}) return l.fail("output shape differs from Flatten's rule");
  return true;
}

bool lower_transpose(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kTranspose;
  if (!l.check_attributes({{"perm", 1}}) || !l.check_inputs(1, 1) || !l.get_ints("perm", &n.ints) ||
      !l.moved(0) || !l.moved_output(1)) {
    return false;
  }
  if (!l.has("perm")) {
    const size_t rank = l.shape_of(0).size();
    for (size_t d = 0; d < rank; ++d) n.ints.push_back(static_cast<int64_t>(rank - 1 - d));
  }
  return true;
}

bool lower_gemm(Lowering& l) {
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " uses legacy broadcasting");
  BlobNode& n = l.node();
  n.op = Op::kGemm;
  int64_t ta = 0, tb = 0;
  if (!l.check_attributes({{"alpha", 1}, {"beta", 1}, {"transA", 1}, {"transB", 1}}) ||
      !l.check_inputs(l.opset() >= 11 ? 2 : 3, 3) || !l.get_float("alpha", 1.0f, &n.alpha) ||
      !l.get_float("beta", 1.0f, &n.beta) || !l.get_int("transA", 0, &ta) ||
      !l.get_int("transB", 0, &tb) || !l.data(0) || !l.data(1)) {
    return false;
  }
  n.trans_a = ta != 0;
  n.trans_b = tb != 0;
  if (l.present(2) && !l.data(2)) return false;
  return l.output(1);
}

// Conv, MaxPool, AveragePool: resolves auto_pad into explicit pads.
bool lower_window(Lowering& l, Op op) {
  BlobNode& n = l.node();
  n.op = op;
  const bool conv = op == Op::kConv;
  if (conv) {
    if (!l.check_attributes({{"auto_pad", 1}, {"dilations", 1}, {"group", 1}, {"kernel_shape", 1},
                             {"pads", 1}, {"strides", 1}}) ||
        !l.check_inputs(2, 3) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2))) {
      return false;
    }
  } else if (op == Op::kMaxPool) {
    if (!l.check_attributes({{"auto_pad", 1}, {"kernel_shape", 1}, {"pads", 1}, {"strides", 1},
                             {"storage_order", 8}, {"dilations", 10}, {"ceil_mode", 10}}) ||
        !l.check_inputs(1, 1)) {
      return false;
    }
    // u8 and i8 from opset 12 (blob format 11): what QOperator models pool.
    const gfb::DType d = l.present(0) ? l.dtype_of(0) : gfb::DType::f32;
    if (d == gfb::DType::u8 || d == gfb::DType::i8) {
      if (l.opset() < 12) return l.fail("MaxPool of " + std::string(gfb::EnumNameDType(d)) + " needs opset 12");
      if (!l.moved(0)) return false;
    } else if (!l.data(0)) {
      return false;
    }
  } else {
    if (!l.check_attributes({{"auto_pad", 1}, {"kernel_shape", 1}, {"pads", 1}, {"strides", 1},
                             {"count_include_pad", 7}, {"ceil_mode", 10}, {"dilations", 19}}) ||
        !l.check_inputs(1, 1) || !l.data(0)) {
      return false;
    }
  }
  if (!(op == Op::kMaxPool ? l.moved_output(2) : l.output(1))) return false;
  const Shape x = l.shape_of(0);
  if (x.size() < 3 || x.size() > static_cast<size_t>(2 + kMaxSpatial)) {
    return l.fail("input rank " + std::to_string(x.size()) + " is not 3 to " + std::to_string(2 + kMaxSpatial));
  }
  const size_t k = x.size() - 2;
  Shape kernel, strides, dilations, pads;
  std::string auto_pad;
  int64_t group = 1, ceil_mode = 0, count_include_pad = 0, storage_order = 0;
  if (!l.get_ints("kernel_shape", &kernel) || !l.get_ints("strides", &strides) ||
      !l.get_ints("dilations", &dilations) || !l.get_ints("pads", &pads) ||
      !l.get_string("auto_pad", "NOTSET", &auto_pad) || !l.get_int("group", 1, &group) ||
      !l.get_int("ceil_mode", 0, &ceil_mode) || !l.get_int("count_include_pad", 0, &count_include_pad) ||
      !l.get_int("storage_order", 0, &storage_order)) {
    return false;
  }
  if (conv) {
    const Shape w = l.shape_of(1);
    if (w.size() != x.size()) return l.fail("weight rank differs from the input's");
    const Shape from_w(w.begin() + 2, w.end());
    if (kernel.empty()) kernel = from_w;
    if (kernel != from_w) return l.fail("kernel_shape disagrees with the weight's shape");
  } else if (kernel.empty()) {
    return l.fail("attribute 'kernel_shape' is required");
  }
  if (strides.empty()) strides.assign(k, 1);
  if (dilations.empty()) dilations.assign(k, 1);
  if (kernel.size() != k || strides.size() != k || dilations.size() != k) {
    return l.fail("kernel_shape, strides and dilations need " + std::to_string(k) + " entries");
  }
  if ((ceil_mode != 0 && ceil_mode != 1) || (count_include_pad != 0 && count_include_pad != 1) ||
      (storage_order != 0 && storage_order != 1)) {
    return l.fail("ceil_mode, count_include_pad and storage_order must be 0 or 1");
  }
  for (size_t i = 0; i < k; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || kernel[i] > kMaxAttr ||
        strides[i] > kMaxAttr || dilations[i] > kMaxAttr) {
      return l.fail("kernel_shape, strides and dilations must be positive and < 2^31");
    }
  }
  Shape begin(k, 0), end(k, 0);
  if (auto_pad == "NOTSET") {
    if (!pads.empty()) {
      if (pads.size() != 2 * k) return l.fail("pads needs " + std::to_string(2 * k) + " entries");
      for (size_t i = 0; i < k; ++i) {
        begin[i] = pads[i];
        end[i] = pads[k + i];
        if (begin[i] < 0 || end[i] < 0 || begin[i] > kMaxAttr || end[i] > kMaxAttr) {
          return l.fail("pads must be >= 0 and < 2^31");
        }
      }
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!pads.empty()) return l.fail("pads together with auto_pad " + auto_pad);
    if (ceil_mode != 0) return l.fail("ceil_mode together with auto_pad " + auto_pad);
    for (size_t i = 0; i < k; ++i) {
      const int64_t out = (x[2 + i] + strides[i] - 1) / strides[i];
      const int64_t span = (kernel[i] - 1) * dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - x[2 + i]);
      begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    }
  } else if (auto_pad == "VALID") {
    if (!pads.empty()) return l.fail("pads together with auto_pad VALID");
  } else {
    return l.fail("auto_pad '" + auto_pad + "' is unknown");
  }
  n.ints = {static_cast<int64_t>(k)};
  if (conv) {
    n.ints.push_back(group);
  } else {
    n.ints.push_back(ceil_mode);
    n.ints.push_back(count_include_pad);
  }
  for (const Shape* v : {&kernel, &strides, &dilations, &begin, &end}) {
    n.ints.insert(n.ints.end(), v->begin(), v->end());
  }
  return true;
}

bool lower_batch_norm(Lowering& l) {
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  BlobNode& n = l.node();
  n.op = Op::kBatchNorm;
  if (!l.check_attributes({{"epsilon", 1}, {"momentum", 1}, {"spatial", 7}, {"training_mode", 14}}) ||
      !l.check_inputs(5, 5) || !l.get_float("epsilon", 1e-5f, &n.alpha)) {
    return false;
  }
  if (l.opset() >= 9 && l.has("spatial")) return l.fail("attribute 'spatial' was removed in opset 9");
  int64_t spatial = 1, training = 0;
  if (!l.get_int("spatial", 1, &spatial) || !l.get_int("training_mode", 0, &training)) return false;
  if (spatial != 1) return l.fail("spatial = 0 is not supported");
  if (training != 0) return l.fail("training_mode is not supported");
  for (size_t i = 0; i < 5; ++i) {
    if (!l.data(i)) return false;
  }
  // Opsets before 14 list up to four training outputs, which must be left out.
  return l.output(l.opset() >= 14 ? 3 : 5);
}

// Squeeze and Unsqueeze: the same elements under a new shape (kCopy), with
// axes from the attribute before opset 13 and an inline i64 input from 13;
// the declared output must be the operator's shape.
bool lower_squeeze(Lowering& l, bool unsqueeze) {
  l.node().op = Op::kCopy;
  const bool axes_input = l.opset() >= 13;
  if (!l.check_attributes({{"axes", 1}}) || !l.check_inputs(1, axes_input ? 2 : 1)) return false;
  if (axes_input && l.has("axes")) return l.fail("attribute 'axes' is an input from opset 13");
  Shape axes;
  if (!l.get_ints("axes", &axes)) return false;
  if (axes_input && l.present(1) && !l.constant_i64s(1, &axes)) return false;
  if (!l.moved(0) || !l.moved_output(1)) return false;
  const Shape x = l.shape_of(0);
  const int64_t out_rank = static_cast<int64_t>(x.size()) + (unsqueeze ? static_cast<int64_t>(axes.size()) : 0);
  if (unsqueeze && axes.empty()) return l.fail("Unsqueeze needs axes");
  std::vector<bool> named(static_cast<size_t>(unsqueeze ? out_rank : static_cast<int64_t>(x.size())), false);
  const int64_t rank = static_cast<int64_t>(named.size());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (named[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    named[static_cast<size_t>(a)] = true;
  }
  if (l.open_shapes()) {
    // Per binding: kept dimensions copied from the input, inserted ones 1.
    // Squeeze's dropped dimensions must be 1 then (bind_shapes checks the
    // element count); without axes, which ones drop depends on the binding.
    Shape blob_spec;
    if (unsqueeze) {
      int64_t next = 0;
      for (int64_t d = 0; d < out_rank; ++d) blob_spec.push_back(named[static_cast<size_t>(d)] ? 1 : -2 - next++);
    } else {
      if (axes.empty()) return l.fail("Squeeze without axes of input " + detail::shape_string(x) +
                                      " with open dimensions");
      for (size_t d = 0; d < x.size(); ++d) {
        if (named[d] && x[d] > 1) return l.fail("axis " + std::to_string(d) + " has extent " + std::to_string(x[d]) + ", not 1");
        if (!named[d]) blob_spec.push_back(-2 - static_cast<int64_t>(d));
      }
    }
    l.node().ints = std::move(blob_spec);
    return true;
  }
  Shape want;
  if (unsqueeze) {
    size_t next = 0;
    for (int64_t d = 0; d < out_rank; ++d) want.push_back(named[static_cast<size_t>(d)] ? 1 : x[next++]);
  } else {
    for (size_t d = 0; d < x.size(); ++d) {
      const bool drop = axes.empty() ? x[d] == 1 : static_cast<bool>(named[d]);
      if (drop && x[d] != 1) return l.fail("axis " + std::to_string(d) + " has extent " + std::to_string(x[d]) + ", not 1");
      if (!drop) want.push_back(x[d]);
    }
  }
  if (want != l.output_shape()) {
    return l.fail("the output is declared " + detail::shape_string(l.output_shape()) + ", the operator gives " +
                  detail::shape_string(want));
  }
  return true;
}

// Open graphs (ABI 1.2): the probe an open dimension takes when a node's
// shape rule is checked at compile time. Big enough for any window a model
// slides over a map whose size is left open.
constexpr int64_t kOpenProbe = 64;

Shape probe_shape(const Shape& s) {
  Shape p = s;
  for (int64_t& d : p) d = d < 0 ? kOpenProbe : d;
  return p;
}

}  // namespace

// Operators whose blob form fixes what an open dimension decides (Slice's,
// Split's and Gather's index tables, SAME padding, Pad's checks against the
// input's extent) are refused when their data input is open; everything
// else is checked per node by check_open_node (a Resize by scales takes the
// open form whose taps bind_shapes makes per binding; lower_resize refuses
// one to sizes).
bool open_shapes_ok(const sdk::GraphView&, const sdk::NodeView& node, std::string* why) {
  if (node.input_count() == 0 || !node.has_input(0) || !is_open(node.input(0).shape())) return true;
  const std::string op = node.op_type();
  const std::string x = detail::shape_string(node.input(0).shape());
  if (op == "Slice" || op == "Split" || op == "Gather" || op == "Pad") {
    *why = op + " of an input with open dimensions " + x +
           " (its index tables are resolved at compile time)";
    return false;
  }
  if (op == "Conv" || op == "QLinearConv" || op == "ConvInteger" || op == "MaxPool" || op == "AveragePool") {
    std::string auto_pad;
    if (!node.get_string("auto_pad", "NOTSET", &auto_pad).ok()) return true;  // dispatch says why
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      *why = "auto_pad " + auto_pad + " over an input with open dimensions " + x +
             " (its pads depend on the binding)";
      return false;
    }
  }
  return true;
}

// A lowered node of an open graph: a Copy between open shapes carries a
// shape spec (identity when the declared shapes are the same), and every
// node's shape rule must hold at a probe binding (open dimensions 64) with
// a result that fits the declared output. bind_shapes checks each real
// binding again at execute.
bool check_open_node(const sdk::GraphView& g, std::vector<BlobNode>* nodes, std::string* why) {
  for (BlobNode& n : *nodes) {
    std::vector<Shape> shapes;
    std::vector<loom_dtype_t> dtypes;
    for (uint32_t t : n.inputs) {
      shapes.push_back(probe_shape(g.tensor(t).shape()));
      dtypes.push_back(g.tensor(t).dtype());
    }
    const sdk::TensorView y = g.tensor(n.outputs[0]);
    const Shape declared = y.shape();
    if (n.op == Op::kCopy && n.ints.empty() && !n.inputs.empty() &&
        (is_open(declared) || is_open(g.tensor(n.inputs[0]).shape()))) {
      if (declared != g.tensor(n.inputs[0]).shape()) {
        *why = "Copy from " + detail::shape_string(g.tensor(n.inputs[0]).shape()) + " to " +
               detail::shape_string(declared) + " cannot be expressed per binding";
        return false;
      }
      for (size_t d = 0; d < declared.size(); ++d) n.ints.push_back(-2 - static_cast<int64_t>(d));
    }
    std::vector<const Shape*> in;
    for (const Shape& s : shapes) in.push_back(&s);
    Shape inferred;
    std::string error;
    if (!infer_output_shape(n, in, &inferred, &error) || !check_dtypes(n, dtypes, y.dtype(), &error)) {
      *why = error + " (open dimensions probed at " + std::to_string(kOpenProbe) + ")";
      return false;
    }
    // Where every operand is static, the output must be exactly the rule's.
    bool any_open = is_open(declared);
    for (uint32_t t : n.inputs) any_open = any_open || is_open(g.tensor(t).shape());
    if (n.op == Op::kCopy && n.ints.empty()) continue;  // static: its lowering checked the shapes
    if (!(any_open ? shape_fits(inferred, declared) : inferred == declared)) {
      *why = "the output is declared " + detail::shape_string(declared) + " but the operator gives " +
             detail::shape_string(inferred) + (any_open ? " with open dimensions probed at " +
                                                              std::to_string(kOpenProbe)
                                                        : std::string());
      return false;
    }
  }
  return true;
}

namespace {

bool dispatch(Lowering& l, const std::string& op) {
  if (op == "Add") return lower_binary(l, Op::kAdd, 7);
  if (op == "Sub") return lower_binary(l, Op::kSub, 7);
  if (op == "Mul") return lower_binary(l, Op::kMul, 7);
  if (op == "Div") return lower_binary(l, Op::kDiv, 7);
  if (op == "Pow") return lower_binary(l, Op::kPow, 7);
  if (op == "PRelu") return lower_binary(l, Op::kPRelu, 7);
  if (op == "Max") return lower_max_min(l, Op::kMax);
  if (op == "Min") return lower_max_min(l, Op::kMin);
  if (op == "Relu") return lower_unary(l, Op::kRelu, 6);
  if (op == "Sigmoid") return lower_unary(l, Op::kSigmoid, 6);
  if (op == "Tanh") return lower_unary(l, Op::kTanh, 6);
  if (op == "Exp") return lower_unary(l, Op::kExp, 6);
  if (op == "Log") return lower_unary(l, Op::kLog, 6);
  if (op == "Sqrt") return lower_unary(l, Op::kSqrt, 6);
  if (op == "Neg") return lower_unary(l, Op::kNeg, 6);
  if (op == "Abs") return lower_unary(l, Op::kAbs, 6);
  if (op == "Reciprocal") return lower_unary(l, Op::kReciprocal, 6);
  if (op == "Floor") return lower_unary(l, Op::kFloor, 6);
  if (op == "Ceil") return lower_unary(l, Op::kCeil, 6);
  if (op == "Round") return lower_unary(l, Op::kRound, 11);
  if (op == "Erf") return lower_unary(l, Op::kErf, 9);
  if (op == "Softplus") return lower_unary(l, Op::kSoftplus, 1);
  if (op == "HardSwish") return lower_unary(l, Op::kHardSwish, 14);
  BlobNode& n = l.node();
  if (op == "LeakyRelu") {
    return lower_unary(l, Op::kLeakyRelu, 6, {{"alpha", 1}}) && l.get_float("alpha", 0.01f, &n.alpha);
  }
  if (op == "Elu") {
    return lower_unary(l, Op::kElu, 6, {{"alpha", 1}}) && l.get_float("alpha", 1.0f, &n.alpha);
  }
  if (op == "Selu") {
    return lower_unary(l, Op::kSelu, 6, {{"alpha", 1}, {"gamma", 1}}) &&
           l.get_float("alpha", 1.67326319217681884765625f, &n.alpha) &&
           l.get_float("gamma", 1.05070102214813232421875f, &n.beta);
  }
  if (op == "HardSigmoid") {
    return lower_unary(l, Op::kHardSigmoid, 6, {{"alpha", 1}, {"beta", 1}}) &&
           l.get_float("alpha", 0.2f, &n.alpha) && l.get_float("beta", 0.5f, &n.beta);
  }
  if (op == "Clip") return lower_clip(l);
  if (op == "Identity") return lower_copy_same(l);
  if (op == "Dropout") return lower_dropout(l);
  if (op == "Softmax") return lower_softmax(l, Op::kSoftmax);
  if (op == "LogSoftmax") return lower_softmax(l, Op::kLogSoftmax);
  if (op == "Concat") return lower_concat(l);
  if (op == "Reshape") return lower_reshape(l);
  if (op == "Flatten") return lower_flatten(l);
  if (op == "Squeeze") return lower_squeeze(l, false);
  if (op == "Slice") return lower_slice(l);
  if (op == "Unsqueeze") return lower_squeeze(l, true);
  if (op == "Transpose") return lower_transpose(l);
  if (op == "MatMul") {
    n.op = Op::kMatMul;
    return l.check_attributes({}) && l.check_inputs(2, 2) && l.data(0) && l.data(1) && l.output(1);
  }
  if (op == "Gemm") return lower_gemm(l);
  if (op == "Conv") return lower_window(l, Op::kConv);
  if (op == "MaxPool") return lower_window(l, Op::kMaxPool);
  if (op == "AveragePool") return lower_window(l, Op::kAveragePool);
  if (op == "GlobalAveragePool") {
    n.op = Op::kGlobalAveragePool;
    return l.check_attributes({}) && l.check_inputs(1, 1) && l.data(0) && l.output(1);
  }
  if (op == "BatchNormalization") return lower_batch_norm(l);
  if (op == "ReduceMean") return lower_reduce(l, Op::kReduceMean);
  if (op == "ReduceSum") return lower_reduce(l, Op::kReduceSum);
  if (op == "ReduceMax") return lower_reduce(l, Op::kReduceMax);
  if (op == "ReduceMin") return lower_reduce(l, Op::kReduceMin);
  if (op == "Gather") return lower_gather(l);
  if (op == "Resize") return lower_resize(l);
  if (op == "ConvTranspose") return lower_conv_transpose(l);
  if (op == "LayerNormalization") return lower_layer_norm(l);
  if (op == "Split") return lower_split(l);
  if (op == "Pad") return lower_pad(l);
  if (op == "Where") return lower_where(l);
  if (op == "Equal") return lower_equal(l);
  if (op == "Cast") return lower_cast(l);
  if (op == "QuantizeLinear") return lower_quantize(l);
  if (op == "DequantizeLinear") return lower_dequantize(l);
  if (op == "QLinearConv") return lower_qlinear_conv(l);
  if (op == "QLinearMatMul") return lower_qlinear_matmul(l);
  if (op == "ConvInteger") return lower_conv_integer(l);
  if (op == "MatMulInteger") return lower_matmul_integer(l);
  if (op == "DynamicQuantizeLinear") return lower_dynamic_quantize(l);
  if (op == "LSTM") return lower_recurrent(l, Op::kLstm);
  if (op == "GRU") return lower_recurrent(l, Op::kGru);
  if (op == "RNN") return lower_recurrent(l, Op::kRnn);
  return l.fail("operator " + op + " is not implemented by cpu-simd");
}

}  // namespace
}  // namespace lowering

bool lower_node(const sdk::GraphView& g, size_t index, std::vector<BlobNode>* out, std::string* why,
                bool* invalid) {
  if (invalid != nullptr) *invalid = false;
  using lowering::Shape;
  const sdk::NodeView node = g.node(index);
  out->assign(1, BlobNode{});
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    *why = "domain '" + node.domain() + "' is not the default ONNX domain";
    return false;
  }
  if (node.opset() < 1) {
    *why = "opset " + std::to_string(node.opset()) + " is not valid";
    return false;
  }
  if (g.has_open_dims() && !lowering::open_shapes_ok(g, node, why)) return false;
  lowering::Lowering l(g, index, out, why);
  if (!lowering::dispatch(l, node.op_type())) {
    if (invalid != nullptr) *invalid = l.is_invalid();
    return false;
  }
  if (g.has_open_dims()) return lowering::check_open_node(g, out, why);
  // The output shape the operator's rule gives must be the declared one
  // (kCopy's shapes were checked by its lowering), and the dtypes must
  // follow the operator's dtype rule.
  // Scratch tensors (kScratchTensor + k) are f32 of the shape their
  // writer's rule gives.
  std::vector<Shape> scratch;
  for (const BlobNode& blob_node : *out) {
    std::vector<Shape> shapes;
    std::vector<loom_dtype_t> dtypes;
    for (uint32_t t : blob_node.inputs) {
      const bool own = t >= kScratchTensor;
      if (own && t - kScratchTensor >= scratch.size()) {
        *why = "reads scratch tensor " + std::to_string(t - kScratchTensor) + " before it is written";
        return false;
      }
      shapes.push_back(own ? scratch[t - kScratchTensor] : g.tensor(t).shape());
      dtypes.push_back(own ? LOOM_DTYPE_F32 : g.tensor(t).dtype());
    }
    std::vector<const Shape*> in;
    for (const Shape& s : shapes) in.push_back(&s);
    Shape inferred;
    std::string error;
    const uint32_t y_id = blob_node.outputs[0];
    if (y_id >= kScratchTensor) {
      if (!infer_output_shape(blob_node, in, &inferred, &error) ||
          !check_dtypes(blob_node, dtypes, LOOM_DTYPE_F32, &error)) {
        *why = error;
        return false;
      }
      scratch.resize(std::max<size_t>(scratch.size(), y_id - kScratchTensor + 1));
      scratch[y_id - kScratchTensor] = inferred;
      continue;
    }
    const int32_t y = static_cast<int32_t>(y_id);
    if (!infer_output_shape(blob_node, in, &inferred, &error) ||
        !check_dtypes(blob_node, dtypes, g.tensor(static_cast<size_t>(y)).dtype(), &error)) {
      *why = error;
      return false;
    }
    const Shape declared = g.tensor(static_cast<size_t>(y)).shape();
    if (blob_node.op != Op::kCopy && inferred != declared) {
      *why = "the output is declared " + detail::shape_string(declared) + " but the operator gives " +
             detail::shape_string(inferred);
      return false;
    }
  }
  return true;
}

}  // namespace loom::cpu_simd
