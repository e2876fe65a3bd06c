// check_node and node_cost: the shape rules of every operator the device
// runs, shared by the compiler (which builds nodes) and the loader (which must
// not trust them).
#include <algorithm>

#include "node_check.hpp"

namespace loom::fpga_stub {
namespace {

using Shape = std::vector<int64_t>;

class Checker {
 public:
  Checker(const Bitstream& bs, size_t index, Shape* inferred)
      : bs_(bs), node_(bs.nodes[index]), inferred_(inferred),
        where_("node " + std::to_string(index) + " (" + op_name(node_.op) + ")") {}

  Status fail(const std::string& what) const { return sdk::invalid_argument(where_ + ": " + what); }

  Status arity(size_t min, size_t max, size_t params) const {
    const size_t n = node_.inputs.size();
    if (n < min || n > max) {
      return fail("has " + std::to_string(n) + " inputs, expected " + std::to_string(min) + " to " +
                  std::to_string(max));
    }
    for (size_t i = 0; i < min; ++i) {
      if (node_.inputs[i] < 0) return fail("input " + std::to_string(i) + " is required");
    }
    if (node_.params.size() != params) {
      return fail("has " + std::to_string(node_.params.size()) + " parameters, expected " +
                  std::to_string(params));
    }
    return Status();
  }
  bool present(size_t i) const { return i < node_.inputs.size() && node_.inputs[i] >= 0; }
  const BsTensor& in(size_t i) const { return bs_.tensors[node_.inputs[i]]; }
  const BsTensor& out() const { return bs_.tensors[node_.output]; }

  Status dtype(size_t i, std::initializer_list<loom_dtype_t> allowed) const {
    for (loom_dtype_t d : allowed) {
      if (in(i).dtype == d) return Status();
    }
    return fail("input " + std::to_string(i) + " is " + dtype_label(in(i).dtype));
  }
  Status same_dtype(size_t i, loom_dtype_t want) const {
    if (in(i).dtype != want) {
      return fail("input " + std::to_string(i) + " is " + dtype_label(in(i).dtype) + ", expected " +
                  dtype_label(want));
    }
    return Status();
  }
  // A scalar, or a vector of `channels` elements when per_channel.
  Status scale_like(size_t i, int64_t channels, bool per_channel) const {
    const uint64_t n = element_count(in(i).shape);
    if (n == 1 && in(i).shape.size() <= 1) return Status();
    if (per_channel && in(i).shape.size() == 1 && in(i).shape[0] == channels) return Status();
    return fail("input " + std::to_string(i) + " has shape " + shape_label(in(i).shape) +
                (per_channel ? ", expected a scalar or [" + std::to_string(channels) + "]"
                             : ", expected a scalar"));
  }
  // The output the operator computes: compared with the recorded one, or
  // (inferring) stored once its dtype matches.
  Status output(loom_dtype_t dtype, const Shape& shape) const {
    if (inferred_ != nullptr && out().dtype == dtype) {
      *inferred_ = shape;
      return Status();
    }
    if (out().dtype != dtype || out().shape != shape) {
      return fail("output is " + std::string(dtype_label(out().dtype)) + " " + shape_label(out().shape) +
                  ", the operator computes " + dtype_label(dtype) + " " + shape_label(shape));
    }
    return Status();
  }
  int64_t param(size_t i) const { return node_.params[i]; }
  bool inferring() const { return inferred_ != nullptr; }

