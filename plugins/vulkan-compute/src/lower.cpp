#include "lower.hpp"

#include "lowering.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace loom::vulkan {
namespace {



struct UnaryEntry {
  const char* name;
  UnaryOp op;
  int64_t min_opset;
};
constexpr UnaryEntry kUnaries[] = {
    {"Relu", UnaryOp::kRelu, 6},         {"Sigmoid", UnaryOp::kSigmoid, 6},
    {"Tanh", UnaryOp::kTanh, 6},         {"Exp", UnaryOp::kExp, 6},
    {"Sqrt", UnaryOp::kSqrt, 6},         {"Erf", UnaryOp::kErf, 9},
    {"Abs", UnaryOp::kAbs, 6},           {"Neg", UnaryOp::kNeg, 6},
    {"Log", UnaryOp::kLog, 6},           {"Reciprocal", UnaryOp::kReciprocal, 6},
    {"Floor", UnaryOp::kFloor, 6},       {"Ceil", UnaryOp::kCeil, 6},
    {"Sin", UnaryOp::kSin, 7},           {"Cos", UnaryOp::kCos, 7},
    {"Softplus", UnaryOp::kSoftplus, 1}, {"HardSwish", UnaryOp::kHardSwish, 14},
};

struct BinaryEntry {
  const char* name;
  BinaryOp op;
  int64_t min_opset;
};
constexpr BinaryEntry kBinaries[] = {
    {"Add", BinaryOp::kAdd, 7}, {"Sub", BinaryOp::kSub, 7}, {"Mul", BinaryOp::kMul, 7},
    {"Div", BinaryOp::kDiv, 7}, {"Pow", BinaryOp::kPow, 7}, {"Max", BinaryOp::kMax, 8},
    {"Min", BinaryOp::kMin, 8}, {"PRelu", BinaryOp::kPRelu, 7},
};


}  // namespace

namespace lowering {

bool same_shape_out(Lowering& l) {
  return l.output_is(l.shape_of(0)) || l.fail("output shape differs from the input's");
}

}  // namespace lowering

namespace {

using lowering::Lowering;
using lowering::same_shape_out;

bool lower_unary(Lowering& l, const UnaryEntry& e) {
  if (l.opset() < e.min_opset) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  l.out().kind = Lowered::Kind::kUnary;
  l.out().unary = e.op;
  return l.attributes({}) && l.inputs(1, 1) && l.data(0) && l.output() && same_shape_out(l);
}

bool lower_param_unary(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kUnary;
  const std::string op = l.op();
  if (l.opset() < 6) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  if (op == "LeakyRelu") {
    o.unary = UnaryOp::kLeakyRelu;
    if (!l.attributes({"alpha"}) || !l.get_float("alpha", 0.01f, &o.alpha)) return false;
  } else if (op == "Elu") {
    o.unary = UnaryOp::kElu;
    if (!l.attributes({"alpha"}) || !l.get_float("alpha", 1.0f, &o.alpha)) return false;
  } else if (op == "HardSigmoid") {
    o.unary = UnaryOp::kHardSigmoid;
    if (!l.attributes({"alpha", "beta"}) || !l.get_float("alpha", 0.2f, &o.alpha) ||
        !l.get_float("beta", 0.5f, &o.beta)) {
      return false;
    }
  } else {  // Clip
    o.unary = UnaryOp::kClip;
    if (l.opset() < 11) {
      if (!l.attributes({"min", "max"}) || !l.inputs(1, 1) ||
          !l.get_float("min", std::numeric_limits<float>::lowest(), &o.alpha) ||
          !l.get_float("max", std::numeric_limits<float>::max(), &o.beta)) {
        return false;
      }
    } else {
      o.alpha = -std::numeric_limits<float>::infinity();
      o.beta = std::numeric_limits<float>::infinity();
      if (!l.attributes({}) || !l.inputs(1, 3)) return false;
      if (l.present(1) && !l.constant_f32_scalar(1, &o.alpha)) return false;
      if (l.present(2) && !l.constant_f32_scalar(2, &o.beta)) return false;
    }
  }
  return (op == "Clip" || l.inputs(1, 1)) && l.data(0) && l.output() && same_shape_out(l);
}

}  // namespace

