// Lowering of the neural-network operators: Conv, pools, reductions,
// Softmax/LogSoftmax, LayerNormalization.
#include <algorithm>

#include "lowering.hpp"

namespace loom::vulkan::lowering {

// The kernel parameters of a 2-D (transposed) convolution whose shapes and
// attributes the caller has checked: NCHW x and y, w's spatial dims last,
// `m` output channels.
static void fill_conv(const Shape& x, const Shape& w, const Shape& y, int64_t m, const Shape& strides,
                      const Shape& dilations, const Shape& pads, int64_t group, bool bias, ConvParams* p) {
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  p->n = u(x[0]);
  p->c = u(x[1]);
  p->h = u(x[2]);
  p->w = u(x[3]);
  p->m = u(m);
  p->oh = u(y[2]);
  p->ow = u(y[3]);
  p->kh = u(w[2]);
  p->kw = u(w[3]);
  p->sh = u(strides[0]);
  p->sw = u(strides[1]);
  p->dh = u(dilations[0]);
  p->dw = u(dilations[1]);
  p->pt = u(pads[0]);
  p->pl = u(pads[1]);
  p->group = u(group);
  p->bias = bias;
}

// Softmax/LogSoftmax: before opset 13 over the flattened [axis, rank)
// dimensions, from 13 over dimension `axis` alone.
bool lower_softmax(Lowering& l, bool log_softmax) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kSoftmax;
  o.log_softmax = log_softmax;
  const bool legacy = l.opset() < 13;
  int64_t axis = 0;
  if (!l.attributes({"axis"}) || !l.get_int("axis", legacy ? 1 : -1, &axis) || !l.inputs(1, 1) ||
      !l.data(0) || !l.output() || !same_shape_out(l)) {
    return false;
  }
  const Shape s = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(s.size());
  if (axis < -rank || axis >= rank || rank == 0) {
    return l.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  if (axis < 0 && l.opset() < 11) return l.fail("negative axis before opset 11");
  if (axis < 0) axis += rank;
  o.outer = o.n = o.inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const uint64_t v = static_cast<uint64_t>(s[static_cast<size_t>(d)]);
    if (d < axis) {
      o.outer *= v;
    } else if (d == axis || legacy) {
      o.n *= v;
    } else {
      o.inner *= v;
    }
  }
  if (o.inner == 0 || o.n == 0 || o.outer == 0) return l.fail("empty tensors are not supported");
  return true;
}

// 2-D Conv (NCHW), any group, stride, dilation and pads; auto_pad NOTSET,
// VALID, SAME_UPPER or SAME_LOWER.
bool conv_geometry(Lowering& l, size_t wi, bool bias, ConvParams* p) {
  Shape strides, dilations, pads, kernel;
  int64_t group = 1;
  std::string auto_pad;
  if (!l.get_window_ints("strides", &strides) || !l.get_window_ints("dilations", &dilations) ||
      !l.get_window_ints("pads", &pads) || !l.get_window_ints("kernel_shape", &kernel) ||
      !l.get_window_int("group", 1, &group) || !l.get_string("auto_pad", "NOTSET", &auto_pad)) {
    return false;
  }
  const Shape x = l.shape_of(0), w = l.shape_of(wi);
  if (x.size() != 4 || w.size() != 4) return l.fail("only 2-D convolutions (4-D tensors) are supported");
  if (group < 1 || x[1] % group != 0 || w[0] % group != 0 || w[1] * group != x[1]) {
    return l.fail("group " + std::to_string(group) + " does not fit the channels");
  }
  if (!kernel.empty() && kernel != Shape{w[2], w[3]}) return l.fail("kernel_shape differs from W");
  if (strides.empty()) strides = {1, 1};
  if (dilations.empty()) dilations = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) return l.fail("attribute sizes are not 2-D");
  Shape want = {x[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (strides[i] < 1 || dilations[i] < 1) return l.fail("strides and dilations must be >= 1");
    const int64_t in = x[2 + i], k = (w[2 + i] - 1) * dilations[i] + 1;
    if (auto_pad == "VALID") {
      pads[i] = pads[i + 2] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + k - in);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + 2] = total - pads[i];
    } else if (auto_pad != "NOTSET") {
      return l.fail("auto_pad " + auto_pad + " is not supported");
    }
    if (pads[i] < 0 || pads[i + 2] < 0) return l.fail("negative pads");
    if (in + pads[i] + pads[i + 2] < k) {
      return l.fail("the kernel of " + std::to_string(k) + " is larger than the padded input along axis " +
                    std::to_string(2 + i));
    }
    want[2 + static_cast<size_t>(i)] = (in + pads[i] + pads[i + 2] - k) / strides[i] + 1;
  }
  if (!l.output_is(want)) {
    return l.fail("output shape " + shape_text(l.output_shape()) + " does not match the convolution");
  }
  fill_conv(x, w, l.output_shape(), w[0], strides, dilations, pads, group, bias, p);
  if (uint64_t{p->n} * p->group > 65535) return l.fail("N x group exceeds 65535");
  return true;
}

