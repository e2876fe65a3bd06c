#include "loom/conformance/onnx_cases.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "loom/device.hpp"
#include "loom/file_type.hpp"
#include "onnx/onnx_model.hpp"
#include "onnx/onnx_pb.h"
#include "onnx/onnx-data.pb.h"

namespace loom::conformance {
namespace {

// Issue 3's operator list and those issue 26 added; sorted so that a binary
// search answers, and the static_assert keeps it so when someone adds an op.
constexpr std::array<std::string_view, 107> kRequiredOps = {
    "Abs", "Add", "And", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "BlackmanWindow",
    "Cast", "Ceil", "Clip", "Compress", "Concat", "Constant", "ConstantOfShape", "Conv",
    "ConvInteger", "ConvTranspose", "CumSum", "DepthToSpace", "DequantizeLinear", "Det", "Div",
    "Dropout", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike", "Flatten", "Floor",
    "GRU", "Gather", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Greater", "GridSample",
    "HammingWindow", "HannWindow", "HardSigmoid", "HardSwish", "Identity", "InstanceNormalization",
    "LRN", "LSTM", "LayerNormalization", "LeakyRelu", "Less", "Log", "LogSoftmax", "MatMul",
    "MatMulInteger", "Max", "MaxPool", "MaxUnpool", "Mean", "Min", "Mul", "Neg",
    "NegativeLogLikelihoodLoss", "NonMaxSuppression", "NonZero", "Not", "Or", "PRelu", "Pad", "Pow",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "RNN", "Range", "Reciprocal", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "Relu", "Reshape", "Resize", "RoiAlign",
    "Selu", "Shape", "Sigmoid", "Size", "Slice", "Softmax", "SoftmaxCrossEntropyLoss", "Softplus",
    "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "TopK", "Transpose",
    "Unique", "Unsqueeze", "Upsample", "Where"
};
static_assert(std::is_sorted(kRequiredOps.begin(), kRequiredOps.end()));

bool is_case_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "model.onnx", ec);
}

// "test_data_set_12" -> 12; -1 for other names.
int64_t data_set_index(const std::string& name) {
  constexpr std::string_view prefix = "test_data_set_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t value = -1;
  auto [end, ec] = std::from_chars(name.data() + prefix.size(), name.data() + name.size(), value);
  if (ec != std::errc() || end != name.data() + name.size()) return -1;
  return value;
}

Result<TestCase> load_case(const fs::path& dir) {
  TestCase c;
  c.dir = dir;
  c.name = dir.filename().string();
  if (c.name.empty()) c.name = dir.parent_path().filename().string();
  std::vector<std::pair<int64_t, fs::path>> sets;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t index = data_set_index(it->path().filename().string());
    if (index >= 0 && it->is_directory(ec)) sets.emplace_back(index, it->path());
  }
  if (ec) return unavailable("cannot list " + dir.string() + ": " + ec.message());
  if (sets.empty()) return invalid_argument(dir.string() + ": no test_data_set_<N> folder");
  std::sort(sets.begin(), sets.end());
  for (auto& s : sets) c.data_sets.push_back(std::move(s.second));
  return c;
}


// onnx_io::read_tensor needs a Model for external data; .pb files of the
// test data hold their bytes inline, so an empty model (no folder: external
// data refused) serves.
Result<std::unique_ptr<onnx_io::Model>> empty_model() {
  ::onnx::ModelProto proto;
  proto.set_ir_version(8);
  proto.mutable_graph()->set_name("pb");
  std::string bytes = proto.SerializeAsString();
  return onnx_io::Model::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), {}, "pb");
}

