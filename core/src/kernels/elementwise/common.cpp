#include "kernels/elementwise/common.hpp"

#include <algorithm>

namespace loom::kernels::elementwise {

Status unsupported_dtype(std::string_view op, std::string_view name, DType dtype) {
  return unimplemented(std::string(op) + ": " + std::string(name) + " has unsupported dtype " +
                       std::string(dtype_name(dtype)));
}

Status check_dtype(std::string_view op, std::string_view name, DType got, DType want) {
  if (got != want) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has dtype " +
                            std::string(dtype_name(got)) + ", expected " +
                            std::string(dtype_name(want)));
  }
  return Status();
}

Status check_operand(std::string_view op, std::string_view name, const TensorRef& t,
                     DType want) {
  if (want != DType::kInvalid) LOOM_RETURN_IF_ERROR(check_dtype(op, name, t.dtype, want));
  const size_t es = dtype_size(t.dtype);
  if (es == 0) {
    return invalid_argument(std::string(op) + ": " + std::string(name) +
                            " has an invalid dtype");
  }
  auto count = element_count(t.shape);
  if (!count.ok()) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + ": " +
                            count.status().message());
  }
  if (*count > SIZE_MAX / es || *count * es != t.byte_size) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " of shape " +
                            shape_to_string(t.shape) + " and dtype " +
                            std::string(dtype_name(t.dtype)) + " has " +
                            std::to_string(t.byte_size) + " bytes");
  }
  if (t.data == nullptr && t.byte_size != 0) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has no data");
  }
  return Status();
}

Status check_shape(std::string_view op, std::string_view name,
                   std::span<const int64_t> actual, std::span<const int64_t> expected) {
  if (!std::equal(actual.begin(), actual.end(), expected.begin(), expected.end())) {
    return invalid_argument(std::string(op) + ": output " + std::string(name) + " is " +
                            shape_to_string(actual) + ", expected " +
                            shape_to_string(expected));
  }
  return Status();
}

Status check_infer_shape(std::string_view op, std::string_view name,
                         std::span<const int64_t> shape) {
  return element_count(shape).status().with_context(std::string(op) + ": " + std::string(name));
}

Status plan_nary(std::string_view op, std::span<const std::span<const int64_t>> shapes,
                 std::span<const std::string_view> names, NaryPlan* plan) {
  auto describe = [&](std::string why) {
    std::string m = std::string(op) + ": " + why;
    for (size_t k = 0; k < shapes.size(); ++k) {
      m += k == 0 ? ": " : ", ";
      m += std::string(names[k]) + " is " + shape_to_string(shapes[k]);
    }
    return invalid_argument(m);
  };
  if (shapes.size() > kMaxOperands || shapes.size() != names.size()) {
    return invalid_argument(std::string(op) + ": too many operands to broadcast");
  }
  size_t rank = 0;
  for (auto s : shapes) {
    rank = std::max(rank, s.size());
    for (int64_t d : s) {
      if (d < 0) return describe("negative dimension");
    }
  }
  if (rank > kMaxKernelRank) return describe("rank above " + std::to_string(kMaxKernelRank));
  plan->rank = rank;
  plan->operands = shapes.size();
  for (size_t d = 0; d < rank; ++d) {
    int64_t extent = 1;
    for (auto s : shapes) {
      const size_t from_end = rank - d;
      const int64_t e = from_end <= s.size() ? s[s.size() - from_end] : 1;
      if (e == 1) continue;
      if (extent != 1 && extent != e) {
        return describe("shapes do not broadcast (axis " + std::to_string(d) + ": " +
                        std::to_string(extent) + " vs " + std::to_string(e) + ")");
      }
      extent = e;
    }
    plan->dims[d] = extent;
  }
  for (size_t k = 0; k < shapes.size(); ++k) {
    auto s = shapes[k];
    const size_t pad = rank - s.size();
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      if (d < pad) {
        plan->strides[k][d] = 0;
        continue;
      }
      const int64_t e = s[d - pad];
      plan->strides[k][d] = e == 1 ? 0 : stride;
      stride *= e;
    }
  }
  return element_count(plan->shape()).status().with_context(std::string(op));
}

Result<Shape> nary_shape(std::string_view op, std::span<const Shape> shapes,
                         std::span<const std::string_view> names) {
  std::array<std::span<const int64_t>, kMaxOperands> views;
  if (shapes.size() > kMaxOperands) {
    return invalid_argument(std::string(op) + ": too many operands to broadcast");
  }
  for (size_t k = 0; k < shapes.size(); ++k) views[k] = shapes[k];
  NaryPlan plan;
  LOOM_RETURN_IF_ERROR(plan_nary(op, std::span(views.data(), shapes.size()), names, &plan));
  return Shape(plan.dims.begin(), plan.dims.begin() + plan.rank);
}

}  // namespace loom::kernels::elementwise
