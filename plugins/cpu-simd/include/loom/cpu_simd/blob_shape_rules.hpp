// The cpu-simd operators' shape rules: broadcasting, the window geometry of
// Conv and pooling, each operator's output shape (infer_output_shape).
// The dtypes each accepts (check_dtypes) are in blob_dtype_rules.hpp.
// Header-only, on top of blob_ops.hpp; blob_format.hpp's decoder applies them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_ops.hpp"
#include "loom/cpu_simd/blob_resize_rules.hpp"

namespace loom::cpu_simd {

// Numpy broadcast of two shapes; false when they do not broadcast.
inline bool broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                             std::vector<int64_t>* out) {
  const size_t rank = a.size() > b.size() ? a.size() : b.size();
  out->assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    const size_t from_end = rank - d;
    const int64_t da = from_end <= a.size() ? a[a.size() - from_end] : 1;
    const int64_t db = from_end <= b.size() ? b[b.size() - from_end] : 1;
    if (da != db && da != 1 && db != 1) return false;
    (*out)[d] = da == 1 ? db : da;
  }
  return true;
}

// Conv / pooling geometry unpacked from BlobNode::ints.
struct Window {
  int64_t k = 0;  // spatial dimensions
  int64_t group = 1;
  int64_t ceil_mode = 0, count_include_pad = 0;
  int64_t kernel[kMaxSpatial] = {}, stride[kMaxSpatial] = {}, dilation[kMaxSpatial] = {};
  int64_t pad_begin[kMaxSpatial] = {}, pad_end[kMaxSpatial] = {};
  int64_t output_padding[kMaxSpatial] = {};  // ConvTranspose
};

// Unpacks and range-checks a Conv / MaxPool / AveragePool node's ints.
inline bool unpack_window(const BlobNode& node, Window* w, std::string* error) {
  const bool transposed = node.op == Op::kConvTranspose;
  const bool conv = node.op == Op::kConv || node.op == Op::kQLinearConv ||
                    node.op == Op::kConvInteger || transposed;
  const size_t head = conv ? 2 : 3;
  const size_t per_dim = transposed ? 6 : 5;
  const std::vector<int64_t>& v = node.ints;
  if (v.empty() || v[0] < 1 || v[0] > kMaxSpatial) {
    *error = "the spatial rank (ints[0]) must be 1 to " + std::to_string(kMaxSpatial) +
             (v.empty() ? std::string(", ints is empty") : ", got " + std::to_string(v[0]));
    return false;
  }
  const size_t k = static_cast<size_t>(v[0]);
  if (v.size() != head + per_dim * k) {
    *error = "has " + std::to_string(v.size()) + " ints, expected " +
             std::to_string(head + per_dim * k);
    return false;
  }
  w->k = v[0];
  if (conv) {
    w->group = v[1];
    if (w->group < 1 || w->group > kMaxAttr) {
      *error = "group (ints[1]) must be 1 to 2^31, got " + std::to_string(w->group);
      return false;
    }
  } else {
    w->ceil_mode = v[1];
    w->count_include_pad = v[2];
    if ((v[1] != 0 && v[1] != 1) || (v[2] != 0 && v[2] != 1)) {
      *error = "ceil_mode (ints[1]) and count_include_pad (ints[2]) must be 0 or 1, got " +
               std::to_string(v[1]) + " and " + std::to_string(v[2]);
      return false;
    }
  }
  for (size_t i = 0; i < k; ++i) {
    w->kernel[i] = v[head + i];
    w->stride[i] = v[head + k + i];
    w->dilation[i] = v[head + 2 * k + i];
    w->pad_begin[i] = v[head + 3 * k + i];
    w->pad_end[i] = v[head + 4 * k + i];
    if (w->kernel[i] < 1 || w->stride[i] < 1 || w->dilation[i] < 1 || w->pad_begin[i] < 0 ||
        w->pad_end[i] < 0 || w->kernel[i] > kMaxAttr || w->stride[i] > kMaxAttr ||
        w->dilation[i] > kMaxAttr || w->pad_begin[i] > kMaxAttr || w->pad_end[i] > kMaxAttr) {
      *error = "spatial dimension " + std::to_string(i) + ": kernel " +
               std::to_string(w->kernel[i]) + ", stride " + std::to_string(w->stride[i]) +
               ", dilation " + std::to_string(w->dilation[i]) + ", pads " +
               std::to_string(w->pad_begin[i]) + " and " + std::to_string(w->pad_end[i]) +
               ": kernel, stride and dilation must be >= 1 and pads >= 0 (all <= 2^31)";
      return false;
    }
    if (transposed) {
      w->output_padding[i] = v[head + 5 * k + i];
      if (w->output_padding[i] < 0 || w->output_padding[i] >= w->stride[i]) {
        *error = "spatial dimension " + std::to_string(i) + ": output_padding " +
                 std::to_string(w->output_padding[i]) + " must be >= 0 and below the stride " +
                 std::to_string(w->stride[i]);
        return false;
      }
    }
  }
  return true;
}