bool element_count(const Shape& s, uint64_t* out) {
  uint64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 || (d != 0 && n > (uint64_t{1} << 31) / static_cast<uint64_t>(d))) return false;
    n *= static_cast<uint64_t>(d);
  }
  *out = n;
  return n < (uint64_t{1} << 31);
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Strides of `s` (right-aligned) over the output dims `out`: 0 where s
// broadcasts. False when s does not broadcast to out.
bool broadcast_strides(const Shape& s, const Shape& out, std::vector<uint64_t>* strides) {
  if (s.size() > out.size()) return false;
  strides->assign(out.size(), 0);
  uint64_t stride = 1;
  for (size_t k = 0; k < s.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const int64_t dim = s[s.size() - 1 - k];
    if (dim != out[d] && dim != 1) return false;
    (*strides)[d] = dim == 1 ? 0 : stride;
    stride *= static_cast<uint64_t>(dim);
  }
  return true;
}

namespace {

// Merges neighbouring dimensions that both operands walk contiguously (or
// both broadcast), so that same-shape operands index without division; then
// the rank must fit the binary kernel.
bool coalesce(Lowering& l) {
  Lowered& o = l.out();
  for (size_t d = o.dims.size(); d-- > 1;) {
    const uint64_t inner = static_cast<uint64_t>(o.dims[d]);
    if (o.sa[d - 1] == o.sa[d] * inner && o.sb[d - 1] == o.sb[d] * inner) {
      o.dims[d - 1] *= o.dims[d];
      o.sa[d - 1] = o.sa[d];
      o.sb[d - 1] = o.sb[d];
      o.dims.erase(o.dims.begin() + static_cast<long>(d));
      o.sa.erase(o.sa.begin() + static_cast<long>(d));
      o.sb.erase(o.sb.begin() + static_cast<long>(d));
    }
  }
  if (o.dims.size() > kBinaryMaxRank) return l.fail("rank " + std::to_string(o.dims.size()) + " exceeds 6");
  return true;
}

// Transpose (perm, default reversed) and Expand (constant shape input) as
// strided copies: the binary kernel's copy op reading operand a only.
bool lower_strided_copy(Lowering& l, bool transpose) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kBinary;
  o.binary = BinaryOp::kCopyA;
  Shape perm;
  if (transpose) {
    if (!l.attributes({"perm"}) || !l.inputs(1, 1) || !l.get_ints("perm", &perm)) return false;
  } else if (l.opset() < 8 || !l.attributes({}) || !l.inputs(2, 2)) {
    return l.opset() < 8 ? l.fail("opset " + std::to_string(l.opset()) + " has no Expand") : false;
  }
  if (!l.data(0) || !l.output()) return false;
  o.operands.push_back(o.operands[0]);  // b is bound to a and never read
  const Shape x = l.shape_of(0);
  Shape out;
  if (transpose) {
    if (perm.empty()) {
      for (size_t d = x.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    if (perm.size() != x.size()) return l.fail("perm has " + std::to_string(perm.size()) + " entries");
    const std::vector<uint64_t> stride = lowering::contiguous_strides(x);
    std::vector<bool> seen(x.size(), false);
    Shape want;
    o.sa.clear();
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(x.size()) || seen[static_cast<size_t>(p)]) {
        return l.fail("perm is not a permutation");
      }
      seen[static_cast<size_t>(p)] = true;
      want.push_back(x[static_cast<size_t>(p)]);
      o.sa.push_back(stride[static_cast<size_t>(p)]);
    }
    if (!l.output_is(want)) return l.fail("output shape " + shape_text(l.output_shape()) + ", expected " + shape_text(want));
    out = want;
  } else {
    Shape spec;
    if (!l.constant_i64s(1, &spec)) return false;
    Shape want(std::max(spec.size(), x.size()), 1);
    for (size_t k = 0; k < want.size(); ++k) {
      const int64_t dx = k < x.size() ? x[x.size() - 1 - k] : 1;
      const int64_t ds = k < spec.size() ? spec[spec.size() - 1 - k] : 1;
      if (dx != ds && dx != 1 && ds != 1) return l.fail("the shape does not broadcast");
      want[want.size() - 1 - k] = dx == 1 ? ds : dx;
    }
    if (!l.output_is(want) || !broadcast_strides(x, want, &o.sa)) {
      return l.fail("output shape " + shape_text(l.output_shape()) + ", expected " + shape_text(want));
    }
    out = want;
  }
  o.dims = out;
  o.sb.assign(out.size(), 0);
  return coalesce(l);
}

