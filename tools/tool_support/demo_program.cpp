#include "tool_support/demo_program.hpp"

#include <iterator>
#include <random>
#include <utility>

#include "tool_support/program_builder.hpp"
#include "loom/irpa.hpp"
#include "loom/tensor_metadata.hpp"
#include "loom/cpu_simd/blob_format.hpp"

namespace loom::tools {
namespace {

Tensor random_tensor(Shape shape, float scale, std::mt19937_64& rng) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape)).value();
  std::uniform_real_distribution<float> dist(-scale, scale);
  float* p = t.data_as<float>();
  for (uint64_t i = 0; i < t.element_count(); ++i) p[i] = dist(rng);
  return t;
}

AttributeDef int_attr(std::string name, int64_t v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}

}  // namespace

Tensor mlp_input(const MlpShape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return random_tensor({s.batch, s.in}, 1.0f, rng);
}

std::vector<NamedWeight> mlp_weights(const MlpShape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<NamedWeight> out;
  out.push_back({"w1", random_tensor({s.in, s.hidden}, 0.2f, rng)});
  out.push_back({"b1", random_tensor({s.hidden}, 0.1f, rng)});
  out.push_back({"w2", random_tensor({s.hidden, s.out}, 0.2f, rng)});
  out.push_back({"b2", random_tensor({s.out}, 0.1f, rng)});
  return out;
}

Result<ProgramWriter> build_mlp_program(const MlpShape& s, uint64_t seed, bool with_delegate) {
  MlpOptions options;
  options.with_delegate = with_delegate;
  LOOM_ASSIGN_OR_RETURN(MlpProgram program, build_mlp(s, mlp_weights(s, seed), options));
  return std::move(program.writer);
}