// Output extent of one windowed dimension; -1 when the window does not fit.
inline int64_t window_extent(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                             int64_t pad_begin, int64_t pad_end, bool ceil_mode) {
  const int64_t span = (kernel - 1) * dilation + 1;
  const int64_t padded = in + pad_begin + pad_end;
  if (padded < span) return -1;
  int64_t out = (padded - span) / stride + 1;
  if (ceil_mode && (padded - span) % stride != 0) {
    ++out;
    // The last window must start inside the input or the leading pad.
    if ((out - 1) * stride >= in + pad_begin) --out;
  }
  return out;
}

namespace detail {

inline bool infer_window(const BlobNode& node, const std::vector<const std::vector<int64_t>*>& in,
                         std::vector<int64_t>* out, std::string* error) {
  const std::string op = op_name(node.op);
  Window w;
  std::string why;
  if (!unpack_window(node, &w, &why)) {
    *error = op + ": " + why;
    return false;
  }
  const std::vector<int64_t>& x = *in[0];
  if (static_cast<int64_t>(x.size()) != w.k + 2) {
    *error = op + ": input " + shape_string(x) + " must have rank " + std::to_string(w.k + 2);
    return false;
  }
  *out = x;
  if (node.op == Op::kConv) {
    const std::vector<int64_t>& wt = *in[1];
    if (wt.size() != x.size() || x[1] % w.group != 0 || wt[0] % w.group != 0 ||
        wt[1] * w.group != x[1]) {
      *error = op + ": weight " + shape_string(wt) + " does not fit input " + shape_string(x) +
               " with group " + std::to_string(w.group);
      return false;
    }
    for (int64_t i = 0; i < w.k; ++i) {
      if (wt[2 + i] != w.kernel[i]) {
        *error = op + ": weight " + shape_string(wt) + " disagrees with the kernel shape";
        return false;
      }
    }
    if (in.size() == 3 && *in[2] != std::vector<int64_t>{wt[0]}) {
      *error = op + ": bias " + shape_string(*in[2]) + " must be [" + std::to_string(wt[0]) + "]";
      return false;
    }
    (*out)[1] = wt[0];
  }
  if (node.op == Op::kConvTranspose) {
    // Weight [C_in, C_out / group, kernel...].
    const std::vector<int64_t>& wt = *in[1];
    if (wt.size() != x.size() || wt[0] != x[1] || x[1] % w.group != 0 ||
        wt[1] > kMaxAttr / w.group) {
      *error = op + ": weight " + shape_string(wt) + " does not fit input " + shape_string(x) +
               " with group " + std::to_string(w.group);
      return false;
    }
    for (int64_t i = 0; i < w.k; ++i) {
      if (wt[2 + i] != w.kernel[i]) {
        *error = op + ": weight " + shape_string(wt) + " disagrees with the kernel shape";
        return false;
      }
    }
    const int64_t c_out = wt[1] * w.group;
    if (in.size() == 3 && *in[2] != std::vector<int64_t>{c_out}) {
      *error = op + ": bias " + shape_string(*in[2]) + " must be [" + std::to_string(c_out) + "]";
      return false;
    }
    (*out)[1] = c_out;
    for (int64_t i = 0; i < w.k; ++i) {
      // All factors are below 2^31 (unpack_window), so this cannot overflow.
      const int64_t e = w.stride[i] * (x[2 + i] - 1) + w.output_padding[i] +
                        (w.kernel[i] - 1) * w.dilation[i] + 1 - w.pad_begin[i] - w.pad_end[i];
      if (x[2 + i] < 1 || e < 1) {
        *error = op + ": spatial dimension " + std::to_string(i) + " of input " + shape_string(x) +
                 " gives an empty output";
        return false;
      }
      (*out)[2 + i] = e;
    }
    return true;
  }
  for (int64_t i = 0; i < w.k; ++i) {
    const int64_t e = window_extent(x[2 + i], w.kernel[i], w.stride[i], w.dilation[i],
                                    w.pad_begin[i], w.pad_end[i], w.ceil_mode != 0);
    if (e < 0) {
      *error = op + ": the window does not fit spatial dimension " + std::to_string(i) +
               " of input " + shape_string(x);
      return false;
    }
    (*out)[2 + i] = e;
  }
  return true;
}

inline bool normalize_axis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

}  // namespace detail

