// Format 9's LSTM on the plugin, compiled through its compile entries from a
// graph.fbs LSTM node, against loom_kernels' reference LSTM on random
// weights: every direction, both layouts, with and without bias,
// sequence_lens, initial states, peepholes, clip and input_forget, and each
// subset of the outputs Y / Y_h / Y_c. What cpu-simd declines (other
// activations, activation_alpha) is left unclaimed; bad input (W / R / B / P
// / initial_h of the wrong shape, hidden_size that disagrees with R, an
// unknown direction) is one compile error naming the node; a sequence_lens
// value outside [0, seq] bound at run time is an execute error naming the
// node. Blob-level: format 9 only, each attribute and the present mask
// checked by decode with a named error.
//
// Tolerance: |got - want| <= 2e-5 + 2e-5 |want|. The reference kernel sums in
// double; the plugin sums each gate's W x + R h (at most I + H = 40 terms
// here, |terms| < 1) in f32 with FMA, about 40 * 2^-24 < 3e-6 in the worst
// case, and its exp-based sigmoid / tanh are within a few ulp
// (vec_math.hpp). Sigmoid and tanh have slopes at most 1/4 and 1, and the
// cell's forget gate is below 1, so an error does not grow along the steps
// beyond its sum over the (at most 7) steps: about 2e-5 at worst.
#include "cpu_simd_plugin_fixture.hpp"
#include <functional>

#include "graph_builder.hpp"

namespace loom::cpu_simd {
namespace {

using ::loom::testing::attr_f;
using ::loom::testing::attr_i;
using ::loom::testing::attr_s;
using ::loom::testing::attr_strings;

struct LstmCase {
  Op cell = Op::kLstm;  // kLstm, kGru or kRnn (GRU: input_forget is linear_before_reset)
  int direction = 0;  // 0 forward, 1 reverse, 2 bidirectional
  int layout = 0;
  bool bias = false, lens = false, init_h = false, init_c = false, peep = false, clip = false,
       input_forget = false;
  bool y = true, y_h = true, y_c = true;
  // W, R and B inline constants (a model's initializers) rather than graph
  // inputs: the form oneDNN's lstm_forward takes where it can.
  bool constant_weights = false;
  int64_t seq = 5, batch = 3, input = 7, hidden = 9;
};

std::string describe_lstm(const LstmCase& c) {
  const char* dirs[] = {"forward", "reverse", "bidirectional"};
  std::string s = std::string(op_name(c.cell)) + " " + dirs[c.direction] + " layout " + std::to_string(c.layout);
  if (c.bias) s += " B";
  if (c.lens) s += " sequence_lens";
  if (c.init_h) s += " initial_h";
  if (c.init_c) s += " initial_c";
  if (c.peep) s += " P";
  if (c.clip) s += " clip";
  if (c.input_forget) s += c.cell == Op::kGru ? " linear_before_reset" : " input_forget";
  if (c.constant_weights) s += " constant weights";
  s += std::string(" outputs") + (c.y ? " Y" : "") + (c.y_h ? " Y_h" : "") + (c.y_c ? " Y_c" : "");
  return s;
}

Tensor uniform_lstm(const Dims& s, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(count_of(s));
  for (float& x : v) x = dist(rng);
  return Tensor(s, std::move(v));
}

class CpuSimdLstm : public CpuSimdPlugin {
 protected:
  struct Built {
    ::loom::testing::GraphBuilder graph;
    // X, W, R, [B], [initial_h], [initial_c], [P], and which are graph inputs.
    std::vector<Tensor> values;
    std::vector<bool> is_input;
    // Graph inputs in order: an index into `values`, or -1 for sequence_lens.
    std::vector<int> order;
    std::vector<int32_t> lens;
    Dims y_shape, state_shape;
  };

