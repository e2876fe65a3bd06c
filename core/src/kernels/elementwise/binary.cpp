// Binary and variadic elementwise operators with multidirectional (numpy)
// broadcasting: arithmetic, comparisons, logic, PRelu (slope broadcasts to
// X only), Max/Min/Sum/Mean (any number of inputs), Pow (base and exponent
// of different dtypes) and Where.
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/elementwise/common.hpp"

namespace loom::kernels::elementwise {
namespace {

enum class Bin {
  kAdd, kSub, kMul, kDiv, kMod, kBitShift, kEqual, kLess, kGreater, kLessOrEqual,
  kGreaterOrEqual, kAnd, kOr, kXor, kPRelu, kMax, kMin, kSum, kMean,
};

enum class BinaryTypes { kNumeric, kFloat, kUnsigned, kBool, kAny };

struct BinInfo {
  std::string_view name;
  BinaryTypes types;
  bool bool_output;
  bool variadic;
};

constexpr BinInfo info(Bin op) {
  switch (op) {
    case Bin::kAdd: return {"Add", BinaryTypes::kNumeric, false, false};
    case Bin::kSub: return {"Sub", BinaryTypes::kNumeric, false, false};
    case Bin::kMul: return {"Mul", BinaryTypes::kNumeric, false, false};
    case Bin::kDiv: return {"Div", BinaryTypes::kNumeric, false, false};
    case Bin::kMod: return {"Mod", BinaryTypes::kNumeric, false, false};
    case Bin::kBitShift: return {"BitShift", BinaryTypes::kUnsigned, false, false};
    case Bin::kEqual: return {"Equal", BinaryTypes::kAny, true, false};
    case Bin::kLess: return {"Less", BinaryTypes::kNumeric, true, false};
    case Bin::kGreater: return {"Greater", BinaryTypes::kNumeric, true, false};
    case Bin::kLessOrEqual: return {"LessOrEqual", BinaryTypes::kNumeric, true, false};
    case Bin::kGreaterOrEqual: return {"GreaterOrEqual", BinaryTypes::kNumeric, true, false};
    case Bin::kAnd: return {"And", BinaryTypes::kBool, true, false};
    case Bin::kOr: return {"Or", BinaryTypes::kBool, true, false};
    case Bin::kXor: return {"Xor", BinaryTypes::kBool, true, false};
    case Bin::kPRelu: return {"PRelu", BinaryTypes::kNumeric, false, false};
    case Bin::kMax: return {"Max", BinaryTypes::kNumeric, false, true};
    case Bin::kMin: return {"Min", BinaryTypes::kNumeric, false, true};
    case Bin::kSum: return {"Sum", BinaryTypes::kNumeric, false, true};
    case Bin::kMean: return {"Mean", BinaryTypes::kFloat, false, true};
  }
  return {"?", BinaryTypes::kAny, false, false};
}

template <typename T>
constexpr bool binary_takes(BinaryTypes types) {
  switch (types) {
    case BinaryTypes::kNumeric: return is_floating<T> || is_integer<T>;
    case BinaryTypes::kFloat: return is_floating<T>;
    case BinaryTypes::kUnsigned: return is_integer<T> && std::is_unsigned_v<T>;
    case BinaryTypes::kBool: return std::is_same_v<T, bool>;
    case BinaryTypes::kAny: return true;
  }
  return false;
}

Status check_type(std::string_view op, BinaryTypes types, std::string_view name, DType dtype) {
  return visit_dtype(op, dtype, [&]<typename T>() -> Status {
    if (binary_takes<T>(types)) return Status();
    return unsupported_dtype(op, name, dtype);
  });
}

struct BinaryParams {
  bool fmod = false;
  bool left = true;
};

Result<BinaryParams> read_params(Bin op, DType dtype, const Attributes& a) {
  BinaryParams p;
  if (op == Bin::kMod) {
    const int64_t f = a.get_int("fmod", 0);
    if (f != 0 && f != 1) {
      return invalid_argument("Mod: attribute 'fmod' must be 0 or 1, got " + std::to_string(f));
    }
    p.fmod = f == 1;
    if (!p.fmod && is_float_dtype(dtype)) {
      return invalid_argument("Mod: attribute 'fmod' must be 1 for floating-point inputs");
    }
  }
  if (op == Bin::kBitShift) {
    const std::string_view d = a.get_string("direction", "");
    if (d != "LEFT" && d != "RIGHT") {
      return invalid_argument("BitShift: attribute 'direction' must be LEFT or RIGHT, got '" +
                              std::string(d) + "'");
    }
    p.left = d == "LEFT";
  }
  return p;
}

// Integer arithmetic in uint64 so that signed overflow wraps instead of
// being undefined.
template <typename T>
T wrap(uint64_t v) {
  return static_cast<T>(v);
}

// Set when an integer Div/Mod meets a zero divisor.
struct Flags {
  bool divide_by_zero = false;
};

template <Bin op, typename C>
auto apply(C a, C b, const BinaryParams& p, Flags& f) {
  if constexpr (op == Bin::kEqual) {
    return a == b;
  } else if constexpr (op == Bin::kLess) {
    return a < b;
  } else if constexpr (op == Bin::kGreater) {
    return a > b;
  } else if constexpr (op == Bin::kLessOrEqual) {
    return a <= b;
  } else if constexpr (op == Bin::kGreaterOrEqual) {
    return a >= b;
  } else if constexpr (op == Bin::kAnd) {
    return a && b;
  } else if constexpr (op == Bin::kOr) {
    return a || b;
  } else if constexpr (op == Bin::kXor) {
    return a != b;
  } else if constexpr (op == Bin::kMax || op == Bin::kMin) {
    if constexpr (std::is_floating_point_v<C>) {
      // NaN propagates, like numpy's maximum/minimum.
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    if constexpr (op == Bin::kMax) return a < b ? b : a;
    else return b < a ? b : a;
  } else if constexpr (std::is_floating_point_v<C>) {
    if constexpr (op == Bin::kAdd || op == Bin::kSum || op == Bin::kMean) return a + b;
    else if constexpr (op == Bin::kSub) return a - b;
    else if constexpr (op == Bin::kMul) return a * b;
    else if constexpr (op == Bin::kDiv) return a / b;
    else if constexpr (op == Bin::kMod) return std::fmod(a, b);
    else if constexpr (op == Bin::kPRelu) return a < C{0} ? a * b : a;
    else return a;
  } else {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    if constexpr (op == Bin::kAdd || op == Bin::kSum || op == Bin::kMean) {
      return wrap<C>(ua + ub);
    } else if constexpr (op == Bin::kSub) {
      return wrap<C>(ua - ub);
    } else if constexpr (op == Bin::kMul) {
      return wrap<C>(ua * ub);
    } else if constexpr (op == Bin::kPRelu) {
      return a < C{0} ? wrap<C>(ua * ub) : a;
    } else if constexpr (op == Bin::kBitShift) {
      if (b >= static_cast<C>(sizeof(C) * 8)) return C{0};
      // Shift in uint64: u16 would promote to int, where << can overflow.
      return p.left ? static_cast<C>(ua << ub) : static_cast<C>(ua >> ub);
    } else if constexpr (op == Bin::kDiv || op == Bin::kMod) {
      if (b == 0) {
        f.divide_by_zero = true;
        return C{0};
      }
      if constexpr (std::is_signed_v<C>) {
        // The minimum divided by -1 overflows: wrap like two's complement.
        if (b == C{-1}) return op == Bin::kDiv ? wrap<C>(uint64_t{0} - ua) : C{0};
      }
      if constexpr (op == Bin::kDiv) {
        return static_cast<C>(a / b);  // truncates toward zero, like C
      } else {
        C r = static_cast<C>(a % b);
        // fmod=0: the result binary_takes the divisor's sign (Python's %).
        if (!p.fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        return r;
      }
    } else {
      return a;
    }
  }
}

// PRelu before opset 7 (old PyTorch exports) applies a 1-D slope of X's
// channel count along axis 1; from opset 7 the slope broadcasts numpy-style.
// Returns the shape to broadcast the slope with, written into `storage`.
std::span<const int64_t> prelu_slope_shape(const Attributes& a, std::span<const int64_t> x,
                                           std::span<const int64_t> slope,
                                           std::array<int64_t, kMaxKernelRank>& storage) {
  if (!a.opset_before(7) || slope.size() != 1 || x.size() < 2 || x.size() > kMaxKernelRank ||
      slope[0] != x[1] || slope[0] == 1) {
    return slope;
  }
  storage.fill(1);
  storage[0] = slope[0];
  return {storage.data(), x.size() - 1};
}

Status check_variadic_arity(std::string_view op, size_t inputs) {
  if (inputs == 0) return invalid_argument(std::string(op) + ": takes at least 1 input, got 0");
  return Status();
}

// Runs the element loop of a two-operand op over a planned broadcast.
template <Bin op, typename T>
void binary_loop(const NaryPlan& plan, const T* a, const T* b, void* out, const BinaryParams& p,
                 Flags& f) {
  using C = compute_t<T>;
  if constexpr (info(op).bool_output) {
    bool* o = static_cast<bool*>(out);
    for_each_nary(plan, [&](int64_t i, const auto& off) {
      o[i] = apply<op, C>(load(a[off[0]]), load(b[off[1]]), p, f);
    });
  } else {
    T* o = static_cast<T*>(out);
    for_each_nary(plan, [&](int64_t i, const auto& off) {
      o[i] = store<T>(apply<op, C>(load(a[off[0]]), load(b[off[1]]), p, f));
    });
  }
}

template <Bin op>
Status binary_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                  const Attributes& attrs) {
  constexpr BinInfo bi = info(op);
  constexpr bool prelu = op == Bin::kPRelu;
  constexpr std::string_view a_name = prelu ? "X" : "A", b_name = prelu ? "slope" : "B",
                             c_name = prelu ? "Y" : "C";
  LOOM_RETURN_IF_ERROR(check_arity(bi.name, inputs.size(), 2, 2, outputs.size(), 1));
  const TensorRef &a = inputs[0], &b = inputs[1], &c = outputs[0];
  LOOM_RETURN_IF_ERROR(check_operand(bi.name, a_name, a));
  LOOM_RETURN_IF_ERROR(check_type(bi.name, bi.types, a_name, a.dtype));
  LOOM_RETURN_IF_ERROR(check_operand(bi.name, b_name, b, a.dtype));
  LOOM_RETURN_IF_ERROR(check_operand(bi.name, c_name, c, bi.bool_output ? DType::kBool : a.dtype));
  LOOM_ASSIGN_OR_RETURN(BinaryParams p, read_params(op, a.dtype, attrs));
  std::array<int64_t, kMaxKernelRank> slope_storage;
  const std::array<std::span<const int64_t>, 2> shapes = {
      a.shape, prelu ? prelu_slope_shape(attrs, a.shape, b.shape, slope_storage) : b.shape};
  const std::array<std::string_view, 2> names = {a_name, b_name};
  NaryPlan plan;
  LOOM_RETURN_IF_ERROR(plan_nary(bi.name, shapes, names, &plan));
  if (prelu) {
    LOOM_RETURN_IF_ERROR(check_shape(bi.name, "Y (slope must broadcast to X)", plan.shape(),
                                     a.shape));
  }
  LOOM_RETURN_IF_ERROR(check_shape(bi.name, c_name, c.shape, plan.shape()));
  Flags flags;
  LOOM_RETURN_IF_ERROR(visit_dtype(bi.name, a.dtype, [&]<typename T>() -> Status {
    if constexpr (binary_takes<T>(bi.types)) {
      binary_loop<op, T>(plan, static_cast<const T*>(a.data), static_cast<const T*>(b.data),
                         c.data, p, flags);
    }
    return Status();
  }));
  if (flags.divide_by_zero) {
    return invalid_argument(std::string(bi.name) + ": integer division by zero");
  }
  return Status();
}

// Max, Min, Sum, Mean: the output starts as the broadcast of the first input
// and each further input is folded into it in place.
template <Bin op>
Status variadic_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                    const Attributes&) {
  constexpr BinInfo bi = info(op);
  LOOM_RETURN_IF_ERROR(check_variadic_arity(bi.name, inputs.size()));
  LOOM_RETURN_IF_ERROR(check_arity(bi.name, 1, 1, 1, outputs.size(), 1));
  const TensorRef& out = outputs[0];
  BroadcastPlan total;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string name = "data_" + std::to_string(k);
    LOOM_RETURN_IF_ERROR(check_operand(bi.name, name, inputs[k], inputs[0].dtype));
    if (k == 0) {
      LOOM_RETURN_IF_ERROR(check_type(bi.name, bi.types, name, inputs[0].dtype));
      LOOM_RETURN_IF_ERROR(plan_broadcast(bi.name, name, inputs[0].shape, name, inputs[0].shape,
                                          &total));
    } else {
      BroadcastPlan next;
      LOOM_RETURN_IF_ERROR(plan_broadcast(bi.name, "the earlier inputs", total.shape(), name,
                                          inputs[k].shape, &next));
      total = next;
    }
  }
  LOOM_RETURN_IF_ERROR(check_operand(bi.name, "output", out, inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(check_shape(bi.name, "output", out.shape, total.shape()));
  BinaryParams p;
  Flags flags;
  return visit_dtype(bi.name, out.dtype, [&]<typename T>() -> Status {
    if constexpr (binary_takes<T>(bi.types)) {
      using C = compute_t<T>;
      T* o = static_cast<T*>(out.data);
      for (size_t k = 0; k < inputs.size(); ++k) {
        const std::array<std::span<const int64_t>, 2> shapes = {out.shape, inputs[k].shape};
        const std::array<std::string_view, 2> names = {"output", "input"};
        NaryPlan plan;
        LOOM_RETURN_IF_ERROR(plan_nary(bi.name, shapes, names, &plan));
        const T* in = static_cast<const T*>(inputs[k].data);
        if (k == 0) {
          for_each_nary(plan, [&](int64_t i, const auto& off) { o[i] = in[off[1]]; });
        } else {
          for_each_nary(plan, [&](int64_t i, const auto& off) {
            o[i] = store<T>(apply<op, C>(load(o[i]), load(in[off[1]]), p, flags));
          });
        }
      }
      if constexpr (op == Bin::kMean) {
        const size_t n = count_of(out);
        const C div = static_cast<C>(inputs.size());
        for (size_t i = 0; i < n; ++i) o[i] = store<T>(load(o[i]) / div);
      }
    }
    return Status();
  });
}

template <Bin op>
Result<std::vector<TensorType>> binary_infer(std::span<const TensorType> inputs,
                                             const Attributes& attrs) {
  constexpr BinInfo bi = info(op);
  if constexpr (bi.variadic) {
    LOOM_RETURN_IF_ERROR(check_variadic_arity(bi.name, inputs.size()));
  } else {
    LOOM_RETURN_IF_ERROR(check_arity(bi.name, inputs.size(), 2, 2, 1, 1));
  }
  const DType dtype = inputs[0].dtype;
  LOOM_RETURN_IF_ERROR(check_type(bi.name, bi.types, "input 0", dtype));
  Shape shape = inputs[0].shape;
  LOOM_RETURN_IF_ERROR(check_infer_shape(bi.name, "input 0", shape));
  for (size_t k = 1; k < inputs.size(); ++k) {
    const std::string name = "input " + std::to_string(k);
    LOOM_RETURN_IF_ERROR(check_dtype(bi.name, name, inputs[k].dtype, dtype));
    LOOM_RETURN_IF_ERROR(check_infer_shape(bi.name, name, inputs[k].shape));
    std::array<int64_t, kMaxKernelRank> slope_storage;
    const std::span<const int64_t> other =
        op == Bin::kPRelu
            ? prelu_slope_shape(attrs, inputs[0].shape, inputs[1].shape, slope_storage)
            : std::span<const int64_t>(inputs[k].shape);
    LOOM_ASSIGN_OR_RETURN(shape, broadcast_shape(
                              bi.name, k == 1 ? (op == Bin::kPRelu ? "X" : "A") : "the earlier inputs",
                              shape, k == 1 ? (op == Bin::kPRelu ? "slope" : "B") : name, other));
  }
  if (op == Bin::kPRelu && shape != inputs[0].shape) {
    return invalid_argument("PRelu: slope " + shape_to_string(inputs[1].shape) +
                            " does not broadcast to X " + shape_to_string(inputs[0].shape));
  }
  LOOM_RETURN_IF_ERROR(read_params(op, dtype, attrs).status());
  return std::vector<TensorType>{{bi.bool_output ? DType::kBool : dtype, std::move(shape)}};
}

// ---------------------------------------------------------------- Pow

bool pow_takes(DType d) { return is_float_dtype(d) || is_int_dtype(d); }

Status pow_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
               const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Pow", inputs.size(), 2, 2, outputs.size(), 1));
  const TensorRef &x = inputs[0], &y = inputs[1], &z = outputs[0];
  LOOM_RETURN_IF_ERROR(check_operand("Pow", "X", x));
  LOOM_RETURN_IF_ERROR(check_operand("Pow", "Y", y));
  if (!pow_takes(x.dtype)) return unsupported_dtype("Pow", "X", x.dtype);
  if (!pow_takes(y.dtype)) return unsupported_dtype("Pow", "Y", y.dtype);
  LOOM_RETURN_IF_ERROR(check_operand("Pow", "Z", z, x.dtype));
  const std::array<std::span<const int64_t>, 2> shapes = {x.shape, y.shape};
  const std::array<std::string_view, 2> names = {"X", "Y"};
  NaryPlan plan;
  LOOM_RETURN_IF_ERROR(plan_nary("Pow", shapes, names, &plan));
  LOOM_RETURN_IF_ERROR(check_shape("Pow", "Z", z.shape, plan.shape()));
  return visit_dtype("Pow", x.dtype, [&]<typename T>() -> Status {
    if constexpr (!std::is_same_v<T, bool>) {
      return visit_dtype("Pow", y.dtype, [&]<typename U>() -> Status {
        if constexpr (!std::is_same_v<U, bool>) {
          const T* base = static_cast<const T*>(x.data);
          const U* exponent = static_cast<const U*>(y.data);
          T* out = static_cast<T*>(z.data);
          for_each_nary(plan, [&](int64_t i, const auto& off) {
            const double r = std::pow(static_cast<double>(load(base[off[0]])),
                                      static_cast<double>(load(exponent[off[1]])));
            if constexpr (is_floating<T>) {
              out[i] = store<T>(r);
            } else {
              out[i] = convert<T>(r);
            }
          });
        }
        return Status();
      });
    }
    return Status();
  });
}

Result<std::vector<TensorType>> pow_infer(std::span<const TensorType> inputs, const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Pow", inputs.size(), 2, 2, 1, 1));
  if (!pow_takes(inputs[0].dtype)) return unsupported_dtype("Pow", "X", inputs[0].dtype);
  if (!pow_takes(inputs[1].dtype)) return unsupported_dtype("Pow", "Y", inputs[1].dtype);
  LOOM_ASSIGN_OR_RETURN(Shape shape,
                        broadcast_shape("Pow", "X", inputs[0].shape, "Y", inputs[1].shape));
  LOOM_RETURN_IF_ERROR(check_infer_shape("Pow", "Z", shape));
  return std::vector<TensorType>{{inputs[0].dtype, std::move(shape)}};
}

// ---------------------------------------------------------------- Where

Status where_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                 const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Where", inputs.size(), 3, 3, outputs.size(), 1));
  const TensorRef &cond = inputs[0], &x = inputs[1], &y = inputs[2], &out = outputs[0];
  LOOM_RETURN_IF_ERROR(check_operand("Where", "condition", cond, DType::kBool));
  LOOM_RETURN_IF_ERROR(check_operand("Where", "X", x));
  LOOM_RETURN_IF_ERROR(check_operand("Where", "Y", y, x.dtype));
  LOOM_RETURN_IF_ERROR(check_operand("Where", "output", out, x.dtype));
  const std::array<std::span<const int64_t>, 3> shapes = {cond.shape, x.shape, y.shape};
  const std::array<std::string_view, 3> names = {"condition", "X", "Y"};
  NaryPlan plan;
  LOOM_RETURN_IF_ERROR(plan_nary("Where", shapes, names, &plan));
  LOOM_RETURN_IF_ERROR(check_shape("Where", "output", out.shape, plan.shape()));
  const size_t es = dtype_size(x.dtype);
  // Read as bytes: a bool object holding anything but 0/1 would be UB.
  const auto* c = static_cast<const uint8_t*>(cond.data);
  const auto* xs = static_cast<const std::byte*>(x.data);
  const auto* ys = static_cast<const std::byte*>(y.data);
  auto* o = static_cast<std::byte*>(out.data);
  for_each_nary(plan, [&](int64_t i, const auto& off) {
    const std::byte* src = c[off[0]] != 0 ? xs + off[1] * es : ys + off[2] * es;
    std::memcpy(o + i * es, src, es);
  });
  return Status();
}

Result<std::vector<TensorType>> where_infer(std::span<const TensorType> inputs,
                                            const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Where", inputs.size(), 3, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype("Where", "condition", inputs[0].dtype, DType::kBool));
  if (dtype_size(inputs[1].dtype) == 0) return unsupported_dtype("Where", "X", inputs[1].dtype);
  LOOM_RETURN_IF_ERROR(check_dtype("Where", "Y", inputs[2].dtype, inputs[1].dtype));
  const std::array<Shape, 3> shapes = {inputs[0].shape, inputs[1].shape, inputs[2].shape};
  const std::array<std::string_view, 3> names = {"condition", "X", "Y"};
  LOOM_ASSIGN_OR_RETURN(Shape shape, nary_shape("Where", shapes, names));
  return std::vector<TensorType>{{inputs[1].dtype, std::move(shape)}};
}

template <Bin op>
void add(KernelRegistry& r) {
  if constexpr (info(op).variadic) {
    r.add({info(op).name, &variadic_run<op>, &binary_infer<op>});
  } else {
    r.add({info(op).name, &binary_run<op>, &binary_infer<op>});
  }
}

}  // namespace

void register_binary(KernelRegistry& r) {
  add<Bin::kAdd>(r);
  add<Bin::kSub>(r);
  add<Bin::kMul>(r);
  add<Bin::kDiv>(r);
  add<Bin::kMod>(r);
  add<Bin::kBitShift>(r);
  add<Bin::kEqual>(r);
  add<Bin::kLess>(r);
  add<Bin::kGreater>(r);
  add<Bin::kLessOrEqual>(r);
  add<Bin::kGreaterOrEqual>(r);
  add<Bin::kAnd>(r);
  add<Bin::kOr>(r);
  add<Bin::kXor>(r);
  add<Bin::kPRelu>(r);
  add<Bin::kMax>(r);
  add<Bin::kMin>(r);
  add<Bin::kSum>(r);
  add<Bin::kMean>(r);
  r.add({"Pow", &pow_run, &pow_infer});
  r.add({"Where", &where_run, &where_infer});
}

}  // namespace loom::kernels::elementwise