// Arity of an operator: [min_in, max_in] inputs (max 0 = unbounded).
inline void op_arity(Op op, size_t* min_in, size_t* max_in) {
  if (is_binary(op) || op == Op::kMatMul) {
    *min_in = *max_in = 2;
  } else if (op == Op::kGemm || op == Op::kConv || op == Op::kConvTranspose ||
             op == Op::kLayerNormalization) {
    *min_in = 2;
    *max_in = 3;
  } else if (op == Op::kConcat) {
    *min_in = 1;
    *max_in = 0;
  } else if (op == Op::kBatchNorm) {
    *min_in = *max_in = 5;
  } else if (op == Op::kEqual) {
    *min_in = *max_in = 2;
  } else if (op == Op::kPad) {
    *min_in = 1;
    *max_in = 2;
  } else if (op == Op::kWhere) {
    *min_in = *max_in = 3;
  } else if (op == Op::kQuantizeLinear || op == Op::kDequantizeLinear) {
    *min_in = 2;
    *max_in = 3;
  } else if (op == Op::kQLinearConv || op == Op::kQLinearConvTranspose) {
    *min_in = 8;
    *max_in = 9;
  } else if (op == Op::kQLinearMatMul) {
    *min_in = 8;
    *max_in = 9;  // format 7: an i32 bias
  } else if (op == Op::kConvInteger || op == Op::kMatMulInteger) {
    *min_in = 2;
    *max_in = 4;
  } else if (op == Op::kLstm) {
    *min_in = 3;
    *max_in = 8;
  } else if (op == Op::kGru || op == Op::kRnn) {
    *min_in = 3;
    *max_in = 6;
  } else if (op == Op::kDynamicQuantize) {
    *min_in = *max_in = 3;
  } else {
    *min_in = *max_in = 1;
  }
}

// The output shape of a kCopy node with a shape spec (format 5: `ints`, one
// entry per output dimension: >= 0 that extent, -1 the one extent inferred
// from the element count, -2 - j the input's dimension j) given its input
// shape. False with `*error` when the spec is malformed or does not fit.
inline bool copy_spec_shape(const std::vector<int64_t>& spec, const std::vector<int64_t>& in,
                            std::vector<int64_t>* out, std::string* error) {
  using detail::shape_string;
  if (spec.size() > kMaxRank) {
    *error = "Copy: shape spec of " + std::to_string(spec.size()) + " entries exceeds rank " +
             std::to_string(kMaxRank);
    return false;
  }
  uint64_t count = 1;
  for (int64_t d : in) {
    if (d < 0) {
      *error = "Copy: input " + shape_string(in) + " is not a bound shape";
      return false;
    }
    if (d != 0 && count > (uint64_t{1} << 60) / static_cast<uint64_t>(d)) {
      *error = "Copy: input " + shape_string(in) + " is too large";
      return false;
    }
    count *= static_cast<uint64_t>(d);
  }
  out->assign(spec.size(), 0);
  int64_t inferred = -1;
  uint64_t known = 1;
  bool zero = false;
  for (size_t d = 0; d < spec.size(); ++d) {
    const int64_t e = spec[d];
    int64_t extent = e;
    if (e == -1) {
      if (inferred >= 0) {
        *error = "Copy: shape spec " + shape_string(spec) + " infers more than one dimension";
        return false;
      }
      inferred = static_cast<int64_t>(d);
      continue;
    }
    if (e < -1) {
      const int64_t j = -2 - e;
      if (j < 0 || j >= static_cast<int64_t>(in.size())) {
        *error = "Copy: shape spec " + shape_string(spec) + " entry " + std::to_string(d) +
                 " copies input dimension " + std::to_string(j) + ", input is " + shape_string(in);
        return false;
      }
      extent = in[static_cast<size_t>(j)];
    } else if (e > kMaxAttr) {
      *error = "Copy: shape spec " + shape_string(spec) + " entry " + std::to_string(d) +
               " is too large";
      return false;
    }
    (*out)[d] = extent;
    if (extent == 0) {
      zero = true;
    } else if (known > (uint64_t{1} << 60) / static_cast<uint64_t>(extent)) {
      *error = "Copy: shape spec " + shape_string(spec) + " gives too many elements";
      return false;
    } else {
      known *= static_cast<uint64_t>(extent);
    }
  }
  if (inferred >= 0) {
    if (zero || count % known != 0) {
      *error = "Copy: shape spec " + shape_string(spec) + " cannot hold the " + std::to_string(count) +
               " elements of input " + shape_string(in);
      return false;
    }
    (*out)[static_cast<size_t>(inferred)] = static_cast<int64_t>(count / known);
    return true;
  }
  if ((zero ? 0 : known) != count) {
    *error = "Copy: output " + shape_string(*out) + " does not hold the " + std::to_string(count) +
             " elements of input " + shape_string(in);
    return false;
  }
  return true;
}