bool lower_binary(Lowering& l, const BinaryEntry& e) {
  if (l.opset() < e.min_opset) return l.fail("opset " + std::to_string(l.opset()) + " uses legacy broadcasting");
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kBinary;
  o.binary = e.op;
  if (!l.attributes({}) || !l.inputs(2, 2) || !l.data(0) || !l.data(1) || !l.output()) return false;
  const Shape a = l.shape_of(0), b = l.shape_of(1);
  Shape want(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < want.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return l.fail("shapes " + shape_text(a) + " and " + shape_text(b) + " do not broadcast");
    want[want.size() - 1 - k] = da == 1 ? db : da;
  }
  if (!l.output_is(want)) {
    return l.fail("output shape " + shape_text(l.output_shape()) + " is not the broadcast " + shape_text(want));
  }
  const Shape out = want;
  if (e.op == BinaryOp::kPRelu && a != out) return l.fail("the slope must broadcast to X");
  o.dims = out;
  broadcast_strides(a, out, &o.sa);
  broadcast_strides(b, out, &o.sb);
  return coalesce(l);
}

bool lower_matmul(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kMatMul;
  if (!l.attributes({}) || !l.inputs(2, 2) || !l.data(0) || !l.data(1) || !l.output()) return false;
  Shape a = l.shape_of(0), b = l.shape_of(1);
  if (a.empty() || b.empty()) return l.fail("scalar operands are not allowed");
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k) return l.fail("inner dimensions differ");
  const Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  uint64_t abatch = 1, bbatch = 1;
  for (int64_t d : ab) abatch *= static_cast<uint64_t>(d);
  for (int64_t d : bb) bbatch *= static_cast<uint64_t>(d);
  // Batch broadcasting: one side's batch is all of the output's, the other
  // side's is the same dims or a single matrix.
  Shape batch_dims = ab.size() >= bb.size() ? ab : bb;
  const bool a_full = ab.size() == batch_dims.size() && ab == batch_dims;
  const bool b_full = bb.size() == batch_dims.size() && bb == batch_dims;
  if (!((a_full && (b_full || bbatch == 1)) || (b_full && abatch == 1))) {
    return l.fail("batch dimensions " + shape_text(ab) + " and " + shape_text(bb) +
                  " broadcast in a way vulkan-compute does not run");
  }
  uint64_t batch = 1;
  for (int64_t d : batch_dims) batch *= static_cast<uint64_t>(d);
  Shape want = batch_dims;
  if (l.shape_of(0).size() != 1) want.push_back(m);
  if (l.shape_of(1).size() != 1) want.push_back(n);
  if (!l.output_is(want)) return l.fail("output shape " + shape_text(l.output_shape()) + ", expected " + shape_text(want));
  if (batch > 65535) return l.fail("batch " + std::to_string(batch) + " exceeds 65535");
  MatMulParams& p = o.mm;
  p.m = static_cast<uint32_t>(m);
  p.n = static_cast<uint32_t>(n);
  p.k = static_cast<uint32_t>(k);
  p.batch = static_cast<uint32_t>(batch);
  p.a_stride = abatch == 1 ? 0 : static_cast<uint32_t>(m * k);
  p.b_stride = bbatch == 1 ? 0 : static_cast<uint32_t>(k * n);
  return true;
}