bool lower_conv(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kConv;
  if (!l.attributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}) ||
      !l.inputs(2, 3) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2)) || !l.output() ||
      !conv_geometry(l, 1, l.present(2), &o.conv)) {
    return false;
  }
  if (l.present(2) && l.shape_of(2) != Shape{l.shape_of(1)[0]}) return l.fail("B must have M elements");
  return true;
}

// MaxPool (ceil_mode allowed, Indices output not), AveragePool (ceil_mode 0,
// count_include_pad), GlobalAveragePool, GlobalMaxPool; 2-D (4-D tensors).
bool lower_pool(Lowering& l, const std::string& op) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kPool;
  const bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
  const bool max = op == "MaxPool" || op == "GlobalMaxPool";
  Shape strides, dilations, pads, kernel;
  int64_t ceil_mode = 0, include_pad = 0, storage_order = 0;
  std::string auto_pad;
  if (global) {
    if (!l.attributes({}) || !l.inputs(1, 1)) return false;
  } else if (max) {
    if (!l.attributes({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}) ||
        !l.get_int("ceil_mode", 0, &ceil_mode) || !l.get_int("storage_order", 0, &storage_order) ||
        !l.get_window_ints("dilations", &dilations) || !l.inputs(1, 1)) {
      return false;
    }
  } else if (!l.attributes({"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}) ||
             !l.get_int("ceil_mode", 0, &ceil_mode) || !l.get_int("count_include_pad", 0, &include_pad) ||
             !l.inputs(1, 1)) {
    return false;
  }
  if (!l.get_window_ints("strides", &strides) || !l.get_window_ints("pads", &pads) ||
      !l.get_window_ints("kernel_shape", &kernel) || !l.get_string("auto_pad", "NOTSET", &auto_pad) ||
      !l.data(0) || !l.output()) {
    return false;
  }
  const Shape x = l.shape_of(0);
  if (x.size() != 4) return l.fail("only 2-D pooling (4-D tensors) is supported");
  if (global) kernel = {x[2], x[3]};
  if (kernel.size() != 2) return l.fail("kernel_shape must have 2 entries");
  if (!max && ceil_mode != 0) return l.fail("AveragePool with ceil_mode is not supported");
  if (strides.empty()) strides = {1, 1};
  if (dilations.empty()) dilations = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) return l.fail("attribute sizes are not 2-D");
  Shape want = {x[0], x[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || kernel[i] < 1) return l.fail("strides, dilations and kernel must be >= 1");
    const int64_t in = x[2 + i], k = (kernel[i] - 1) * dilations[i] + 1;
    if (auto_pad == "VALID") {
      pads[i] = pads[i + 2] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + k - in);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + 2] = total - pads[i];
    } else if (auto_pad != "NOTSET") {
      return l.fail("auto_pad " + auto_pad + " is not supported");
    }
    if (pads[i] < 0 || pads[i + 2] < 0 || pads[i] >= k || pads[i + 2] >= k) return l.fail("pads out of range");
    const int64_t span = in + pads[i] + pads[i + 2] - k;
    if (span < 0) return l.fail("the window is larger than the padded input");
    int64_t out = span / strides[i] + 1;
    if (ceil_mode != 0) {
      out = (span + strides[i] - 1) / strides[i] + 1;
      // The last window must start inside the input or its left padding.
      if ((out - 1) * strides[i] >= in + pads[i]) --out;
    }
    want[2 + static_cast<size_t>(i)] = out;
  }
  if (!l.output_is(want)) return l.fail("output shape " + shape_text(l.output_shape()) + " does not match the pooling");
  const Shape y = l.output_shape();
  PoolParams& p = o.pool;
  p.planes = static_cast<uint32_t>(x[0] * x[1]);
  p.h = static_cast<uint32_t>(x[2]);
  p.w = static_cast<uint32_t>(x[3]);
  p.oh = static_cast<uint32_t>(y[2]);
  p.ow = static_cast<uint32_t>(y[3]);
  p.kh = static_cast<uint32_t>(kernel[0]);
  p.kw = static_cast<uint32_t>(kernel[1]);
  p.sh = static_cast<uint32_t>(strides[0]);
  p.sw = static_cast<uint32_t>(strides[1]);
  p.dh = static_cast<uint32_t>(dilations[0]);
  p.dw = static_cast<uint32_t>(dilations[1]);
  p.pt = static_cast<uint32_t>(pads[0]);
  p.pl = static_cast<uint32_t>(pads[1]);
  p.mode = max ? 0 : (include_pad != 0 ? 2 : 1);
  return true;
}