inline bool infer_quant_shape(const BlobNode& node, const std::vector<const std::vector<int64_t>*>& in,
                              std::vector<int64_t>* out, std::string* error);
inline bool check_quant_dtypes(const BlobNode& node, const std::vector<loom_dtype_t>& in, loom_dtype_t out,
                               std::string* error);
struct RnnForm;
inline bool rnn_form(const BlobNode& node, const std::vector<const std::vector<int64_t>*>& in, RnnForm* form,
                     std::vector<int64_t>* out, std::string* error);
inline bool infer_dynamic_quant_shape(const BlobNode& node, const std::vector<const std::vector<int64_t>*>& in,
                                      std::vector<int64_t>* out, std::string* error);

// A plain (not quantized) operator carries ints and floats only where its
// form has them; false with `*error` otherwise.
inline bool attribute_lists_ok(const BlobNode& node, std::string* error) {
  const bool ints_allowed = node.op == Op::kSoftmax || node.op == Op::kLogSoftmax ||
                            node.op == Op::kTranspose || node.op == Op::kConv ||
                            node.op == Op::kMaxPool || node.op == Op::kAveragePool ||
                            (node.op >= Op::kReduceMean && node.op <= Op::kConvTranspose) ||
                            node.op == Op::kSlice || node.op == Op::kPad || node.op == Op::kCast ||
                            node.op == Op::kCopy;
  if ((!ints_allowed && !node.ints.empty()) || (node.op != Op::kResize && !node.floats.empty())) {
    *error = std::string(op_name(node.op)) + ": unexpected attribute lists (" + std::to_string(node.ints.size()) +
             " ints, " + std::to_string(node.floats.size()) + " floats)";
    return false;
  }
  return true;
}

