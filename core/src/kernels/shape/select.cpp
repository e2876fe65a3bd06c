// Operators whose output shape depends on their operands' values: NonZero,
// Compress, Unique and NonMaxSuppression.
//
// Loom allocates every output before a kernel runs, so these infer their
// output shapes by computing the whole result from the operands' values
// (needs_constant() when a deciding operand is not known): a model input
// that decides them is frozen at compile time or, in an open-shape program,
// bound per run (docs/dynamic-shapes.md). When values computed inside the
// program at run time decide them, the compiler makes a staged program that
// runs the node on the host with these kernels (docs/control-flow.md).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

// A computed output: its type and bytes.
struct Owned {
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<std::byte> bytes;
};

Owned owned_i64(Shape shape, const std::vector<int64_t>& v) {
  Owned o{DType::kI64, std::move(shape), std::vector<std::byte>(v.size() * sizeof(int64_t))};
  if (!v.empty()) std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
  return o;
}

std::vector<TensorType> types_of_owned(const std::vector<Owned>& out) {
  std::vector<TensorType> t;
  for (const Owned& o : out) t.push_back({o.dtype, o.shape});
  return t;
}

// Checks the caller's outputs against the computed ones and copies them in
// (an output the node leaves out is skipped).
Status write_owned(std::string_view op, std::span<const TensorRef> outputs, const std::vector<Owned>& got) {
  if (outputs.empty() || outputs.size() > got.size()) {
    return bad(op, "takes 1 to " + std::to_string(got.size()) + " outputs, got " + std::to_string(outputs.size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].present()) continue;
    const Owned& o = got[i];
    if (outputs[i].dtype != o.dtype || !std::equal(outputs[i].shape.begin(), outputs[i].shape.end(),
                                                   o.shape.begin(), o.shape.end())) {
      return bad(op, "output " + std::to_string(i) + " is " + std::string(dtype_name(outputs[i].dtype)) + " " +
                         shape_to_string(outputs[i].shape) + "; the operands' values give " +
                         std::string(dtype_name(o.dtype)) + " " + shape_to_string(o.shape));
    }
    if (outputs[i].byte_size != o.bytes.size() || (outputs[i].data == nullptr && !o.bytes.empty())) {
      return bad(op, "output " + std::to_string(i) + " has no buffer matching its shape");
    }
    if (!o.bytes.empty()) std::memcpy(outputs[i].data, o.bytes.data(), o.bytes.size());
  }
  return Status();
}

// The operand's contents, or needs_constant.
Result<TensorRef> value_of(std::string_view op, std::span<const TensorType> in, size_t i, std::string_view name) {
  if (in[i].value == nullptr) return needs_constant(op, i, name);
  LOOM_RETURN_IF_ERROR(check_operand(op, name, *in[i].value));
  return *in[i].value;
}

// Element i of a numeric or bool tensor as a double (for tests and scores).
double number_at(const TensorRef& t, int64_t i) {
  double v = 0;
  static_cast<void>(visit_dtype("", t.dtype, [&]<typename T>() -> Status {
    v = reduce::to_double(static_cast<const T*>(t.data)[i]);
    return Status();
  }));
  return v;
}

// ---------------------------------------------------------------- NonZero

constexpr std::string_view kNonZero = "NonZero";

Result<std::vector<Owned>> nonzero_compute(std::span<const TensorType> in) {
  LOOM_RETURN_IF_ERROR(check_infer(kNonZero, in, 1, 1));
  LOOM_ASSIGN_OR_RETURN(TensorRef x, value_of(kNonZero, in, 0, "X"));
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t n = static_cast<int64_t>(*element_count(x.shape));
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < n; ++i) {
    if (number_at(x, i) != 0) hits.push_back(i);
  }
  const int64_t k = static_cast<int64_t>(hits.size());
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(rank, 1) * k));
  for (int64_t h = 0; h < k; ++h) {
    int64_t flat = hits[static_cast<size_t>(h)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      out[static_cast<size_t>(d * k + h)] = flat % x.shape[static_cast<size_t>(d)];
      flat /= x.shape[static_cast<size_t>(d)];
    }
  }
  // A scalar's one element is addressed by no coordinate: [0, k] (rank 0).
  if (rank == 0) out.clear();
  return std::vector<Owned>{owned_i64(Shape{rank, k}, out)};
}

// ---------------------------------------------------------------- Compress

constexpr std::string_view kCompress = "Compress";