Result<MlpProgram> build_mlp(const MlpShape& s, const std::vector<NamedWeight>& weights,
                             const MlpOptions& options) {
  const std::pair<const char*, Shape> expected[] = {
      {"w1", {s.in, s.hidden}}, {"b1", {s.hidden}}, {"w2", {s.hidden, s.out}}, {"b2", {s.out}}};
  if (weights.size() != std::size(expected)) {
    return invalid_argument("the demo MLP takes 4 weights (w1, b1, w2, b2), got " +
                            std::to_string(weights.size()));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& t = weights[i].tensor;
    if (weights[i].name != expected[i].first || t.dtype() != DType::kF32 ||
        t.shape() != expected[i].second) {
      return invalid_argument("demo MLP weight " + std::to_string(i) + " is '" +
                              weights[i].name + "' " + std::string(dtype_name(t.dtype())) + " " +
                              shape_to_string(t.shape()) + ", expected '" + expected[i].first +
                              "' f32 " + shape_to_string(expected[i].second));
    }
  }

  ProgramBuilder b("loom demo");
  MlpProgram out;
  io::irpa::ArchiveBuilder archive;
  std::vector<uint32_t> params;
  for (const NamedWeight& w : weights) {
    if (!options.external_weights) {
      params.push_back(b.add_parameter(w.name, w.tensor));
      continue;
    }
    ArchiveRef where{options.scope, options.archive};
    params.push_back(options.record_checksums
                         ? b.add_external_parameter(w.name, w.tensor, where)
                         : b.add_external_parameter(w.name, w.tensor.dtype(), w.tensor.shape(),
                                                    where));
    std::string metadata = io::encode_tensor_metadata(w.tensor.dtype(), w.tensor.shape());
    LOOM_RETURN_IF_ERROR(archive.add_data(w.name, w.tensor.bytes(), std::move(metadata)));
  }
  if (options.external_weights) {
    LOOM_ASSIGN_OR_RETURN(out.archive, archive.write_buffer());
  }
  const uint32_t w1 = params[0], b1 = params[1], w2 = params[2], b2 = params[3];
  const bool with_delegate = options.with_delegate;

  if (with_delegate) {
  // The cpu-simd blob: tensors 0..4 are the delegate's inputs (x, w1, b1, w2,
  // b2), 5..9 its intermediates and result.
  namespace cs = loom::cpu_simd;
  cs::BlobGraph g;
  auto t = [&](std::vector<int64_t> shape) {
    g.tensors.push_back(cs::BlobTensor{LOOM_DTYPE_F32, std::move(shape)});
    return static_cast<uint32_t>(g.tensors.size() - 1);
  };
  uint32_t tx = t({s.batch, s.in}), tw1 = t({s.in, s.hidden}), tb1 = t({s.hidden});
  uint32_t tw2 = t({s.hidden, s.out}), tb2 = t({s.out});
  uint32_t th = t({s.batch, s.hidden}), th1 = t({s.batch, s.hidden}), tr = t({s.batch, s.hidden});
  uint32_t tz = t({s.batch, s.out}), tz1 = t({s.batch, s.out}), ty = t({s.batch, s.out});
  g.inputs = {tx, tw1, tb1, tw2, tb2};
  g.outputs = {ty};
  auto node = [&](cs::Op op, std::vector<uint32_t> in, std::vector<uint32_t> out) {
    cs::BlobNode n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    g.nodes.push_back(std::move(n));
  };
  node(cs::Op::kMatMul, {tx, tw1}, {th});
  node(cs::Op::kAdd, {th, tb1}, {th1});
  node(cs::Op::kRelu, {th1}, {tr});
  node(cs::Op::kMatMul, {tr, tw2}, {tz});
  node(cs::Op::kAdd, {tz, tb2}, {tz1});
  node(cs::Op::kSoftmax, {tz1}, {ty});
  std::vector<std::byte> blob = cs::encode(g);
  uint32_t cpu = b.add_artifact("cpu-simd", cs::kFormatVersion, "mlp.cpu-simd", blob);
  uint32_t mlp = b.add_delegate("mlp", {cpu});

  {
    FunctionBuilder f = b.add_function("main");
    uint32_t x = f.input("x", DType::kF32, {s.batch, s.in});
    uint32_t y = f.value("y", DType::kF32, {s.batch, s.out});
    f.delegate_call(mlp, {x, f.constant(w1), f.constant(b1), f.constant(w2), f.constant(b2)},
                    {y});
    f.output(y);
  }
  }
  {
    FunctionBuilder f = b.add_function("reference");
    uint32_t x = f.input("x", DType::kF32, {s.batch, s.in});
    uint32_t h = f.value("h", DType::kF32, {s.batch, s.hidden});
    uint32_t h1 = f.value("h1", DType::kF32, {s.batch, s.hidden});
    uint32_t r = f.value("r", DType::kF32, {s.batch, s.hidden});
    uint32_t z = f.value("z", DType::kF32, {s.batch, s.out});
    uint32_t z1 = f.value("z1", DType::kF32, {s.batch, s.out});
    uint32_t y = f.value("y", DType::kF32, {s.batch, s.out});
    f.kernel_call("MatMul", {x, f.constant(w1)}, {h});
    f.kernel_call("Add", {h, f.constant(b1)}, {h1});
    f.kernel_call("Relu", {h1}, {r});
    f.kernel_call("MatMul", {r, f.constant(w2)}, {z});
    f.kernel_call("Add", {z, f.constant(b2)}, {z1});
    f.kernel_call("Softmax", {z1}, {y}, {int_attr("axis", -1)});
    f.output(y);
  }
  LOOM_ASSIGN_OR_RETURN(out.writer, b.finish());
  return out;
}

Result<ProgramWriter> build_single_op_program(int64_t n) {
  namespace cs = loom::cpu_simd;
  ProgramBuilder b("loom benchmark");
  cs::BlobGraph g;
  g.tensors.push_back(cs::BlobTensor{LOOM_DTYPE_F32, {n}});
  g.tensors.push_back(cs::BlobTensor{LOOM_DTYPE_F32, {n}});
  g.inputs = {0};
  g.outputs = {1};
  cs::BlobNode relu;
  relu.op = cs::Op::kRelu;
  relu.inputs = {0};
  relu.outputs = {1};
  g.nodes.push_back(relu);
  std::vector<std::byte> blob = cs::encode(g);
  uint32_t art = b.add_artifact("cpu-simd", cs::kFormatVersion, "relu.cpu-simd", blob);
  uint32_t d = b.add_delegate("relu", {art});
  FunctionBuilder f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {n});
  uint32_t y = f.value("y", DType::kF32, {n});
  f.delegate_call(d, {x}, {y});
  f.output(y);
  return b.finish();
}

}  // namespace loom::tools