// ReduceSum/ReduceMean/ReduceMax over axes that form one contiguous run of
// dimensions (after dropping size-1 dimensions would change nothing, so
// they are taken as given), keepdims either way. Axes come from the
// attribute, or for ReduceSum from opset 13 from a constant input.
bool lower_reduce(Lowering& l, const std::string& op) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kReduce;
  o.reduce_op = op == "ReduceSum" ? 0 : op == "ReduceMean" ? 1 : 2;
  const bool axes_input = op == "ReduceSum" && l.opset() >= 13;
  int64_t keepdims = 1, noop = 0;
  Shape axes;
  if (axes_input) {
    if (!l.attributes({"keepdims", "noop_with_empty_axes"}) || !l.inputs(1, 2) ||
        !l.get_int("noop_with_empty_axes", 0, &noop)) {
      return false;
    }
    if (l.present(1) && !l.constant_i64s(1, &axes)) return false;
  } else if (!l.attributes({"axes", "keepdims"}) || !l.inputs(1, 1) || !l.get_ints("axes", &axes)) {
    return false;
  }
  if (!l.get_int("keepdims", 1, &keepdims) || !l.data(0) || !l.output()) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axes.empty()) {
    if (noop != 0) return l.fail("noop_with_empty_axes is not supported");
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<bool> reduced(x.size(), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0 && l.opset() < 11) return l.fail("negative axis before opset 11");
    const size_t d = static_cast<size_t>(a < 0 ? a + rank : a);
    if (reduced[d]) return l.fail("axis " + std::to_string(a) + " is repeated");
    reduced[d] = true;
  }
  size_t first = x.size(), last = 0;
  for (size_t d = 0; d < x.size(); ++d) {
    if (reduced[d]) {
      first = std::min(first, d);
      last = d;
    }
  }
  Shape want;
  o.outer = o.n = o.inner = 1;
  for (size_t d = 0; d < x.size(); ++d) {
    const uint64_t v = static_cast<uint64_t>(x[d]);
    if (reduced[d]) {
      o.n *= v;
      if (keepdims != 0) want.push_back(1);
    } else {
      if (d > first && d < last) return l.fail("the reduced axes are not contiguous");
      (d < first ? o.outer : o.inner) *= v;
      want.push_back(x[d]);
    }
  }
  if (!l.output_is(want)) return l.fail("output shape " + shape_text(l.output_shape()) + ", expected " + shape_text(want));
  if (o.n == 0 || o.inner == 0) return l.fail("empty reductions are not supported");
  return true;
}