// Reads numbered files "<stem>_<K>.pb" for K = 0, 1, ... until one is
// missing; a later number after a gap is an error (a lost file would
// otherwise shift the names).
Result<std::vector<fs::path>> numbered_files(const fs::path& dir, std::string_view stem) {
  std::vector<fs::path> files;
  std::set<int64_t> seen;
  std::error_code ec;
  std::string prefix = std::string(stem) + "_";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() < prefix.size() + 4 || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - 3, 3, ".pb") != 0) {
      continue;
    }
    int64_t k = -1;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size() - 3;
    auto [p, err] = std::from_chars(first, last, k);
    if (err == std::errc() && p == last && k >= 0) seen.insert(k);
  }
  if (ec) return unavailable("cannot list " + dir.string() + ": " + ec.message());
  for (int64_t k = 0; k < static_cast<int64_t>(seen.size()); ++k) {
    if (!seen.count(k)) {
      return invalid_argument(dir.string() + ": " + prefix + std::to_string(k) +
                              ".pb is missing but a later " + std::string(stem) +
                              " is present");
    }
    files.push_back(dir / (prefix + std::to_string(k) + ".pb"));
  }
  return files;
}

Result<std::vector<NamedTensor>> read_numbered(const fs::path& dir, std::string_view stem,
                                               std::span<const std::string> names,
                                               std::span<const ValueArgument> values,
                                               std::vector<std::pair<std::string, Value>>& value_out) {
  LOOM_ASSIGN_OR_RETURN(std::vector<fs::path> files, numbered_files(dir, stem));
  std::vector<NamedTensor> tensors;
  for (size_t k = 0; k < files.size(); ++k) {
    const ValueArgument* value = nullptr;
    for (const ValueArgument& v : values) {
      if (k < names.size() && v.name == names[k]) value = &v;
    }
    if (value != nullptr) {  // a sequence or an optional, at the model's position
      LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_bounded(files[k], uint64_t{1} << 30));
      LOOM_ASSIGN_OR_RETURN(auto named, parse_value_pb(bytes, value->optional, files[k].string()));
      value_out.emplace_back(value->name, std::move(named.second));
      continue;
    }
    LOOM_ASSIGN_OR_RETURN(NamedTensor t, read_tensor_pb(files[k]));
    if (t.name.empty()) {
      if (k >= names.size()) {
        return invalid_argument(files[k].string() + ": the tensor has no name and the model has "
                                "only " + std::to_string(names.size()) + " " +
                                std::string(stem) + "s");
      }
      t.name = names[k];
    } else if (std::find(names.begin(), names.end(), t.name) == names.end()) {
      return invalid_argument(files[k].string() + ": the model has no " + std::string(stem) +
                              " named '" + t.name + "'");
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

void collect_ops(const ::onnx::GraphProto& graph, std::set<std::string>& ops, int depth) {
  if (depth > 64) return;  // bounded: a malicious model could nest without end
  for (const auto& node : graph.node()) {
    const std::string& domain = node.domain();
    ops.insert(domain.empty() || domain == "ai.onnx" ? node.op_type()
                                                     : domain + ":" + node.op_type());
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) collect_ops(attr.g(), ops, depth + 1);
      for (const auto& g : attr.graphs()) collect_ops(g, ops, depth + 1);
    }
  }
}

