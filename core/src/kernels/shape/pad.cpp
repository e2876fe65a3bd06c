// Pad: constant, reflect, edge and (from opset 19) wrap modes, opsets 2-21.
// Before opset 11 the pads and the fill value are attributes; from 11 they
// are operands 'pads' and 'constant_value', and from 18 'axes' may name the
// axes that 'pads' covers. Negative pads crop.
#include <cstring>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

constexpr std::string_view kOp = "Pad";

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

struct PadPlan {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> begin;  // per axis, may be negative
  Shape out;
};

Result<PadPlan> pad_plan(std::span<const TensorType> in, const Attributes& a) {
  const bool old = a.opset_before(11);
  LOOM_RETURN_IF_ERROR(check_arity(kOp, in.size(), old ? 1 : 2, old ? 1 : 4, 1, 1));
  if (in[0].dtype == DType::kInvalid) return bad(kOp, "operand 'data' must be given");
  LOOM_RETURN_IF_ERROR(element_count(in[0].shape).status().with_context("Pad: data"));
  const Shape& s = in[0].shape;
  const size_t rank = s.size();
  PadPlan p;
  const std::string_view mode = a.get_string("mode", "constant");
  if (mode == "constant") {
    p.mode = PadMode::kConstant;
  } else if (mode == "reflect") {
    p.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    p.mode = PadMode::kEdge;
  } else if (mode == "wrap" && !a.opset_before(19)) {
    p.mode = PadMode::kWrap;
  } else {
    return bad(kOp, "unknown 'mode' '" + std::string(mode) + "' (constant, reflect, edge; wrap from opset 19)");
  }
  std::vector<int64_t> pads;
  if (old) {
    pads = a.get_ints("pads");
    if (a.find("pads") == nullptr) return bad(kOp, "needs attribute 'pads'");
  } else {
    const TensorType* t = optional_type(in, 1);
    if (t == nullptr) return bad(kOp, "operand 'pads' must be given");
    if (t->shape.size() != 1) {
      return bad(kOp, "operand 'pads' must be 1-D, got shape " + shape_to_string(t->shape));
    }
    LOOM_ASSIGN_OR_RETURN(pads, constant_ints(kOp, 1, "pads", *t));
    if (const TensorType* axes_type = optional_type(in, 3)) {
      // Opset 18: 'pads' covers only the listed axes, the others get 0.
      if (a.opset_before(18)) return bad(kOp, "operand 'axes' exists from opset 18");
      LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, constant_ints(kOp, 3, "axes", *axes_type));
      if (pads.size() != 2 * axes.size()) {
        return bad(kOp, "'pads' has " + std::to_string(pads.size()) + " entries, expected " +
                   std::to_string(2 * axes.size()) + " for 'axes' " + shape_to_string(axes));
      }
      std::vector<int64_t> full(2 * rank, 0);
      std::vector<bool> seen(rank, false);
      for (size_t i = 0; i < axes.size(); ++i) {
        LOOM_ASSIGN_OR_RETURN(int64_t ax, normalize_axis(kOp, axes[i], static_cast<int64_t>(rank)));
        if (seen[static_cast<size_t>(ax)]) return bad(kOp, "'axes' " + shape_to_string(axes) + " repeats an axis");
        seen[static_cast<size_t>(ax)] = true;
        full[static_cast<size_t>(ax)] = pads[i];
        full[static_cast<size_t>(ax) + rank] = pads[i + axes.size()];
      }
      pads = std::move(full);
    }
    if (const TensorType* v = optional_type(in, 2)) {
      if (v->dtype != in[0].dtype) {
        return bad(kOp, "operand 'constant_value' has dtype " + std::string(dtype_name(v->dtype)) +
                   ", 'data' has " + std::string(dtype_name(in[0].dtype)));
      }
      auto n = element_count(v->shape);
      if (!n.ok() || *n != 1) {
        return bad(kOp, "operand 'constant_value' must be a scalar, got shape " +
                   shape_to_string(v->shape));
      }
    }
  }
  if (pads.size() != 2 * rank) {
    return bad(kOp, "'pads' has " + std::to_string(pads.size()) + " entries, expected " +
               std::to_string(2 * rank) + " for 'data' of shape " + shape_to_string(s));
  }
  p.begin.assign(pads.begin(), pads.begin() + rank);
  p.out = s;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = pads[d], e = pads[d + rank];
    const int64_t limit = INT64_MAX / 4;
    if (b > limit || e > limit || b < -limit || e < -limit || s[d] + b + e < 0) {
      return bad(kOp, "'pads' " + shape_to_string(pads) + " is out of range for 'data' of shape " +
                 shape_to_string(s));
    }
    p.out[d] = s[d] + b + e;
    if (p.mode != PadMode::kConstant && s[d] == 0 && p.out[d] > 0) {
      return bad(kOp, "cannot pad the empty axis " + std::to_string(d) + " in mode '" +
                 std::string(mode) + "'");
    }
  }
  LOOM_RETURN_IF_ERROR(element_count(p.out).status().with_context("Pad: output"));
  return p;
}

// The input coordinate that output coordinate `o` (already shifted by the
// begin pad) reads, or -1 for the fill value.
int64_t source(PadMode mode, int64_t c, int64_t dim) {
  if (c >= 0 && c < dim) return c;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return c < 0 ? 0 : dim - 1;
    case PadMode::kWrap: {
      int64_t m = c % dim;
      return m < 0 ? m + dim : m;
    }
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      // Reflection without repeating the edge is periodic with 2*(dim-1).
      const int64_t period = 2 * (dim - 1);
      int64_t m = c % period;
      if (m < 0) m += period;
      return m < dim ? m : period - m;
    }
  }
  return -1;
}

}  // namespace

Result<std::vector<TensorType>> pad_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(PadPlan p, pad_plan(in, a));
  return std::vector<TensorType>{{in[0].dtype, std::move(p.out)}};
}

Status pad_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
               const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue(kOp, in, out, {"data", "pads", "constant_value", "axes"},
                                [&](std::span<const TensorType> t) { return pad_infer(t, a); })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(PadPlan p, pad_plan(types, a));
  const size_t es = dtype_size(in[0].dtype);
  // The fill value in the data's dtype.
  std::byte fill[16] = {};
  if (const TensorRef* v = optional_ref(in, 2); v != nullptr && !a.opset_before(11)) {
    std::memcpy(fill, v->data, es);
  } else if (a.opset_before(11)) {
    LOOM_RETURN_IF_ERROR(store_scalar(kOp, in[0].dtype, a.get_float("value", 0.0f), fill));
  }
  const uint64_t total = *element_count(p.out);
  const size_t rank = p.out.size();
  const Shape in_strides = strides_of(in[0].shape);
  const std::byte* x = static_cast<const std::byte*>(in[0].data);
  std::byte* y = static_cast<std::byte*>(out[0].data);
  std::vector<int64_t> idx(rank, 0);
  for (uint64_t i = 0; i < total; ++i) {
    int64_t offset = 0;
    bool is_fill = false;
    for (size_t d = 0; d < rank && !is_fill; ++d) {
      const int64_t c = source(p.mode, idx[d] - p.begin[d], in[0].shape[d]);
      if (c < 0) is_fill = true;
      offset += c * in_strides[d];
    }
    std::memcpy(y + i * es, is_fill ? fill : x + offset * static_cast<int64_t>(es), es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < p.out[d]) break;
      idx[d] = 0;
    }
  }
  return Status();
}

}  // namespace loom::kernels::shape
