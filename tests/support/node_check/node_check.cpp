// loom-node-check: runs ONNX backend test cases (model.onnx plus
// test_data_set_*/input_*.pb and output_*.pb) straight through the core's
// reference kernels, node by node, with no importer, partitioner or runtime
// in between. Every value is known, so each infer() sees all its operands as
// constants. A tool for kernel authors: it tells whether a kernel matches
// the ONNX test data before the rest of the compiler exists.
//
//   loom-node-check [--verbose] DIR...   (a case folder or a folder of them)
//
// Prints PASS / FAIL / UNSUPPORTED / ERROR per case and the totals; exits 1
// when a case failed or errored.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "kernels/util.hpp"
#include "onnx/onnx_model.hpp"

namespace fs = std::filesystem;
using namespace loom;

namespace {

struct Value {
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<std::byte> bytes;

  kernels::TensorRef ref() {
    return kernels::TensorRef{dtype, shape, bytes.empty() ? nullptr : bytes.data(), bytes.size()};
  }
};

Result<Value> to_value(const onnx_io::Model& model, const onnx::TensorProto& proto) {
  auto data = onnx_io::read_tensor(model, proto);
  if (!data.ok()) return data.status();
  Value v;
  v.dtype = data->info().dtype;
  v.shape = data->info().shape;
  v.bytes.assign(data->bytes().begin(), data->bytes().end());
  return v;
}

Result<onnx::TensorProto> read_pb(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) return invalid_argument(path.string() + ": not a TensorProto");
  return t;
}

Result<AttributeDef> to_attribute(const onnx_io::Model& model, const onnx::AttributeProto& a) {
  AttributeDef d;
  d.name = a.name();
  switch (a.type()) {
    case onnx::AttributeProto::INT: d.kind = AttributeKind::kInt; d.i = a.i(); break;
    case onnx::AttributeProto::FLOAT: d.kind = AttributeKind::kFloat; d.f = a.f(); break;
    case onnx::AttributeProto::STRING: d.kind = AttributeKind::kString; d.s = a.s(); break;
    case onnx::AttributeProto::INTS:
      d.kind = AttributeKind::kInts;
      d.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      d.kind = AttributeKind::kFloats;
      d.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRINGS:
      d.kind = AttributeKind::kStrings;
      d.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::TENSOR: {
      auto v = to_value(model, a.t());
      if (!v.ok()) return v.status().with_context("attribute '" + a.name() + "'");
      d.kind = AttributeKind::kTensor;
      d.t_dtype = v->dtype;
      d.t_shape = v->shape;
      d.t_data = std::move(v->bytes);
      break;
    }
    default:
      return unimplemented("attribute '" + a.name() + "' of type " +
                           std::to_string(static_cast<int>(a.type())) + " is not supported");
  }
  return d;
}

double element_as_double(const Value& v, size_t i) {
  double out = 0;
  (void)kernels::visit_dtype("compare", v.dtype, [&]<typename T>() {
    T x;
    std::memcpy(&x, v.bytes.data() + i * sizeof(T), sizeof(T));
    if constexpr (std::is_same_v<T, kernels::Half> || std::is_same_v<T, kernels::BFloat16>) {
      out = kernels::to_float(x);
    } else {
      out = static_cast<double>(x);
    }
    return Status();
  });
  return out;
}

// Empty when equal within tolerance; otherwise where and how they differ.
std::string compare(const Value& got, const Value& want) {
  if (got.dtype != want.dtype || got.shape != want.shape) {
    return "got " + std::string(dtype_name(got.dtype)) + " " + shape_to_string(got.shape) +
           ", expected " + std::string(dtype_name(want.dtype)) + " " + shape_to_string(want.shape);
  }
  const size_t es = dtype_size(got.dtype);
  const size_t n = es == 0 ? 0 : got.bytes.size() / es;
  const bool exact = !kernels::is_float_dtype(got.dtype);
  double worst = 0;
  size_t worst_i = n;
  for (size_t i = 0; i < n; ++i) {
    const double a = element_as_double(got, i), e = element_as_double(want, i);
    if (std::isnan(a) && std::isnan(e)) continue;
    double excess;
    if (exact) {
      excess = a == e ? 0 : 1;
    } else if (std::isinf(e) || std::isinf(a)) {
      excess = a == e ? 0 : 1;
    } else {
      excess = std::fabs(a - e) - (1e-7 + 1e-3 * std::fabs(e));
      if (std::isnan(a) != std::isnan(e)) excess = 1;
    }
    if (excess > 0 && (worst_i == n || excess > worst)) {
      worst = excess;
      worst_i = i;
    }
  }
  if (worst_i == n) return std::string();
  std::ostringstream s;
  s.precision(9);
  s << "element " << worst_i << ": got " << element_as_double(got, worst_i) << ", expected "
    << element_as_double(want, worst_i);
  return s.str();
}