// Elements as doubles for the floating comparison, as 64-bit integers (the
// sign kept apart for u64) for the exact one.
double half_to_double(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(mant + 1024, exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}

double bf16_to_double(uint16_t b) {
  uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

bool is_floating(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16;
}

template <typename T>
T load(const std::byte* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

double float_at(const Tensor& t, uint64_t i) {
  const std::byte* p = t.bytes().data();
  switch (t.dtype()) {
    case DType::kF32: return load<float>(p, i);
    case DType::kF64: return load<double>(p, i);
    case DType::kF16: return half_to_double(load<uint16_t>(p, i));
    case DType::kBF16: return bf16_to_double(load<uint16_t>(p, i));
    default: return 0;
  }
}

// Integers: (value as long double) is exact enough to print and to order
// differences; equality is checked on the raw bytes.
long double int_at(const Tensor& t, uint64_t i) {
  const std::byte* p = t.bytes().data();
  switch (t.dtype()) {
    case DType::kI8: return load<int8_t>(p, i);
    case DType::kI16: return load<int16_t>(p, i);
    case DType::kI32: return load<int32_t>(p, i);
    case DType::kI64: return static_cast<long double>(load<int64_t>(p, i));
    case DType::kU8: return load<uint8_t>(p, i);
    case DType::kU16: return load<uint16_t>(p, i);
    case DType::kU32: return load<uint32_t>(p, i);
    case DType::kU64: return static_cast<long double>(load<uint64_t>(p, i));
    case DType::kBool: return load<uint8_t>(p, i) != 0;
    default: return 0;
  }
}

std::string index_string(const Shape& shape, uint64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      index[d] = static_cast<int64_t>(flat % static_cast<uint64_t>(shape[d]));
      flat /= static_cast<uint64_t>(shape[d]);
    }
  }
  return shape_to_string(index);
}

std::string number(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string int_number(const Tensor& t, uint64_t i) {
  const std::byte* p = t.bytes().data();
  if (t.dtype() == DType::kBool) return load<uint8_t>(p, i) ? "true" : "false";
  if (t.dtype() == DType::kU64) return std::to_string(load<uint64_t>(p, i));
  if (t.dtype() == DType::kI64) return std::to_string(load<int64_t>(p, i));
  return std::to_string(static_cast<int64_t>(int_at(t, i)));
}

}  // namespace

Result<std::vector<std::byte>> read_bounded(const fs::path& file, uint64_t max_bytes) {
  // A FIFO or a device is refused for what it is before it is opened.
  LOOM_RETURN_IF_ERROR(check_regular_file(file, ""));
  std::error_code ec;
  uint64_t size = fs::file_size(file, ec);
  if (ec) return unavailable(file.string() + ": cannot get the size: " + ec.message());
  if (size > max_bytes) {
    return resource_exhausted(file.string() + ": " + std::to_string(size) +
                              " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  std::vector<std::byte> bytes(size);
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in || static_cast<uint64_t>(in.gcount()) != size) {
    return data_loss(file.string() + ": cannot read " + std::to_string(size) + " bytes");
  }
  return bytes;
}

Result<std::vector<TestCase>> discover_cases(std::span<const fs::path> roots,
                                             std::string_view filter) {
  std::vector<TestCase> cases;
  for (const fs::path& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      return not_found(root.string() + ": not a folder (expected a test case with model.onnx "
                       "or a folder of test cases)");
    }
    std::vector<fs::path> dirs;
    if (is_case_dir(root)) {
      dirs.push_back(root);
    } else {
      for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->is_directory(ec) && is_case_dir(it->path())) dirs.push_back(it->path());
      }
      if (ec) return unavailable("cannot list " + root.string() + ": " + ec.message());
      if (dirs.empty()) {
        return not_found(root.string() + ": no test case in it (no model.onnx, and no "
                         "subfolder with one)");
      }
      std::sort(dirs.begin(), dirs.end());
    }
    for (const fs::path& dir : dirs) {
      std::string name = dir.filename().string();
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      LOOM_ASSIGN_OR_RETURN(TestCase c, load_case(dir));
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

Result<NamedTensor> parse_tensor_pb(std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return resource_exhausted(std::string(what) + ": too large for a TensorProto");
  }
  ::onnx::TensorProto proto;
  bool parsed = false;
  try {
    parsed = proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::exception& e) {
    return invalid_argument(std::string(what) + ": not an ONNX TensorProto: " + e.what());
  }
  if (!parsed) return invalid_argument(std::string(what) + ": not an ONNX TensorProto");
  if (proto.data_type() == 0) {
    return invalid_argument(std::string(what) + ": not an ONNX TensorProto (no data_type)");
  }
  LOOM_ASSIGN_OR_RETURN(auto holder, empty_model());
  auto data = onnx_io::read_tensor(*holder, proto);
  if (!data.ok()) return data.status().with_context(what);
  const onnx_io::TensorInfo& info = data->info();
  auto tensor = Tensor::copy_of(info.dtype, info.shape, data->bytes());
  if (!tensor.ok()) return tensor.status().with_context(what);
  return NamedTensor{proto.name(), std::move(*tensor)};
}

Result<NamedTensor> read_tensor_pb(const fs::path& file, uint64_t max_bytes) {
  LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_bounded(file, max_bytes));
  return parse_tensor_pb(bytes, file.string());
}

