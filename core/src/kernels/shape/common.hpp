// Helpers shared by the shape family (shape_*.cpp): operand checks for any
// dtype, the run-time prologue that re-runs infer on the actual operands (so
// run and infer can never disagree), and byte-wise copies through strided
// views, which make every data-movement kernel dtype-agnostic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel.hpp"

namespace loom::kernels::shape {

// An operand's bytes, to read (src) or to write (dst).
inline const std::byte* src(const TensorRef& t) { return static_cast<const std::byte*>(t.data); }
inline std::byte* dst(const TensorRef& t) { return static_cast<std::byte*>(t.data); }

// invalid_argument("<op>: <msg>").
Status bad(std::string_view op, const std::string& msg);

// The common infer prologue: operand count in [min, max], one output, and a
// given operand 0 with a valid shape.
Status check_infer(std::string_view op, std::span<const TensorType> in, size_t min, size_t max);

// The operand's byte_size matches its shape and dtype and its data is set.
Status check_operand(std::string_view op, std::string_view name, const TensorRef& t);

// Operand `i` of an infer call when the node gives it (present and not left
// out), else nullptr.
inline const TensorType* optional_type(std::span<const TensorType> in, size_t i) {
  return i < in.size() && in[i].dtype != DType::kInvalid ? &in[i] : nullptr;
}
inline const TensorRef* optional_ref(std::span<const TensorRef> in, size_t i) {
  return i < in.size() && in[i].present() ? &in[i] : nullptr;
}

// What every run() does first: checks the inputs, infers the output types
// from the actual operands (every operand's contents known) and checks that
// the caller's outputs have exactly those types. `infer` is the op's infer
// function or a lambda that also knows the output count.
template <typename Infer>
Result<std::vector<TensorType>> prologue(std::string_view op, std::span<const TensorRef> inputs,
                                         std::span<const TensorRef> outputs,
                                         const std::vector<std::string_view>& input_names,
                                         Infer&& infer);
Status check_results(std::string_view op, std::span<const TensorRef> outputs,
                     const std::vector<TensorType>& want);
std::vector<TensorType> types_of(std::span<const TensorRef> inputs);

template <typename Infer>
Result<std::vector<TensorType>> prologue(std::string_view op, std::span<const TensorRef> inputs,
                                         std::span<const TensorRef> outputs,
                                         const std::vector<std::string_view>& input_names,
                                         Infer&& infer) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present()) continue;
    std::string name = i < input_names.size() ? std::string(input_names[i])
                                              : "input " + std::to_string(i);
    LOOM_RETURN_IF_ERROR(check_operand(op, name, inputs[i]));
  }
  std::vector<TensorType> types = types_of(inputs);
  LOOM_ASSIGN_OR_RETURN(std::vector<TensorType> want, infer(std::span<const TensorType>(types)));
  for (TensorType& t : want) t.value = nullptr;  // would point into `types`
  LOOM_RETURN_IF_ERROR(check_results(op, outputs, want));
  return want;
}

// Row-major strides (in elements) of `shape`.
Shape strides_of(std::span<const int64_t> shape);

// out[i] = in[base + sum_d idx_d * strides[d]] for every multi-index idx of
// out_shape in row-major order, copying `elem` bytes per element. Strides
// may be zero or negative; the caller guarantees every source lies inside
// the input.
void strided_copy(size_t elem, std::span<const int64_t> out_shape,
                  std::span<const int64_t> strides, int64_t base, const std::byte* in,
                  std::byte* out);

// Writes `v` converted to `dtype` (rounding like a C++ cast; f16/bf16 to
// nearest) into `dst`; an error naming `op` for a dtype that has no value.
Status store_scalar(std::string_view op, DType dtype, double v, std::byte* dst);
// Reads element `i` of a numeric operand as a double.
Result<double> load_scalar(std::string_view op, std::string_view name, const TensorRef& t,
                           size_t i);
// The floats of an f32/f64/f16 operand (Resize's scales and roi).
Result<std::vector<double>> read_floats(std::string_view op, std::string_view name,
                                        const TensorRef& t);

// Reads an axes-like list from an attribute (before `input_opset`) or from
// operand `index` (from then on; an absent operand falls back to the
// attribute). `present` says whether either gave one.
Result<std::vector<int64_t>> ints_from_attr_or_input(std::string_view op,
                                                     std::span<const TensorType> in,
                                                     size_t index, std::string_view name,
                                                     const Attributes& attrs,
                                                     int32_t input_opset, bool* present);

// Every entry of `axes` normalized into [0, rank); an error on a value out
// of range or a repeated axis.
Result<std::vector<int64_t>> normalize_axes(std::string_view op, std::string_view what,
                                            std::vector<int64_t> axes, int64_t rank);

// The product of shape[begin, end); the caller has checked the whole shape.
inline int64_t product(std::span<const int64_t> shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

}  // namespace loom::kernels::shape