Result<std::vector<Owned>> compress_compute(std::span<const TensorType> in, const TensorRef* data,
                                            const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(kCompress, in, 2, 2));
  if (in[1].dtype != DType::kBool) {
    return bad(kCompress, "operand 'condition' must be bool, got " + std::string(dtype_name(in[1].dtype)));
  }
  if (in[1].shape.size() != 1) {
    return bad(kCompress, "operand 'condition' must be 1-D, got shape " + shape_to_string(in[1].shape));
  }
  LOOM_ASSIGN_OR_RETURN(TensorRef cond, value_of(kCompress, in, 1, "condition"));
  const Shape& s = in[0].shape;
  const bool flat = a.find("axis") == nullptr;
  int64_t axis = 0;
  Shape view = s;
  if (flat) {
    view = Shape{static_cast<int64_t>(*element_count(s))};
  } else {
    LOOM_ASSIGN_OR_RETURN(axis, normalize_axis(kCompress, a.get_int("axis", 0), static_cast<int64_t>(s.size())));
  }
  const int64_t dim = view[static_cast<size_t>(axis)];
  if (cond.shape[0] > dim) {
    return bad(kCompress, "operand 'condition' has " + std::to_string(cond.shape[0]) +
                              " entries, more than the " + std::to_string(dim) + " slices along the axis");
  }
  std::vector<int64_t> kept;
  const auto* c = static_cast<const uint8_t*>(cond.data);
  for (int64_t i = 0; i < cond.shape[0]; ++i) {
    if (c[i] != 0) kept.push_back(i);
  }
  Owned out{in[0].dtype, view, {}};
  out.shape[static_cast<size_t>(axis)] = static_cast<int64_t>(kept.size());
  if (data == nullptr) return std::vector<Owned>{std::move(out)};
  const size_t es = dtype_size(in[0].dtype);
  const int64_t outer = std::accumulate(view.begin(), view.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner = std::accumulate(view.begin() + axis + 1, view.end(), int64_t{1}, std::multiplies<>());
  const size_t run = static_cast<size_t>(inner) * es;
  out.bytes.resize(static_cast<size_t>(outer) * kept.size() * run);
  std::byte* dst = out.bytes.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k : kept) {
      std::memcpy(dst, src(*data) + static_cast<size_t>((o * dim + k) * inner) * es, run);
      dst += run;
    }
  }
  return std::vector<Owned>{std::move(out)};
}

// ---------------------------------------------------------------- Unique

constexpr std::string_view kUnique = "Unique";

Result<std::vector<Owned>> unique_compute(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(kUnique, in, 1, 1));
  LOOM_ASSIGN_OR_RETURN(TensorRef x, value_of(kUnique, in, 0, "X"));
  const int64_t sorted = a.get_int("sorted", 1);
  if (sorted != 0 && sorted != 1) {
    return bad(kUnique, "attribute 'sorted' must be 0 or 1, got " + std::to_string(sorted));
  }
  Shape view(x.shape.begin(), x.shape.end());
  const bool flat = a.find("axis") == nullptr;
  int64_t axis = 0;
  if (flat) {
    view = Shape{static_cast<int64_t>(*element_count(view))};
  } else {
    LOOM_ASSIGN_OR_RETURN(axis, normalize_axis(kUnique, a.get_int("axis", 0), static_cast<int64_t>(view.size())));
  }
  const int64_t dim = view[static_cast<size_t>(axis)];
  const int64_t outer = std::accumulate(view.begin(), view.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner = std::accumulate(view.begin() + axis + 1, view.end(), int64_t{1}, std::multiplies<>());
  const size_t es = dtype_size(x.dtype);
  // Slice k: the elements with index k along the axis, in row-major order.
  auto element = [&](int64_t k, int64_t e) { return (e / inner * dim + k) * inner + e % inner; };
  const int64_t slice = outer * inner;
  auto less = [&](int64_t p, int64_t q) {
    bool result = false;
    static_cast<void>(visit_dtype(kUnique, x.dtype, [&]<typename T>() -> Status {
      const T* v = static_cast<const T*>(x.data);
      for (int64_t e = 0; e < slice; ++e) {
        const auto l = reduce::comparable(v[element(p, e)]), r = reduce::comparable(v[element(q, e)]);
        if (l < r) return result = true, Status();
        if (r < l) return Status();
      }
      return Status();
    }));
    return result;
  };
  auto equal = [&](int64_t p, int64_t q) {
    for (int64_t e = 0; e < slice; ++e) {
      if (std::memcmp(src(x) + element(p, e) * es, src(x) + element(q, e) * es, es) != 0) return false;
    }
    return true;
  };
  // First occurrences in order, each slice's unique index, and counts.
  std::vector<int64_t> firsts, inverse(static_cast<size_t>(dim)), counts;
  for (int64_t k = 0; k < dim; ++k) {
    int64_t found = -1;
    for (size_t u = 0; u < firsts.size() && found < 0; ++u) {
      if (equal(firsts[u], k)) found = static_cast<int64_t>(u);
    }
    if (found < 0) {
      found = static_cast<int64_t>(firsts.size());
      firsts.push_back(k);
      counts.push_back(0);
    }
    inverse[static_cast<size_t>(k)] = found;
    ++counts[static_cast<size_t>(found)];
  }
  std::vector<int64_t> order(firsts.size());
  std::iota(order.begin(), order.end(), 0);
  if (sorted == 1) {
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
      return less(firsts[static_cast<size_t>(p)], firsts[static_cast<size_t>(q)]);
    });
  }
  std::vector<int64_t> rank_of(order.size());
  for (size_t r = 0; r < order.size(); ++r) rank_of[static_cast<size_t>(order[r])] = static_cast<int64_t>(r);
  const int64_t u = static_cast<int64_t>(order.size());
  Owned y{x.dtype, view, {}};
  y.shape[static_cast<size_t>(axis)] = u;
  y.bytes.resize(static_cast<size_t>(outer * u * inner) * es);
  std::vector<int64_t> indices(order.size()), out_counts(order.size());
  for (int64_t r = 0; r < u; ++r) {
    const int64_t k = firsts[static_cast<size_t>(order[static_cast<size_t>(r)])];
    indices[static_cast<size_t>(r)] = k;
    out_counts[static_cast<size_t>(r)] = counts[static_cast<size_t>(order[static_cast<size_t>(r)])];
    for (int64_t e = 0; e < slice; ++e) {
      const int64_t to = (e / inner * u + r) * inner + e % inner;
      std::memcpy(y.bytes.data() + to * es, src(x) + element(k, e) * es, es);
    }
  }
  for (int64_t& v : inverse) v = rank_of[static_cast<size_t>(v)];
  std::vector<Owned> out;
  out.push_back(std::move(y));
  out.push_back(owned_i64(Shape{u}, indices));
  out.push_back(owned_i64(Shape{dim}, inverse));
  out.push_back(owned_i64(Shape{u}, out_counts));
  return out;
}