Result<DataSet> read_data_set(const fs::path& dir, std::span<const std::string> input_names,
                              std::span<const std::string> output_names, std::span<const ValueArgument> values) {
  DataSet set;
  LOOM_ASSIGN_OR_RETURN(set.inputs, read_numbered(dir, "input", input_names, values, set.input_values));
  LOOM_ASSIGN_OR_RETURN(set.outputs, read_numbered(dir, "output", output_names, values, set.output_values));
  if (set.outputs.empty() && set.output_values.empty()) return invalid_argument(dir.string() + ": no output_0.pb");
  return set;
}

Result<std::pair<std::string, Value>> parse_value_pb(std::span<const std::byte> bytes, bool optional,
                                                     std::string_view what) {
  const std::string kind = optional ? "OptionalProto" : "SequenceProto";
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return resource_exhausted(std::string(what) + ": too large for an ONNX " + kind);
  }
  LOOM_ASSIGN_OR_RETURN(auto holder, empty_model());
  auto tensor_of = [&](const ::onnx::TensorProto& proto, const std::string& where) -> Result<Tensor> {
    auto data = onnx_io::read_tensor(*holder, proto);
    if (!data.ok()) return data.status().with_context(where);
    auto tensor = Tensor::copy_of(data->info().dtype, data->info().shape, data->bytes());
    if (!tensor.ok()) return tensor.status().with_context(where);
    return std::move(*tensor);
  };
  auto sequence_of = [&](const ::onnx::SequenceProto& seq, const std::string& where) -> Result<Value> {
    if (seq.elem_type() != ::onnx::SequenceProto::TENSOR && seq.elem_type() != ::onnx::SequenceProto::UNDEFINED) {
      return unimplemented(where + ": a sequence of element type " + std::to_string(seq.elem_type()) +
                           "; Loom reads sequences of tensors only");
    }
    std::vector<Tensor> elements;
    for (int i = 0; i < seq.tensor_values_size(); ++i) {
      LOOM_ASSIGN_OR_RETURN(Tensor t, tensor_of(seq.tensor_values(i), where + ", element " + std::to_string(i)));
      elements.push_back(std::move(t));
    }
    return Value::sequence(std::move(elements));
  };
  bool parsed = false;
  ::onnx::SequenceProto seq;
  ::onnx::OptionalProto opt;
  try {
    parsed = optional ? opt.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))
                      : seq.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::exception& e) {
    return invalid_argument(std::string(what) + ": not an ONNX " + kind + ": " + e.what());
  }
  if (!parsed) return invalid_argument(std::string(what) + ": not an ONNX " + kind);
  if (!optional) {
    LOOM_ASSIGN_OR_RETURN(Value v, sequence_of(seq, std::string(what)));
    return std::make_pair(seq.name(), std::move(v));
  }
  if (opt.has_tensor_value()) {
    LOOM_ASSIGN_OR_RETURN(Tensor t, tensor_of(opt.tensor_value(), std::string(what)));
    return std::make_pair(opt.name(), Value::of(std::move(t)));
  }
  if (opt.has_sequence_value()) {
    LOOM_ASSIGN_OR_RETURN(Value v, sequence_of(opt.sequence_value(), std::string(what)));
    return std::make_pair(opt.name(), std::move(v));
  }
  if (opt.has_sparse_tensor_value() || opt.has_map_value() || opt.has_optional_value()) {
    return unimplemented(std::string(what) + ": an optional of a sparse tensor, map or optional");
  }
  return std::make_pair(opt.name(), Value::none());
}

