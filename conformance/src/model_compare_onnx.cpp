// Writing ONNX models for loom compare: the model with its intermediate
// values as outputs, and a divergent step cut out as a model of its own.
#include "model_compare_onnx.hpp"

#include "model_compare_detail.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <onnx/onnx_pb.h>

#include "loom/conformance/model_compare.hpp"
#include "loom/npy.hpp"
#include "onnx/onnx_model.hpp"

namespace loom::conformance {

namespace fs = std::filesystem;

namespace model_compare_onnx_detail {

// External data becomes raw_data: the written model lives elsewhere.
Status inline_external_initializers(const onnx_io::Model& model, ::onnx::GraphProto* graph) {
  for (::onnx::TensorProto& init : *graph->mutable_initializer()) {
    if (init.data_location() != ::onnx::TensorProto::EXTERNAL) continue;
    LOOM_ASSIGN_OR_RETURN(onnx_io::TensorData data, onnx_io::read_tensor(model, init));
    init.clear_external_data();
    init.set_data_location(::onnx::TensorProto::DEFAULT);
    init.set_raw_data(reinterpret_cast<const char*>(data.bytes().data()), data.bytes().size());
  }
  return Status();
}

Status write_model_proto(const ::onnx::ModelProto& proto, const fs::path& out) {
  std::string bytes;
  bool serialized = false;
  try {
    serialized = proto.SerializeToString(&bytes);
  } catch (const std::exception& e) {
    return internal_error("cannot serialize the model for '" + out.string() + "': " + e.what());
  }
  if (!serialized) return internal_error("cannot serialize the model for '" + out.string() + "' (over 2 GiB?)");
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return unavailable("cannot write '" + out.string() + "'");
  return Status();
}

// ONNX's element type for a Loom dtype: the inverse of dtype_from_onnx.
Result<int32_t> onnx_elem_type(DType dtype) {
  for (int32_t t = 1; t <= 23; ++t) {
    auto d = onnx_io::dtype_from_onnx(t);
    if (d.ok() && *d == dtype) return t;
  }
  return unimplemented("dtype " + std::string(dtype_name(dtype)) + " has no ONNX element type");
}

Status set_value_info(::onnx::ValueInfoProto* info, const std::string& name, const Tensor& value) {
  info->set_name(name);
  LOOM_ASSIGN_OR_RETURN(int32_t elem, onnx_elem_type(value.dtype()));
  auto* tensor_type = info->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(elem);
  auto* shape = tensor_type->mutable_shape();
  for (int64_t d : value.shape()) shape->add_dim()->set_dim_value(d);
  return Status();
}

}  // namespace model_compare_onnx_detail

Status write_observing_model(const fs::path& model, const std::vector<std::string>& values,
                             const fs::path& out) {
  namespace detail = model_compare_onnx_detail;
  LOOM_ASSIGN_OR_RETURN(auto loaded, onnx_io::Model::load_file(model));
  ::onnx::ModelProto proto = loaded->proto();
  ::onnx::GraphProto* graph = proto.mutable_graph();
  std::set<std::string> outputs;
  for (const auto& o : graph->output()) outputs.insert(o.name());
  for (const std::string& v : values) {
    if (outputs.insert(v).second) graph->add_output()->set_name(v);
  }
  LOOM_RETURN_IF_ERROR(detail::inline_external_initializers(*loaded, graph));
  return detail::write_model_proto(proto, out);
}

Result<Reproducer> write_reproducer(const fs::path& model, const ModelComparison& comparison, size_t step,
                                    const fs::path& out_dir) {
  namespace detail = model_compare_onnx_detail;
  if (is_program_path(model)) {
    return model_compare_detail::write_program_reproducer(model, comparison, step, out_dir);
  }
  if (step >= comparison.steps.size()) {
    return invalid_argument("step " + std::to_string(step) + " of " + std::to_string(comparison.steps.size()));
  }
  const compiler::SubgraphReport& s = comparison.steps[step].step;
  LOOM_ASSIGN_OR_RETURN(auto loaded, onnx_io::Model::load_file(model));
  const ::onnx::GraphProto& graph = loaded->proto().graph();
  std::map<std::string, int> producer;
  for (int n = 0; n < graph.node_size(); ++n) {
    for (const std::string& o : graph.node(n).output()) {
      if (!o.empty()) producer[o] = n;
    }
  }
  std::map<std::string, int> initializer;
  for (int i = 0; i < graph.initializer_size(); ++i) initializer[graph.initializer(i).name()] = i;
  std::set<std::string> graph_inputs;
  for (const auto& in : graph.input()) {
    if (!initializer.count(in.name())) graph_inputs.insert(in.name());
  }
  const std::set<std::string> cut(s.inputs.begin(), s.inputs.end());

  // Walk back from the step's outputs to the values it reads.
  std::vector<std::string> inputs;  // in order of discovery
  std::set<int> nodes, inits;
  std::set<std::string> seen;
  std::vector<std::string> work(s.outputs.rbegin(), s.outputs.rend());
  while (!work.empty()) {
    std::string v = std::move(work.back());
    work.pop_back();
    if (v.empty() || !seen.insert(v).second) continue;
    if (cut.count(v) || graph_inputs.count(v)) {
      inputs.push_back(v);
    } else if (auto it = initializer.find(v); it != initializer.end()) {
      inits.insert(it->second);
    } else if (auto p = producer.find(v); p != producer.end()) {
      if (!nodes.insert(p->second).second) continue;
      const auto& node = graph.node(p->second);
      for (int k = node.input_size(); k-- > 0;) work.push_back(node.input(k));
    } else {
      return invalid_argument(model.string() + ": value '" + v + "' has no producer in the main graph");
    }
  }

  ::onnx::ModelProto proto;
  proto.set_ir_version(loaded->proto().ir_version());
  *proto.mutable_opset_import() = loaded->proto().opset_import();
  proto.set_producer_name("loom compare --bisect");
  ::onnx::GraphProto* out = proto.mutable_graph();
  out->set_name((graph.name().empty() ? std::string("model") : graph.name()) + "_bisected");
  for (int n : nodes) *out->add_node() = graph.node(n);  // std::set: the model's order
  for (int i : inits) *out->add_initializer() = graph.initializer(i);
  LOOM_RETURN_IF_ERROR(detail::inline_external_initializers(*loaded, out));

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return unavailable("cannot create '" + out_dir.string() + "': " + ec.message());
  Reproducer r;
  r.nodes = nodes.size();
  std::set<std::string> used;
  auto file_for = [&](const std::string& prefix, const std::string& value) {
    std::string stem = prefix + io::npy_file_stem(value);
    std::string name = stem;
    for (int k = 2; !used.insert(name).second; ++k) name = stem + "_" + std::to_string(k);
    return out_dir / (name + ".npy");
  };
  // Each value: its type in the model, its reference value as a file.
  auto add_value = [&](const std::string& v, ::onnx::ValueInfoProto* info, const std::string& prefix,
                       std::vector<std::pair<std::string, fs::path>>& files) -> Status {
    const Tensor* value = comparison.reference_value(v);
    if (value == nullptr) return internal_error("no reference value for '" + v + "'");
    LOOM_RETURN_IF_ERROR(detail::set_value_info(info, v, *value));
    fs::path file = file_for(prefix, v);
    LOOM_RETURN_IF_ERROR(io::write_npy(file, *value));
    files.emplace_back(v, file);
    return Status();
  };
  for (const std::string& v : inputs) LOOM_RETURN_IF_ERROR(add_value(v, out->add_input(), "", r.inputs));
  for (const std::string& v : s.outputs) {
    LOOM_RETURN_IF_ERROR(add_value(v, out->add_output(), "expected_", r.expected));
  }
  r.model = out_dir / "model.onnx";
  LOOM_RETURN_IF_ERROR(detail::write_model_proto(proto, r.model));
  return r;
}

}  // namespace loom::conformance