  Built build(const LstmCase& c, std::mt19937& rng) {
    Built b;
    const int64_t d = c.direction == 2 ? 2 : 1, h = c.hidden;
    const int64_t gates = c.cell == Op::kLstm ? 4 : c.cell == Op::kGru ? 3 : 1;
    const bool lstm = c.cell == Op::kLstm;
    const Dims x_shape = c.layout == 0 ? Dims{c.seq, c.batch, c.input} : Dims{c.batch, c.seq, c.input};
    b.y_shape = c.layout == 0 ? Dims{c.seq, d, c.batch, h} : Dims{c.batch, c.seq, d, h};
    b.state_shape = c.layout == 0 ? Dims{d, c.batch, h} : Dims{c.batch, d, h};
    auto& g = b.graph;
    std::vector<int32_t> ins;
    auto add = [&](const Dims& s, float scale, bool constant = false) {
      b.values.push_back(uniform_lstm(s, scale, rng));
      b.is_input.push_back(!constant);
      if (constant) {
        ins.push_back(g.constant_f32(s, b.values.back().data));
      } else {
        ins.push_back(g.input(s));
        b.order.push_back(static_cast<int>(b.values.size() - 1));
      }
    };
    add(x_shape, 1.0f);
    add({d, gates * h, c.input}, 0.4f, c.constant_weights);
    add({d, gates * h, h}, 0.4f, c.constant_weights);
    const int32_t none = -1;
    if (c.bias) add({d, 2 * gates * h}, 0.5f, c.constant_weights); else ins.push_back(none);
    if (c.lens) {
      b.order.push_back(-1);
      ins.push_back(g.input({c.batch}, ::loom::graph::fb::DType::i32));
      std::uniform_int_distribution<int32_t> len(0, static_cast<int32_t>(c.seq));
      for (int64_t i = 0; i < c.batch; ++i) b.lens.push_back(i == 0 ? static_cast<int32_t>(c.seq) : len(rng));
    } else {
      ins.push_back(none);
    }
    if (c.init_h) add(b.state_shape, 1.0f); else ins.push_back(none);
    if (lstm && c.init_c) add(b.state_shape, 1.0f); else ins.push_back(none);
    if (lstm && c.peep) add({d, 3 * h}, 0.5f); else ins.push_back(none);
    while (!ins.empty() && ins.back() == none) ins.pop_back();
    std::vector<int32_t> outs = {c.y ? g.tensor(b.y_shape) : none, c.y_h ? g.tensor(b.state_shape) : none,
                                 lstm && c.y_c ? g.tensor(b.state_shape) : none};
    while (outs.back() == none) outs.pop_back();
    const char* dirs[] = {"forward", "reverse", "bidirectional"};
    std::vector<::loom::testing::Attr> attrs = {attr_i("hidden_size", h), attr_s("direction", dirs[c.direction]),
                                                attr_i("layout", c.layout)};
    if (c.clip) attrs.push_back(attr_f("clip", 0.7f));
    if (c.input_forget) attrs.push_back(attr_i(c.cell == Op::kGru ? "linear_before_reset" : "input_forget", 1));
    g.node(op_name(c.cell), ins, outs, attrs, 14);
    for (int32_t o : outs) {
      if (o != none) g.output(o);
    }
    return b;
  }

  // The reference kernel's Y, Y_h, Y_c.
  std::vector<Tensor> reference(const LstmCase& c, Built& b) {
    const char* dirs[] = {"forward", "reverse", "bidirectional"};
    std::vector<AttributeDef> attrs(3);
    attrs[0].name = "hidden_size";
    attrs[0].i = c.hidden;
    attrs[1].name = "direction";
    attrs[1].kind = AttributeKind::kString;
    attrs[1].s = dirs[c.direction];
    attrs[2].name = "layout";
    attrs[2].i = c.layout;
    if (c.clip) {
      AttributeDef a;
      a.name = "clip";
      a.kind = AttributeKind::kFloat;
      a.f = 0.7f;
      attrs.push_back(a);
    }
    if (c.input_forget) {
      AttributeDef a;
      a.name = c.cell == Op::kGru ? "linear_before_reset" : "input_forget";
      a.i = 1;
      attrs.push_back(a);
    }
    const bool lstm = c.cell == Op::kLstm;
    std::vector<kernels::TensorRef> refs(lstm ? 8 : 6);
    size_t k = 0;
    refs[0] = b.values[k++].ref();
    refs[1] = b.values[k++].ref();
    refs[2] = b.values[k++].ref();
    if (c.bias) refs[3] = b.values[k++].ref();
    const Dims lens_shape = {c.batch};
    if (c.lens) refs[4] = kernels::TensorRef{DType::kI32, lens_shape, b.lens.data(), b.lens.size() * 4};
    if (c.init_h) refs[5] = b.values[k++].ref();
    if (lstm && c.init_c) refs[6] = b.values[k++].ref();
    if (lstm && c.peep) refs[7] = b.values[k++].ref();
    std::vector<Tensor> want = {zero_tensor(b.y_shape), zero_tensor(b.state_shape), zero_tensor(b.state_shape)};
    std::vector<kernels::TensorRef> outs = {want[0].ref(), want[1].ref()};
    if (lstm) outs.push_back(want[2].ref());
    const auto registry = kernels::KernelRegistry::reference();
    Status s = registry.find(op_name(c.cell))->run(refs, outs, kernels::Attributes(attrs, 14));
    EXPECT_TRUE(s.ok()) << s.to_string();
    return want;
  }