Result<ModelSummary> summarize_model(const fs::path& model) {
  LOOM_ASSIGN_OR_RETURN(auto m, onnx_io::Model::load_file(model));
  const ::onnx::GraphProto& graph = m->proto().graph();
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());
  ModelSummary summary;
  for (const auto& in : graph.input()) {
    if (!initializers.count(in.name())) summary.inputs.push_back(in.name());
  }
  for (const auto& out : graph.output()) summary.outputs.push_back(out.name());
  auto check_type = [&summary](const ::onnx::ValueInfoProto& v, const char* role) {
    if (!summary.non_tensor.empty() || !v.has_type() || v.type().has_tensor_type()) return;
    const auto& t = v.type();
    // A sequence of tensors, an optional tensor or sequence of tensors.
    const bool seq_of_tensors = t.has_sequence_type() && t.sequence_type().elem_type().has_tensor_type();
    const bool optional = t.has_optional_type() &&
                          (t.optional_type().elem_type().has_tensor_type() ||
                           (t.optional_type().elem_type().has_sequence_type() &&
                            t.optional_type().elem_type().sequence_type().elem_type().has_tensor_type()));
    if (seq_of_tensors || optional) {
      summary.values.push_back({v.name(), optional});
      return;
    }
    const char* kind = t.has_sequence_type() ? "a sequence"
                       : t.has_map_type()    ? "a map"
                       : t.has_optional_type() ? "an optional"
                                               : "not a tensor";
    summary.non_tensor = std::string(role) + " '" + v.name() + "' is " + kind +
                         "; Loom supports tensors, sequences of tensors and optionals only";
  };
  for (const auto& in : graph.input()) check_type(in, "input");
  for (const auto& out : graph.output()) check_type(out, "output");
  for (const auto& o : m->proto().opset_import()) {
    if (!o.domain().empty() && o.domain() != "ai.onnx") continue;
    if (o.version() < 1 || o.version() > 21) {
      summary.out_of_scope = "the model imports opset " + std::to_string(o.version()) +
                             " of the default ONNX domain; Loom supports opsets 1-21";
    }
  }
  std::set<std::string> ops;
  collect_ops(graph, ops, 0);
  summary.op_types.assign(ops.begin(), ops.end());
  return summary;
}

TensorDifference measure_difference(const Tensor& got, const Tensor& expected,
                                    const Tolerance& tol) {
  TensorDifference d;
  if (got.dtype() != expected.dtype()) {
    d.mismatch = "dtype " + std::string(dtype_name(got.dtype())) + ", expected " +
                 std::string(dtype_name(expected.dtype()));
    return d;
  }
  if (got.shape() != expected.shape()) {
    d.mismatch = "shape " + shape_to_string(got.shape()) + ", expected " +
                 shape_to_string(expected.shape());
    return d;
  }
  const uint64_t n = expected.element_count();
  d.elements = n;
  if (is_floating(expected.dtype())) {
    double worst_excess = -1;
    for (uint64_t i = 0; i < n; ++i) {
      double a = float_at(got, i), e = float_at(expected, i);
      if (a == e || (std::isnan(a) && std::isnan(e))) continue;
      double diff = std::fabs(a - e);
      if (!std::isfinite(diff)) diff = std::numeric_limits<double>::infinity();
      d.max_abs_diff = std::max(d.max_abs_diff, diff);
      double allowed = tol.atol + tol.rtol * std::fabs(e);
      // An infinity (or a NaN) must match exactly: inf <= atol + rtol*inf.
      if (std::isfinite(a) && std::isfinite(e) && diff <= allowed) continue;
      // NaN against a number, or an infinity, is the worst kind of miss.
      double excess = std::isfinite(diff) ? diff - allowed : std::numeric_limits<double>::max();
      ++d.outside;
      if (excess > worst_excess) worst_excess = excess, d.worst = i;
    }
    return d;
  }
  const size_t width = dtype_size(expected.dtype());
  const std::byte* pa = got.bytes().data();
  const std::byte* pe = expected.bytes().data();
  long double worst_diff = -1;
  for (uint64_t i = 0; i < n; ++i) {
    bool same = expected.dtype() == DType::kBool
                    ? (load<uint8_t>(pa, i) != 0) == (load<uint8_t>(pe, i) != 0)
                    : std::memcmp(pa + i * width, pe + i * width, width) == 0;
    if (same) continue;
    ++d.outside;
    long double diff = int_at(got, i) - int_at(expected, i);
    if (diff < 0) diff = -diff;
    if (diff > worst_diff) worst_diff = diff, d.worst = i;
  }
  if (d.outside != 0) d.max_abs_diff = static_cast<double>(worst_diff);
  return d;
}

