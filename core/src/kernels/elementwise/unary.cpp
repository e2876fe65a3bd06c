// Unary elementwise operators: activations, math functions, rounding, the
// floating-point class tests (IsNaN, IsInf) and Not. One template per
// operator; the element loop is the same for all.
#include <cmath>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/elementwise/common.hpp"

namespace loom::kernels::elementwise {
namespace {

enum class Op {
  kRelu, kLeakyRelu, kElu, kSelu, kCelu, kThresholdedRelu, kSigmoid, kHardSigmoid,
  kHardSwish, kTanh, kSoftplus, kSoftsign, kErf, kExp, kLog, kSqrt, kReciprocal, kNeg,
  kAbs, kFloor, kCeil, kRound, kSign, kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh,
  kCosh, kAsinh, kAcosh, kAtanh, kShrink, kIsNaN, kIsInf, kNot,
};

// Which element types an operator takes.
enum class Types { kFloat, kFloatAndSigned, kNumeric, kBool };

struct OpInfo {
  std::string_view name;
  Types types;
  bool bool_output;
};

constexpr OpInfo info(Op op) {
  switch (op) {
    case Op::kRelu: return {"Relu", Types::kFloatAndSigned, false};
    case Op::kLeakyRelu: return {"LeakyRelu", Types::kFloat, false};
    case Op::kElu: return {"Elu", Types::kFloat, false};
    case Op::kSelu: return {"Selu", Types::kFloat, false};
    case Op::kCelu: return {"Celu", Types::kFloat, false};
    case Op::kThresholdedRelu: return {"ThresholdedRelu", Types::kFloat, false};
    case Op::kSigmoid: return {"Sigmoid", Types::kFloat, false};
    case Op::kHardSigmoid: return {"HardSigmoid", Types::kFloat, false};
    case Op::kHardSwish: return {"HardSwish", Types::kFloat, false};
    case Op::kTanh: return {"Tanh", Types::kFloat, false};
    case Op::kSoftplus: return {"Softplus", Types::kFloat, false};
    case Op::kSoftsign: return {"Softsign", Types::kFloat, false};
    case Op::kErf: return {"Erf", Types::kFloat, false};
    case Op::kExp: return {"Exp", Types::kFloat, false};
    case Op::kLog: return {"Log", Types::kFloat, false};
    case Op::kSqrt: return {"Sqrt", Types::kFloat, false};
    case Op::kReciprocal: return {"Reciprocal", Types::kFloat, false};
    case Op::kNeg: return {"Neg", Types::kFloatAndSigned, false};
    case Op::kAbs: return {"Abs", Types::kNumeric, false};
    case Op::kFloor: return {"Floor", Types::kFloat, false};
    case Op::kCeil: return {"Ceil", Types::kFloat, false};
    case Op::kRound: return {"Round", Types::kFloat, false};
    case Op::kSign: return {"Sign", Types::kNumeric, false};
    case Op::kSin: return {"Sin", Types::kFloat, false};
    case Op::kCos: return {"Cos", Types::kFloat, false};
    case Op::kTan: return {"Tan", Types::kFloat, false};
    case Op::kAsin: return {"Asin", Types::kFloat, false};
    case Op::kAcos: return {"Acos", Types::kFloat, false};
    case Op::kAtan: return {"Atan", Types::kFloat, false};
    case Op::kSinh: return {"Sinh", Types::kFloat, false};
    case Op::kCosh: return {"Cosh", Types::kFloat, false};
    case Op::kAsinh: return {"Asinh", Types::kFloat, false};
    case Op::kAcosh: return {"Acosh", Types::kFloat, false};
    case Op::kAtanh: return {"Atanh", Types::kFloat, false};
    case Op::kShrink: return {"Shrink", Types::kNumeric, false};
    case Op::kIsNaN: return {"IsNaN", Types::kFloat, true};
    case Op::kIsInf: return {"IsInf", Types::kFloat, true};
    case Op::kNot: return {"Not", Types::kBool, true};
  }
  return {"?", Types::kFloat, false};
}

template <typename T>
constexpr bool takes(Types types) {
  switch (types) {
    case Types::kFloat: return is_floating<T>;
    case Types::kFloatAndSigned: return is_floating<T> || (is_integer<T> && std::is_signed_v<T>);
    case Types::kNumeric: return is_floating<T> || is_integer<T>;
    case Types::kBool: return std::is_same_v<T, bool>;
  }
  return false;
}

Status check_type(Op op, DType dtype) {
  return visit_dtype(info(op).name, dtype, [&]<typename T>() -> Status {
    if (takes<T>(info(op).types)) return Status();
    return unsupported_dtype(info(op).name, "X", dtype);
  });
}

// Attribute values, read once per call.
struct Params {
  double alpha = 0, beta = 0, gamma = 0;
  bool detect_negative = true, detect_positive = true;
};

Result<Params> read_params(Op op, const Attributes& a) {
  Params p;
  switch (op) {
    case Op::kLeakyRelu: p.alpha = a.get_float("alpha", 0.01f); break;
    case Op::kElu: p.alpha = a.get_float("alpha", 1.0f); break;
    case Op::kCelu:
      p.alpha = a.get_float("alpha", 1.0f);
      if (p.alpha == 0) return invalid_argument("Celu: attribute 'alpha' must not be 0");
      break;
    case Op::kThresholdedRelu: p.alpha = a.get_float("alpha", 1.0f); break;
    case Op::kSelu:
      p.alpha = a.get_float("alpha", 1.67326319217681884765625f);
      p.gamma = a.get_float("gamma", 1.05070102214813232421875f);
      break;
    case Op::kHardSigmoid:
      p.alpha = a.get_float("alpha", 0.2f);
      p.beta = a.get_float("beta", 0.5f);
      break;
    case Op::kShrink:
      p.alpha = a.get_float("lambd", 0.5f);
      p.beta = a.get_float("bias", 0.0f);
      break;
    case Op::kIsInf:
      p.detect_negative = a.get_int("detect_negative", 1) != 0;
      p.detect_positive = a.get_int("detect_positive", 1) != 0;
      break;
    default: break;
  }
  return p;
}

// Integer forms: wrap-around negation (no overflow UB for the minimum).
template <typename T>
T wrap_neg(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(U{0} - static_cast<U>(x)));
}

template <Op op, typename T>
T apply_int(T x, const Params& p) {
  if constexpr (op == Op::kRelu) {
    return x < 0 ? T{0} : x;
  } else if constexpr (op == Op::kNeg) {
    return wrap_neg(x);
  } else if constexpr (op == Op::kAbs) {
    if constexpr (std::is_signed_v<T>) return x < 0 ? wrap_neg(x) : x;
    return x;
  } else if constexpr (op == Op::kSign) {
    return static_cast<T>(x > 0 ? 1 : (x < 0 ? -1 : 0));
  } else if constexpr (op == Op::kShrink) {
    const double v = static_cast<double>(x);
    const double r = v < -p.alpha ? v + p.beta : (v > p.alpha ? v - p.beta : 0.0);
    return convert<T>(r);
  } else {
    return x;
  }
}

template <Op op, typename C>
C apply_float(C x, const Params& p) {
  const C one{1}, zero{0};
  const C alpha = static_cast<C>(p.alpha), beta = static_cast<C>(p.beta);
  if constexpr (op == Op::kRelu) {
    return x < zero ? zero : x;
  } else if constexpr (op == Op::kLeakyRelu) {
    return x < zero ? alpha * x : x;
  } else if constexpr (op == Op::kElu) {
    return x < zero ? alpha * (std::exp(x) - one) : x;
  } else if constexpr (op == Op::kSelu) {
    return static_cast<C>(p.gamma) * (x <= zero ? alpha * (std::exp(x) - one) : x);
  } else if constexpr (op == Op::kCelu) {
    return std::max(zero, x) + std::min(zero, alpha * (std::exp(x / alpha) - one));
  } else if constexpr (op == Op::kThresholdedRelu) {
    return x > alpha ? x : zero;
  } else if constexpr (op == Op::kSigmoid) {
    // Split by sign so exp never overflows.
    if (x >= zero) return one / (one + std::exp(-x));
    const C e = std::exp(x);
    return e / (one + e);
  } else if constexpr (op == Op::kHardSigmoid) {
    return std::max(zero, std::min(one, alpha * x + beta));
  } else if constexpr (op == Op::kHardSwish) {
    return x * std::max(zero, std::min(one, x / C{6} + C{0.5}));
  } else if constexpr (op == Op::kTanh) {
    return std::tanh(x);
  } else if constexpr (op == Op::kSoftplus) {
    // log(1 + e^x) without overflow for large x.
    return x > zero ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  } else if constexpr (op == Op::kSoftsign) {
    return x / (one + std::fabs(x));
  } else if constexpr (op == Op::kErf) {
    return std::erf(x);
  } else if constexpr (op == Op::kExp) {
    return std::exp(x);
  } else if constexpr (op == Op::kLog) {
    return std::log(x);
  } else if constexpr (op == Op::kSqrt) {
    return std::sqrt(x);
  } else if constexpr (op == Op::kReciprocal) {
    return one / x;
  } else if constexpr (op == Op::kNeg) {
    return -x;
  } else if constexpr (op == Op::kAbs) {
    return std::fabs(x);
  } else if constexpr (op == Op::kFloor) {
    return std::floor(x);
  } else if constexpr (op == Op::kCeil) {
    return std::ceil(x);
  } else if constexpr (op == Op::kRound) {
    return std::nearbyint(x);  // the default rounding mode: half to even
  } else if constexpr (op == Op::kSign) {
    if (std::isnan(x)) return x;
    return x > zero ? one : (x < zero ? -one : zero);
  } else if constexpr (op == Op::kSin) {
    return std::sin(x);
  } else if constexpr (op == Op::kCos) {
    return std::cos(x);
  } else if constexpr (op == Op::kTan) {
    return std::tan(x);
  } else if constexpr (op == Op::kAsin) {
    return std::asin(x);
  } else if constexpr (op == Op::kAcos) {
    return std::acos(x);
  } else if constexpr (op == Op::kAtan) {
    return std::atan(x);
  } else if constexpr (op == Op::kSinh) {
    return std::sinh(x);
  } else if constexpr (op == Op::kCosh) {
    return std::cosh(x);
  } else if constexpr (op == Op::kAsinh) {
    return std::asinh(x);
  } else if constexpr (op == Op::kAcosh) {
    return std::acosh(x);
  } else if constexpr (op == Op::kAtanh) {
    return std::atanh(x);
  } else if constexpr (op == Op::kShrink) {
    return x < -alpha ? x + beta : (x > alpha ? x - beta : zero);
  } else {
    return x;
  }
}

template <Op op, typename T>
bool apply_bool(T v, const Params& p) {
  if constexpr (op == Op::kNot) {
    return !v;
  } else {
    const auto x = load(v);
    if constexpr (op == Op::kIsNaN) {
      return std::isnan(x);
    } else {
      return std::isinf(x) && ((x > 0 && p.detect_positive) || (x < 0 && p.detect_negative));
    }
  }
}

template <Op op>
Status unary_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                 const Attributes& attrs) {
  constexpr OpInfo oi = info(op);
  LOOM_RETURN_IF_ERROR(check_arity(oi.name, inputs.size(), 1, 1, outputs.size(), 1));
  const TensorRef& x = inputs[0];
  const TensorRef& y = outputs[0];
  LOOM_RETURN_IF_ERROR(check_operand(oi.name, "X", x));
  LOOM_RETURN_IF_ERROR(check_type(op, x.dtype));
  LOOM_RETURN_IF_ERROR(
      check_operand(oi.name, "Y", y, oi.bool_output ? DType::kBool : x.dtype));
  LOOM_RETURN_IF_ERROR(check_shape(oi.name, "Y", y.shape, x.shape));
  LOOM_ASSIGN_OR_RETURN(Params p, read_params(op, attrs));
  const size_t n = count_of(x);
  return visit_dtype(oi.name, x.dtype, [&]<typename T>() -> Status {
    const T* in = static_cast<const T*>(x.data);
    if constexpr (oi.bool_output) {
      if constexpr (takes<T>(oi.types)) {
        bool* out = static_cast<bool*>(y.data);
        for (size_t i = 0; i < n; ++i) out[i] = apply_bool<op>(in[i], p);
      }
    } else if constexpr (is_floating<T> && takes<T>(oi.types)) {
      T* out = static_cast<T*>(y.data);
      for (size_t i = 0; i < n; ++i) {
        out[i] = store<T>(apply_float<op, compute_t<T>>(load(in[i]), p));
      }
    } else if constexpr (is_integer<T> && takes<T>(oi.types)) {
      T* out = static_cast<T*>(y.data);
      for (size_t i = 0; i < n; ++i) out[i] = apply_int<op>(in[i], p);
    }
    return Status();
  });
}