// Drops leading 1s: scale and bias match the normalized shape up to them.
static Shape without_leading_ones(const Shape& s) {
  size_t i = 0;
  while (i < s.size() && s[i] == 1) ++i;
  return Shape(s.begin() + static_cast<std::ptrdiff_t>(i), s.end());
}

// LayerNormalization (opset 17) over dimensions [axis, rank), computed in
// f32 (stash_type 1); scale and bias must have the normalized shape (leading
// 1s aside), not a smaller one broadcast over it. The Mean and InvStdDev
// outputs are not produced, so a node that uses them is not claimed.
bool lower_layernorm(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kLayerNorm;
  int64_t axis = -1, stash = 1;
  float epsilon = 1e-5f;
  if (!l.attributes({"axis", "epsilon", "stash_type"}) || !l.get_int("axis", -1, &axis) ||
      !l.get_float("epsilon", 1e-5f, &epsilon) || !l.get_int("stash_type", 1, &stash) ||
      !l.inputs(2, 3) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2)) || !l.output() ||
      !same_shape_out(l)) {
    return false;
  }
  if (stash != 1) return l.fail("stash_type " + std::to_string(stash) + " is not supported (only 1, f32)");
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) {
    return l.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  if (axis < 0) axis += rank;
  const Shape normalized(x.begin() + axis, x.end());
  o.outer = 1;
  o.n = 1;
  for (int64_t d = 0; d < rank; ++d) {
    (d < axis ? o.outer : o.n) *= static_cast<uint64_t>(x[static_cast<size_t>(d)]);
  }
  if (o.n == 0 || o.outer == 0) return l.fail("empty tensors are not supported");
  for (size_t i = 1; i < 3; ++i) {
    if (!l.present(i)) continue;
    if (without_leading_ones(l.shape_of(i)) != without_leading_ones(normalized)) {
      return l.fail(std::string(i == 1 ? "scale" : "bias") + " shape " + shape_text(l.shape_of(i)) +
                    " is not the normalized shape " + shape_text(normalized) +
                    " (broadcast scale and bias are not supported)");
    }
  }
  o.has_bias = l.present(2);
  o.alpha = epsilon;
  return true;
}

}  // namespace loom::vulkan::lowering