std::string describe_difference(const TensorDifference& d, const Tensor& got,
                                const Tensor& expected) {
  if (!d.mismatch.empty()) return d.mismatch;
  if (d.outside == 0) return "within tolerance";
  const bool floating = is_floating(expected.dtype());
  return "element " + index_string(expected.shape(), d.worst) + ": got " +
         (floating ? number(float_at(got, d.worst)) : int_number(got, d.worst)) + ", expected " +
         (floating ? number(float_at(expected, d.worst)) : int_number(expected, d.worst)) + " (" +
         std::to_string(d.outside) + " of " + std::to_string(d.elements) + " elements differ)";
}

Status compare_tensors(std::string_view output, const Tensor& got, const Tensor& expected,
                       const Tolerance& tol) {
  const TensorDifference d = measure_difference(got, expected, tol);
  if (d.mismatch.empty() && d.outside == 0) return Status();
  return invalid_argument("output '" + std::string(output) + "'" + (d.mismatch.empty() ? " " : ": ") +
                          describe_difference(d, got, expected));
}

Status compare_values(std::string_view output, const Value& got, const Value& expected, const Tolerance& tol) {
  if (got.kind != expected.kind || got.elements.size() != expected.elements.size()) {
    return invalid_argument("output '" + std::string(output) + "': got " + describe_value(got) + ", expected " +
                            describe_value(expected));
  }
  if (got.is_tensor()) return compare_tensors(output, got.tensor, expected.tensor, tol);
  for (size_t i = 0; i < got.elements.size(); ++i) {
    LOOM_RETURN_IF_ERROR(compare_tensors(std::string(output) + "[" + std::to_string(i) + "]", got.elements[i],
                                         expected.elements[i], tol));
  }
  return Status();
}

std::span<const std::string_view> required_ops() { return kRequiredOps; }

bool is_required_op(std::string_view op_type) {
  return std::binary_search(kRequiredOps.begin(), kRequiredOps.end(), op_type);
}

std::vector<std::string> ops_outside_required(std::span<const std::string> op_types) {
  std::vector<std::string> outside;
  for (const std::string& op : op_types) {
    if (!is_required_op(op)) outside.push_back(op);
  }
  return outside;
}

Result<KnownFailures> KnownFailures::parse(std::string_view text, std::string_view source) {
  KnownFailures list;
  list.source_ = std::string(source);
  int line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto next_word = [&line]() {
      size_t start = line.find_first_not_of(" \t\r");
      if (start == std::string_view::npos) return line = {}, std::string_view();
      size_t end = line.find_first_of(" \t\r", start);
      std::string_view word = line.substr(start, end == std::string_view::npos
                                                     ? std::string_view::npos : end - start);
      line = end == std::string_view::npos ? std::string_view() : line.substr(end);
      return word;
    };
    KnownFailure entry;
    entry.line = line_no;
    entry.name = next_word();
    if (entry.name.empty()) continue;
    std::string where = std::string(source) + ":" + std::to_string(line_no);
    entry.device = next_word();
    size_t r0 = line.find_first_not_of(" \t\r");
    size_t r1 = line.find_last_not_of(" \t\r");
    if (r0 != std::string_view::npos) entry.reason = std::string(line.substr(r0, r1 - r0 + 1));
    if (entry.device.empty() || entry.reason.empty()) {
      return invalid_argument(where + ": '" + entry.name + "' needs a device (reference, a "
                              "plugin name such as cpu-simd, or *) and a reason");
    }
    if (entry.device != "*" && entry.device != "reference" &&
        entry.device.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") !=
            std::string::npos) {
      return invalid_argument(where + ": '" + entry.device + "' is not a device (reference, a "
                              "plugin name such as cpu-simd, or *)");
    }
    for (const KnownFailure& other : list.entries_) {
      if (other.name == entry.name &&
          (other.device == entry.device || other.device == "*" || entry.device == "*")) {
        return invalid_argument(where + ": '" + entry.name + "' on " + entry.device +
                                " is already listed on line " + std::to_string(other.line));
      }
    }
    list.entries_.push_back(std::move(entry));
  }
  return list;
}

Result<KnownFailures> KnownFailures::load(const fs::path& file) {
  LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_bounded(file, uint64_t{16} << 20));
  return parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
               file.string());
}

