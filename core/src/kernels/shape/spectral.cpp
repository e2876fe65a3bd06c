// Spectral operators (opset 17; DFT's opset-20 form too): DFT, STFT and
// MelWeightMatrix.
//
// Signals are real ([..., 1]) or complex ([..., 2]: real, imaginary) in the
// last dimension. The transforms are the plain O(N^2) sums, in double
// precision, with the twiddle angle reduced modulo N before the cosine so
// that long signals keep their accuracy:
//   X[k] = sum_n x[n] e^(-2 pi i k n / N)      (inverse: e^(+...), times 1/N)
// A length (dft_length, frame_length) shorter than the signal truncates it,
// a longer one pads it with zeros. `onesided` keeps the bins 0..N/2 of a real
// signal's transform (the rest are their conjugates).
#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

using Complex = std::complex<double>;

// Transform lengths above this are refused: the output is allocated from a
// value the model computes, and the sums are quadratic.
constexpr int64_t kMaxTransformLength = int64_t{1} << 20;

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16;
}

// A scalar integer operand (shape [] or [1]) at infer time.
Result<int64_t> scalar_int(std::string_view op, size_t index, std::string_view name,
                           const TensorType& t) {
  if (t.dtype != DType::kI32 && t.dtype != DType::kI64) {
    return bad(op, "operand '" + std::string(name) + "' must be int32 or int64, got " +
                       std::string(dtype_name(t.dtype)));
  }
  if (!t.shape.empty() && !(t.shape.size() == 1 && t.shape[0] == 1)) {
    return bad(op, "operand '" + std::string(name) + "' must be a scalar, got shape " +
                       shape_to_string(t.shape));
  }
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> v, constant_ints(op, index, name, t));
  if (v.size() != 1) return bad(op, "operand '" + std::string(name) + "' must hold one value");
  return v[0];
}

Status check_length(std::string_view op, std::string_view name, int64_t n) {
  if (n < 1 || n > kMaxTransformLength) {
    return bad(op, "'" + std::string(name) + "' must be in [1, " + std::to_string(kMaxTransformLength) +
                       "], got " + std::to_string(n));
  }
  return Status();
}

// e^(sign * 2 pi i k n / len), with k n reduced modulo len first.
Complex twiddle(int64_t k, int64_t n, int64_t len, double sign) {
  const int64_t r = static_cast<int64_t>((static_cast<unsigned __int128>(k) * static_cast<unsigned __int128>(n)) %
                                         static_cast<unsigned __int128>(len));
  const double angle = sign * 2.0 * std::numbers::pi * static_cast<double>(r) / static_cast<double>(len);
  return {std::cos(angle), std::sin(angle)};
}

// One transform: `x` (its first `len` samples, zeros past its end) to
// `bins` outputs.
void transform(const std::vector<Complex>& x, int64_t len, int64_t bins, bool inverse,
               std::vector<Complex>* out) {
  out->assign(static_cast<size_t>(bins), Complex{});
  const int64_t used = std::min<int64_t>(len, static_cast<int64_t>(x.size()));
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < bins; ++k) {
    Complex sum{};
    for (int64_t n = 0; n < used; ++n) sum += x[static_cast<size_t>(n)] * twiddle(k, n, len, sign);
    (*out)[static_cast<size_t>(k)] = inverse ? sum / static_cast<double>(len) : sum;
  }
}

// ---------------------------------------------------------------- DFT

constexpr std::string_view kDft = "DFT";

struct DftPlan {
  TensorType out;
  int64_t axis = 1;
  int64_t length = 0;  // N
  int64_t bins = 0;    // N, or N / 2 + 1 one-sided
};