namespace loom::vulkan::lowering {

// ConvTranspose, 1-D and 2-D (3-D and 4-D tensors; 1-D runs as H = 1): any
// group, strides, dilations, output_padding and non-negative explicit pads,
// auto_pad NOTSET or VALID, optional bias. output_shape and SAME_UPPER /
// SAME_LOWER are claimed only when the padding they imply is even and not
// negative: the spec and its reference implementation place an odd or
// negative padding on different sides.
bool lower_conv_transpose(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kConvTranspose;
  Shape strides, dilations, pads, kernel, out_pad, out_shape;
  int64_t group = 1;
  std::string auto_pad;
  if (!l.attributes({"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads",
                     "strides"}) ||
      !l.inputs(2, 3) || !l.get_window_ints("strides", &strides) || !l.get_window_ints("dilations", &dilations) ||
      !l.get_window_ints("pads", &pads) || !l.get_window_ints("kernel_shape", &kernel) ||
      !l.get_window_ints("output_padding", &out_pad) ||
      !l.get_window_ints("output_shape", &out_shape) || !l.get_window_int("group", 1, &group) ||
      !l.get_string("auto_pad", "NOTSET", &auto_pad) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2)) ||
      !l.output()) {
    return false;
  }
  Shape x = l.shape_of(0), w = l.shape_of(1);
  if (x.size() != w.size() || (x.size() != 3 && x.size() != 4)) {
    return l.fail("only 1-D and 2-D transposed convolutions (3-D or 4-D tensors) are supported");
  }
  for (const Shape* s : {&x, &w}) {
    for (int64_t d : *s) {
      if (d < 1) return l.fail("empty tensors are not supported");
    }
  }
  const size_t spatial = x.size() - 2;
  if (strides.empty()) strides.assign(spatial, 1);
  if (dilations.empty()) dilations.assign(spatial, 1);
  if (pads.empty()) pads.assign(2 * spatial, 0);
  if (out_pad.empty()) out_pad.assign(spatial, 0);
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial ||
      out_pad.size() != spatial || (!out_shape.empty() && out_shape.size() != spatial) ||
      (!kernel.empty() && kernel.size() != spatial)) {
    return l.fail("attribute sizes do not match " + std::to_string(spatial) + " spatial dimensions");
  }
  if (group < 1 || x[1] % group != 0 || w[0] != x[1]) {
    return l.fail("group " + std::to_string(group) + " does not fit X " + shape_text(x) + " and W " + shape_text(w));
  }
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID") return l.fail("auto_pad " + auto_pad + " is unknown");
  if ((same || !out_shape.empty()) && l.binding()) {
    // The padding's parity, which decides whether the node is claimed,
    // would follow the binding.
    const Shape declared = l.declared_of(0);
    for (size_t d = 2; d < declared.size(); ++d) {
      if (declared[d] < 0) {
        return l.fail(std::string(same ? "auto_pad " + auto_pad : std::string("output_shape")) +
                      " over an input with open spatial dimensions " + shape_text(declared) +
                      " (whether its padding is even follows the binding)");
      }
    }
  }
  Shape want = {x[0], w[1] * group};
  for (size_t i = 0; i < spatial; ++i) {
    if (!kernel.empty() && kernel[i] != w[2 + i]) return l.fail("kernel_shape differs from W");
    if (strides[i] < 1 || dilations[i] < 1) return l.fail("strides and dilations must be >= 1");
    if (out_pad[i] < 0 || (out_pad[i] >= strides[i] && out_pad[i] >= dilations[i])) {
      return l.fail("output_padding " + std::to_string(out_pad[i]) + " is out of range");
    }
    const int64_t natural = strides[i] * (x[2 + i] - 1) + out_pad[i] + (w[2 + i] - 1) * dilations[i] + 1;
    if (auto_pad == "VALID") pads[i] = pads[i + spatial] = 0;
    if (!out_shape.empty() || same) {
      const int64_t total = natural - (out_shape.empty() ? x[2 + i] * strides[i] : out_shape[i]);
      if (total < 0 || total % 2 != 0) {
        return l.fail("output_shape or auto_pad implies padding " + std::to_string(total) +
                      ", which is odd or negative");
      }
      pads[i] = pads[i + spatial] = total / 2;
    }
    if (pads[i] < 0 || pads[i + spatial] < 0) return l.fail("negative pads");
    want.push_back(natural - pads[i] - pads[i + spatial]);
  }
  if (!l.output_is(want)) {
    return l.fail("output shape " + shape_text(l.output_shape()) + " does not match the transposed convolution");
  }
  Shape y = l.output_shape();
  for (int64_t d : y) {
    if (d < 1) return l.fail("empty tensors are not supported");
  }
  if (l.present(2) && l.shape_of(2) != Shape{y[1]}) return l.fail("B must have M elements");
  if (spatial == 1) {  // a 1-D convolution is a 2-D one of height 1
    x.insert(x.begin() + 2, 1);
    w.insert(w.begin() + 2, 1);
    y.insert(y.begin() + 2, 1);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
    pads = {0, pads[0]};
  }
  ConvParams& p = o.conv;
  fill_conv(x, w, y, y[1], strides, dilations, pads, group, l.present(2), &p);
  for (int64_t v : {x[2], x[3], y[2], y[3], pads[0], pads[1], w[2] * dilations[0], w[3] * dilations[1]}) {
    if (v >= (int64_t{1} << 30)) return l.fail("sizes beyond the kernel's 32-bit indexing");
  }
  return true;
}

}  // namespace loom::vulkan::lowering
