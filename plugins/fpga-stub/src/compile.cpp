// The compile side: graph.fbs in, a bitstream out. A node is claimed only
// when lower_node maps it to one device operator and check_node (the same
// check the loader runs) accepts it, and while the claimed nodes' tensors
// fit the device's memory; anything else is declined with its reason so the
// partitioner places it elsewhere.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "loom/sdk/graph.hpp"
#include "bind.hpp"
#include "plugin.hpp"
#include "node_check.hpp"

namespace loom::fpga_stub {
namespace {

using Shape = std::vector<int64_t>;
using sdk::GraphView;
using sdk::TensorView;

constexpr uint64_t kRegionAlignment = 64;

// An inline constant: bytes in the graph, not an execute input.
bool is_inline_constant(const TensorView& t) { return t.has_data() && !t.is_graph_input(); }

int64_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return static_cast<int64_t>(b);
}

// One node mapped onto a device operator; inputs name graph tensors. The
// node's reads go through sdk::NodeView (the attribute allow-list, typed
// attributes, constant operands), as a vendor's plugin would.
class Lowering {
 public:
  Lowering(const GraphView& g, size_t index, BsNode* out, std::string* why)
      : node_(g.node(index)), out_(out), why_(why) {}

  bool fail(std::string why) {
    *why_ = std::move(why);
    return false;
  }
  // True when `s` is OK; otherwise fail() with its message.
  bool ok(const Status& s) { return s.ok() || fail(s.message()); }
  int64_t opset() const { return node_.opset(); }
  bool has(const char* name) const { return node_.has_attribute(name); }
  bool allow(std::initializer_list<sdk::AttributeRule> names) { return ok(node_.check_attributes(names)); }
  bool get_int(const char* name, int64_t def, int64_t* v) { return ok(node_.get_int(name, def, v)); }
  bool get_float(const char* name, float def, float* v) { return ok(node_.get_float(name, def, v)); }
  bool get_ints(const char* name, Shape* v) { return ok(node_.get_ints(name, v)); }
  bool get_string(const char* name, const char* def, std::string* v) {
    return ok(node_.get_string(name, def, v));
  }
  size_t input_count() const { return node_.input_count(); }
  int32_t input(size_t i) const { return node_.has_input(i) ? node_.input_index(i) : -1; }

  // Takes inputs [0, n) as operands (absent ones stay -1), and the one output.
  bool operands(size_t min, size_t max) {
    const size_t n = input_count();
    if (n < min || n > max) return fail("has " + std::to_string(n) + " inputs");
    for (size_t i = 0; i < n; ++i) out_->inputs.push_back(input(i));
    while (!out_->inputs.empty() && out_->inputs.back() == -1) out_->inputs.pop_back();
    if (!node_.has_output(0)) return fail("has no output");
    for (size_t i = 1; i < node_.output_count(); ++i) {
      if (node_.has_output(i)) return fail("optional output " + std::to_string(i) + " is not supported");
    }
    out_->output = node_.output_index(0);
    return true;
  }
  // An inline f32 scalar constant, or `def` when the input is absent.
  bool const_scalar(size_t i, float def, float* v) {
    *v = def;
    return input(i) == -1 || ok(node_.constant_float(i, v));
  }
  BsNode& node() { return *out_; }
  Shape in_shape(size_t i) const { return node_.input(i).shape(); }