Result<DftPlan> dft_plan(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(kDft, in, 1, 3));
  const TensorType& x = in[0];
  if (!is_float(x.dtype)) return bad(kDft, "operand 'input' must be a float type, got " + std::string(dtype_name(x.dtype)));
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank < 2 || (x.shape.back() != 1 && x.shape.back() != 2)) {
    return bad(kDft, "operand 'input' must end in a dimension of 1 (real) or 2 (complex), got shape " +
                         shape_to_string(x.shape));
  }
  DftPlan p;
  // Opset 20 made the axis an operand (default -2); before, an attribute
  // (default 1).
  int64_t axis = a.get_int("axis", 1);
  if (!a.opset_before(20) && a.opset() != 0) {
    axis = -2;
    if (const TensorType* t = optional_type(in, 2)) {
      LOOM_ASSIGN_OR_RETURN(axis, scalar_int(kDft, 2, "axis", *t));
    }
  }
  if (axis < -rank || axis >= rank - 1 || axis == -1) {
    return bad(kDft, "axis " + std::to_string(axis) + " is not a signal axis of an input of rank " +
                         std::to_string(rank) + " (the last dimension holds real and imaginary parts)");
  }
  p.axis = axis < 0 ? axis + rank : axis;
  p.length = x.shape[static_cast<size_t>(p.axis)];
  if (const TensorType* t = optional_type(in, 1)) {
    LOOM_ASSIGN_OR_RETURN(p.length, scalar_int(kDft, 1, "dft_length", *t));
  }
  LOOM_RETURN_IF_ERROR(check_length(kDft, "dft_length", p.length));
  const int64_t onesided = a.get_int("onesided", 0), inverse = a.get_int("inverse", 0);
  if ((onesided != 0 && onesided != 1) || (inverse != 0 && inverse != 1)) {
    return bad(kDft, "attributes 'onesided' and 'inverse' must be 0 or 1");
  }
  if (onesided == 1 && x.shape.back() == 2) {
    return bad(kDft, "onesided = 1 needs a real input (last dimension 1), got shape " + shape_to_string(x.shape));
  }
  p.bins = onesided == 1 ? p.length / 2 + 1 : p.length;
  p.out.dtype = x.dtype;
  p.out.shape = x.shape;
  p.out.shape[static_cast<size_t>(p.axis)] = p.bins;
  p.out.shape.back() = 2;
  return p;
}

// ---------------------------------------------------------------- STFT

constexpr std::string_view kStft = "STFT";

struct StftPlan {
  TensorType out;
  int64_t batch = 0, signal_length = 0, components = 1;
  int64_t step = 0, frame_length = 0, frames = 0, bins = 0;
};

Result<StftPlan> stft_plan(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(kStft, in, 2, 4));
  const TensorType& s = in[0];
  if (!is_float(s.dtype)) return bad(kStft, "operand 'signal' must be a float type, got " + std::string(dtype_name(s.dtype)));
  if (s.shape.size() != 3 || (s.shape[2] != 1 && s.shape[2] != 2)) {
    return bad(kStft, "operand 'signal' must be [batch, length, 1 or 2], got shape " + shape_to_string(s.shape));
  }
  StftPlan p;
  p.batch = s.shape[0];
  p.signal_length = s.shape[1];
  p.components = s.shape[2];
  LOOM_ASSIGN_OR_RETURN(p.step, scalar_int(kStft, 1, "frame_step", in[1]));
  if (p.step < 1) return bad(kStft, "operand 'frame_step' must be positive, got " + std::to_string(p.step));
  const TensorType* window = optional_type(in, 2);
  if (window != nullptr) {
    if (window->dtype != s.dtype || window->shape.size() != 1) {
      return bad(kStft, "operand 'window' must be 1-D of the signal's type, got " +
                            std::string(dtype_name(window->dtype)) + " " + shape_to_string(window->shape));
    }
  }
  if (const TensorType* t = optional_type(in, 3)) {
    LOOM_ASSIGN_OR_RETURN(p.frame_length, scalar_int(kStft, 3, "frame_length", *t));
    if (window != nullptr && window->shape[0] != p.frame_length) {
      return bad(kStft, "operand 'window' has " + std::to_string(window->shape[0]) +
                            " values but 'frame_length' is " + std::to_string(p.frame_length));
    }
  } else if (window != nullptr) {
    p.frame_length = window->shape[0];
  } else {
    return bad(kStft, "give 'window' or 'frame_length': the frame length is not known");
  }
  LOOM_RETURN_IF_ERROR(check_length(kStft, "frame_length", p.frame_length));
  if (p.frame_length > p.signal_length) {
    return bad(kStft, "the frame length " + std::to_string(p.frame_length) + " is longer than the signal (" +
                          std::to_string(p.signal_length) + ")");
  }
  const int64_t onesided = a.get_int("onesided", 1);
  if (onesided != 0 && onesided != 1) return bad(kStft, "attribute 'onesided' must be 0 or 1");
  if (onesided == 1 && p.components == 2) {
    return bad(kStft, "onesided = 1 needs a real signal (last dimension 1)");
  }
  p.frames = (p.signal_length - p.frame_length) / p.step + 1;
  p.bins = onesided == 1 ? p.frame_length / 2 + 1 : p.frame_length;
  p.out.dtype = s.dtype;
  p.out.shape = {p.batch, p.frames, p.bins, 2};
  return p;
}

// ------------------------------------------------------- MelWeightMatrix

constexpr std::string_view kMel = "MelWeightMatrix";

struct MelPlan {
  TensorType out;
  int64_t mel_bins = 0, dft_length = 0, sample_rate = 0;
};