 private:
  const Bitstream& bs_;
  const BsNode& node_;
  Shape* inferred_;
  std::string where_;
};

constexpr int64_t kMaxExtent = int64_t{1} << 31;

// Output extent of a window over `in` (kernel k, stride s, dilation d, pads).
bool window_extent(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil,
                   int64_t* out) {
  if (k < 1 || s < 1 || d < 1 || pb < 0 || pe < 0 || k > kMaxExtent || s > kMaxExtent ||
      d > kMaxExtent || pb > kMaxExtent || pe > kMaxExtent) {
    return false;
  }
  const int64_t span = in + pb + pe - ((k - 1) * d + 1);
  if (span < 0) return false;
  int64_t o = (ceil ? span + s - 1 : span) / s + 1;
  if (ceil && (o - 1) * s >= in + pb) --o;
  *out = o;
  return true;
}

Status check_window(const Checker& c, const Shape& x, int64_t kh, int64_t kw, bool ceil, Shape* out) {
  if (x.size() != 4) return c.fail("input 0 has shape " + shape_label(x) + ", expected [N,C,H,W]");
  int64_t oh = 0, ow = 0;
  if (!window_extent(x[2], kh, c.param(kSh), c.param(kDh), c.param(kPadT), c.param(kPadB), ceil, &oh) ||
      !window_extent(x[3], kw, c.param(kSw), c.param(kDw), c.param(kPadL), c.param(kPadR), ceil, &ow)) {
    return c.fail("the window (kernel " + std::to_string(kh) + "x" + std::to_string(kw) +
                  ") does not fit input " + shape_label(x));
  }
  *out = {x[0], x[1], oh, ow};
  return Status();
}

Status check_conv(const Checker& c, size_t x_i, size_t w_i, Shape* out) {
  const Shape& x = c.in(x_i).shape;
  const Shape& w = c.in(w_i).shape;
  if (x.size() != 4 || w.size() != 4) {
    return c.fail("X " + shape_label(x) + " and W " + shape_label(w) + " must both have rank 4");
  }
  const int64_t g = c.param(kGroup);
  if (g < 1 || x[1] % g != 0 || w[0] % g != 0 || w[1] != x[1] / g || w[2] != c.param(kKh) ||
      w[3] != c.param(kKw)) {
    return c.fail("group " + std::to_string(g) + " and kernel do not fit X " + shape_label(x) + " and W " +
                  shape_label(w));
  }
  LOOM_SDK_RETURN_IF_ERROR(check_window(c, x, w[2], w[3], false, out));
  (*out)[1] = w[0];
  return Status();
}

bool broadcast(const Shape& a, const Shape& b, Shape* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

Status check_matmul(const Checker& c, size_t a_i, size_t b_i, Shape* out) {
  const Shape& a = c.in(a_i).shape;
  const Shape& b = c.in(b_i).shape;
  if (a.size() < 2 || b.size() < 2 || a.back() != b[b.size() - 2]) {
    return c.fail("A " + shape_label(a) + " and B " + shape_label(b) + " do not multiply");
  }
  Shape batch;
  if (!broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), &batch)) {
    return c.fail("the batch dimensions of A " + shape_label(a) + " and B " + shape_label(b) + " do not broadcast");
  }
  *out = batch;
  out->push_back(a[a.size() - 2]);
  out->push_back(b.back());
  return Status();
}

Status check_quant_axis(const Checker& c, int64_t axis, size_t scale_i) {
  const Shape& x = c.in(0).shape;
  const Shape& scale = c.in(scale_i).shape;
  if (scale.size() <= 1 && element_count(scale) == 1) return Status();  // per tensor: axis unused
  if (axis < 0 || static_cast<size_t>(axis) >= std::max<size_t>(x.size(), 1)) {
    return c.fail("axis " + std::to_string(axis) + " is out of range for " + shape_label(x));
  }
  return c.scale_like(scale_i, x.empty() ? 1 : x[axis], !x.empty());
}

constexpr std::initializer_list<loom_dtype_t> kInt8 = {LOOM_DTYPE_U8, LOOM_DTYPE_I8};

}  // namespace

Status check_node(const Bitstream& bs, size_t index) { return infer_node(bs, index, nullptr); }

