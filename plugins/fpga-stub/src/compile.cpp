// The compile side: graph.fbs in, a bitstream out. A node is claimed only
// when lower_node maps it to one device operator and check_node (the same
// check the loader runs) accepts it, and while the claimed nodes' tensors
// fit the device's memory; anything else is declined with its reason so the
// partitioner places it elsewhere.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "loom/graph/graph_generated.h"
#include "plugin.hpp"
#include "node_check.hpp"

namespace loom::fpga_stub {
namespace {

namespace gfb = loom::graph::fb;
using Shape = std::vector<int64_t>;

constexpr flatbuffers::uoffset_t kMaxDepth = 64;
constexpr flatbuffers::uoffset_t kMaxTables = 10'000'000;
constexpr uint64_t kRegionAlignment = 64;

struct GraphView {
  const gfb::Graph* graph = nullptr;
  size_t tensors = 0;
  std::vector<bool> is_input;
  const gfb::Tensor& tensor(int32_t i) const { return *graph->tensors()->Get(static_cast<uint32_t>(i)); }
  Shape shape(int32_t i) const {
    const auto* s = tensor(i).shape();
    return s == nullptr ? Shape{} : Shape(s->begin(), s->end());
  }
  size_t node_count() const { return graph->nodes() == nullptr ? 0 : graph->nodes()->size(); }
  const gfb::Node& node(size_t i) const { return *graph->nodes()->Get(static_cast<uint32_t>(i)); }
  bool is_const(int32_t t) const { return tensor(t).data() != nullptr && !is_input[static_cast<size_t>(t)]; }
};

Status bad_graph(const std::string& what) { return sdk::invalid_argument("graph.fbs: " + what); }

Status open_graph(const void* data, size_t size, GraphView* out) {
  if (data == nullptr || size < 8) return bad_graph("empty buffer");
  if (!gfb::GraphBufferHasIdentifier(data)) return bad_graph("missing file identifier \"LMGR\"");
  flatbuffers::Verifier v(static_cast<const uint8_t*>(data), size, kMaxDepth, kMaxTables);
  if (!gfb::VerifyGraphBuffer(v)) return bad_graph("the buffer of " + std::to_string(size) + " bytes fails verification");
  GraphView g;
  g.graph = gfb::GetGraph(data);
  g.tensors = g.graph->tensors() == nullptr ? 0 : g.graph->tensors()->size();
  g.is_input.assign(g.tensors, false);
  auto check = [&](int32_t t, bool absent_ok, const std::string& where) -> Status {
    if ((t == -1 && absent_ok) || (t >= 0 && static_cast<size_t>(t) < g.tensors)) return Status();
    return bad_graph(where + ": tensor index " + std::to_string(t) + " out of range");
  };
  if (g.graph->inputs() != nullptr) {
    for (uint32_t i = 0; i < g.graph->inputs()->size(); ++i) {
      LOOM_SDK_RETURN_IF_ERROR(check(g.graph->inputs()->Get(i), false, "graph input " + std::to_string(i)));
      g.is_input[static_cast<size_t>(g.graph->inputs()->Get(i))] = true;
    }
  }
  if (g.graph->outputs() != nullptr) {
    for (uint32_t i = 0; i < g.graph->outputs()->size(); ++i) {
      LOOM_SDK_RETURN_IF_ERROR(check(g.graph->outputs()->Get(i), false, "graph output " + std::to_string(i)));
    }
  }
  for (size_t n = 0; n < g.node_count(); ++n) {
    const gfb::Node& node = g.node(n);
    for (const auto* list : {node.inputs(), node.outputs()}) {
      if (list == nullptr) continue;
      for (uint32_t i = 0; i < list->size(); ++i) {
        LOOM_SDK_RETURN_IF_ERROR(check(list->Get(i), true, "node " + std::to_string(n)));
      }
    }
  }
  *out = g;
  return Status();
}

int64_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return static_cast<int64_t>(b);
}

// One node mapped onto a device operator; inputs name graph tensors.
class Lowering {
 public:
  Lowering(const GraphView& g, size_t index, BsNode* out, std::string* why)
      : g_(g), node_(g.node(index)), out_(out), why_(why) {}

