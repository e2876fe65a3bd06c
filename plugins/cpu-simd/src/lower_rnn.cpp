// Lowering of the recurrent operators (blob format 9): ONNX LSTM, GRU and
// RNN each become one kLstm / kGru / kRnn node writing a packed tensor
// (blob_rnn_rules.hpp) and the Slice / Copy nodes that read Y, Y_h (and
// LSTM's Y_c) out of it.
//
// Declined (the node runs elsewhere, with the reason): opsets before 7
// (output_sequence), activations other than ONNX's defaults (LSTM Sigmoid,
// Tanh, Tanh; GRU Sigmoid, Tanh; RNN Tanh) or with alpha / beta, graphs with
// open dimensions. Bad input that no
// kernel runs (W, R, B, sequence_lens, initial_h/c or P of the wrong shape,
// hidden_size that disagrees with W and R, an unknown direction, a clip that
// is not positive, sequence_lens outside [0, seq] given inline) is claimed
// so that compile fails with one line naming the node.
#include <string>

#include "lowering.hpp"

namespace loom::cpu_simd::lowering {
namespace {

// One ONNX output of the LSTM: a Slice of the packed tensor along the time
// axis [start, start + len), then, for Y_h and Y_c, a Copy dropping that
// axis (scratch tensor `scratch` in between).
bool add_rnn_part(Lowering& l, size_t output, const Shape& packed, int64_t time_axis, int64_t start,
                  int64_t len, uint32_t scratch, const Shape& declared_want) {
  const std::string names[3] = {"Y", "Y_h", "Y_c"};
  if (!l.output_ok(output, gfb::DType::f32)) return false;
  const Shape declared = l.output_shape(output);
  if (declared != declared_want) {
    return l.invalid("output " + names[output] + " is declared " + detail::shape_string(declared) + ", expected " +
                     detail::shape_string(declared_want));
  }
  const uint32_t target = static_cast<uint32_t>(l.output_index(output));
  BlobNode& slice = l.add_node();
  slice.op = Op::kSlice;
  slice.inputs = {kScratchTensor};
  const size_t rank = packed.size();
  Shape dims = packed;
  dims[static_cast<size_t>(time_axis)] = len;
  slice.ints.assign(3 * rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    slice.ints[d] = d == static_cast<size_t>(time_axis) ? start : 0;
    slice.ints[rank + d] = 1;
    slice.ints[2 * rank + d] = dims[d];
  }
  if (output == 0) {
    slice.outputs = {target};
    return true;
  }
  slice.outputs = {scratch};
  BlobNode& copy = l.add_node();
  copy.op = Op::kCopy;
  copy.inputs = {scratch};
  copy.outputs = {target};
  return true;
}

}  // namespace

bool lower_recurrent(Lowering& l, Op op) {
  const bool lstm = op == Op::kLstm, gru = op == Op::kGru;
  const std::string name = op_name(op);
  if (l.opset() < 7) return l.fail("opset " + std::to_string(l.opset()) + " (output_sequence) is not supported");
  const bool attrs_ok =
      lstm ? l.check_attributes({{"activation_alpha", 7}, {"activation_beta", 7}, {"activations", 7}, {"clip", 7},
                                 {"direction", 7}, {"hidden_size", 7}, {"input_forget", 7}, {"layout", 14}})
      : gru ? l.check_attributes({{"activation_alpha", 7}, {"activation_beta", 7}, {"activations", 7}, {"clip", 7},
                                  {"direction", 7}, {"hidden_size", 7}, {"linear_before_reset", 7}, {"layout", 14}})
            : l.check_attributes({{"activation_alpha", 7}, {"activation_beta", 7}, {"activations", 7}, {"clip", 7},
                                  {"direction", 7}, {"hidden_size", 7}, {"layout", 14}});
  const size_t max_inputs = lstm ? 8 : 6;
  if (!attrs_ok || !l.check_inputs(3, max_inputs)) return false;
  if (l.open_graph()) return l.fail("the graph has open dimensions; cpu-simd runs " + name + " on static shapes only");
  std::string direction;
  int64_t hidden = -1, input_forget = 0, layout = 0;
  float clip = 0;
  const char* flag = lstm ? "input_forget" : "linear_before_reset";
  if (!l.get_string("direction", "forward", &direction) || !l.get_int("hidden_size", -1, &hidden) ||
      !l.get_int(flag, 0, &input_forget) || !l.get_int("layout", 0, &layout)) {
    return false;
  }
  int64_t dir_code = 0;
  if (direction == "forward") {
    dir_code = 0;
  } else if (direction == "reverse") {
    dir_code = 1;
  } else if (direction == "bidirectional") {
    dir_code = 2;
  } else {
    return l.invalid("attribute 'direction' is '" + direction + "', expected forward, reverse or bidirectional");
  }
  const int64_t dirs = dir_code == 2 ? 2 : 1;
  if (input_forget != 0 && input_forget != 1) {
    return l.invalid(std::string("attribute '") + flag + "' is " + std::to_string(input_forget) + ", expected 0 or 1");
  }
  if (layout != 0 && layout != 1) return l.invalid("attribute 'layout' is " + std::to_string(layout) + ", expected 0 or 1");
  const bool has_clip = l.has("clip");
  if (has_clip) {
    if (!l.get_float("clip", 0, &clip)) return false;
    if (!(clip > 0) || !std::isfinite(clip)) return l.invalid("attribute 'clip' is " + std::to_string(clip) + ", expected a positive finite value");
  }
  if (l.has("activation_alpha") || l.has("activation_beta")) {
    return l.fail("activation_alpha / activation_beta: cpu-simd runs the default activations only");
  }
  if (const auto* a = l.view().find_attribute("activations")) {
    if (a->kind() != gfb::AttributeKind::strings || a->strings() == nullptr) {
      return l.invalid("attribute 'activations' is not a list of strings");
    }
    const std::vector<std::string> defaults = lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                              : gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                    : std::vector<std::string>{"Tanh"};
    const size_t per_dir = defaults.size();
    const size_t n = a->strings()->size();
    if (n != per_dir && n != per_dir * static_cast<size_t>(dirs)) {
      return l.invalid("attribute 'activations' has " + std::to_string(n) + " entries, expected " +
                       std::to_string(per_dir) + " or " + std::to_string(per_dir * static_cast<size_t>(dirs)));
    }
    for (size_t i = 0; i < n; ++i) {
      const std::string act = a->strings()->Get(static_cast<flatbuffers::uoffset_t>(i))->str();
      if (act != defaults[i % per_dir]) {
        std::string list;
        for (const std::string& d : defaults) list += (list.empty() ? "" : ", ") + d;
        return l.fail("activation '" + act + "' at " + std::to_string(i) + ": cpu-simd runs the default activations (" +
                      list + ") only");
      }
    }
  }

  // Operands: X, W, R and the optional ones that are present.
  if (!l.data(0) || !l.data(1) || !l.data(2)) return false;
  int mask = 0;
  for (size_t i = 3; i < l.input_count() && i < max_inputs; ++i) {
    if (!l.present(i)) continue;
    mask |= 1 << (i - 3);
    if (i != 4) {
      if (!l.data(i)) return false;
      continue;
    }
    // sequence_lens: i32, a graph input, an earlier node's output or an
    // inline constant (the blob embeds i32 constants).
    if (l.dtype_of(4) != gfb::DType::i32) {
      return l.invalid(std::string("input 4 (sequence_lens) is ") + gfb::EnumNameDType(l.dtype_of(4)) + ", expected i32");
    }
    l.node().inputs.push_back(static_cast<uint32_t>(l.input(4)));
  }
  const Shape x = l.shape_of(0), r = l.shape_of(2);
  if (hidden < 0) {
    // hidden_size is optional: R is [dirs, gates * hidden, hidden].
    if (r.size() != 3) return l.invalid("R is " + detail::shape_string(r) + ", expected rank 3");
    hidden = r[2];
  } else if (r.size() == 3 && r[2] != hidden) {
    const int64_t gates = lstm ? 4 : gru ? 3 : 1;
    return l.invalid("attribute 'hidden_size' is " + std::to_string(hidden) + " but R is " + detail::shape_string(r) +
                     " (expected [" + std::to_string(dirs) + ", " + std::to_string(gates * hidden) + ", " +
                     std::to_string(hidden) + "])");
  }
  BlobNode& n = l.node();
  n.op = op;
  n.trans_a = mask;
  n.ints = {dir_code, layout, hidden, input_forget};
  if (has_clip) n.floats = {clip};
  n.outputs = {kScratchTensor};
  // The shapes, checked with the blob rule (one message per operand).
  std::vector<Shape> shapes;
  for (size_t i = 0; i < l.input_count(); ++i) {
    if (l.present(i)) shapes.push_back(l.shape_of(i));
  }
  std::vector<const Shape*> in;
  for (const Shape& s : shapes) in.push_back(&s);
  Shape packed;
  std::string error;
  RnnForm form;
  if (!rnn_form(n, in, &form, &packed, &error)) return l.invalid(error);
  if (mask & 2) {
    sdk::TensorView t(nullptr, -1);
    if (l.view().constant_input(4, &t).ok()) {
      // Known now: checked here; otherwise before every run.
      const auto* v = reinterpret_cast<const int32_t*>(t.data());
      for (int64_t b = 0; b < form.batch; ++b) {
        int32_t len;
        std::memcpy(&len, v + b, sizeof len);
        if (len < 0 || len > form.seq) {
          return l.invalid("sequence_lens holds " + std::to_string(len) + " at batch " + std::to_string(b) +
                           "; each length must lie in [0, " + std::to_string(form.seq) + "]");
        }
      }
    }
  }
  bool any_output = false;
  for (size_t o = 0; o < l.output_count(); ++o) any_output = any_output || l.has_output(o);
  if (!any_output) return l.fail("has no output");
  const size_t max_outputs = lstm ? 3 : 2;
  if (l.output_count() > max_outputs) {
    return l.fail("has " + std::to_string(l.output_count()) + " outputs, expected at most " + std::to_string(max_outputs));
  }
  const int64_t t_axis = layout == 0 ? 0 : 1;
  const Shape y_want = layout == 0 ? Shape{form.seq, dirs, form.batch, hidden} : Shape{form.batch, form.seq, dirs, hidden};
  const Shape state_want = layout == 0 ? Shape{dirs, form.batch, hidden} : Shape{form.batch, dirs, hidden};
  uint32_t next_scratch = kScratchTensor + 1;
  for (size_t o = 0; o < l.output_count(); ++o) {
    if (!l.has_output(o)) continue;
    const int64_t start = o == 0 ? 0 : form.seq + static_cast<int64_t>(o) - 1;
    if (!add_rnn_part(l, o, packed, t_axis, start, o == 0 ? form.seq : 1, next_scratch, o == 0 ? y_want : state_want)) {
      return false;
    }
    if (o > 0) ++next_scratch;
  }
  return true;
}

}  // namespace loom::cpu_simd::lowering
