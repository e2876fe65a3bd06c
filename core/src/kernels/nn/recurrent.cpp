// RNN, GRU and LSTM (opsets 1 to 14) on f32 operands.
//
// One walk serves the three: per direction and batch element, the state H
// (and LSTM's cell C) starts at initial_h/initial_c or zero and steps through
// the batch element's sequence_lens[b] time steps (all of X's when absent),
// forward or from the last valid step back. Each step computes the gates of
// the spec's equations (W's rows in the spec's gate order: RNN i; GRU z, r,
// h; LSTM i, o, f, c; P's in i, o, f) in double, writes H into Y at the
// time step's position, and the state after the last step is Y_h (Y_c).
// Steps past a batch element's length leave zeros in Y.
//
// Activations: f (RNN: f; GRU: f, g; LSTM: f, g, h) per direction, from the
// attribute 'activations' (one list for every direction, or one per
// direction) or the spec's defaults. 'activation_alpha' and
// 'activation_beta' are consumed in order by the activations that take the
// parameter (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid,
// Elu; beta: Affine, ScaledTanh, HardSigmoid); one they do not reach takes
// the default of the ONNX operator of the same name. 'clip' bounds every
// gate's input before its activation (not the cell state before h).
//
// 'layout' 1 (opset 14) puts the batch first: X [batch, seq, input], Y
// [batch, seq, dirs, hidden], initial_h/Y_h [batch, dirs, hidden].
// Before opset 7, LSTM/GRU/RNN had an 'output_sequence' attribute that only
// said whether Y is wanted; Loom computes Y whenever the node names it.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

enum class Cell { kRnn, kGru, kLstm };

struct CellSpec {
  Cell cell;
  std::string_view op;
  int64_t gates;        // rows of W per hidden unit
  size_t activations;   // activation functions per direction
  size_t max_inputs;
  size_t max_outputs;
};

constexpr CellSpec kRnnSpec{Cell::kRnn, "RNN", 1, 1, 6, 2};
constexpr CellSpec kGruSpec{Cell::kGru, "GRU", 3, 2, 6, 2};
constexpr CellSpec kLstmSpec{Cell::kLstm, "LSTM", 4, 3, 8, 3};