Status infer_node(const Bitstream& bs, size_t index, Shape* out_shape) {
  const BsNode& n = bs.nodes[index];
  Checker c(bs, index, out_shape);
  Shape shape;
  switch (n.op) {
    case Op::kConv:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 3, kWindowParams));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(1, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(check_conv(c, 0, 1, &shape));
      if (c.present(2)) {
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(2, LOOM_DTYPE_F32));
        if (c.in(2).shape != Shape{shape[1]}) return c.fail("B must have shape [" + std::to_string(shape[1]) + "]");
      }
      return c.output(LOOM_DTYPE_F32, shape);
    case Op::kConvInteger:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 4, kWindowParams));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(0, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(1, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(check_conv(c, 0, 1, &shape));
      if (c.present(2)) {
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(2, c.in(0).dtype));
        LOOM_SDK_RETURN_IF_ERROR(c.scale_like(2, 1, false));
      }
      if (c.present(3)) {
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(3, c.in(1).dtype));
        LOOM_SDK_RETURN_IF_ERROR(c.scale_like(3, shape[1], true));
      }
      return c.output(LOOM_DTYPE_I32, shape);
    case Op::kQLinearConv:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(8, 9, kWindowParams));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(0, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(3, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(7, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(check_conv(c, 0, 3, &shape));
      for (size_t i : {1, 4, 6}) LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(i, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(2, c.in(0).dtype));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(5, c.in(3).dtype));
      for (size_t i : {1, 2, 6, 7}) LOOM_SDK_RETURN_IF_ERROR(c.scale_like(i, 1, false));
      for (size_t i : {4, 5}) LOOM_SDK_RETURN_IF_ERROR(c.scale_like(i, shape[1], true));
      if (c.present(8)) {
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(8, LOOM_DTYPE_I32));
        if (c.in(8).shape != Shape{shape[1]}) return c.fail("B must have shape [" + std::to_string(shape[1]) + "]");
      }
      return c.output(c.in(7).dtype, shape);
    case Op::kMaxPool:
    case Op::kAveragePool: {
      LOOM_SDK_RETURN_IF_ERROR(c.arity(1, 1, kWindowParams));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      if (c.param(kGroup) != 1 || (c.param(kCeilMode) & ~int64_t{1}) || (c.param(kCountIncludePad) & ~int64_t{1})) {
        return c.fail("bad pool parameters");
      }
      LOOM_SDK_RETURN_IF_ERROR(check_window(c, c.in(0).shape, c.param(kKh), c.param(kKw), c.param(kCeilMode) != 0, &shape));
      return c.output(LOOM_DTYPE_F32, shape);
    }
    case Op::kGlobalAveragePool:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(1, 1, 0));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      shape = c.in(0).shape;
      if (shape.size() < 3) return c.fail("input has shape " + shape_label(shape) + ", expected [N,C,spatial...]");
      std::fill(shape.begin() + 2, shape.end(), 1);
      return c.output(LOOM_DTYPE_F32, shape);
    case Op::kMatMul:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 2, 0));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(1, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(check_matmul(c, 0, 1, &shape));
      return c.output(LOOM_DTYPE_F32, shape);
    case Op::kMatMulInteger:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 4, 0));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(0, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(1, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(check_matmul(c, 0, 1, &shape));
      if (c.present(2)) {
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(2, c.in(0).dtype));
        LOOM_SDK_RETURN_IF_ERROR(c.scale_like(2, 1, false));
      }
      if (c.present(3)) {
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(3, c.in(1).dtype));
        LOOM_SDK_RETURN_IF_ERROR(c.scale_like(3, shape.back(), true));
      }
      return c.output(LOOM_DTYPE_I32, shape);
    case Op::kQLinearMatMul:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(8, 8, 0));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(0, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(3, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(7, kInt8));
      LOOM_SDK_RETURN_IF_ERROR(check_matmul(c, 0, 3, &shape));
      for (size_t i : {1, 4, 6}) LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(i, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(2, c.in(0).dtype));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(5, c.in(3).dtype));
      for (size_t i : {1, 2, 6, 7}) LOOM_SDK_RETURN_IF_ERROR(c.scale_like(i, 1, false));
      for (size_t i : {4, 5}) LOOM_SDK_RETURN_IF_ERROR(c.scale_like(i, shape.back(), true));
      return c.output(c.in(7).dtype, shape);
    case Op::kGemm: {
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 3, 4));
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (c.present(i)) LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(i, LOOM_DTYPE_F32));
      }
      const Shape& a = c.in(0).shape;
      const Shape& b = c.in(1).shape;
      if (a.size() != 2 || b.size() != 2 || (c.param(0) & ~int64_t{1}) || (c.param(1) & ~int64_t{1})) {
        return c.fail("A " + shape_label(a) + " and B " + shape_label(b) + " must be matrices");
      }
      const int64_t m = c.param(0) ? a[1] : a[0], k = c.param(0) ? a[0] : a[1];
      const int64_t kb = c.param(1) ? b[1] : b[0], nn = c.param(1) ? b[0] : b[1];
      if (k != kb) return c.fail("A " + shape_label(a) + " and B " + shape_label(b) + " do not multiply");
      shape = {m, nn};
      if (c.present(2)) {
        Shape bc;
        if (c.in(2).shape.size() > 2 || !broadcast(c.in(2).shape, shape, &bc) || bc != shape) {
          return c.fail("C " + shape_label(c.in(2).shape) + " does not broadcast to " + shape_label(shape));
        }
      }
      return c.output(LOOM_DTYPE_F32, shape);
    }
    case Op::kAdd:
    case Op::kMul:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 2, 0));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(1, LOOM_DTYPE_F32));
      if (!broadcast(c.in(0).shape, c.in(1).shape, &shape)) {
        return c.fail(shape_label(c.in(0).shape) + " and " + shape_label(c.in(1).shape) + " do not broadcast");
      }
      return c.output(LOOM_DTYPE_F32, shape);
    case Op::kRelu:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(1, 1, 0));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      return c.output(LOOM_DTYPE_F32, c.in(0).shape);
    case Op::kClip:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(1, 1, 2));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      return c.output(LOOM_DTYPE_F32, c.in(0).shape);
    case Op::kConcat: {
      LOOM_SDK_RETURN_IF_ERROR(c.arity(1, kMaxNodeInputs, 1));
      const Shape& first = c.in(0).shape;
      const int64_t axis = c.param(0);
      if (axis < 0 || static_cast<size_t>(axis) >= first.size()) {
        return c.fail("axis " + std::to_string(axis) + " is out of range for " + shape_label(first));
      }
      shape = first;
      shape[axis] = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!c.present(i)) return c.fail("input " + std::to_string(i) + " is required");
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(i, c.in(0).dtype));
        const Shape& s = c.in(i).shape;
        bool ok = s.size() == first.size();
        for (size_t d = 0; ok && d < s.size(); ++d) ok = static_cast<int64_t>(d) == axis || s[d] == first[d];
        if (!ok) return c.fail("input " + std::to_string(i) + " " + shape_label(s) + " does not concatenate with " + shape_label(first));
        shape[axis] += s[axis];
      }
      return c.output(c.in(0).dtype, shape);
    }
    case Op::kReshape:
    case Op::kFlatten:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(1, 1, 0));
      if (c.inferring()) {
        // The new shape is not in the node: only a recorded static output
        // can be checked against a binding.
        if (is_open(c.out().shape)) return c.fail("cannot compute its output shape at a binding (it is open)");
        *out_shape = c.out().shape;
      }
      if (c.out().dtype != c.in(0).dtype || c.out().bytes != c.in(0).bytes) {
        return c.fail("output " + shape_label(c.out().shape) + " does not hold input " + shape_label(c.in(0).shape));
      }
      return Status();
    case Op::kQuantizeLinear:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 3, 1));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(0, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(1, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(check_quant_axis(c, c.param(0), 1));
      if (c.present(2)) {
        LOOM_SDK_RETURN_IF_ERROR(c.dtype(2, kInt8));
        if (c.in(2).shape != c.in(1).shape) return c.fail("zero point and scale differ in shape");
      }
      return c.output(c.present(2) ? c.in(2).dtype : LOOM_DTYPE_U8, c.in(0).shape);
    case Op::kDequantizeLinear:
      LOOM_SDK_RETURN_IF_ERROR(c.arity(2, 3, 1));
      LOOM_SDK_RETURN_IF_ERROR(c.dtype(0, {LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_I32}));
      LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(1, LOOM_DTYPE_F32));
      LOOM_SDK_RETURN_IF_ERROR(check_quant_axis(c, c.param(0), 1));
      if (c.present(2)) {
        LOOM_SDK_RETURN_IF_ERROR(c.same_dtype(2, c.in(0).dtype));
        if (c.in(2).shape != c.in(1).shape) return c.fail("zero point and scale differ in shape");
      }
      return c.output(LOOM_DTYPE_F32, c.in(0).shape);
  }
  return c.fail("unknown operator");
}