template <Op op>
Result<std::vector<TensorType>> unary_infer(std::span<const TensorType> inputs,
                                            const Attributes& attrs) {
  constexpr OpInfo oi = info(op);
  LOOM_RETURN_IF_ERROR(check_arity(oi.name, inputs.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_type(op, inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(check_infer_shape(oi.name, "X", inputs[0].shape));
  LOOM_RETURN_IF_ERROR(read_params(op, attrs).status());
  return std::vector<TensorType>{
      {oi.bool_output ? DType::kBool : inputs[0].dtype, inputs[0].shape}};
}

template <Op op>
void add(KernelRegistry& r) {
  r.add({info(op).name, &unary_run<op>, &unary_infer<op>});
}

}  // namespace

void register_unary(KernelRegistry& r) {
  add<Op::kRelu>(r);
  add<Op::kLeakyRelu>(r);
  add<Op::kElu>(r);
  add<Op::kSelu>(r);
  add<Op::kCelu>(r);
  add<Op::kThresholdedRelu>(r);
  add<Op::kSigmoid>(r);
  add<Op::kHardSigmoid>(r);
  add<Op::kHardSwish>(r);
  add<Op::kTanh>(r);
  add<Op::kSoftplus>(r);
  add<Op::kSoftsign>(r);
  add<Op::kErf>(r);
  add<Op::kExp>(r);
  add<Op::kLog>(r);
  add<Op::kSqrt>(r);
  add<Op::kReciprocal>(r);
  add<Op::kNeg>(r);
  add<Op::kAbs>(r);
  add<Op::kFloor>(r);
  add<Op::kCeil>(r);
  add<Op::kRound>(r);
  add<Op::kSign>(r);
  add<Op::kSin>(r);
  add<Op::kCos>(r);
  add<Op::kTan>(r);
  add<Op::kAsin>(r);
  add<Op::kAcos>(r);
  add<Op::kAtan>(r);
  add<Op::kSinh>(r);
  add<Op::kCosh>(r);
  add<Op::kAsinh>(r);
  add<Op::kAcosh>(r);
  add<Op::kAtanh>(r);
  add<Op::kShrink>(r);
  add<Op::kIsNaN>(r);
  add<Op::kIsInf>(r);
  add<Op::kNot>(r);
}

}  // namespace loom::kernels::elementwise
