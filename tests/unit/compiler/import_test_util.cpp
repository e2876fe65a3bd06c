#include "import_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/util.hpp"

namespace loom::compiler::testing {

namespace fx = loom::testing::onnx_fixtures;
using kernels::Attributes;
using kernels::TensorRef;
using kernels::TensorType;

namespace {

void fill_type(::onnx::ValueInfoProto* v, const std::string& name, int32_t elem_type,
               const std::vector<int64_t>& dims, bool no_shape) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  if (no_shape) return;
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    if (dims[i] >= 0) {
      d->set_dim_value(dims[i]);
    } else {
      d->set_dim_param("d" + std::to_string(i));
    }
  }
}

std::vector<int64_t> ints_ref(const TensorRef& t) {
  auto v = kernels::read_ints("test", "ints", t);
  return v.ok() ? *v : std::vector<int64_t>{};
}

// Gather: axis 0 only, any element type.
Result<std::vector<TensorType>> gather_infer(std::span<const TensorType> in, const Attributes&) {
  if (in.size() != 2 || in[0].shape.empty()) return invalid_argument("Gather(test): bad operands");
  Shape s = in[1].shape;
  s.insert(s.end(), in[0].shape.begin() + 1, in[0].shape.end());
  return std::vector<TensorType>{{in[0].dtype, s, nullptr}};
}
Status gather_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes&) {
  const size_t es = dtype_size(in[0].dtype);
  size_t row = es;
  for (size_t i = 1; i < in[0].shape.size(); ++i) row *= static_cast<size_t>(in[0].shape[i]);
  const std::vector<int64_t> idx = ints_ref(in[1]);
  for (size_t k = 0; k < idx.size(); ++k) {
    int64_t i = idx[k] < 0 ? idx[k] + in[0].shape[0] : idx[k];
    if (i < 0 || i >= in[0].shape[0]) return invalid_argument("Gather(test): index out of range");
    std::memcpy(static_cast<std::byte*>(out[0].data) + k * row,
                static_cast<const std::byte*>(in[0].data) + static_cast<size_t>(i) * row, row);
  }
  return Status();
}

// Unsqueeze with `axes` as an input (opset 13).
Result<std::vector<TensorType>> unsqueeze_infer(std::span<const TensorType> in, const Attributes&) {
  if (in.size() != 2) return invalid_argument("Unsqueeze(test): axes must be an input");
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, kernels::constant_ints("Unsqueeze", 1, "axes", in[1]));
  Shape s = in[0].shape;
  std::sort(axes.begin(), axes.end());
  for (int64_t a : axes) {
    if (a < 0 || a > static_cast<int64_t>(s.size())) return invalid_argument("Unsqueeze(test): axis");
    s.insert(s.begin() + a, 1);
  }
  return std::vector<TensorType>{{in[0].dtype, s, nullptr}};
}
Status copy_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes&) {
  if (in[0].byte_size != out[0].byte_size) return invalid_argument("copy(test): sizes differ");
  if (in[0].byte_size) std::memcpy(out[0].data, in[0].data, in[0].byte_size);
  return Status();
}

// Concat of 1-D tensors.
Result<std::vector<TensorType>> concat_infer(std::span<const TensorType> in, const Attributes&) {
  int64_t n = 0;
  for (const TensorType& t : in) {
    if (t.shape.size() != 1) return invalid_argument("Concat(test): 1-D only");
    n += t.shape[0];
  }
  return std::vector<TensorType>{{in[0].dtype, {n}, nullptr}};
}
Status concat_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes&) {
  size_t at = 0;
  for (const TensorRef& t : in) {
    if (t.byte_size) std::memcpy(static_cast<std::byte*>(out[0].data) + at, t.data, t.byte_size);
    at += t.byte_size;
  }
  return Status();
}

Result<std::vector<TensorType>> reshape_infer(std::span<const TensorType> in, const Attributes&) {
  if (in.size() != 2) return invalid_argument("Reshape(test): two operands");
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> shape, kernels::constant_ints("Reshape", 1, "shape", in[1]));
  LOOM_ASSIGN_OR_RETURN(uint64_t total, element_count(in[0].shape));
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && i < in[0].shape.size()) shape[i] = in[0].shape[i];
    if (shape[i] == -1) {
      infer_at = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer_at >= 0) shape[infer_at] = known ? static_cast<int64_t>(total) / known : 0;
  auto count = element_count(shape);
  if (!count.ok() || *count != total) return invalid_argument("Reshape(test): element count");
  return std::vector<TensorType>{{in[0].dtype, shape, nullptr}};
}