// ---------------------------------------------------------------- NonMaxSuppression

constexpr std::string_view kNms = "NonMaxSuppression";

// The IoU of two boxes given as [y1, x1, y2, x2] corners in any order.
double nms_iou(const double* a, const double* b) {
  const double ay1 = std::min(a[0], a[2]), ay2 = std::max(a[0], a[2]);
  const double ax1 = std::min(a[1], a[3]), ax2 = std::max(a[1], a[3]);
  const double by1 = std::min(b[0], b[2]), by2 = std::max(b[0], b[2]);
  const double bx1 = std::min(b[1], b[3]), bx2 = std::max(b[1], b[3]);
  const double area_a = (ay2 - ay1) * (ax2 - ax1), area_b = (by2 - by1) * (bx2 - bx1);
  if (area_a <= 0 || area_b <= 0) return 0.0;
  const double ih = std::min(ay2, by2) - std::max(ay1, by1);
  const double iw = std::min(ax2, bx2) - std::max(ax1, bx1);
  if (ih <= 0 || iw <= 0) return 0.0;
  const double inter = ih * iw;
  return inter / (area_a + area_b - inter);
}

Result<std::vector<Owned>> nms_compute(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(kNms, in, 2, 5));
  static constexpr std::string_view kNames[] = {"boxes", "scores", "max_output_boxes_per_class",
                                                "iou_threshold", "score_threshold"};
  if (!is_float_dtype(in[0].dtype) || in[1].dtype != in[0].dtype) {
    return bad(kNms, "operands 'boxes' and 'scores' must have one float dtype, got " +
                         std::string(dtype_name(in[0].dtype)) + " and " + std::string(dtype_name(in[1].dtype)));
  }
  const Shape& bs = in[0].shape;
  const Shape& ss = in[1].shape;
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1]) {
    return bad(kNms, "'boxes' must be [B, N, 4] and 'scores' [B, C, N], got " + shape_to_string(bs) + " and " +
                         shape_to_string(ss));
  }
  const int64_t center = a.get_int("center_point_box", 0);
  if (center != 0 && center != 1) {
    return bad(kNms, "attribute 'center_point_box' must be 0 or 1, got " + std::to_string(center));
  }
  TensorRef vals[5];
  for (size_t i = 0; i < in.size() && i < 5; ++i) {
    if (in[i].dtype == DType::kInvalid) continue;
    LOOM_ASSIGN_OR_RETURN(vals[i], value_of(kNms, in, i, kNames[i]));
    if (i >= 2 && *element_count(in[i].shape) != 1) {
      return bad(kNms, "operand '" + std::string(kNames[i]) + "' must hold one value, got shape " +
                           shape_to_string(in[i].shape));
    }
  }
  if (vals[2].present() && vals[2].dtype != DType::kI64) {
    return bad(kNms, "operand 'max_output_boxes_per_class' must be int64");
  }
  for (size_t i : {size_t{3}, size_t{4}}) {
    if (vals[i].present() && !is_float_dtype(vals[i].dtype)) {
      return bad(kNms, "operand '" + std::string(kNames[i]) + "' must be a float");
    }
  }
  const int64_t max_out = vals[2].present() ? std::max<int64_t>(0, *static_cast<const int64_t*>(vals[2].data)) : 0;
  const double iou_max = vals[3].present() ? number_at(vals[3], 0) : 0.0;
  const bool has_score_min = vals[4].present();
  const double score_min = has_score_min ? number_at(vals[4], 0) : 0.0;
  const int64_t batches = bs[0], n = bs[1], classes = ss[1];
  std::vector<double> boxes(static_cast<size_t>(batches * n * 4));
  for (int64_t i = 0; i < batches * n; ++i) {
    double b[4];
    for (int64_t k = 0; k < 4; ++k) b[k] = number_at(vals[0], i * 4 + k);
    if (center == 1) {  // [x_center, y_center, width, height]
      const double x = b[0], y = b[1], w = b[2], h = b[3];
      b[0] = y - h / 2, b[1] = x - w / 2, b[2] = y + h / 2, b[3] = x + w / 2;
    }
    std::copy(b, b + 4, boxes.begin() + i * 4);
  }
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<std::pair<double, int64_t>> cand;
      for (int64_t i = 0; i < n; ++i) {
        const double s = number_at(vals[1], (b * classes + c) * n + i);
        if (!has_score_min || s > score_min) cand.emplace_back(s, i);
      }
      std::stable_sort(cand.begin(), cand.end(), [](const auto& l, const auto& r) { return l.first > r.first; });
      std::vector<int64_t> kept;
      for (const auto& [s, i] : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept) {
          if (nms_iou(&boxes[static_cast<size_t>((b * n + i) * 4)], &boxes[static_cast<size_t>((b * n + k) * 4)]) >
              iou_max) {
            keep = false;
            break;
          }
        }
        if (keep) kept.push_back(i);
      }
      for (int64_t k : kept) selected.insert(selected.end(), {b, c, k});
    }
  }
  return std::vector<Owned>{owned_i64(Shape{static_cast<int64_t>(selected.size() / 3), 3}, selected)};
}