  bool fail(std::string why) {
    *why_ = std::move(why);
    return false;
  }
  int64_t opset() const { return node_.opset(); }
  const gfb::Attribute* find(const char* name) const {
    if (node_.attributes() == nullptr) return nullptr;
    for (const gfb::Attribute* a : *node_.attributes()) {
      if (a->name()->str() == name) return a;
    }
    return nullptr;
  }
  bool allow(std::initializer_list<const char*> names) {
    if (node_.attributes() == nullptr) return true;
    for (const gfb::Attribute* a : *node_.attributes()) {
      bool ok = false;
      for (const char* n : names) ok = ok || a->name()->str() == n;
      if (!ok) return fail("attribute '" + a->name()->str() + "' is not supported");
    }
    return true;
  }
  bool get_int(const char* name, int64_t def, int64_t* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::int_) return fail(std::string("attribute '") + name + "' is not an int");
    *v = a->i();
    return true;
  }
  bool get_float(const char* name, float def, float* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::float_) return fail(std::string("attribute '") + name + "' is not a float");
    *v = a->f();
    return true;
  }
  bool get_ints(const char* name, Shape* v) {
    const gfb::Attribute* a = find(name);
    v->clear();
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::ints) return fail(std::string("attribute '") + name + "' is not ints");
    if (a->ints() != nullptr) v->assign(a->ints()->begin(), a->ints()->end());
    return true;
  }
  bool get_string(const char* name, const char* def, std::string* v) {
    const gfb::Attribute* a = find(name);
    *v = def;
    if (a == nullptr) return true;
    if (a->kind() != gfb::AttributeKind::string) return fail(std::string("attribute '") + name + "' is not a string");
    *v = a->s() == nullptr ? "" : a->s()->str();
    return true;
  }
  size_t input_count() const { return node_.inputs() == nullptr ? 0 : node_.inputs()->size(); }
  int32_t input(size_t i) const { return i < input_count() ? node_.inputs()->Get(static_cast<uint32_t>(i)) : -1; }

  // Takes inputs [0, n) as operands (absent ones stay -1), and the one output.
  bool operands(size_t min, size_t max) {
    const size_t n = input_count();
    if (n < min || n > max) return fail("has " + std::to_string(n) + " inputs");
    for (size_t i = 0; i < n; ++i) out_->inputs.push_back(input(i));
    while (!out_->inputs.empty() && out_->inputs.back() == -1) out_->inputs.pop_back();
    const auto* outs = node_.outputs();
    if (outs == nullptr || outs->size() == 0 || outs->Get(0) == -1) return fail("has no output");
    for (uint32_t i = 1; i < outs->size(); ++i) {
      if (outs->Get(i) != -1) return fail("optional output " + std::to_string(i) + " is not supported");
    }
    out_->output = outs->Get(0);
    return true;
  }
  // An inline f32 scalar constant, or `def` when the input is absent.
  bool const_scalar(size_t i, float def, float* v) {
    *v = def;
    if (input(i) == -1) return true;
    const gfb::Tensor& t = g_.tensor(input(i));
    if (!g_.is_const(input(i)) || t.dtype() != gfb::DType::f32 || t.data()->size() != 4) {
      return fail("input " + std::to_string(i) + " must be an inline f32 scalar constant");
    }
    std::memcpy(v, t.data()->data(), 4);
    return true;
  }
  BsNode& node() { return *out_; }
  Shape in_shape(size_t i) const { return g_.shape(input(i)); }

 private:
  const GraphView& g_;
  const gfb::Node& node_;
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
  const gfb::Node& node = g.node(index);
  Lowering l(g, index, out, why);
  const std::string domain = node.domain() == nullptr ? "" : node.domain()->str();
  if (!domain.empty() && domain != "ai.onnx") return l.fail("domain '" + domain + "' is not served");
  const std::string op = node.op_type()->str();
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
    if (!max && l.opset() < 19 && l.find("dilations") != nullptr) return l.fail("dilations need opset 19");
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
    if (!l.allow({"axis"}) || l.find("axis") == nullptr || !l.get_int("axis", 0, &axis) ||
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
      if (!g.is_const(n.inputs[1])) return l.fail("the shape must be an inline constant");
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
  bt.dtype = static_cast<loom_dtype_t>(g.tensor(t).dtype());
  bt.shape = g.shape(t);
  const uint64_t n = element_count(bt.shape);
  bt.bytes = n > kMaxElements ? 0 : n * dtype_size(bt.dtype);
  bs->tensors.push_back(std::move(bt));
  return static_cast<uint32_t>(bs->tensors.size() - 1);
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
  for (const BsTensor& t : one.tensors) {
    if (dtype_size(t.dtype) == 0 || element_count(t.shape) > kMaxElements || t.shape.size() > LOOM_MAX_RANK) {
      *why = "a tensor has dtype or shape the device does not take";
      return false;
    }
  }
  one.nodes.push_back(local);
  Status s = check_node(one, 0);
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
  LOOM_SDK_RETURN_IF_ERROR(open_graph(data, size, &g));
  if (g.node_count() != node_count) {
    return sdk::invalid_argument("compile_supported: node_count is " + std::to_string(node_count) +
                                 ", the graph has " + std::to_string(g.node_count()) + " nodes");
  }
  // The resource budget: every tensor a claimed node touches must fit the
  // device at once; nodes past the budget are declined.
  std::vector<bool> counted(g.tensors, false);
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
      more += aligned(element_count(g.shape(t)) * dtype_size(static_cast<loom_dtype_t>(g.tensor(t).dtype())));
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
  LOOM_SDK_RETURN_IF_ERROR(open_graph(data, size, &g));
  Bitstream bs;
  std::vector<int32_t> map(g.tensors, -1);
  if (g.graph->inputs() != nullptr) {
    for (int32_t t : *g.graph->inputs()) {
      if (map[static_cast<size_t>(t)] != -1) return sdk::invalid_argument("compile: a graph input is listed twice");
      map[static_cast<size_t>(t)] = static_cast<int32_t>(add_tensor(g, t, &bs));
      bs.inputs.push_back(static_cast<uint32_t>(map[static_cast<size_t>(t)]));
    }
  }
  std::vector<bool> is_output(g.tensors, false);
  if (g.graph->outputs() != nullptr) {
    for (int32_t t : *g.graph->outputs()) is_output[static_cast<size_t>(t)] = true;
  }
  for (size_t n = 0; n < g.node_count(); ++n) {
    BsNode node;
    std::string why;
    const gfb::Node& gn = g.node(n);
    const std::string label = "node " + (gn.name() != nullptr ? gn.name()->str() : "#" + std::to_string(n)) +
                              " (" + gn.op_type()->str() + ")";
    if (!claim(g, n, &node, &why)) return sdk::invalid_argument("compile: " + label + " is not supported by fpga-stub: " + why);
    for (int32_t& t : node.inputs) {
      if (t == -1) continue;
      const auto gt = static_cast<size_t>(t);
      if (map[gt] == -1) {
        const gfb::Tensor& tensor = g.tensor(t);
        if (!g.is_const(t)) return sdk::invalid_argument("compile: " + label + " reads a tensor nothing provides");
        map[gt] = static_cast<int32_t>(add_tensor(g, t, &bs));
        BsTensor& bt = bs.tensors[static_cast<size_t>(map[gt])];
        if (tensor.data()->size() != bt.bytes) return sdk::invalid_argument("compile: a constant of " + label + " has the wrong size");
        bt.storage = Storage::kConst;
        bt.offset = bs.weights.size();
        const auto* p = reinterpret_cast<const std::byte*>(tensor.data()->data());
        bs.weights.insert(bs.weights.end(), p, p + bt.bytes);
        bs.weights.resize(aligned(bs.weights.size()));
      }
      t = map[gt];
    }
    const auto o = static_cast<size_t>(node.output);
    if (map[o] != -1) return sdk::invalid_argument("compile: " + label + " writes a tensor that already has a producer");
    map[o] = static_cast<int32_t>(add_tensor(g, node.output, &bs));
    BsTensor& bt = bs.tensors[static_cast<size_t>(map[o])];
    if (is_output[o]) {
      bt.storage = Storage::kIo;
    } else {
      bt.storage = Storage::kScratch;
      bt.offset = bs.activation_bytes;
      bs.activation_bytes += aligned(bt.bytes);
    }
    node.output = map[o];
    bs.nodes.push_back(std::move(node));
  }
  if (g.graph->outputs() != nullptr) {
    for (int32_t t : *g.graph->outputs()) {
      if (map[static_cast<size_t>(t)] == -1) return sdk::invalid_argument("compile: a graph output is not written by any node");
      bs.outputs.push_back(static_cast<uint32_t>(map[static_cast<size_t>(t)]));
    }
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