// The output shape of `node` given its input shapes (ONNX rules), except for
// kCopy without a shape spec, whose output shape is free (only its element
// count is checked by validate). False with `*error` naming the operator and
// the mismatch.
inline bool infer_output_shape(const BlobNode& node,
                               const std::vector<const std::vector<int64_t>*>& in,
                               std::vector<int64_t>* out, std::string* error) {
  using detail::shape_string;
  if (is_quant(node.op)) return infer_quant_shape(node, in, out, error);
  if (is_dynamic_quant(node.op)) return infer_dynamic_quant_shape(node, in, out, error);
  if (is_recurrent(node.op)) return rnn_form(node, in, nullptr, out, error);
  const std::string op = op_name(node.op);
  if (!attribute_lists_ok(node, error)) return false;
  if (is_binary(node.op)) {
    if (!broadcast_shapes(*in[0], *in[1], out)) {
      *error = op + ": shapes do not broadcast: A is " + shape_string(*in[0]) + ", B is " +
               shape_string(*in[1]);
      return false;
    }
    if (node.op == Op::kPRelu && *out != *in[0]) {
      *error = op + ": slope " + shape_string(*in[1]) + " does not broadcast to X " +
               shape_string(*in[0]);
      return false;
    }
    return true;
  }
  if (node.op == Op::kCopy && !node.ints.empty()) return copy_spec_shape(node.ints, *in[0], out, error);
  if (is_unary(node.op) || node.op == Op::kCopy) {
    *out = *in[0];
    return true;
  }
  switch (node.op) {
    case Op::kSoftmax:
    case Op::kLogSoftmax: {
      const std::vector<int64_t>& x = *in[0];
      int64_t axis = 0;
      if (!detail::normalize_axis(node.axis, static_cast<int64_t>(x.size()), &axis)) {
        *error = op + ": axis " + std::to_string(node.axis) + " is out of range for input " +
                 shape_string(x);
        return false;
      }
      if (node.ints.size() > 1 || (node.ints.size() == 1 && node.ints[0] != 0 && node.ints[0] != 1)) {
        *error = op + ": ints must be empty or [coerce_2d (0 or 1)], got " +
                 std::to_string(node.ints.size()) + " ints" +
                 (node.ints.empty() ? std::string() : " starting " + std::to_string(node.ints[0]));
        return false;
      }
      *out = x;
      return true;
    }
    case Op::kMatMul: {
      const std::vector<int64_t>& a = *in[0];
      const std::vector<int64_t>& b = *in[1];
      const std::string both = "A is " + shape_string(a) + ", B is " + shape_string(b);
      if (a.empty() || b.empty()) {
        *error = op + ": operands must have rank >= 1: " + both;
        return false;
      }
      const int64_t ka = a.back();
      const int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
      if (ka != kb) {
        *error = op + ": inner dimensions differ: " + both;
        return false;
      }
      std::vector<int64_t> ba(a.begin(), a.end() - (a.size() >= 2 ? 2 : a.size()));
      std::vector<int64_t> bb(b.begin(), b.end() - (b.size() >= 2 ? 2 : b.size()));
      if (!broadcast_shapes(ba, bb, out)) {
        *error = op + ": batch dimensions do not broadcast: " + both;
        return false;
      }
      if (a.size() >= 2) out->push_back(a[a.size() - 2]);
      if (b.size() >= 2) out->push_back(b.back());
      return true;
    }
    case Op::kGemm: {
      const std::vector<int64_t>& a = *in[0];
      const std::vector<int64_t>& b = *in[1];
      if (a.size() != 2 || b.size() != 2) {
        *error = op + ": A and B must be 2-D: A is " + shape_string(a) + ", B is " + shape_string(b);
        return false;
      }
      const int64_t m = node.trans_a ? a[1] : a[0];
      const int64_t k = node.trans_a ? a[0] : a[1];
      const int64_t kb = node.trans_b ? b[1] : b[0];
      const int64_t n = node.trans_b ? b[0] : b[1];
      if (k != kb) {
        *error = op + ": inner dimensions differ: A is " + shape_string(a) + ", B is " +
                 shape_string(b) + " (trans_a " + std::to_string(node.trans_a) + ", trans_b " +
                 std::to_string(node.trans_b) + ")";
        return false;
      }
      *out = {m, n};
      if (in.size() == 3) {
        std::vector<int64_t> c_out;
        if (in[2]->size() > 2 || !broadcast_shapes(*in[2], *out, &c_out) || c_out != *out) {
          *error = op + ": C is " + shape_string(*in[2]) + ", does not broadcast to " +
                   shape_string(*out);
          return false;
        }
      }
      return true;
    }
    case Op::kConcat: {
      const std::vector<int64_t>& first = *in[0];
      int64_t axis = 0;
      if (!detail::normalize_axis(node.axis, static_cast<int64_t>(first.size()), &axis)) {
        *error = op + ": axis " + std::to_string(node.axis) + " is out of range for input " +
                 shape_string(first);
        return false;
      }
      *out = first;
      for (size_t i = 1; i < in.size(); ++i) {
        const std::vector<int64_t>& s = *in[i];
        bool same = s.size() == first.size();
        for (size_t d = 0; same && d < s.size(); ++d) same = d == size_t(axis) || s[d] == first[d];
        if (!same) {
          *error = op + ": input " + std::to_string(i) + " " + shape_string(s) +
                   " does not match input 0 " + shape_string(first) + " off axis " +
                   std::to_string(axis);
          return false;
        }
        (*out)[axis] += s[axis];
      }
      return true;
    }
    case Op::kTranspose: {
      const std::vector<int64_t>& x = *in[0];
      if (node.ints.size() != x.size()) {
        *error = op + ": perm has " + std::to_string(node.ints.size()) + " entries, input is " +
                 shape_string(x);
        return false;
      }
      std::vector<bool> seen(x.size(), false);
      out->resize(x.size());
      for (size_t d = 0; d < x.size(); ++d) {
        const int64_t p = node.ints[d];
        if (p < 0 || p >= static_cast<int64_t>(x.size()) || seen[p]) {
          *error = op + ": perm " + shape_string(node.ints) +
                   " is not a permutation of the input's axes (entry " + std::to_string(d) +
                   " is " + std::to_string(p) + ")";
          return false;
        }
        seen[p] = true;
        (*out)[d] = x[p];
      }
      return true;
    }
    case Op::kConv:
    case Op::kConvTranspose:
    case Op::kMaxPool:
    case Op::kAveragePool:
      return detail::infer_window(node, in, out, error);
    case Op::kReduceMean:
    case Op::kReduceSum:
    case Op::kReduceMax:
    case Op::kReduceMin: {
      const std::vector<int64_t>& x = *in[0];
      const std::vector<int64_t>& v = node.ints;
      if (v.size() < 2 || (v[0] != 0 && v[0] != 1)) {
        *error = op + ": ints must be [keepdims (0 or 1), axes...] with at least one axis, got " +
                 shape_string(v);
        return false;
      }
      for (size_t i = 1; i < v.size(); ++i) {
        if (v[i] < 0 || v[i] >= static_cast<int64_t>(x.size()) || (i > 1 && v[i] <= v[i - 1])) {
          *error = op + ": axes " + shape_string(std::vector<int64_t>(v.begin() + 1, v.end())) +
                   " must be ascending axes of input " + shape_string(x);
          return false;
        }
        if (x[static_cast<size_t>(v[i])] == 0) {
          *error = op + ": axis " + std::to_string(v[i]) + " of input " + shape_string(x) +
                   " is empty";
          return false;
        }
      }
      out->clear();
      size_t next = 1;
      for (size_t d = 0; d < x.size(); ++d) {
        const bool reduced = next < v.size() && v[next] == static_cast<int64_t>(d);
        if (reduced) ++next;
        if (!reduced) out->push_back(x[d]);
        else if (v[0] == 1) out->push_back(1);
      }
      return true;
    }
    case Op::kGather: {
      const std::vector<int64_t>& x = *in[0];
      const std::vector<int64_t>& v = node.ints;
      if (node.axis < 0 || node.axis >= static_cast<int64_t>(x.size())) {
        *error = op + ": axis " + std::to_string(node.axis) + " is not an axis of input " +
                 shape_string(x);
        return false;
      }
      if (v.empty() || v[0] < 0 || static_cast<uint64_t>(v[0]) + x.size() > kMaxRank + 1 ||
          v.size() < 1 + static_cast<size_t>(v[0])) {
        *error = op + ": ints must be [r, index shape (r entries), index values] with an output "
                 "rank of at most " + std::to_string(kMaxRank) + ", got " +
                 std::to_string(v.size()) + " ints";
        return false;
      }
      const size_t r = static_cast<size_t>(v[0]);
      const std::vector<int64_t> index_shape(v.begin() + 1, v.begin() + 1 + static_cast<int64_t>(r));
      uint64_t count = 1;
      for (int64_t d : index_shape) {
        if (d < 0 || d > kMaxAttr || (d != 0 && count > (uint64_t{1} << 40) / static_cast<uint64_t>(d))) {
          *error = op + ": index shape " + shape_string(index_shape) + " is negative or too large";
          return false;
        }
        count *= static_cast<uint64_t>(d);
      }
      if (v.size() != 1 + r + count) {
        *error = op + ": has " + std::to_string(v.size() - 1 - r) +
                 " index values, index shape " + shape_string(index_shape) + " needs " +
                 std::to_string(count);
        return false;
      }
      const int64_t extent = x[static_cast<size_t>(node.axis)];
      for (size_t i = 1 + r; i < v.size(); ++i) {
        if (v[i] < 0 || v[i] >= extent) {
          *error = op + ": index value " + std::to_string(v[i]) + " is outside [0, " +
                   std::to_string(extent) + "), axis " + std::to_string(node.axis) +
                   " of input " + shape_string(x);
          return false;
        }
      }
      out->assign(x.begin(), x.begin() + node.axis);
      out->insert(out->end(), index_shape.begin(), index_shape.end());
      out->insert(out->end(), x.begin() + node.axis + 1, x.end());
      return true;
    }
    case Op::kSlice: {
      const std::vector<int64_t>& x = *in[0];
      const std::vector<int64_t>& v = node.ints;
      const size_t rank = x.size();
      if (rank == 0 || v.size() != 3 * rank) {
        *error = op + ": ints must be [starts, steps, output dims] with " + std::to_string(rank) +
                 " entries each for input " + shape_string(x) + ", got " + std::to_string(v.size()) +
                 " ints";
        return false;
      }
      out->assign(v.begin() + 2 * static_cast<int64_t>(rank), v.end());
      for (size_t d = 0; d < rank; ++d) {
        const int64_t start = v[d], step = v[rank + d], n = (*out)[d];
        bool ok = step != 0 && step >= -kMaxAttr && step <= kMaxAttr && n >= 0 && n <= x[d];
        if (ok && n > 0) {
          // The last index read, start + (n - 1) step, in 128 bits.
          const __int128 last = static_cast<__int128>(start) + static_cast<__int128>(n - 1) * step;
          ok = start >= 0 && start < x[d] && last >= 0 && last < x[d];
        }
        if (!ok) {
          *error = op + ": axis " + std::to_string(d) + ": start " + std::to_string(start) +
                   ", step " + std::to_string(step) + " and " + std::to_string(n) +
                   " outputs do not stay inside input " + shape_string(x);
          return false;
        }
      }
      return true;
    }
    case Op::kPad: {
      const std::vector<int64_t>& x = *in[0];
      const std::vector<int64_t>& v = node.ints;
      const size_t rank = x.size();
      if (v.size() != 1 + 2 * rank || v[0] < 0 || v[0] > static_cast<int64_t>(PadMode::kWrap)) {
        *error = op + ": ints must be [mode (0 to 3), pads_begin, pads_end] with " +
                 std::to_string(rank) + " pads each for input " + shape_string(x) + ", got " +
                 std::to_string(v.size()) + " ints" +
                 (v.empty() ? std::string() : " starting " + std::to_string(v[0]));
        return false;
      }
      *out = x;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t b = v[1 + d], e = v[1 + rank + d];
        if (b < 0 || e < 0 || b > kMaxAttr || e > kMaxAttr) {
          *error = op + ": axis " + std::to_string(d) + ": pads " + std::to_string(b) + " and " +
                   std::to_string(e) + " must be 0 to 2^31";
          return false;
        }
        if (v[0] != static_cast<int64_t>(PadMode::kConstant) && x[d] == 0 && b + e > 0) {
          *error = op + ": axis " + std::to_string(d) + " of input " + shape_string(x) +
                   " is empty, only constant mode pads it";
          return false;
        }
        (*out)[d] = x[d] + b + e;
      }
      bool one = true;  // one element: every dimension is 1
      for (size_t i = 1; i < in.size(); ++i) {
        for (int64_t d : *in[i]) one = one && d == 1;
      }
      if (!one) {
        *error = op + ": the constant value " + shape_string(*in[1]) + " must hold one element";
        return false;
      }
      return true;
    }
    case Op::kEqual:
      if (!broadcast_shapes(*in[0], *in[1], out)) {
        *error = op + ": shapes do not broadcast: A is " + shape_string(*in[0]) + ", B is " +
                 shape_string(*in[1]);
        return false;
      }
      return true;
    case Op::kWhere: {
      std::vector<int64_t> xy;
      if (!broadcast_shapes(*in[1], *in[2], &xy) || !broadcast_shapes(*in[0], xy, out)) {
        *error = op + ": shapes do not broadcast: condition is " + shape_string(*in[0]) +
                 ", X is " + shape_string(*in[1]) + ", Y is " + shape_string(*in[2]);
        return false;
      }
      return true;
    }
    case Op::kCast:
      if (node.ints.size() != 1 || !cast_to_ok(node.ints[0])) {
        *error = op + ": ints must be [to] with to a dtype of f32 (1), i32 (7), i64 (8), "
                 "bool (13), u8 (9) or i8 (5), got " + shape_string(node.ints);
        return false;
      }
      *out = *in[0];
      return true;
    case Op::kLayerNormalization: {
      const std::vector<int64_t>& x = *in[0];
      if (node.axis < 0 || node.axis >= static_cast<int64_t>(x.size())) {
        *error = op + ": axis " + std::to_string(node.axis) + " is not an axis of input " +
                 shape_string(x);
        return false;
      }
      const std::vector<int64_t> normalized(x.begin() + node.axis, x.end());
      for (size_t i = 1; i < in.size(); ++i) {
        if (*in[i] != normalized) {
          *error = op + ": " + (i == 1 ? "Scale " : "B ") + shape_string(*in[i]) + " must be " +
                   shape_string(normalized) + ", the normalized dims of input " + shape_string(x);
          return false;
        }
      }
      if (!(node.alpha >= 0.0f) || node.alpha > 1.0f) {
        *error = op + ": epsilon " + std::to_string(node.alpha) + " is not in [0, 1]";
        return false;
      }
      *out = x;
      return true;
    }
    case Op::kResize: {
      const std::vector<int64_t>& x = *in[0];
      if (is_open_resize(node)) return open_resize_shape(node, x, out, error);
      const std::vector<int64_t>& v = node.ints;
      const size_t rank = x.size();
      if (rank == 0 || v.size() < 1 + rank || (v[0] != 0 && v[0] != 1)) {
        *error = op + ": ints must be [linear (0 or 1), output dims (" + std::to_string(rank) +
                 "), taps] for input " + shape_string(x) + ", got " + std::to_string(v.size()) +
                 " ints";
        return false;
      }
      const bool linear = v[0] == 1;
      const std::vector<int64_t> dims(v.begin() + 1, v.begin() + 1 + static_cast<int64_t>(rank));
      uint64_t positions = 0;
      for (size_t a = 0; a < rank; ++a) {
        if (dims[a] < 1 || dims[a] > kMaxAttr || x[a] < 1) {
          *error = op + ": output dims " + shape_string(dims) + " or input " + shape_string(x) +
                   " has an empty or too large dimension";
          return false;
        }
        positions += static_cast<uint64_t>(dims[a]);
      }
      if (v.size() != 1 + rank + 2 * positions || node.floats.size() != (linear ? positions : 0)) {
        *error = op + ": has " + std::to_string(v.size() - 1 - rank) + " tap ints and " +
                 std::to_string(node.floats.size()) + " weights, output dims " +
                 shape_string(dims) + " need " + std::to_string(2 * positions) + " and " +
                 std::to_string(linear ? positions : 0);
        return false;
      }
      size_t at = 1 + rank, wi = 0;
      for (size_t a = 0; a < rank; ++a) {
        for (int64_t o = 0; o < dims[a]; ++o, at += 2, ++wi) {
          const int64_t i0 = v[at], i1 = v[at + 1];
          const bool weight_ok = !linear || (node.floats[wi] >= 0.0f && node.floats[wi] <= 1.0f);
          if (i0 < 0 || i0 >= x[a] || i1 < 0 || i1 >= x[a] || (!linear && i0 != i1) || !weight_ok) {
            *error = op + ": axis " + std::to_string(a) + ", output position " + std::to_string(o) +
                     ": taps " + std::to_string(i0) + " and " + std::to_string(i1) +
                     (linear ? " with weight " + std::to_string(node.floats[wi]) : std::string()) +
                     " do not fit input " + shape_string(x) + " in " +
                     (linear ? "linear" : "nearest") + " mode";
            return false;
          }
        }
      }
      *out = dims;
      return true;
    }
    case Op::kGlobalAveragePool: {
      const std::vector<int64_t>& x = *in[0];
      if (x.size() < 3) {
        *error = op + ": input " + shape_string(x) + " must have rank >= 3";
        return false;
      }
      *out = x;
      for (size_t d = 2; d < x.size(); ++d) (*out)[d] = 1;
      return true;
    }
    case Op::kBatchNorm: {
      const std::vector<int64_t>& x = *in[0];
      if (x.size() < 2) {
        *error = op + ": input " + shape_string(x) + " must have rank >= 2";
        return false;
      }
      for (size_t i = 1; i < 5; ++i) {
        if (*in[i] != std::vector<int64_t>{x[1]}) {
          *error = op + ": input " + std::to_string(i) + " " + shape_string(*in[i]) +
                   " must be [" + std::to_string(x[1]) + "]";
          return false;
        }
      }
      *out = x;
      return true;
    }
    default:
      break;
  }
  *error = "unknown operator " + std::to_string(static_cast<uint32_t>(node.op));
  return false;
}

}  // namespace loom::cpu_simd

#include "loom/cpu_simd/blob_quant_rules.hpp"
#include "loom/cpu_simd/blob_rnn_rules.hpp"
#include "loom/cpu_simd/blob_dql_rules.hpp"