NodeCost node_cost(const Bitstream& bs, const BsNode& n) {
  NodeCost cost;
  const BsTensor& out = bs.tensors[n.output];
  const uint64_t outputs = element_count(out.shape);
  auto reduce_of = [&](size_t w_i) {  // per output element: C/g * kh * kw
    const auto& w = bs.tensors[n.inputs[w_i]].shape;
    return element_count(w) / static_cast<uint64_t>(std::max<int64_t>(w[0], 1));
  };
  switch (n.op) {
    case Op::kConv: cost.f32_ops = outputs * reduce_of(1); break;
    case Op::kConvInteger: cost.int8_macs = outputs * reduce_of(1); break;
    case Op::kQLinearConv: cost.int8_macs = outputs * reduce_of(3); break;
    case Op::kMatMul: cost.f32_ops = outputs * static_cast<uint64_t>(bs.tensors[n.inputs[0]].shape.back()); break;
    case Op::kGemm: {
      const auto& a = bs.tensors[n.inputs[0]].shape;
      cost.f32_ops = outputs * static_cast<uint64_t>(n.params[0] ? a[0] : a[1]);
      break;
    }
    case Op::kMatMulInteger:
    case Op::kQLinearMatMul:
      cost.int8_macs = outputs * static_cast<uint64_t>(bs.tensors[n.inputs[0]].shape.back());
      break;
    case Op::kMaxPool:
    case Op::kAveragePool: cost.f32_ops = outputs * static_cast<uint64_t>(n.params[kKh] * n.params[kKw]); break;
    case Op::kGlobalAveragePool: cost.f32_ops = element_count(bs.tensors[n.inputs[0]].shape); break;
    case Op::kQuantizeLinear:
    case Op::kDequantizeLinear: cost.int8_macs = outputs; break;
    default: cost.f32_ops = outputs; break;
  }
  return cost;
}

}  // namespace loom::fpga_stub