template <typename Compute>
Status run_owned(std::string_view op, std::span<const TensorRef> in, std::span<const TensorRef> out,
                 const std::vector<std::string_view>& names, Compute&& compute) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].present()) LOOM_RETURN_IF_ERROR(check_operand(op, i < names.size() ? names[i] : "input", in[i]));
  }
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(std::vector<Owned> got, compute(std::span<const TensorType>(types)));
  return write_owned(op, out, got);
}

}  // namespace

Result<std::vector<TensorType>> nonzero_infer(std::span<const TensorType> in, const Attributes&) {
  LOOM_ASSIGN_OR_RETURN(std::vector<Owned> out, nonzero_compute(in));
  return types_of_owned(out);
}
Status nonzero_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes&) {
  return run_owned(kNonZero, in, out, {"X"}, [](std::span<const TensorType> t) { return nonzero_compute(t); });
}

Result<std::vector<TensorType>> compress_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(std::vector<Owned> out, compress_compute(in, nullptr, a));
  return types_of_owned(out);
}
Status compress_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  return run_owned(kCompress, in, out, {"input", "condition"},
                   [&](std::span<const TensorType> t) { return compress_compute(t, &in[0], a); });
}

Result<std::vector<TensorType>> unique_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(std::vector<Owned> out, unique_compute(in, a));
  return types_of_owned(out);
}
Status unique_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  return run_owned(kUnique, in, out, {"X"}, [&](std::span<const TensorType> t) { return unique_compute(t, a); });
}

Result<std::vector<TensorType>> non_max_suppression_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(std::vector<Owned> out, nms_compute(in, a));
  return types_of_owned(out);
}
Status non_max_suppression_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                               const Attributes& a) {
  return run_owned(kNms, in, out,
                   {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"},
                   [&](std::span<const TensorType> t) { return nms_compute(t, a); });
}

}  // namespace loom::kernels::shape