 private:
  const sdk::NodeView node_;
  BsNode* out_;
  std::string* why_;
};

// Conv-family and pools: the window parameters, auto_pad resolved.
bool lower_window(Lowering& l, bool conv, bool pool_ceil) {
  Shape kernel, strides, dilations, pads;
  std::string auto_pad;
  int64_t group = 1, ceil = 0, include = 0;
  if (!l.get_ints("kernel_shape", &kernel) || !l.get_ints("strides", &strides) ||
      !l.get_ints("dilations", &dilations) || !l.get_ints("pads", &pads) ||
      !l.get_string("auto_pad", "NOTSET", &auto_pad) || !l.get_int("group", 1, &group) ||
      !l.get_int("ceil_mode", 0, &ceil) || !l.get_int("count_include_pad", 0, &include)) {
    return false;
  }
  if (!pool_ceil && ceil != 0) return l.fail("ceil_mode is not supported here");
  const Shape x = l.in_shape(0);
  if (x.size() != 4) return l.fail("only 2-D windows (rank-4 input) are supported");
  if (conv) {
    const Shape w = l.in_shape(l.node().op == Op::kQLinearConv ? 3 : 1);
    if (w.size() != 4) return l.fail("W must have rank 4");
    if (!kernel.empty() && kernel != Shape{w[2], w[3]}) return l.fail("kernel_shape disagrees with W");
    kernel = {w[2], w[3]};
  }
  if (kernel.size() != 2) return l.fail("kernel_shape must have 2 entries");
  if (strides.empty()) strides = {1, 1};
  if (dilations.empty()) dilations = {1, 1};
  if (strides.size() != 2 || dilations.size() != 2) return l.fail("strides and dilations need 2 entries");
  Shape begin{0, 0}, end{0, 0};
  if (auto_pad == "NOTSET") {
    if (!pads.empty() && pads.size() != 4) return l.fail("pads must have 4 entries");
    if (pads.size() == 4) begin = {pads[0], pads[1]}, end = {pads[2], pads[3]};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The pads follow the input's extent: fixed in the bitstream, so only
    // for a static one.
    if (x[2] < 0 || x[3] < 0) return l.fail("auto_pad " + auto_pad + " over an open spatial dimension");
    for (size_t d = 0; d < 2; ++d) {
      if (strides[d] < 1 || dilations[d] < 1 || kernel[d] < 1) return l.fail("bad window");
      const int64_t out = (x[2 + d] + strides[d] - 1) / strides[d];
      int64_t total = (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - x[2 + d];
      if (total < 0) total = 0;
      begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[d] = total - begin[d];
    }
  } else if (auto_pad != "VALID") {
    return l.fail("auto_pad '" + auto_pad + "' is not supported");
  }
  l.node().params = {group, kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1],
                     begin[0], begin[1], end[0], end[1], include, ceil};
  return true;
}

bool lower(const GraphView& g, size_t index, BsNode* out, std::string* why) {
  const sdk::NodeView node = g.node(index);
  Lowering l(g, index, out, why);
  const std::string domain = node.domain();
  if (!domain.empty() && domain != "ai.onnx") return l.fail("domain '" + domain + "' is not served");
  const std::string op = node.op_type();
  BsNode& n = l.node();
  if (op == "Conv" || op == "ConvInteger" || op == "QLinearConv") {
    n.op = op == "Conv" ? Op::kConv : op == "ConvInteger" ? Op::kConvInteger : Op::kQLinearConv;
    const size_t max = op == "Conv" ? 3 : op == "ConvInteger" ? 4 : 9;
    return l.allow({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}) &&
           l.operands(op == "QLinearConv" ? 8 : 2, max) && lower_window(l, true, false);
  }
  if (op == "MaxPool" || op == "AveragePool") {
    n.op = op == "MaxPool" ? Op::kMaxPool : Op::kAveragePool;
    const bool max = n.op == Op::kMaxPool;
    if (max ? !l.allow({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"})
            : !l.allow({"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides",
                        "dilations"})) {
      return false;
    }
    if (!max && l.opset() < 19 && l.has("dilations")) return l.fail("dilations need opset 19");
    return l.operands(1, 1) && lower_window(l, false, true);
  }
  if (op == "GlobalAveragePool" || op == "Relu" || op == "MatMul" || op == "MatMulInteger" ||
      op == "QLinearMatMul") {
    n.op = op == "GlobalAveragePool" ? Op::kGlobalAveragePool
           : op == "Relu"            ? Op::kRelu
           : op == "MatMul"          ? Op::kMatMul
           : op == "MatMulInteger"   ? Op::kMatMulInteger
                                     : Op::kQLinearMatMul;
    const size_t min = n.op == Op::kQLinearMatMul ? 8 : n.op == Op::kMatMul || n.op == Op::kMatMulInteger ? 2 : 1;
    const size_t max = n.op == Op::kQLinearMatMul ? 8 : n.op == Op::kMatMulInteger ? 4 : min;
    if (n.op == Op::kRelu && l.opset() < 6) return l.fail("Relu before opset 6 is not supported");
    return l.allow({}) && l.operands(min, max);
  }
  if (op == "Add" || op == "Mul") {
    n.op = op == "Add" ? Op::kAdd : Op::kMul;
    if (l.opset() < 7) return l.fail("legacy broadcasting (opset < 7) is not supported");
    return l.allow({}) && l.operands(2, 2);
  }
  if (op == "Gemm") {
    n.op = Op::kGemm;
    int64_t ta = 0, tb = 0;
    float alpha = 1.0f, beta = 1.0f;
    if (l.opset() < 7) return l.fail("Gemm before opset 7 is not supported");
    if (!l.allow({"alpha", "beta", "transA", "transB"}) || !l.get_int("transA", 0, &ta) ||
        !l.get_int("transB", 0, &tb) || !l.get_float("alpha", 1.0f, &alpha) || !l.get_float("beta", 1.0f, &beta) ||
        !l.operands(2, 3)) {
      return false;
    }
    n.params = {ta, tb, f32_bits(alpha), f32_bits(beta)};
    return true;
  }
  if (op == "Clip") {
    n.op = Op::kClip;
    float lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
    if (l.opset() < 11) {
      if (l.opset() < 6 || !l.allow({"min", "max"}) || !l.get_float("min", lo, &lo) || !l.get_float("max", hi, &hi) ||
          !l.operands(1, 1)) {
        return false;
      }
    } else {
      const float inf = std::numeric_limits<float>::infinity();
      if (!l.allow({}) || !l.const_scalar(1, -inf, &lo) || !l.const_scalar(2, inf, &hi) || !l.operands(1, 3)) {
        return false;
      }
      n.inputs.resize(1);
    }
    n.params = {f32_bits(lo), f32_bits(hi)};
    return true;
  }
  if (op == "Concat") {
    n.op = Op::kConcat;
    int64_t axis = 0;
    if (!l.allow({"axis"}) || !l.has("axis") || !l.get_int("axis", 0, &axis) ||
        !l.operands(1, kMaxNodeInputs)) {
      return false;
    }
    const auto rank = static_cast<int64_t>(l.in_shape(0).size());
    if (axis < 0 && l.opset() >= 11) axis += rank;
    n.params = {axis};
    return true;
  }
  if (op == "Reshape" || op == "Flatten") {
    n.op = op == "Reshape" ? Op::kReshape : Op::kFlatten;
    if (n.op == Op::kReshape) {
      if (l.opset() < 5 || !l.allow({"allowzero"}) || !l.operands(2, 2)) return false;
      if (!is_inline_constant(g.tensor(static_cast<size_t>(n.inputs[1])))) return l.fail("the shape must be an inline constant");
      n.inputs.resize(1);
      return true;
    }
    return l.allow({"axis"}) && l.operands(1, 1);
  }
  if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    n.op = op == "QuantizeLinear" ? Op::kQuantizeLinear : Op::kDequantizeLinear;
    int64_t axis = 1;
    if (l.opset() >= 19) return l.fail("opset " + std::to_string(l.opset()) + " forms are not supported");
    if (!l.allow({"axis"}) || !l.get_int("axis", 1, &axis) || !l.operands(2, 3)) return false;
    const auto rank = static_cast<int64_t>(l.in_shape(0).size());
    if (axis < 0) axis += rank;
    if (rank == 0) axis = 0;
    n.params = {axis};
    return true;
  }
  return l.fail("operator " + op + " is not on the device");
}

// Maps a graph tensor into `bs` (as kIo for now; callers settle storage).
uint32_t add_tensor(const GraphView& g, int32_t t, Bitstream* bs) {
  BsTensor bt;
  bt.dtype = g.tensor(static_cast<size_t>(t)).dtype();
  bt.shape = g.tensor(static_cast<size_t>(t)).shape();
  const uint64_t n = element_count(bt.shape);
  bt.bytes = n > kMaxElements || is_open(bt.shape) ? 0 : n * dtype_size(bt.dtype);
  bs->tensors.push_back(std::move(bt));
  return static_cast<uint32_t>(bs->tensors.size() - 1);
}

// Open shapes (ABI 1.2): a node over open tensors is claimed when its rule
// holds with every open input dimension at each of two probe sizes, and its
// output agrees with the dimensions the graph fixes. Whatever a binding
// decides beyond that (a window larger than the input, mismatched open
// extents) is checked again per binding (bind_shapes) with a one-line error.
// Reshape and Flatten keep no shape rule in the bitstream: over open data
// they are declined, and the host places them elsewhere.
Status check_open(const Bitstream& one, const BsNode& node) {
  if (node.op == Op::kReshape || node.op == Op::kFlatten) {
    return sdk::invalid_argument(std::string(op_name(node.op)) + " over open dimensions is not on the device");
  }
  for (int64_t probe : {64, 97}) {
    std::vector<std::vector<int64_t>> inputs;
    Bitstream bs = one;
    for (size_t i = 0; i < bs.tensors.size(); ++i) {
      if (static_cast<int32_t>(i) == node.output) continue;
      for (int64_t& d : bs.tensors[i].shape) d = d == -1 ? probe : d;
      bs.tensors[i].bytes = element_count(bs.tensors[i].shape) * dtype_size(bs.tensors[i].dtype);
      bs.tensors[i].storage = Storage::kIo;
      bs.inputs.push_back(static_cast<uint32_t>(i));
      inputs.push_back(bs.tensors[i].shape);
    }
    Bitstream bound;
    LOOM_SDK_RETURN_IF_ERROR(bind_shapes(bs, inputs, &bound));
  }
  return Status();
}

// Lowers node `index` and checks it alone, as the loader would.
bool claim(const GraphView& g, size_t index, BsNode* out, std::string* why) {
  BsNode node;
  if (!lower(g, index, &node, why)) return false;
  Bitstream one;
  BsNode local = node;
  for (int32_t& t : local.inputs) {
    if (t != -1) t = static_cast<int32_t>(add_tensor(g, t, &one));
  }
  local.output = static_cast<int32_t>(add_tensor(g, local.output, &one));
  bool open = false;
  for (const BsTensor& t : one.tensors) {
    open = open || is_open(t.shape);
    if (dtype_size(t.dtype) == 0 || t.shape.size() > LOOM_MAX_RANK ||
        (!is_open(t.shape) && element_count(t.shape) > kMaxElements)) {
      *why = "a tensor has dtype or shape the device does not take";
      return false;
    }
  }
  one.nodes.push_back(local);
  Status s = open ? check_open(one, local) : check_node(one, 0);
  if (!s.ok()) {
    *why = s.message();
    return false;
  }
  *out = std::move(node);
  return true;
}

uint64_t aligned(uint64_t v) { return (v + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment; }

}  // namespace

Status compile_supported(const Config& config, const void* data, size_t size, size_t node_count, bool* out) {
  GraphView g;
  LOOM_SDK_RETURN_IF_ERROR(GraphView::open(data, size, &g, /*allow_open_dims=*/true));
  if (g.node_count() != node_count) {
    return sdk::invalid_argument("compile_supported: node_count is " + std::to_string(node_count) +
                                 ", the graph has " + std::to_string(g.node_count()) + " nodes");
  }
  // The resource budget: every tensor a claimed node touches must fit the
  // device at once; nodes past the budget are declined.
  std::vector<bool> counted(g.tensor_count(), false);
  uint64_t used = 0;
  for (size_t n = 0; n < node_count; ++n) {
    BsNode node;
    std::string why;
    out[n] = claim(g, n, &node, &why);
    if (!out[n]) continue;
    uint64_t more = 0;
    std::vector<int32_t> touched = node.inputs;
    touched.push_back(node.output);
    for (int32_t t : touched) {
      if (t < 0 || counted[static_cast<size_t>(t)]) continue;
      more += aligned(g.tensor(static_cast<size_t>(t)).byte_size());
    }
    if (used + more > config.memory_bytes) {
      out[n] = false;
      continue;
    }
    used += more;
    for (int32_t t : touched) {
      if (t >= 0) counted[static_cast<size_t>(t)] = true;
    }
  }
  return Status();
}

Status compile_graph(const Config& config, const void* data, size_t size, Bitstream* out) {
  GraphView g;
  LOOM_SDK_RETURN_IF_ERROR(GraphView::open(data, size, &g, /*allow_open_dims=*/true));
  Bitstream bs;
  std::vector<int32_t> map(g.tensor_count(), -1);
  for (size_t i = 0; i < g.input_count(); ++i) {
    const int32_t t = g.input(i).index();
    if (map[static_cast<size_t>(t)] != -1) return sdk::invalid_argument("compile: a graph input is listed twice");
    map[static_cast<size_t>(t)] = static_cast<int32_t>(add_tensor(g, t, &bs));
    bs.inputs.push_back(static_cast<uint32_t>(map[static_cast<size_t>(t)]));
  }
  for (size_t n = 0; n < g.node_count(); ++n) {
    BsNode node;
    std::string why;
    const std::string label = g.node(n).label();
    if (!claim(g, n, &node, &why)) return sdk::invalid_argument("compile: " + label + " is not supported by fpga-stub: " + why);
    for (int32_t& t : node.inputs) {
      if (t == -1) continue;
      const auto gt = static_cast<size_t>(t);
      if (map[gt] == -1) {
        const TensorView tensor = g.tensor(gt);
        if (!is_inline_constant(tensor)) {
          return sdk::invalid_argument("compile: " + label + " reads a tensor nothing provides");
        }
        map[gt] = static_cast<int32_t>(add_tensor(g, t, &bs));
        BsTensor& bt = bs.tensors[static_cast<size_t>(map[gt])];
        if (tensor.data_size() != bt.bytes) return sdk::invalid_argument("compile: a constant of " + label + " has the wrong size");
        bt.storage = Storage::kConst;
        bt.offset = bs.weights.size();
        const auto* p = reinterpret_cast<const std::byte*>(tensor.data());
        bs.weights.insert(bs.weights.end(), p, p + bt.bytes);
        bs.weights.resize(aligned(bs.weights.size()));
      }
      t = map[gt];
    }
    const auto o = static_cast<size_t>(node.output);
    if (map[o] != -1) return sdk::invalid_argument("compile: " + label + " writes a tensor that already has a producer");
    map[o] = static_cast<int32_t>(add_tensor(g, node.output, &bs));
    BsTensor& bt = bs.tensors[static_cast<size_t>(map[o])];
    if (g.tensor(o).is_graph_output()) {
      bt.storage = Storage::kIo;
    } else if (is_open(bt.shape)) {
      bt.storage = Storage::kScratch;  // laid out per binding (bind_shapes)
    } else {
      bt.storage = Storage::kScratch;
      bt.offset = bs.activation_bytes;
      bs.activation_bytes += aligned(bt.bytes);
    }
    node.output = map[o];
    bs.nodes.push_back(std::move(node));
  }
  for (size_t i = 0; i < g.output_count(); ++i) {
    const auto t = static_cast<size_t>(g.output(i).index());
    if (map[t] == -1) return sdk::invalid_argument("compile: a graph output is not written by any node");
    bs.outputs.push_back(static_cast<uint32_t>(map[t]));
  }
  Status s = validate(bs);
  if (!s.ok()) return sdk::invalid_argument("compile: " + s.message());
  if (bs.footprint() > config.memory_bytes) {
    return sdk::resource_exhausted("compile: the subgraph needs " + std::to_string(bs.footprint()) +
                                   " bytes of device memory, fpga-stub devices have " +
                                   std::to_string(config.memory_bytes));
  }
  *out = std::move(bs);
  return Status();
}

}  // namespace loom::fpga_stub
