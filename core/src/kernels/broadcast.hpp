// Multidirectional (numpy) broadcasting, shared by the kernels that take two
// operands of possibly different shapes (Add, Gemm's C, MatMul's batch dims).
//
// plan_broadcast works on fixed-size arrays so that running a kernel does not
// touch the heap; only the error path builds strings.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::kernels {

// Highest rank the reference kernels handle.
inline constexpr size_t kMaxKernelRank = 16;

// The broadcast of two shapes, ready to iterate: for each output element the
// element offsets into A and B (stride 0 along broadcast dimensions).
struct BroadcastPlan {
  size_t rank = 0;
  std::array<int64_t, kMaxKernelRank> dims{};
  std::array<int64_t, kMaxKernelRank> a_strides{};
  std::array<int64_t, kMaxKernelRank> b_strides{};

  std::span<const int64_t> shape() const { return {dims.data(), rank}; }
  // Number of elements of the broadcast shape.
  int64_t count() const;
};

// Broadcasts `a` and `b` by numpy rules into `out`. On mismatch the error
// names `op`, the operands (`a_name`, `b_name`) and their shapes.
Status plan_broadcast(std::string_view op, std::string_view a_name,
                      std::span<const int64_t> a, std::string_view b_name,
                      std::span<const int64_t> b, BroadcastPlan* out);

// The broadcast shape of `a` and `b` (infer-time convenience).
Result<Shape> broadcast_shape(std::string_view op, std::string_view a_name,
                              std::span<const int64_t> a, std::string_view b_name,
                              std::span<const int64_t> b);

// Calls fn(out_index, a_index, b_index) for every element of the broadcast,
// in row-major order of the output.
template <typename Fn>
void for_each_broadcast(const BroadcastPlan& plan, Fn&& fn) {
  const int64_t total = plan.count();
  if (total == 0) return;
  if (plan.rank == 0) {
    fn(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  std::array<int64_t, kMaxKernelRank> index{};
  const size_t last = plan.rank - 1;
  const int64_t inner = plan.dims[last];
  const int64_t as = plan.a_strides[last];
  const int64_t bs = plan.b_strides[last];
  int64_t a_base = 0, b_base = 0;
  for (int64_t out = 0; out < total; out += inner) {
    for (int64_t j = 0; j < inner; ++j) fn(out + j, a_base + j * as, b_base + j * bs);
    // Advance the odometer over the outer dimensions.
    for (size_t d = last; d-- > 0;) {
      ++index[d];
      a_base += plan.a_strides[d];
      b_base += plan.b_strides[d];
      if (index[d] < plan.dims[d]) break;
      a_base -= plan.a_strides[d] * index[d];
      b_base -= plan.b_strides[d] * index[d];
      index[d] = 0;
    }
  }
}

}  // namespace loom::kernels