  // Compiles, checks the blob holds one LSTM node (format 9), runs it; the
  // error of execute or "ok".
  std::string compile_and_run(const LstmCase& c, Built& b, std::vector<Tensor>* got) {
    ::loom::testing::CompiledBlob compiled;
    const std::string s = harness_.compile(plugin_, b.graph.finish(), &compiled);
    if (s != "ok") return "compile: " + s;
    BlobGraph g;
    std::string error;
    EXPECT_TRUE(decode(compiled.bytes.data(), compiled.bytes.size(), &g, &error)) << error;
    EXPECT_EQ(compiled.format_version, 9u);
    size_t cells = 0;
    for (const BlobNode& n : g.nodes) cells += n.op == c.cell;
    EXPECT_EQ(cells, 1u);
    loom_executable_t* exe = load(compiled.bytes, &error, compiled.format_version);
    EXPECT_NE(exe, nullptr) << error;
    if (exe == nullptr) return "load: " + error;
    std::vector<const loom_tensor_t*> ins;
    loom_tensor_t lens_desc{};
    const Dims lens_shape = {c.batch};
    for (int i : b.order) {
      if (i < 0) {
        lens_desc = ::loom::testing::host_tensor(LOOM_DTYPE_I32, lens_shape, b.lens.data(), b.lens.size() * 4);
        ins.push_back(&lens_desc);
        continue;
      }
      b.values[static_cast<size_t>(i)].refresh();
      ins.push_back(&b.values[static_cast<size_t>(i)].desc);
    }
    got->clear();
    std::vector<const loom_tensor_t*> outs;
    const bool present[3] = {c.y, c.y_h, c.y_c && c.cell == Op::kLstm};
    for (int o = 0; o < 3; ++o) {
      Tensor t(o == 0 ? b.y_shape : b.state_shape,
               std::vector<float>(count_of(o == 0 ? b.y_shape : b.state_shape), 1234.5f));
      got->push_back(t);
    }
    for (int o = 0; o < 3; ++o) {
      (*got)[static_cast<size_t>(o)].refresh();
      if (present[o]) outs.push_back(&(*got)[static_cast<size_t>(o)].desc);
    }
    const std::string r = execute(exe, ins, outs);
    api_->executable_destroy(exe);
    return r;
  }

  void check(const LstmCase& c, uint32_t seed) {
    SCOPED_TRACE(describe_lstm(c));
    std::mt19937 rng(seed);
    Built b = build(c, rng);
    std::vector<Tensor> want = reference(c, b);
    std::vector<Tensor> got;
    ASSERT_EQ(compile_and_run(c, b, &got), "ok");
    const bool present[3] = {c.y, c.y_h, c.y_c && c.cell == Op::kLstm};
    const char* names[3] = {"Y", "Y_h", "Y_c"};
    for (int o = 0; o < 3; ++o) {
      if (!present[o]) continue;
      const std::vector<float>& g = got[static_cast<size_t>(o)].data;
      const std::vector<float>& w = want[static_cast<size_t>(o)].data;
      ASSERT_EQ(g.size(), w.size());
      float worst = 0;
      size_t nonzero = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const float err = std::fabs(g[i] - w[i]);
        worst = std::max(worst, err);
        nonzero += w[i] != 0.0f;
        ASSERT_LE(err, 2e-5f + 2e-5f * std::fabs(w[i])) << names[o] << " element " << i << ": " << g[i]
                                                         << " vs " << w[i];
      }
      // The outputs say something: most entries are not zero.
      EXPECT_GT(nonzero, g.size() / 3) << names[o];
      max_error_ = std::max(max_error_, worst);
    }
  }

