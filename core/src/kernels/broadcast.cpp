#include "kernels/broadcast.hpp"

#include <string>

namespace loom::kernels {

int64_t BroadcastPlan::count() const {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

namespace {

std::string mismatch(std::string_view op, std::string_view a_name,
                     std::span<const int64_t> a, std::string_view b_name,
                     std::span<const int64_t> b, std::string_view why) {
  std::string m(op);
  m += ": ";
  m += why;
  m += ": ";
  m += a_name;
  m += " is " + shape_to_string(a) + ", ";
  m += b_name;
  m += " is " + shape_to_string(b);
  return m;
}

// Row-major element strides of a shape, aligned to the right of `rank`
// dimensions, with 0 along dimensions of extent 1 (they broadcast).
void fill_strides(std::span<const int64_t> shape, size_t rank,
                  std::array<int64_t, kMaxKernelRank>& strides) {
  const size_t pad = rank - shape.size();
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    if (d < pad) {
      strides[d] = 0;
      continue;
    }
    int64_t extent = shape[d - pad];
    strides[d] = extent == 1 ? 0 : stride;
    stride *= extent;
  }
}

}  // namespace

Status plan_broadcast(std::string_view op, std::string_view a_name,
                      std::span<const int64_t> a, std::string_view b_name,
                      std::span<const int64_t> b, BroadcastPlan* out) {
  const size_t rank = a.size() > b.size() ? a.size() : b.size();
  if (rank > kMaxKernelRank) {
    return invalid_argument(mismatch(op, a_name, a, b_name, b,
                                     "rank above " + std::to_string(kMaxKernelRank)));
  }
  for (int64_t d : a) {
    if (d < 0) return invalid_argument(mismatch(op, a_name, a, b_name, b, "negative dimension"));
  }
  for (int64_t d : b) {
    if (d < 0) return invalid_argument(mismatch(op, a_name, a, b_name, b, "negative dimension"));
  }
  out->rank = rank;
  for (size_t d = 0; d < rank; ++d) {
    const size_t from_end = rank - d;
    int64_t da = from_end <= a.size() ? a[a.size() - from_end] : 1;
    int64_t db = from_end <= b.size() ? b[b.size() - from_end] : 1;
    if (da != db && da != 1 && db != 1) {
      return invalid_argument(mismatch(
          op, a_name, a, b_name, b,
          "shapes do not broadcast (axis " + std::to_string(d) + ": " +
              std::to_string(da) + " vs " + std::to_string(db) + ")"));
    }
    out->dims[d] = da == 1 ? db : da;
  }
  fill_strides(a, rank, out->a_strides);
  fill_strides(b, rank, out->b_strides);
  return Status();
}

Result<Shape> broadcast_shape(std::string_view op, std::string_view a_name,
                              std::span<const int64_t> a, std::string_view b_name,
                              std::span<const int64_t> b) {
  BroadcastPlan plan;
  LOOM_RETURN_IF_ERROR(plan_broadcast(op, a_name, a, b_name, b, &plan));
  return Shape(plan.dims.begin(), plan.dims.begin() + plan.rank);
}

}  // namespace loom::kernels