const KnownFailure* KnownFailures::find(std::string_view name, std::string_view device) const {
  for (const KnownFailure& e : entries_) {
    if (e.name == name && (e.device == "*" || e.device == device)) return &e;
  }
  return nullptr;
}

std::string device_key(std::string_view device_uri) {
  if (device_uri.empty()) return "reference";
  auto uri = parse_device_uri(device_uri);
  return std::string(uri.ok() ? uri->plugin : device_uri);
}

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass: return "PASS";
    case Outcome::kFail: return "FAIL";
    case Outcome::kUnsupported: return "UNSUPPORTED";
    case Outcome::kError: return "ERROR";
  }
  return "ERROR";
}

std::vector<std::string> classify(std::vector<CaseResult>& results, const KnownFailures* known,
                                  std::string_view device) {
  std::vector<std::string> problems;
  for (CaseResult& r : results) {
    if (r.outcome == Outcome::kUnsupported && !r.op_types.empty() &&
        ops_outside_required(r.op_types).empty()) {
      r.outcome = Outcome::kFail;
      r.message = "unsupported, but every op of the model is one Loom must support: " + r.message;
    }
    const KnownFailure* entry = known ? known->find(r.name, device) : nullptr;
    if (!entry) continue;
    if (r.outcome == Outcome::kFail || r.outcome == Outcome::kError) {
      r.known_failure = true;
      r.known_reason = entry->reason;
    } else if (r.outcome == Outcome::kPass) {
      problems.push_back("known failure '" + r.name + "' passed: remove it from " +
                         known->source() + " (line " + std::to_string(entry->line) + ")");
    }
  }
  return problems;
}

std::string format_case(const CaseResult& r) {
  std::string line = std::string(outcome_name(r.outcome)) + " " + r.name;
  if (!r.message.empty()) line += ": " + r.message;  // a PASS's message is a note
  if (r.known_failure) line += " [known failure: " + r.known_reason + "]";
  if (!r.placement.empty()) line += " [" + r.placement + "]";
  return line;
}

Totals count(std::span<const CaseResult> results) {
  Totals t;
  t.cases = results.size();
  for (const CaseResult& r : results) {
    if (r.known_failure) {
      ++t.known;
      continue;
    }
    switch (r.outcome) {
      case Outcome::kPass: ++t.passed; break;
      case Outcome::kFail: ++t.failed; break;
      case Outcome::kUnsupported: ++t.unsupported; break;
      case Outcome::kError: ++t.errors; break;
    }
  }
  return t;
}

std::string format_totals(const Totals& t, std::string_view device) {
  return "test-onnx: " + std::to_string(t.cases) + " cases: " + std::to_string(t.passed) +
         " passed, " + std::to_string(t.failed) + " failed, " + std::to_string(t.unsupported) +
         " unsupported, " + std::to_string(t.errors) + " errors, " + std::to_string(t.known) +
         " known failures (device " + std::string(device.empty() ? "reference" : device) + ")";
}

std::string report_json(std::span<const CaseResult> results, std::string_view device,
                        std::span<const std::string> problems) {
  using nlohmann::json;
  Totals t = count(results);
  json cases = json::array();
  for (const CaseResult& r : results) {
    cases.push_back({{"name", r.name},
                     {"dir", r.dir.string()},
                     {"status", outcome_name(r.outcome)},
                     {"message", r.message},
                     {"ms", r.ms},
                     {"known_failure", r.known_failure},
                     {"known_reason", r.known_reason},
                     {"placement", r.placement}});
  }
  json doc = {{"device", device.empty() ? "reference" : std::string(device)},
              {"totals",
               {{"cases", t.cases},
                {"passed", t.passed},
                {"failed", t.failed},
                {"unsupported", t.unsupported},
                {"errors", t.errors},
                {"known_failures", t.known}}},
              {"cases", std::move(cases)},
              {"problems", std::vector<std::string>(problems.begin(), problems.end())}};
  // Messages may carry bytes from a model that are not UTF-8: replace them
  // rather than fail the whole report.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace loom::conformance