struct Outcome {
  std::string kind;  // PASS FAIL UNSUPPORTED ERROR
  std::string message;
};

Outcome run_case(const fs::path& dir, const kernels::KernelRegistry& registry) {
  auto model = onnx_io::Model::load_file(dir / "model.onnx");
  if (!model.ok()) return {"ERROR", model.status().to_string()};
  const onnx::GraphProto& g = (*model)->proto().graph();
  int64_t opset = 0;
  for (const auto& o : (*model)->proto().opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  std::vector<std::string> data_inputs;
  std::map<std::string, bool> is_initializer;
  for (const auto& t : g.initializer()) is_initializer[t.name()] = true;
  for (const auto& in : g.input()) {
    if (!is_initializer.count(in.name())) data_inputs.push_back(in.name());
  }
  for (const auto& node : g.node()) {
    if (node.op_type() != "Constant" && registry.find(node.op_type()) == nullptr) {
      return {"UNSUPPORTED", "no reference kernel for '" + node.op_type() + "'"};
    }
  }
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(e.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {"ERROR", "no test_data_set_* folder"};
  for (const fs::path& set : sets) {
    std::map<std::string, Value> values;
    for (const auto& t : g.initializer()) {
      auto v = to_value(**model, t);
      if (!v.ok()) return {"ERROR", v.status().to_string()};
      values[t.name()] = std::move(*v);
    }
    for (size_t k = 0;; ++k) {
      const fs::path p = set / ("input_" + std::to_string(k) + ".pb");
      if (!fs::exists(p)) break;
      auto proto = read_pb(p);
      if (!proto.ok()) return {"ERROR", proto.status().to_string()};
      auto v = to_value(**model, *proto);
      if (!v.ok()) return {"ERROR", v.status().to_string()};
      std::string name = proto->name();
      if (name.empty() && k < data_inputs.size()) name = data_inputs[k];
      values[name] = std::move(*v);
    }
    for (int n = 0; n < g.node_size(); ++n) {
      const onnx::NodeProto& node = g.node(n);
      const std::string where = "node " + std::to_string(n) + " (" + node.op_type() + ")";
      std::vector<AttributeDef> attrs;
      for (const auto& a : node.attribute()) {
        auto d = to_attribute(**model, a);
        if (!d.ok()) return {"UNSUPPORTED", where + ": " + d.status().message()};
        attrs.push_back(std::move(*d));
      }
      if (node.op_type() == "Constant") {
        // The importer's job in the compiler; here just enough for the
        // "_expanded" cases, which build small graphs from Constants.
        Value c;
        for (const AttributeDef& a : attrs) {
          if (a.kind == AttributeKind::kTensor) {
            c = Value{a.t_dtype, a.t_shape, a.t_data};
          } else if (a.name == "value_float" || a.name == "value_int") {
            c.dtype = a.name == "value_float" ? DType::kF32 : DType::kI64;
            c.bytes.resize(dtype_size(c.dtype));
            if (a.name == "value_float") std::memcpy(c.bytes.data(), &a.f, 4);
            else std::memcpy(c.bytes.data(), &a.i, 8);
          } else if (a.name == "value_floats" || a.name == "value_ints") {
            const bool f = a.name == "value_floats";
            c.dtype = f ? DType::kF32 : DType::kI64;
            c.shape = {static_cast<int64_t>(f ? a.floats.size() : a.ints.size())};
            c.bytes.resize(c.shape[0] * dtype_size(c.dtype));
            if (!c.bytes.empty()) {
              std::memcpy(c.bytes.data(), f ? static_cast<const void*>(a.floats.data())
                                            : static_cast<const void*>(a.ints.data()),
                          c.bytes.size());
            }
          }
        }
        if (c.dtype == DType::kInvalid) return {"UNSUPPORTED", where + ": Constant form not supported"};
        values[node.output(0)] = std::move(c);
        continue;
      }
      const kernels::KernelInfo* k = registry.find(node.op_type());
      kernels::Attributes attributes(attrs, static_cast<int32_t>(opset));
      std::vector<kernels::TensorRef> in_refs(node.input_size());
      std::vector<kernels::TensorType> in_types(node.input_size());
      for (int i = 0; i < node.input_size(); ++i) {
        if (node.input(i).empty()) continue;
        auto it = values.find(node.input(i));
        if (it == values.end()) return {"ERROR", where + ": input '" + node.input(i) + "' unknown"};
        in_refs[i] = it->second.ref();
        in_types[i] = {it->second.dtype, it->second.shape, &in_refs[i]};
      }
      if (k->infer == nullptr) return {"ERROR", where + ": kernel has no infer"};
      auto types = k->infer(in_types, attributes);
      if (!types.ok()) {
        const auto code = types.status().code();
        return {code == StatusCode::kUnimplemented ? "UNSUPPORTED" : "ERROR",
                where + " infer: " + types.status().to_string()};
      }
      if (types->size() < static_cast<size_t>(node.output_size())) {
        return {"ERROR", where + ": infer gave " + std::to_string(types->size()) + " outputs, node has " +
                             std::to_string(node.output_size())};
      }
      std::vector<Value> outs(node.output_size());
      std::vector<kernels::TensorRef> out_refs;
      for (int o = 0; o < node.output_size(); ++o) {
        outs[o].dtype = (*types)[o].dtype;
        outs[o].shape = (*types)[o].shape;
        auto count = element_count(outs[o].shape);
        if (!count.ok()) return {"ERROR", where + ": " + count.status().to_string()};
        outs[o].bytes.assign(*count * dtype_size(outs[o].dtype), std::byte{0});
        out_refs.push_back(outs[o].ref());
      }
      Status st = k->run(in_refs, out_refs, attributes);
      if (!st.ok()) {
        return {st.code() == StatusCode::kUnimplemented ? "UNSUPPORTED" : "ERROR",
                where + " run: " + st.to_string()};
      }
      for (int o = 0; o < node.output_size(); ++o) {
        if (!node.output(o).empty()) values[node.output(o)] = std::move(outs[o]);
      }
    }
    for (int o = 0;; ++o) {
      const fs::path p = set / ("output_" + std::to_string(o) + ".pb");
      if (!fs::exists(p)) break;
      auto proto = read_pb(p);
      if (!proto.ok()) return {"ERROR", proto.status().to_string()};
      auto want = to_value(**model, *proto);
      if (!want.ok()) return {"UNSUPPORTED", want.status().to_string()};
      std::string name = proto->name();
      if (name.empty() && o < g.output_size()) name = g.output(o).name();
      auto it = values.find(name);
      if (it == values.end()) return {"ERROR", "output '" + name + "' not produced"};
      std::string diff = compare(it->second, *want);
      if (!diff.empty()) {
        return {"FAIL", "output '" + name + "' " + diff + " (" + set.filename().string() + ")"};
      }
    }
  }
  return {"PASS", ""};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> cases;
  for (int i = 1; i < argc; ++i) {
    fs::path p = argv[i];
    if (fs::exists(p / "model.onnx")) {
      cases.push_back(p);
      continue;
    }
    std::error_code ec;
    std::vector<fs::path> sub;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      if (fs::exists(e.path() / "model.onnx")) sub.push_back(e.path());
    }
    if (ec) {
      std::cerr << "loom-node-check: " << p << ": " << ec.message() << "\n";
      return 2;
    }
    std::sort(sub.begin(), sub.end());
    cases.insert(cases.end(), sub.begin(), sub.end());
  }
  const kernels::KernelRegistry registry = kernels::KernelRegistry::reference();
  std::map<std::string, int> totals;
  for (const fs::path& c : cases) {
    Outcome r = run_case(c, registry);
    ++totals[r.kind];
    std::cout << r.kind << " " << c.filename().string();
    if (!r.message.empty()) std::cout << ": " << r.message;
    std::cout << "\n";
  }
  std::cout << "loom-node-check: " << cases.size() << " cases: " << totals["PASS"] << " passed, "
            << totals["FAIL"] << " failed, " << totals["UNSUPPORTED"] << " unsupported, "
            << totals["ERROR"] << " errors\n";
  return totals["FAIL"] + totals["ERROR"] > 0 ? 1 : 0;
}