bool lower_gemm(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kMatMul;
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  int64_t ta = 0, tb = 0;
  MatMulParams& p = o.mm;
  if (!l.attributes({"alpha", "beta", "transA", "transB"}) || !l.get_float("alpha", 1, &p.alpha) ||
      !l.get_float("beta", 1, &p.beta) || !l.get_int("transA", 0, &ta) || !l.get_int("transB", 0, &tb) ||
      !l.inputs(l.opset() >= 11 ? 2 : 3, 3) || !l.data(0) || !l.data(1)) {
    return false;
  }
  const Shape a = l.shape_of(0), b = l.shape_of(1);
  if (a.size() != 2 || b.size() != 2) return l.fail("A and B must be 2-D");
  p.trans_a = ta != 0;
  p.trans_b = tb != 0;
  const int64_t m = p.trans_a ? a[1] : a[0], k = p.trans_a ? a[0] : a[1];
  const int64_t n = p.trans_b ? b[0] : b[1], kb = p.trans_b ? b[1] : b[0];
  if (k != kb) return l.fail("inner dimensions differ");
  p.m = static_cast<uint32_t>(m);
  p.n = static_cast<uint32_t>(n);
  p.k = static_cast<uint32_t>(k);
  if (l.present(2)) {
    if (!l.data(2)) return false;
    std::vector<uint64_t> strides;
    if (!broadcast_strides(l.shape_of(2), {m, n}, &strides)) return l.fail("C does not broadcast to [M, N]");
    p.bias = true;
    p.c_row = static_cast<uint32_t>(strides[0]);
    p.c_col = static_cast<uint32_t>(strides[1]);
  }
  return l.output() && (l.output_is(Shape{m, n}) || l.fail("output shape is not [M, N]"));
}

// The output shape of the reshape family (Reshape with 0 and -1 entries
// and allowzero, Flatten, Squeeze, Unsqueeze, Identity) for the input's
// shape. Shape, axes and target operands must be constants. Used where the
// output shape is not given (binding an open graph); a static graph's
// declared output is checked by element count only.
bool alias_shape(Lowering& l, const std::string& op, Shape* out) {
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  uint64_t count = 1;
  for (int64_t d : x) count *= static_cast<uint64_t>(d);  // below 2^31: data(0) checked it
  if (op == "Identity") {
    *out = x;
    return true;
  }
  if (op == "Flatten") {
    int64_t axis = 1;
    if (!l.get_int("axis", 1, &axis)) return false;
    if (axis < -rank || axis > rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x[static_cast<size_t>(d)];
    *out = {outer, inner};
    return true;
  }
  if (op == "Reshape") {
    Shape target;
    int64_t allowzero = 0;
    if (!l.get_int("allowzero", 0, &allowzero)) return false;
    if (!l.constant_i64s(1, &target)) {
      return l.fail("the target shape is not a constant, so it cannot be bound per execution");
    }
    Shape want = target;
    int64_t infer = -1;
    uint64_t known = 1;
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i] == 0 && allowzero == 0) {
        if (i >= x.size()) return l.fail("target entry " + std::to_string(i) + " copies a dimension X lacks");
        want[i] = x[i];
      }
      if (want[i] == -1) {
        if (infer >= 0) return l.fail("the target has more than one -1");
        infer = static_cast<int64_t>(i);
        continue;
      }
      if (want[i] < 0) return l.fail("target entry " + std::to_string(want[i]) + " is negative");
      known *= static_cast<uint64_t>(want[i]);
    }
    if (infer >= 0) {
      if (known == 0 || count % known != 0) {
        return l.fail("X " + shape_text(x) + " does not reshape to " + shape_text(target));
      }
      want[static_cast<size_t>(infer)] = static_cast<int64_t>(count / known);
    } else if (known != count) {
      return l.fail("X " + shape_text(x) + " does not reshape to " + shape_text(target));
    }
    *out = want;
    return true;
  }
  // Squeeze / Unsqueeze: axes from the attribute before opset 13, then from
  // the optional constant input.
  Shape axes;
  if (l.opset() < 13) {
    if (!l.get_ints("axes", &axes)) return false;
  } else if (l.present(1) && !l.constant_i64s(1, &axes)) {
    return l.fail("the axes are not a constant, so they cannot be bound per execution");
  }
  if (op == "Squeeze") {
    std::vector<bool> drop(x.size(), false);
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
      const size_t d = static_cast<size_t>(a < 0 ? a + rank : a);
      if (x[d] != 1) return l.fail("axis " + std::to_string(a) + " has size " + std::to_string(x[d]) + ", not 1");
      drop[d] = true;
    }
    out->clear();
    for (size_t d = 0; d < x.size(); ++d) {
      if (axes.empty() ? x[d] != 1 : !drop[d]) out->push_back(x[d]);
    }
    return true;
  }
  const int64_t out_rank = rank + static_cast<int64_t>(axes.size());
  std::vector<bool> one(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) {
    if (a < -out_rank || a >= out_rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    const size_t d = static_cast<size_t>(a < 0 ? a + out_rank : a);
    if (one[d]) return l.fail("axis " + std::to_string(a) + " is repeated");
    one[d] = true;
  }
  out->clear();
  size_t next = 0;
  for (size_t d = 0; d < one.size(); ++d) out->push_back(one[d] ? 1 : x[next++]);
  return true;
}

