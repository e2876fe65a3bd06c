// The reduce family of reference kernels: the Reduce* operators, ArgMax and
// ArgMin, TopK, CumSum, Einsum, Softmax, LogSoftmax and Hardmax. One
// run/infer pair per operator; reduce/registry.cpp lists them (Softmax keeps
// its older declaration in ops.hpp). The helpers
// below are shared by the family's sources only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel.hpp"

namespace loom::kernels::reduce {

#define LOOM_REDUCE_DECLARE_OP(name)                                                \
  Status name##_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs, \
                    const Attributes& attributes);                                  \
  Result<std::vector<TensorType>> name##_infer(std::span<const TensorType> inputs,  \
                                               const Attributes& attributes)

LOOM_REDUCE_DECLARE_OP(reduce_sum);
LOOM_REDUCE_DECLARE_OP(reduce_mean);
LOOM_REDUCE_DECLARE_OP(reduce_max);
LOOM_REDUCE_DECLARE_OP(reduce_min);
LOOM_REDUCE_DECLARE_OP(reduce_prod);
LOOM_REDUCE_DECLARE_OP(reduce_l1);
LOOM_REDUCE_DECLARE_OP(reduce_l2);
LOOM_REDUCE_DECLARE_OP(reduce_log_sum);
LOOM_REDUCE_DECLARE_OP(reduce_log_sum_exp);
LOOM_REDUCE_DECLARE_OP(reduce_sum_square);
LOOM_REDUCE_DECLARE_OP(argmax);
LOOM_REDUCE_DECLARE_OP(argmin);
LOOM_REDUCE_DECLARE_OP(topk);
LOOM_REDUCE_DECLARE_OP(cumsum);
LOOM_REDUCE_DECLARE_OP(einsum);
LOOM_REDUCE_DECLARE_OP(log_softmax);
LOOM_REDUCE_DECLARE_OP(hardmax);
LOOM_REDUCE_DECLARE_OP(nll_loss);
LOOM_REDUCE_DECLARE_OP(softmax_cross_entropy_loss);

#undef LOOM_REDUCE_DECLARE_OP

// An operand of any dtype whose byte_size matches its shape and whose data is
// set; `name` is the ONNX operand name for the error.
Status check_operand(std::string_view op, std::string_view name, const TensorRef& t);

// The same, and its dtype must be `dtype`.
Status check_operand_dtype(std::string_view op, std::string_view name, const TensorRef& t,
                           DType dtype);

// "<op>: <what> has dtype <d>, which is not supported" with code kUnimplemented.
Status unsupported_dtype(std::string_view op, std::string_view what, DType dtype);

// Row-major element strides of `shape`.
std::vector<int64_t> strides_of(std::span<const int64_t> shape);

// The product of shape[begin, end); the caller has validated the shape (its
// element count does not overflow), so neither does any sub-product.
int64_t product(std::span<const int64_t> shape, size_t begin, size_t end);

}  // namespace loom::kernels::reduce