// Conv: 2-D, f32, no padding, stride 1, with group.
Result<std::vector<TensorType>> conv_infer(std::span<const TensorType> in, const Attributes&) {
  if (in.size() < 2) return invalid_argument("Conv(test): operands");
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  if (x.size() != 4 || w.size() != 4) return invalid_argument("Conv(test): 2-D only");
  return std::vector<TensorType>{{DType::kF32, {x[0], w[0], x[2] - w[2] + 1, x[3] - w[3] + 1}, nullptr}};
}
Status conv_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  const auto x = in[0].shape;
  const auto w = in[1].shape;
  const auto y = out[0].shape;
  const int64_t group = a.get_int("group", 1);
  const float* X = static_cast<const float*>(in[0].data);
  const float* W = static_cast<const float*>(in[1].data);
  const float* B = in.size() > 2 && in[2].present() ? static_cast<const float*>(in[2].data) : nullptr;
  float* Y = static_cast<float*>(out[0].data);
  const int64_t cin_g = w[1], m_g = w[0] / group;
  for (int64_t n = 0; n < y[0]; ++n)
    for (int64_t m = 0; m < y[1]; ++m)
      for (int64_t i = 0; i < y[2]; ++i)
        for (int64_t j = 0; j < y[3]; ++j) {
          double acc = B ? B[m] : 0.0;
          const int64_t g = m / m_g;
          for (int64_t c = 0; c < cin_g; ++c)
            for (int64_t p = 0; p < w[2]; ++p)
              for (int64_t q = 0; q < w[3]; ++q) {
                const int64_t xc = g * cin_g + c;
                acc += double(X[((n * x[1] + xc) * x[2] + i + p) * x[3] + j + q]) *
                       W[((m * cin_g + c) * w[2] + p) * w[3] + q];
              }
          Y[((n * y[1] + m) * y[2] + i) * y[3] + j] = static_cast<float>(acc);
        }
  return Status();
}

Result<std::vector<TensorType>> same_infer(std::span<const TensorType> in, const Attributes&) {
  if (in.size() != 5) return invalid_argument("BatchNormalization(test): five operands");
  return std::vector<TensorType>{{in[0].dtype, in[0].shape, nullptr}};
}
Status bn_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  const float eps = a.get_float("epsilon", 1e-5f);
  const auto x = in[0].shape;
  const float* X = static_cast<const float*>(in[0].data);
  const float* p[4];
  for (int i = 0; i < 4; ++i) p[i] = static_cast<const float*>(in[1 + i].data);
  float* Y = static_cast<float*>(out[0].data);
  int64_t inner = 1;
  for (size_t i = 2; i < x.size(); ++i) inner *= x[i];
  for (int64_t n = 0; n < x[0]; ++n)
    for (int64_t c = 0; c < x[1]; ++c)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t at = (n * x[1] + c) * inner + k;
        Y[at] = (X[at] - p[2][c]) / std::sqrt(p[3][c] + eps) * p[0][c] + p[1][c];
      }
  return Status();
}

}  // namespace

void add_input(::onnx::ModelProto& m, const std::string& name, int32_t elem_type,
               std::vector<int64_t> dims, bool no_shape) {
  fill_type(m.mutable_graph()->add_input(), name, elem_type, dims, no_shape);
}
void add_output(::onnx::ModelProto& m, const std::string& name, int32_t elem_type,
                std::vector<int64_t> dims) {
  fill_type(m.mutable_graph()->add_output(), name, elem_type, dims, false);
}
void add_value_info(::onnx::ModelProto& m, const std::string& name, int32_t elem_type,
                    std::vector<int64_t> dims) {
  fill_type(m.mutable_graph()->add_value_info(), name, elem_type, dims, false);
}

::onnx::NodeProto& add_node(::onnx::ModelProto& m, const std::string& op,
                            std::vector<std::string> inputs, std::vector<std::string> outputs,
                            const std::string& name) {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : inputs) n->add_input(i);
  for (auto& o : outputs) n->add_output(o);
  return *n;
}

