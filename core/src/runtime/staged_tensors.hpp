// Helpers of the staged runtime (staged_function.cpp, staged_steps.cpp):
// attributes of a step, one-element operands, and tensors sliced and
// stacked along an axis.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"
#include "runtime/staged_function.hpp"

namespace loom::runtime::staged {

int64_t int_attribute(const StagedStep& step, std::string_view name, int64_t fallback);
std::vector<int64_t> ints_attribute(const StagedStep& step, std::string_view name);
uint64_t clock_ns();
// The one element of a one-element tensor (any rank) as an integer: bool,
// int64, int32 or uint8; otherwise an error naming `what`.
Result<int64_t> scalar_of(const Tensor& t, const std::string& what);
// Slice `index` of `t` along `axis`, without that axis.
Result<Tensor> take_slice(const Tensor& t, size_t axis, int64_t index);
// Writes `part` as slice `index` of `out` along `axis`.
void put_slice(Tensor& out, size_t axis, int64_t index, const Tensor& part);
// `parts` stacked along a new axis `axis`, in reverse order when `reverse`.
Result<Tensor> stack(const std::vector<Tensor>& parts, int64_t axis, bool reverse, const std::string& what);
// Whether iteration `iteration`'s value of a scan output agrees with the
// first iteration's (dtype and shape); an error naming `what` otherwise.
Status same_as_first(const std::vector<Tensor>& parts, const Tensor& next, const std::string& what, int64_t iteration);

}  // namespace loom::runtime::staged