  float max_error_ = 0;
};

TEST_F(CpuSimdLstm, EveryDirectionLayoutAndOptionMatchesTheReferenceKernel) {
  uint32_t seed = 100;
  for (int direction = 0; direction < 3; ++direction) {
    for (int layout = 0; layout < 2; ++layout) {
      LstmCase plain;
      plain.direction = direction;
      plain.layout = layout;
      check(plain, seed++);
      LstmCase all = plain;
      all.bias = all.lens = all.init_h = all.init_c = all.peep = true;
      check(all, seed++);
      LstmCase clipped = all;
      clipped.clip = true;
      clipped.lens = false;
      check(clipped, seed++);
      LstmCase forget = plain;
      forget.input_forget = forget.bias = forget.init_c = true;
      check(forget, seed++);
    }
  }
  // W, R and B constants: forward and reverse with initial states take
  // oneDNN's lstm_forward; the other forms the plugin's own loops.
  for (int direction = 0; direction < 3; ++direction) {
    for (int layout = 0; layout < 2; ++layout) {
      LstmCase c;
      c.direction = direction;
      c.layout = layout;
      c.constant_weights = true;
      check(c, seed++);
      c.bias = c.init_h = c.init_c = true;
      check(c, seed++);
      c.seq = 1;
      c.batch = 1;
      check(c, seed++);
      c.y = false;
      check(c, seed++);
    }
  }
  // Each option alone, forward and bidirectional.
  for (int option = 0; option < 7; ++option) {
    for (int direction : {0, 2}) {
      LstmCase c;
      c.direction = direction;
      bool* flags[] = {&c.bias, &c.lens, &c.init_h, &c.init_c, &c.peep, &c.clip, &c.input_forget};
      *flags[option] = true;
      check(c, seed++);
    }
  }
  // Output subsets; one time step, batch 1 (the streaming form).
  for (int mask = 1; mask < 8; ++mask) {
    LstmCase c;
    c.y = mask & 1;
    c.y_h = mask & 2;
    c.y_c = mask & 4;
    c.init_h = c.init_c = c.bias = true;
    check(c, seed++);
    c.seq = 1;
    c.batch = 1;
    c.direction = 1;
    check(c, seed++);
  }
  std::cout << "LSTM: largest difference from the reference kernel " << max_error_ << "\n";
}

TEST_F(CpuSimdLstm, GruAndRnnMatchTheReferenceKernel) {
  uint32_t seed = 500;
  for (Op cell : {Op::kGru, Op::kRnn}) {
    for (int direction = 0; direction < 3; ++direction) {
      for (int layout = 0; layout < 2; ++layout) {
        LstmCase plain;
        plain.cell = cell;
        plain.direction = direction;
        plain.layout = layout;
        check(plain, seed++);
        LstmCase all = plain;
        all.bias = all.lens = all.init_h = true;
        check(all, seed++);
        all.clip = true;
        all.input_forget = cell == Op::kGru;  // linear_before_reset
        check(all, seed++);
        all.lens = false;
        all.constant_weights = true;
        check(all, seed++);
      }
    }
    for (int mask = 1; mask < 4; ++mask) {
      LstmCase c;
      c.cell = cell;
      c.y = mask & 1;
      c.y_h = mask & 2;
      c.init_h = c.bias = true;
      c.seq = 1;
      c.batch = 1;
      check(c, seed++);
    }
  }
  std::cout << "GRU, RNN: largest difference from the reference kernel " << max_error_ << "\n";
}

TEST_F(CpuSimdLstm, OtherActivationsAreDeclinedTheDefaultsSpelledOutAreNot) {
  std::mt19937 rng(7);
  auto claimed = [&](std::vector<::loom::testing::Attr> extra) {
    LstmCase c;
    c.direction = 2;
    Built b = build(c, rng);
    for (auto& a : extra) b.graph.nodes[0].attrs.push_back(a);
    std::vector<bool> flags;
    EXPECT_EQ(harness_.supported(plugin_, b.graph.finish(), 1, &flags), "ok");
    return !flags.empty() && flags[0];
  };
  EXPECT_TRUE(claimed({}));
  EXPECT_TRUE(claimed({attr_strings("activations", {"Sigmoid", "Tanh", "Tanh"})}));
  EXPECT_TRUE(claimed({attr_strings("activations", {"Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh"})}));
  EXPECT_FALSE(claimed({attr_strings("activations", {"Sigmoid", "Relu", "Tanh"})}));
  EXPECT_FALSE(claimed({attr_strings("activations", {"Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Tanh", "Tanh"})}));
  auto alpha = attr_f("activation_alpha", 0.5f);
  EXPECT_FALSE(claimed({alpha}));
  // GRU's defaults are Sigmoid, Tanh; RNN's Tanh.
  auto claimed_cell = [&](Op cell, std::vector<std::string> acts) {
    LstmCase c;
    c.cell = cell;
    Built b = build(c, rng);
    b.graph.nodes[0].attrs.push_back(attr_strings("activations", std::move(acts)));
    std::vector<bool> flags;
    EXPECT_EQ(harness_.supported(plugin_, b.graph.finish(), 1, &flags), "ok");
    return !flags.empty() && flags[0];
  };
  EXPECT_TRUE(claimed_cell(Op::kGru, {"Sigmoid", "Tanh"}));
  EXPECT_FALSE(claimed_cell(Op::kGru, {"Sigmoid", "Relu"}));
  EXPECT_TRUE(claimed_cell(Op::kRnn, {"Tanh"}));
  EXPECT_FALSE(claimed_cell(Op::kRnn, {"Relu"}));
}

TEST_F(CpuSimdLstm, BadShapesAndAttributesAreOneCompileErrorNamingTheNode) {
  std::mt19937 rng(8);
  auto compile_error = [&](const std::function<void(Built&)>& breaks) {
    LstmCase c;
    c.bias = c.init_h = c.peep = true;
    Built b = build(c, rng);
    breaks(b);
    ::loom::testing::CompiledBlob compiled;
    return harness_.compile(plugin_, b.graph.finish(), &compiled);
  };
  // Inputs in graph order: X, W, R, B, initial_h, P (tensors 0, 1, 2, 3, 4, 5).
  const std::string prefix = "node n0 (LSTM) is not supported by cpu-simd: ";
  std::string s = compile_error([](Built& b) { b.graph.tensors[1].shape = {1, 35, 7}; });
  EXPECT_NE(s.find(prefix + "LSTM: W is [1, 35, 7], expected [1, 36, 7]"), std::string::npos) << s;
  s = compile_error([](Built& b) { b.graph.tensors[2].shape = {1, 36, 8}; });
  EXPECT_NE(s.find(prefix + "attribute 'hidden_size' is 9 but R is [1, 36, 8]"), std::string::npos) << s;
  s = compile_error([](Built& b) { b.graph.tensors[3].shape = {1, 36}; });
  EXPECT_NE(s.find(prefix + "LSTM: B is [1, 36], expected [1, 72]"), std::string::npos) << s;
  s = compile_error([](Built& b) { b.graph.tensors[4].shape = {1, 2, 9}; });
  EXPECT_NE(s.find(prefix + "LSTM: initial_h is [1, 2, 9], expected [1, 3, 9]"), std::string::npos) << s;
  s = compile_error([](Built& b) { b.graph.tensors[5].shape = {1, 9}; });
  EXPECT_NE(s.find(prefix + "LSTM: P is [1, 9], expected [1, 27]"), std::string::npos) << s;
  s = compile_error([](Built& b) { b.graph.nodes[0].attrs[1] = attr_s("direction", "sideways"); });
  EXPECT_NE(s.find(prefix + "attribute 'direction' is 'sideways'"), std::string::npos) << s;
  s = compile_error([](Built& b) {
    b.graph.nodes[0].op = "GRU";  // W is [1, 36, 7], an LSTM's
    b.graph.nodes[0].inputs.resize(3);
  });
  EXPECT_NE(s.find("node n0 (GRU) is not supported by cpu-simd: GRU: W is [1, 36, 7], expected [1, 27, 7]"),
            std::string::npos)
      << s;
  s = compile_error([](Built& b) { b.graph.nodes[0].attrs.push_back(attr_f("clip", -1.0f)); });
  EXPECT_NE(s.find(prefix + "attribute 'clip' is -1.000000"), std::string::npos) << s;
  // One line each.
  EXPECT_EQ(s.find('\n'), std::string::npos) << s;
}

TEST_F(CpuSimdLstm, ASequenceLengthOutOfRangeIsAnExecuteErrorNamingTheNode) {
  std::mt19937 rng(9);
  LstmCase c;
  c.lens = true;
  Built b = build(c, rng);
  b.lens[1] = 6;  // seq is 5
  std::vector<Tensor> got;
  const std::string s = compile_and_run(c, b, &got);
  EXPECT_NE(s.find("node 0 (LSTM): sequence_lens holds 6 at batch 1; each length must lie in [0, 5]"),
            std::string::npos)
      << s;
}

TEST_F(CpuSimdLstm, TheBlobChecksEveryLstmField) {
  // X [2, 1, 3], W [1, 8, 3], R [1, 8, 2] -> packed [4, 1, 1, 2].
  BlobGraph g;
  for (const Dims& s : {Dims{2, 1, 3}, Dims{1, 8, 3}, Dims{1, 8, 2}}) {
    BlobTensor t;
    t.shape = s;
    g.tensors.push_back(t);
    g.inputs.push_back(static_cast<uint32_t>(g.tensors.size() - 1));
  }
  BlobTensor y;
  y.shape = {4, 1, 1, 2};
  g.tensors.push_back(y);
  g.outputs = {3};
  BlobNode n;
  n.op = Op::kLstm;
  n.inputs = {0, 1, 2};
  n.outputs = {3};
  n.ints = {0, 0, 2, 0};
  g.nodes = {n};
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_EQ(format_version_for(g), 9u);
  const std::vector<std::byte> bytes = encode(g);
  BlobGraph back;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &back, &error)) << error;
  // Format 8 has no LSTM.
  const std::vector<std::byte> v8 = encode(g, 8);
  EXPECT_FALSE(decode(v8.data(), v8.size(), &back, &error));
  EXPECT_NE(error.find("operator 59 for format 8"), std::string::npos) << error;
  auto refused = [&](const std::function<void(BlobGraph&)>& breaks, const std::string& want) {
    BlobGraph bad = g;
    breaks(bad);
    std::string why;
    EXPECT_FALSE(validate(bad, &why)) << want;
    EXPECT_NE(why.find(want), std::string::npos) << why;
  };
  refused([](BlobGraph& b) { b.nodes[0].ints = {0, 0, 2}; }, "LSTM: ints must be [direction, layout, hidden_size, input_forget]");
  refused([](BlobGraph& b) { b.nodes[0].ints[0] = 3; }, "LSTM: direction 3 is not 0");
  refused([](BlobGraph& b) { b.nodes[0].ints[1] = 2; }, "LSTM: layout 2 is not 0 or 1");
  refused([](BlobGraph& b) { b.nodes[0].ints[2] = 0; }, "LSTM: hidden_size 0 is not in [1, 2^20]");
  refused([](BlobGraph& b) { b.nodes[0].ints[3] = 5; }, "LSTM: input_forget 5 is not 0 or 1");
  refused([](BlobGraph& b) { b.nodes[0].floats = {-1.0f}; }, "LSTM: clip -1.000000 is not positive and finite");
  refused([](BlobGraph& b) { b.nodes[0].trans_a = 1; }, "LSTM: present mask 1 names 4 inputs, the node has 3");
  refused([](BlobGraph& b) { b.nodes[0].trans_a = 64; }, "LSTM: present mask (trans_a) 64 is not in [0, 31]");
  refused([](BlobGraph& b) { b.tensors[3].shape = {3, 1, 1, 2}; }, "but the operator produces [4, 1, 1, 2]");
  refused([](BlobGraph& b) { b.tensors[2].shape = {1, 8, 3}; }, "LSTM: R is [1, 8, 3], expected [1, 8, 2]");
  refused([](BlobGraph& b) { b.tensors[0].dtype = LOOM_DTYPE_I32; }, "LSTM: input 0 is i32, expected f32");
  // The same X as a GRU (W [1, 6, 3], R [1, 6, 2], output [3, 1, 1, 2]) and
  // as an RNN.
  BlobGraph gru = g;
  gru.nodes[0].op = Op::kGru;
  gru.tensors[1].shape = {1, 6, 3};
  gru.tensors[2].shape = {1, 6, 2};
  gru.tensors[3].shape = {3, 1, 1, 2};
  ASSERT_TRUE(validate(gru, &error)) << error;
  gru.nodes[0].ints[3] = 1;  // linear_before_reset
  ASSERT_TRUE(validate(gru, &error)) << error;
  gru.nodes[0].trans_a = 8;
  EXPECT_FALSE(validate(gru, &error));
  EXPECT_NE(error.find("GRU: present mask (trans_a) 8 is not in [0, 7]"), std::string::npos) << error;
  gru.nodes[0].trans_a = 0;
  gru.nodes[0].op = Op::kRnn;
  EXPECT_FALSE(validate(gru, &error));
  EXPECT_NE(error.find("RNN: ints[3] 1 is not 0"), std::string::npos) << error;
  gru.nodes[0].ints[3] = 0;
  EXPECT_FALSE(validate(gru, &error));
  EXPECT_NE(error.find("RNN: W is [1, 6, 3], expected [1, 2, 3]"), std::string::npos) << error;
  gru.tensors[1].shape = {1, 2, 3};
  gru.tensors[2].shape = {1, 2, 2};
  EXPECT_TRUE(validate(gru, &error)) << error;
}

}  // namespace
}  // namespace loom::cpu_simd
