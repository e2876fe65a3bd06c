// Operators that make a tensor from a shape or a size rather than from
// their operand's elements: EyeLike (opset 9) and the window functions
// HannWindow, HammingWindow and BlackmanWindow (opset 17).
//
// A window's length is the value of its scalar operand 'size', so its
// output shape is known only when that value is (needs_constant otherwise).
// `periodic` 1 (the default) computes the window of length size + 1 and
// drops the last element (N = size); 0 computes the symmetric one
// (N = size - 1). The element type is `output_datatype` (default float).
#include <cmath>
#include <numbers>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

// ---------------------------------------------------------------- EyeLike

constexpr std::string_view kEyeLike = "EyeLike";

Result<std::vector<TensorType>> eye_like_types(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(kEyeLike, in, 1, 1));
  if (in[0].shape.size() != 2) {
    return bad(kEyeLike, "operand 'input' must be 2-D, got shape " + shape_to_string(in[0].shape));
  }
  DType dtype = in[0].dtype;
  if (a.find("dtype") != nullptr) {
    LOOM_ASSIGN_OR_RETURN(dtype, dtype_from_onnx_number(kEyeLike, "dtype", a.get_int("dtype", 0)));
  }
  return std::vector<TensorType>{{dtype, in[0].shape}};
}

// ---------------------------------------------------------------- windows

enum class Window { kHann, kHamming, kBlackman };

std::string_view window_name(Window w) {
  switch (w) {
    case Window::kHann: return "HannWindow";
    case Window::kHamming: return "HammingWindow";
    case Window::kBlackman: return "BlackmanWindow";
  }
  return "HannWindow";
}

// A window longer than this is refused: the output is allocated from a
// value the model computes.
constexpr int64_t kMaxWindowLength = int64_t{1} << 28;

Result<std::vector<TensorType>> window_types(Window w, std::span<const TensorType> in,
                                             const Attributes& a) {
  const std::string_view op = window_name(w);
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 1, 1));
  if (in[0].dtype != DType::kI32 && in[0].dtype != DType::kI64) {
    return bad(op, "operand 'size' must be int32 or int64, got " + std::string(dtype_name(in[0].dtype)));
  }
  if (!in[0].shape.empty() && !(in[0].shape.size() == 1 && in[0].shape[0] == 1)) {
    return bad(op, "operand 'size' must be a scalar, got shape " + shape_to_string(in[0].shape));
  }
  const int64_t periodic = a.get_int("periodic", 1);
  if (periodic != 0 && periodic != 1) {
    return bad(op, "attribute 'periodic' must be 0 or 1, got " + std::to_string(periodic));
  }
  LOOM_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx_number(op, "output_datatype",
                                                            a.get_int("output_datatype", 1)));
  if (dtype == DType::kBool) return bad(op, "attribute 'output_datatype' must name a numeric type, got bool");
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> size, constant_ints(op, 0, "size", in[0]));
  if (size.size() != 1 || size[0] < 0 || size[0] > kMaxWindowLength) {
    return bad(op, "operand 'size' must be in [0, " + std::to_string(kMaxWindowLength) + "], got " +
                       (size.empty() ? std::string("nothing") : std::to_string(size[0])));
  }
  return std::vector<TensorType>{{dtype, Shape{size[0]}}};
}

double window_at(Window w, int64_t n, double period) {
  const double x = 2.0 * std::numbers::pi * static_cast<double>(n) / period;
  switch (w) {
    case Window::kHann: return 0.5 - 0.5 * std::cos(x);
    case Window::kHamming: return 25.0 / 46.0 - (21.0 / 46.0) * std::cos(x);
    case Window::kBlackman: return 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2.0 * x);
  }
  return 0.0;
}

Status window_run(Window w, std::span<const TensorRef> in, std::span<const TensorRef> out,
                  const Attributes& a) {
  const std::string_view op = window_name(w);
  LOOM_ASSIGN_OR_RETURN(std::vector<TensorType> types,
                        prologue(op, in, out, {"size"},
                                 [&](std::span<const TensorType> t) { return window_types(w, t, a); }));
  const int64_t size = types[0].shape[0];
  const bool periodic = a.get_int("periodic", 1) == 1;
  const double period = static_cast<double>(periodic ? size : size - 1);
  return visit_dtype(op, out[0].dtype, [&]<typename T>() -> Status {
    if constexpr (!std::is_same_v<T, bool>) {
      T* y = static_cast<T*>(out[0].data);
      // A symmetric window of length 1 is the single value at n = 0 (the
      // formula's 0/0 taken as its limit).
      for (int64_t n = 0; n < size; ++n) {
        y[n] = reduce::from_double<T>(period > 0 ? window_at(w, n, period) : window_at(w, 0, 1.0));
      }
    }
    return Status();
  });
}

}  // namespace

Result<std::vector<TensorType>> eye_like_infer(std::span<const TensorType> in, const Attributes& a) {
  return eye_like_types(in, a);
}

Status eye_like_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(std::vector<TensorType> types,
                        prologue(kEyeLike, in, out, {"input"},
                                 [&](std::span<const TensorType> t) { return eye_like_types(t, a); }));
  const int64_t rows = types[0].shape[0], cols = types[0].shape[1];
  const int64_t k = a.get_int("k", 0);
  return visit_dtype(kEyeLike, out[0].dtype, [&]<typename T>() -> Status {
    T* y = static_cast<T*>(out[0].data);
    for (int64_t i = 0; i < rows * cols; ++i) y[i] = reduce::from_double<T>(0.0);
    for (int64_t i = 0; i < rows; ++i) {
      // Compared without forming i + k, which a huge k would overflow.
      if (k < -i || k >= cols - i) continue;
      y[i * cols + i + k] = reduce::from_double<T>(1.0);
    }
    return Status();
  });
}

Result<std::vector<TensorType>> hann_window_infer(std::span<const TensorType> in, const Attributes& a) {
  return window_types(Window::kHann, in, a);
}
Status hann_window_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  return window_run(Window::kHann, in, out, a);
}
Result<std::vector<TensorType>> hamming_window_infer(std::span<const TensorType> in, const Attributes& a) {
  return window_types(Window::kHamming, in, a);
}
Status hamming_window_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                          const Attributes& a) {
  return window_run(Window::kHamming, in, out, a);
}
Result<std::vector<TensorType>> blackman_window_infer(std::span<const TensorType> in, const Attributes& a) {
  return window_types(Window::kBlackman, in, a);
}
Status blackman_window_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                           const Attributes& a) {
  return window_run(Window::kBlackman, in, out, a);
}

}  // namespace loom::kernels::shape