Result<MelPlan> mel_plan(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(kMel, in, 5, 5));
  MelPlan p;
  LOOM_ASSIGN_OR_RETURN(p.mel_bins, scalar_int(kMel, 0, "num_mel_bins", in[0]));
  LOOM_ASSIGN_OR_RETURN(p.dft_length, scalar_int(kMel, 1, "dft_length", in[1]));
  LOOM_ASSIGN_OR_RETURN(p.sample_rate, scalar_int(kMel, 2, "sample_rate", in[2]));
  LOOM_RETURN_IF_ERROR(check_length(kMel, "num_mel_bins", p.mel_bins));
  LOOM_RETURN_IF_ERROR(check_length(kMel, "dft_length", p.dft_length));
  if (p.sample_rate < 1) return bad(kMel, "operand 'sample_rate' must be positive, got " + std::to_string(p.sample_rate));
  for (size_t i : {size_t{3}, size_t{4}}) {
    if (!is_float(in[i].dtype) || !(in[i].shape.empty() || (in[i].shape.size() == 1 && in[i].shape[0] == 1))) {
      return bad(kMel, std::string(i == 3 ? "operand 'lower_edge_hertz'" : "operand 'upper_edge_hertz'") +
                           " must be a float scalar, got " + std::string(dtype_name(in[i].dtype)) + " " +
                           shape_to_string(in[i].shape));
    }
  }
  LOOM_ASSIGN_OR_RETURN(p.out.dtype, dtype_from_onnx_number(kMel, "output_datatype", a.get_int("output_datatype", 1)));
  if (p.out.dtype == DType::kBool) return bad(kMel, "attribute 'output_datatype' must name a numeric type, got bool");
  p.out.shape = {p.dft_length / 2 + 1, p.mel_bins};
  return p;
}

double read_scalar(const TensorRef& t) {
  double v = 0;
  (void)visit_dtype("MelWeightMatrix", t.dtype, [&]<typename T>() -> Status {
    if constexpr (!std::is_same_v<T, bool>) v = reduce::to_double(*static_cast<const T*>(t.data));
    return Status();
  });
  return v;
}

double hertz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hertz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

}  // namespace

Result<std::vector<TensorType>> dft_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(DftPlan p, dft_plan(in, a));
  return std::vector<TensorType>{p.out};
}

Status dft_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(std::vector<TensorType> types,
                        prologue(kDft, in, out, {"input", "dft_length", "axis"},
                                 [&](std::span<const TensorType> t) { return dft_infer(t, a); }));
  (void)types;
  std::vector<TensorType> in_types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(DftPlan p, dft_plan(in_types, a));
  const Shape xs(in[0].shape.begin(), in[0].shape.end());
  const int64_t comps = xs.back();
  // outer x signal x inner, the last (component) dimension apart.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < p.axis; ++d) outer *= xs[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(p.axis) + 1; d + 1 < xs.size(); ++d) inner *= xs[d];
  const int64_t signal = xs[static_cast<size_t>(p.axis)];
  const bool inverse = a.get_int("inverse", 0) == 1;
  return visit_dtype(kDft, in[0].dtype, [&]<typename T>() -> Status {
    {
      if constexpr (!std::is_same_v<T, bool>) {
        const T* x = static_cast<const T*>(in[0].data);
        T* y = static_cast<T*>(out[0].data);
        std::vector<Complex> line(static_cast<size_t>(signal)), result;
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            for (int64_t n = 0; n < signal; ++n) {
              const int64_t at = ((o * signal + n) * inner + i) * comps;
              line[static_cast<size_t>(n)] = {reduce::to_double(x[at]),
                                              comps == 2 ? reduce::to_double(x[at + 1]) : 0.0};
            }
            transform(line, p.length, p.bins, inverse, &result);
            for (int64_t k = 0; k < p.bins; ++k) {
              const int64_t at = ((o * p.bins + k) * inner + i) * 2;
              y[at] = reduce::from_double<T>(result[static_cast<size_t>(k)].real());
              y[at + 1] = reduce::from_double<T>(result[static_cast<size_t>(k)].imag());
            }
          }
        }
      }
    }
    return Status();
  });
}

Result<std::vector<TensorType>> stft_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(StftPlan p, stft_plan(in, a));
  return std::vector<TensorType>{p.out};
}