bool lower_alias(Lowering& l) {
  const std::string op = l.op();
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kAlias;
  if (op == "Reshape") {
    if (l.opset() < 5) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
    if (!l.attributes({"allowzero"}) || !l.inputs(2, 2)) return false;
  } else if (op == "Flatten") {
    if (!l.attributes({"axis"}) || !l.inputs(1, 1)) return false;
  } else if (op == "Squeeze" || op == "Unsqueeze") {
    if (!l.attributes({"axes"}) || !l.inputs(1, 2)) return false;
  } else if (!l.attributes({}) || !l.inputs(1, 1)) {  // Identity
    return false;
  }
  if (!l.data(0) || !l.output()) return false;
  if (l.binding()) {
    // Binding an open graph: the output shape by the operator's rule.
    Shape want;
    return alias_shape(l, op, &want) &&
           (l.output_is(want) || l.fail("output shape " + shape_text(l.output_shape()) + ", expected " +
                                        shape_text(want)));
  }
  uint64_t in = 0, out = 0;
  element_count(l.shape_of(0), &in);
  element_count(l.output_shape(), &out);
  if (in != out) return l.fail("output has " + std::to_string(out) + " elements, the input " + std::to_string(in));
  return true;
}


}  // namespace

bool lower_node(const sdk::GraphView& g, size_t n, Lowered* out, std::string* why, std::vector<Shape>* bound,
                const std::string* int8_unavailable) {
  using namespace lowering;
  const sdk::NodeView node = g.node(n);
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    *why = "domain '" + node.domain() + "' is not supported";
    return false;
  }
  Lowering l(g, n, out, why, bound, int8_unavailable);
  const std::string op = node.op_type();
  for (const UnaryEntry& e : kUnaries) {
    if (op == e.name) return lower_unary(l, e);
  }
  for (const BinaryEntry& e : kBinaries) {
    if (op == e.name) return lower_binary(l, e);
  }
  if (op == "LeakyRelu" || op == "Elu" || op == "HardSigmoid" || op == "Clip") return lower_param_unary(l);
  if (op == "MatMul") return lower_matmul(l);
  if (op == "Conv") return lower_conv(l);
  if (op == "Transpose" || op == "Expand") return lower_strided_copy(l, op == "Transpose");
  if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax") return lower_reduce(l, op);
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    return lower_pool(l, op);
  }
  if (op == "Softmax" || op == "LogSoftmax") return lower_softmax(l, op == "LogSoftmax");
  if (op == "LayerNormalization") return lower_layernorm(l);
  if (op == "Slice") return lower_slice(l);
  if (op == "Concat") return lower_concat(l);
  if (op == "Resize") return lower_resize(l);
  if (op == "ConvTranspose") return lower_conv_transpose(l);
  if (op == "Gemm") return lower_gemm(l);
  if (op == "QuantizeLinear" || op == "DequantizeLinear") return lower_quantize(l, op == "QuantizeLinear");
  if (op == "QLinearConv" || op == "ConvInteger") return lower_qconv(l, op == "QLinearConv");
  if (op == "QLinearMatMul" || op == "MatMulInteger") return lower_qmatmul(l, op == "QLinearMatMul");
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity") {
    return lower_alias(l);
  }
  *why = "operator " + op + " is not supported by vulkan-compute";
  return false;
}

}  // namespace loom::vulkan