constexpr std::array<std::string_view, 8> kInputNames = {
    "X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
constexpr std::array<std::string_view, 3> kOutputNames = {"Y", "Y_h", "Y_c"};

enum class ActFn {
  kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid,
  kElu, kSoftsign, kSoftplus
};

struct Activation {
  ActFn fn = ActFn::kTanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (fn) {
      case ActFn::kRelu: return x > 0 ? x : 0.0;
      case ActFn::kTanh: return std::tanh(x);
      case ActFn::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case ActFn::kAffine: return alpha * x + beta;
      case ActFn::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case ActFn::kThresholdedRelu: return x > alpha ? x : 0.0;
      case ActFn::kScaledTanh: return alpha * std::tanh(beta * x);
      case ActFn::kHardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
      case ActFn::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case ActFn::kSoftsign: return x / (1.0 + std::fabs(x));
      case ActFn::kSoftplus: return x > 30 ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

struct ActInfo {
  std::string_view name;
  ActFn fn;
  bool takes_alpha, takes_beta;
  double alpha, beta;  // the defaults of the ONNX operator of that name
};

constexpr std::array<ActInfo, 11> kActivations = {{
    {"relu", ActFn::kRelu, false, false, 0, 0},
    {"tanh", ActFn::kTanh, false, false, 0, 0},
    {"sigmoid", ActFn::kSigmoid, false, false, 0, 0},
    {"affine", ActFn::kAffine, true, true, 1.0, 0.0},
    {"leakyrelu", ActFn::kLeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", ActFn::kThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", ActFn::kScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", ActFn::kHardSigmoid, true, true, 0.2, 0.5},
    {"elu", ActFn::kElu, true, false, 1.0, 0},
    {"softsign", ActFn::kSoftsign, false, false, 0, 0},
    {"softplus", ActFn::kSoftplus, false, false, 0, 0},
}};

struct CellParams {
  int64_t hidden = 0;  // 0: take it from R
  int64_t dirs = 1;
  bool reverse = false;  // direction 'reverse' (one direction, backwards)
  bool batch_first = false;
  bool input_forget = false;
  bool linear_before_reset = false;
  double clip = std::numeric_limits<double>::infinity();
  std::vector<Activation> acts;  // dirs * spec.activations
};

Result<CellParams> cell_params(const CellSpec& spec, const Attributes& a) {
  const std::string op(spec.op);
  CellParams p;
  const AttributeDef* hs = a.find("hidden_size");
  if (hs != nullptr) {
    if (hs->kind != AttributeKind::kInt || hs->i <= 0) {
      return invalid_argument(op + ": attribute 'hidden_size' must be a positive integer");
    }
    p.hidden = hs->i;
  }
  const std::string_view dir = a.get_string("direction", "forward");
  if (dir == "forward") {
  } else if (dir == "reverse") {
    p.reverse = true;
  } else if (dir == "bidirectional") {
    p.dirs = 2;
  } else {
    return invalid_argument(op + ": attribute 'direction' is '" + std::string(dir) +
                            "'; expected forward, reverse or bidirectional");
  }
  const int64_t layout = a.get_int("layout", 0);
  if (layout != 0 && layout != 1) {
    return invalid_argument(op + ": attribute 'layout' must be 0 or 1, got " + std::to_string(layout));
  }
  p.batch_first = layout == 1;
  if (const AttributeDef* c = a.find("clip")) {
    if (c->kind != AttributeKind::kFloat || !(c->f > 0)) {
      return invalid_argument(op + ": attribute 'clip' must be a positive float");
    }
    p.clip = c->f;
  }
  if (spec.cell == Cell::kLstm) {
    const int64_t v = a.get_int("input_forget", 0);
    if (v != 0 && v != 1) return invalid_argument(op + ": attribute 'input_forget' must be 0 or 1");
    p.input_forget = v == 1;
  }
  if (spec.cell == Cell::kGru) p.linear_before_reset = a.get_int("linear_before_reset", 0) != 0;

  std::vector<std::string> names;
  if (const AttributeDef* acts = a.find("activations"); acts != nullptr && acts->kind == AttributeKind::kStrings) {
    names = acts->strings;
  }
  if (names.empty()) {
    const std::array<std::string_view, 3> defaults =
        spec.cell == Cell::kRnn ? std::array<std::string_view, 3>{"tanh"}
        : spec.cell == Cell::kGru ? std::array<std::string_view, 3>{"sigmoid", "tanh"}
                                  : std::array<std::string_view, 3>{"sigmoid", "tanh", "tanh"};
    for (size_t i = 0; i < spec.activations; ++i) names.emplace_back(defaults[i]);
  }
  const size_t want = spec.activations * static_cast<size_t>(p.dirs);
  if (names.size() == spec.activations && want > names.size()) {
    for (size_t i = 0; i < spec.activations; ++i) names.push_back(names[i]);
  }
  if (names.size() != want) {
    return invalid_argument(op + ": attribute 'activations' has " + std::to_string(names.size()) +
                            " names; " + std::to_string(p.dirs) + " direction(s) need " + std::to_string(want));
  }
  const std::vector<float> alphas = a.get_floats("activation_alpha");
  const std::vector<float> betas = a.get_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const auto it = std::find_if(kActivations.begin(), kActivations.end(),
                                 [&](const ActInfo& info) { return info.name == lower; });
    if (it == kActivations.end()) {
      return invalid_argument(op + ": attribute 'activations' names '" + name +
                              "', which is not an activation the spec lists (Relu, Tanh, Sigmoid, Affine, "
                              "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    }
    Activation act{it->fn, it->alpha, it->beta};
    if (it->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (it->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    p.acts.push_back(act);
  }
  return p;
}

struct Operand {
  bool present = false;
  DType dtype = DType::kInvalid;
  std::span<const int64_t> shape;
};

struct CellDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
};

Status want_shape(std::string_view op, std::string_view name, std::span<const int64_t> got,
                  std::initializer_list<int64_t> want, std::string_view why) {
  if (!std::equal(got.begin(), got.end(), want.begin(), want.end())) {
    return invalid_argument(std::string(op) + ": input '" + std::string(name) + "' has shape " +
                            shape_to_string(got) + "; expected " + shape_to_string(std::vector<int64_t>(want)) +
                            " (" + std::string(why) + ")");
  }
  return Status();
}

// Checks every operand's dtype and shape against X, W, R and the attributes.
Result<CellDims> cell_dims(const CellSpec& spec, CellParams& p, std::span<const Operand> in) {
  const std::string op(spec.op);
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present) {
      if (i < 3) return invalid_argument(op + ": input '" + std::string(kInputNames[i]) + "' is required");
      continue;
    }
    LOOM_RETURN_IF_ERROR(check_dtype(spec.op, kInputNames[i], in[i].dtype,
                                     {i == 4 ? DType::kI32 : DType::kF32}));
    const size_t rank = i == 3 || i == 4 || i == 7 ? (i == 4 ? 1 : 2) : 3;
    if (in[i].shape.size() != rank) {
      return invalid_argument(op + ": input '" + std::string(kInputNames[i]) + "' must have rank " +
                              std::to_string(rank) + ", got shape " + shape_to_string(in[i].shape));
    }
  }
  CellDims d;
  const auto x = in[0].shape, w = in[1].shape, r = in[2].shape;
  d.seq = p.batch_first ? x[1] : x[0];
  d.batch = p.batch_first ? x[0] : x[1];
  d.input = x[2];
  d.dirs = p.dirs;
  d.hidden = p.hidden != 0 ? p.hidden : r[2];
  if (d.hidden <= 0) return invalid_argument(op + ": input 'R' gives hidden size " + std::to_string(d.hidden));
  p.hidden = d.hidden;
  const int64_t rows = spec.gates * d.hidden;
  const std::string why = std::to_string(d.dirs) + " direction(s), " + std::to_string(spec.gates) +
                          " gate(s) of hidden_size " + std::to_string(d.hidden);
  LOOM_RETURN_IF_ERROR(want_shape(spec.op, "W", w, {d.dirs, rows, d.input}, why + ", input size of X"));
  LOOM_RETURN_IF_ERROR(want_shape(spec.op, "R", r, {d.dirs, rows, d.hidden}, why));
  if (in.size() > 3 && in[3].present) {
    LOOM_RETURN_IF_ERROR(want_shape(spec.op, "B", in[3].shape, {d.dirs, 2 * rows}, why));
  }
  if (in.size() > 4 && in[4].present) {
    LOOM_RETURN_IF_ERROR(want_shape(spec.op, "sequence_lens", in[4].shape, {d.batch}, "the batch size of X"));
  }
  for (size_t i = 5; i < 7 && i < in.size(); ++i) {
    if (!in[i].present) continue;
    if (p.batch_first) {
      LOOM_RETURN_IF_ERROR(want_shape(spec.op, kInputNames[i], in[i].shape, {d.batch, d.dirs, d.hidden},
                                      "layout 1: batch, directions, hidden_size"));
    } else {
      LOOM_RETURN_IF_ERROR(want_shape(spec.op, kInputNames[i], in[i].shape, {d.dirs, d.batch, d.hidden},
                                      "directions, batch, hidden_size"));
    }
  }
  if (in.size() > 7 && in[7].present) {
    LOOM_RETURN_IF_ERROR(want_shape(spec.op, "P", in[7].shape, {d.dirs, 3 * d.hidden}, why));
  }
  if (d.seq < 0 || d.batch < 0 || d.input < 0) {
    return invalid_argument(op + ": input 'X' has shape " + shape_to_string(x));
  }
  return d;
}

std::vector<Shape> output_shapes(const CellSpec& spec, const CellParams& p, const CellDims& d) {
  std::vector<Shape> s;
  s.push_back(p.batch_first ? Shape{d.batch, d.seq, d.dirs, d.hidden} : Shape{d.seq, d.dirs, d.batch, d.hidden});
  const Shape state = p.batch_first ? Shape{d.batch, d.dirs, d.hidden} : Shape{d.dirs, d.batch, d.hidden};
  for (size_t i = 1; i < spec.max_outputs; ++i) s.push_back(state);
  return s;
}

Result<std::vector<TensorType>> cell_infer(const CellSpec& spec, std::span<const TensorType> in,
                                           const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(spec.op, in.size(), 3, spec.max_inputs, 1, 1));
  LOOM_ASSIGN_OR_RETURN(CellParams p, cell_params(spec, a));
  std::vector<Operand> ops;
  for (const TensorType& t : in) ops.push_back({t.dtype != DType::kInvalid, t.dtype, t.shape});
  LOOM_ASSIGN_OR_RETURN(CellDims d, cell_dims(spec, p, ops));
  std::vector<TensorType> out;
  for (Shape& s : output_shapes(spec, p, d)) {
    LOOM_RETURN_IF_ERROR(checked_count(spec.op, "Y", s).status());
    out.push_back({DType::kF32, std::move(s)});
  }
  return out;
}

double dot(const float* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(a[k]) * b[k];
  return s;
}

Status cell_run(const CellSpec& spec, std::span<const TensorRef> in, std::span<const TensorRef> out,
                const Attributes& a) {
  const std::string op(spec.op);
  if (in.size() < 3 || in.size() > spec.max_inputs || out.empty() || out.size() > spec.max_outputs) {
    return invalid_argument(op + ": takes 3 to " + std::to_string(spec.max_inputs) + " inputs and 1 to " +
                            std::to_string(spec.max_outputs) + " outputs, got " + std::to_string(in.size()) +
                            " and " + std::to_string(out.size()));
  }
  LOOM_ASSIGN_OR_RETURN(CellParams p, cell_params(spec, a));
  std::vector<Operand> ops;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].present()) LOOM_RETURN_IF_ERROR(check_data(spec.op, kInputNames[i], in[i]));
    ops.push_back({in[i].present(), in[i].dtype, in[i].shape});
  }
  LOOM_ASSIGN_OR_RETURN(CellDims d, cell_dims(spec, p, ops));
  const std::vector<Shape> shapes = output_shapes(spec, p, d);
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].present()) continue;
    LOOM_RETURN_IF_ERROR(check_operand(spec.op, kOutputNames[i], out[i], {DType::kF32}));
    LOOM_RETURN_IF_ERROR(check_output_shape(spec.op, kOutputNames[i], out[i].shape, shapes[i]));
  }
  auto opt = [&](size_t i) { return i < in.size() && in[i].present() ? in[i].data : nullptr; };
  const auto* seq_lens = static_cast<const int32_t*>(opt(4));
  if (seq_lens != nullptr) {
    for (int64_t b = 0; b < d.batch; ++b) {
      if (seq_lens[b] < 0 || seq_lens[b] > d.seq) {
        return invalid_argument(op + ": input 'sequence_lens' holds " + std::to_string(seq_lens[b]) +
                                " at batch " + std::to_string(b) + "; each length must lie in [0, " +
                                std::to_string(d.seq) + "] (the sequence length of X)");
      }
    }
  }
  const int64_t h_n = d.hidden, g_n = spec.gates, rows = g_n * h_n;
  const float* x = in_data(in[0]);
  const float* w = in_data(in[1]);
  const float* r = in_data(in[2]);
  const auto* bias = static_cast<const float*>(opt(3));
  const auto* init_h = static_cast<const float*>(opt(5));
  const auto* init_c = static_cast<const float*>(opt(6));
  const auto* peep = static_cast<const float*>(opt(7));
  float* y = out[0].present() ? out_data(out[0]) : nullptr;
  float* y_h = out.size() > 1 && out[1].present() ? out_data(out[1]) : nullptr;
  float* y_c = out.size() > 2 && out[2].present() ? out_data(out[2]) : nullptr;
  if (y != nullptr) std::fill(y, y + d.seq * d.dirs * d.batch * h_n, 0.0f);

  auto x_at = [&](int64_t t, int64_t b) { return x + (p.batch_first ? b * d.seq + t : t * d.batch + b) * d.input; };
  auto state_at = [&](int64_t dir, int64_t b) { return (p.batch_first ? b * d.dirs + dir : dir * d.batch + b) * h_n; };
  auto y_at = [&](int64_t t, int64_t dir, int64_t b) {
    return (p.batch_first ? (b * d.seq + t) * d.dirs + dir : (t * d.dirs + dir) * d.batch + b) * h_n;
  };
  auto clip = [&](double v) { return std::clamp(v, -p.clip, p.clip); };

  std::vector<double> h(h_n), c(h_n), xw(rows), hr(rows), rh(h_n);
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    const bool backwards = p.reverse || dir == 1;
    const float* wd = w + dir * rows * d.input;
    const float* rd = r + dir * rows * h_n;
    const float* wb = bias != nullptr ? bias + dir * 2 * rows : nullptr;
    const float* rb = wb != nullptr ? wb + rows : nullptr;
    const float* pd = peep != nullptr ? peep + dir * 3 * h_n : nullptr;
    const Activation* act = p.acts.data() + dir * spec.activations;
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t j = 0; j < h_n; ++j) {
        h[j] = init_h != nullptr ? init_h[state_at(dir, b) + j] : 0.0;
        c[j] = init_c != nullptr ? init_c[state_at(dir, b) + j] : 0.0;
      }
      const int64_t len = seq_lens != nullptr ? seq_lens[b] : d.seq;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = backwards ? len - 1 - s : s;
        const float* xt = x_at(t, b);
        for (int64_t row = 0; row < rows; ++row) {
          double v = 0;
          for (int64_t k = 0; k < d.input; ++k) v += static_cast<double>(xt[k]) * wd[row * d.input + k];
          xw[row] = v + (wb != nullptr ? wb[row] : 0.0);
          hr[row] = dot(rd + row * h_n, h.data(), h_n) + (rb != nullptr ? rb[row] : 0.0);
        }
        switch (spec.cell) {
          case Cell::kRnn:
            for (int64_t j = 0; j < h_n; ++j) h[j] = act[0](clip(xw[j] + hr[j]));
            break;
          case Cell::kGru: {
            // Rows: z [0, H), r [H, 2H), h [2H, 3H).
            std::vector<double>& z = c;  // GRU has no cell state: c holds z.
            for (int64_t j = 0; j < h_n; ++j) {
              z[j] = act[0](clip(xw[j] + hr[j]));
              rh[j] = act[0](clip(xw[h_n + j] + hr[h_n + j]));  // r
            }
            std::vector<double> cand(h_n);
            for (int64_t j = 0; j < h_n; ++j) {
              const int64_t row = 2 * h_n + j;
              double rec;
              if (p.linear_before_reset) {
                rec = rh[j] * hr[row];
              } else {
                double v = 0;
                for (int64_t k = 0; k < h_n; ++k) v += static_cast<double>(rd[row * h_n + k]) * rh[k] * h[k];
                rec = v + (rb != nullptr ? rb[row] : 0.0);
              }
              cand[j] = act[1](clip(xw[row] + rec));
            }
            for (int64_t j = 0; j < h_n; ++j) h[j] = (1 - z[j]) * cand[j] + z[j] * h[j];
            break;
          }
          case Cell::kLstm:
            // Rows: i [0, H), o [H, 2H), f [2H, 3H), c [3H, 4H); P: i, o, f.
            for (int64_t j = 0; j < h_n; ++j) {
              const double c_prev = c[j];
              const double i_g = act[0](clip(xw[j] + hr[j] + (pd != nullptr ? pd[j] * c_prev : 0.0)));
              const double f_g = p.input_forget
                                     ? 1.0 - i_g
                                     : act[0](clip(xw[2 * h_n + j] + hr[2 * h_n + j] +
                                                   (pd != nullptr ? pd[2 * h_n + j] * c_prev : 0.0)));
              const double c_g = act[1](clip(xw[3 * h_n + j] + hr[3 * h_n + j]));
              c[j] = f_g * c_prev + i_g * c_g;
              const double o_g =
                  act[0](clip(xw[h_n + j] + hr[h_n + j] + (pd != nullptr ? pd[h_n + j] * c[j] : 0.0)));
              h[j] = o_g * act[2](c[j]);
            }
            break;
        }
        if (y != nullptr) {
          for (int64_t j = 0; j < h_n; ++j) y[y_at(t, dir, b) + j] = static_cast<float>(h[j]);
        }
      }
      for (int64_t j = 0; j < h_n; ++j) {
        if (y_h != nullptr) y_h[state_at(dir, b) + j] = static_cast<float>(h[j]);
        if (y_c != nullptr) y_c[state_at(dir, b) + j] = static_cast<float>(c[j]);
      }
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<TensorType>> rnn_infer(std::span<const TensorType> in, const Attributes& a) {
  return cell_infer(kRnnSpec, in, a);
}
Status rnn_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  return cell_run(kRnnSpec, in, out, a);
}
Result<std::vector<TensorType>> gru_infer(std::span<const TensorType> in, const Attributes& a) {
  return cell_infer(kGruSpec, in, a);
}
Status gru_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  return cell_run(kGruSpec, in, out, a);
}
Result<std::vector<TensorType>> lstm_infer(std::span<const TensorType> in, const Attributes& a) {
  return cell_infer(kLstmSpec, in, a);
}
Status lstm_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  return cell_run(kLstmSpec, in, out, a);
}

}  // namespace loom::kernels::nn