Status stft_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(std::vector<TensorType> types,
                        prologue(kStft, in, out, {"signal", "frame_step", "window", "frame_length"},
                                 [&](std::span<const TensorType> t) { return stft_infer(t, a); }));
  (void)types;
  std::vector<TensorType> in_types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(StftPlan p, stft_plan(in_types, a));
  const TensorRef* window = optional_ref(in, 2);
  return visit_dtype(kStft, in[0].dtype, [&]<typename T>() -> Status {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* s = static_cast<const T*>(in[0].data);
      const T* w = window != nullptr ? static_cast<const T*>(window->data) : nullptr;
      T* y = static_cast<T*>(out[0].data);
      std::vector<Complex> frame(static_cast<size_t>(p.frame_length)), result;
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t f = 0; f < p.frames; ++f) {
          for (int64_t n = 0; n < p.frame_length; ++n) {
            const int64_t at = (b * p.signal_length + f * p.step + n) * p.components;
            const double scale = w != nullptr ? reduce::to_double(w[n]) : 1.0;
            frame[static_cast<size_t>(n)] = {scale * reduce::to_double(s[at]),
                                             p.components == 2 ? scale * reduce::to_double(s[at + 1]) : 0.0};
          }
          transform(frame, p.frame_length, p.bins, false, &result);
          for (int64_t k = 0; k < p.bins; ++k) {
            const int64_t at = ((b * p.frames + f) * p.bins + k) * 2;
            y[at] = reduce::from_double<T>(result[static_cast<size_t>(k)].real());
            y[at + 1] = reduce::from_double<T>(result[static_cast<size_t>(k)].imag());
          }
        }
      }
    }
    return Status();
  });
}

Result<std::vector<TensorType>> mel_weight_matrix_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(MelPlan p, mel_plan(in, a));
  return std::vector<TensorType>{p.out};
}

// The triangular filters of the mel scale: num_mel_bins + 2 points equally
// spaced in mels from lower_edge_hertz to upper_edge_hertz, each mapped back
// to hertz and to the DFT bin floor((dft_length + 1) * hz / sample_rate);
// filter i rises linearly from point i to point i + 1 (1 there) and falls to
// 0 at point i + 2. A filter whose rising edge is empty is 1 at its centre.
Status mel_weight_matrix_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                             const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(std::vector<TensorType> types,
                        prologue(kMel, in, out,
                                 {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"},
                                 [&](std::span<const TensorType> t) { return mel_weight_matrix_infer(t, a); }));
  (void)types;
  std::vector<TensorType> in_types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(MelPlan p, mel_plan(in_types, a));
  const double lower = read_scalar(in[3]), upper = read_scalar(in[4]);
  if (!(lower >= 0) || !(upper > lower) || !(upper <= static_cast<double>(p.sample_rate) / 2.0 + 1e-9)) {
    return bad(kMel, "the edges must satisfy 0 <= lower_edge_hertz < upper_edge_hertz <= sample_rate / 2, got " +
                         std::to_string(lower) + " and " + std::to_string(upper));
  }
  const int64_t spectrogram_bins = p.dft_length / 2 + 1;
  const double low_mel = hertz_to_mel(lower), high_mel = hertz_to_mel(upper);
  const double step = (high_mel - low_mel) / static_cast<double>(p.mel_bins + 2);
  std::vector<int64_t> point(static_cast<size_t>(p.mel_bins + 2));
  for (int64_t i = 0; i < p.mel_bins + 2; ++i) {
    const double hz = mel_to_hertz(low_mel + static_cast<double>(i) * step);
    point[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(p.dft_length + 1) * hz / static_cast<double>(p.sample_rate)));
  }
  std::vector<double> w(static_cast<size_t>(spectrogram_bins * p.mel_bins), 0.0);
  auto at = [&](int64_t bin, int64_t filter) -> double* {
    if (bin < 0 || bin >= spectrogram_bins) return nullptr;
    return &w[static_cast<size_t>(bin * p.mel_bins + filter)];
  };
  for (int64_t i = 0; i < p.mel_bins; ++i) {
    const int64_t left = point[static_cast<size_t>(i)], centre = point[static_cast<size_t>(i + 1)],
                  right = point[static_cast<size_t>(i + 2)];
    if (centre == left) {
      if (double* v = at(centre, i)) *v = 1.0;
    } else {
      for (int64_t j = left; j <= centre; ++j) {
        if (double* v = at(j, i)) *v = static_cast<double>(j - left) / static_cast<double>(centre - left);
      }
    }
    if (right > centre) {
      for (int64_t j = centre; j < right; ++j) {
        if (double* v = at(j, i)) *v = static_cast<double>(right - j) / static_cast<double>(right - centre);
      }
    }
  }
  return visit_dtype(kMel, out[0].dtype, [&]<typename T>() -> Status {
    if constexpr (!std::is_same_v<T, bool>) {
      T* y = static_cast<T*>(out[0].data);
      for (size_t i = 0; i < w.size(); ++i) y[i] = reduce::from_double<T>(w[i]);
    }
    return Status();
  });
}

}  // namespace loom::kernels::shape