void attr_int(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}
void attr_ints(::onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void attr_float(::onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void init_f32(::onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims,
              const std::vector<float>& v) {
  fx::set_raw(fx::add_initializer(m, name, TP::FLOAT, std::move(dims)), fx::bytes_of(v));
}
void init_i64(::onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims,
              const std::vector<int64_t>& v) {
  fx::set_raw(fx::add_initializer(m, name, TP::INT64, std::move(dims)), fx::bytes_of(v));
}
void set_opset(::onnx::ModelProto& m, int64_t version) {
  m.mutable_opset_import(0)->set_version(version);
}

std::unique_ptr<onnx_io::Model> parse(const ::onnx::ModelProto& m) {
  auto bytes = fx::serialize(m);
  auto model = onnx_io::Model::parse(bytes, {}, "test.onnx");
  return model.ok() ? std::move(model).value() : nullptr;
}

Result<ImportedModel> import(const ::onnx::ModelProto& m, const ImportOptions& options,
                             const kernels::KernelRegistry& registry) {
  auto model = parse(m);
  if (model == nullptr) return invalid_argument("test model does not parse");
  return import_onnx(*model, options, registry);
}

Result<ImportedModel> import(const ::onnx::ModelProto& m, const ImportOptions& options) {
  return import(m, options, test_registry());
}

kernels::KernelRegistry test_registry() {
  kernels::KernelRegistry r = kernels::KernelRegistry::reference();
  auto add_if_missing = [&](kernels::KernelInfo info) {
    if (r.find(info.op) == nullptr) r.add(info);
  };
  add_if_missing({"Gather", gather_run, gather_infer});
  add_if_missing({"Unsqueeze", copy_run, unsqueeze_infer});
  add_if_missing({"Concat", concat_run, concat_infer});
  add_if_missing({"Reshape", copy_run, reshape_infer});
  add_if_missing({"Conv", conv_run, conv_infer});
  add_if_missing({"BatchNormalization", bn_run, same_infer});
  return r;
}

Result<std::vector<std::vector<float>>> run_graph(
    const graph::Graph& g, const kernels::KernelRegistry& registry,
    const std::map<std::string, std::vector<float>>& inputs) {
  std::vector<std::vector<std::byte>> values(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].is_constant()) values[t] = *g.tensors[t].data;
  }
  for (int32_t t : g.inputs) {
    auto it = inputs.find(g.tensors[t].name);
    if (it == inputs.end()) return invalid_argument("no value for " + g.tensors[t].name);
    values[t].resize(it->second.size() * 4);
    std::memcpy(values[t].data(), it->second.data(), values[t].size());
  }
  auto ref = [&](int32_t t) {
    if (t == graph::kNoTensor) return TensorRef{};
    return TensorRef{g.tensors[t].dtype, g.tensors[t].shape, values[t].data(), values[t].size()};
  };
  for (const graph::Node& node : g.nodes) {
    const kernels::KernelInfo* k = registry.find(node.op_type);
    if (k == nullptr) return invalid_argument("no kernel for " + node.op_type);
    std::vector<TensorRef> in, out;
    for (int32_t t : node.inputs) in.push_back(ref(t));
    for (int32_t t : node.outputs) {
      values[t].resize(*element_count(g.tensors[t].shape) * dtype_size(g.tensors[t].dtype));
      out.push_back(ref(t));
    }
    LOOM_RETURN_IF_ERROR(k->run(in, out, Attributes(node.attributes, static_cast<int32_t>(node.opset))));
  }
  std::vector<std::vector<float>> result;
  for (int32_t t : g.outputs) {
    std::vector<float> v(values[t].size() / 4);
    if (!v.empty()) std::memcpy(v.data(), values[t].data(), v.size() * 4);
    result.push_back(std::move(v));
  }
  return result;
}

int32_t find_tensor(const graph::Graph& g, const std::string& name) {
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].name == name) return static_cast<int32_t>(t);
  }
  return -1;
}

std::vector<int64_t> ints_of(const graph::Tensor& t) {
  if (!t.is_constant() || t.dtype != DType::kI64) return {};
  std::vector<int64_t> v(t.data->size() / 8);
  if (!v.empty()) std::memcpy(v.data(), t.data->data(), v.size() * 8);
  return v;
}

std::vector<float> floats_of(const graph::Tensor& t) {
  if (!t.is_constant() || t.dtype != DType::kF32) return {};
  std::vector<float> v(t.data->size() / 4);
  if (!v.empty()) std::memcpy(v.data(), t.data->data(), v.size() * 4);
  return v;
}

}  // namespace loom::compiler::testing
