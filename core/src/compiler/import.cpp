// import_onnx: reads the ModelProto into a graph::Graph (initializers and
// Constant nodes as constants, inputs bound to static shapes, nodes sorted),
// then runs the passes of import_passes.hpp.
//
// A node whose output shape depends on a value computed from model inputs
// (Reshape fed by a "shape" input) stops shape inference; the importer then
// asks ImportOptions::input_value for those inputs, makes them constants and
// starts the passes again on the freshly read graph. Each round freezes at
// least one input, so there are at most as many rounds as inputs.
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/import.hpp"
#include "compiler/import_attributes.hpp"
#include "compiler/import_contrib.hpp"
#include "compiler/import_control_flow.hpp"
#include "compiler/import_opsets.hpp"
#include "lowering/graph_passes.hpp"
#include "lowering/open_shapes.hpp"
#include "lowering/staged.hpp"
#include "onnx/onnx_pb.h"

namespace loom::compiler {

namespace passes = lowering::passes;

namespace {

using passes::DeclaredType;

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

std::string list_names(const std::vector<std::string>& names) {
  if (names.empty()) return "(none)";
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

// A given input shape disagrees with the model's: another rank, or another
// size where both fix one (-1 on either side agrees with any size).
bool contradicts_declared(const Shape& given, const Shape& declared) {
  if (given.size() != declared.size()) return true;
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i] >= 0 && declared[i] >= 0 && given[i] != declared[i]) return true;
  }
  return false;
}

struct ReadGraph {
  graph::Graph graph;
  std::vector<DeclaredType> declared;  // by tensor index
  // Per graph input: its signature (open dimensions -1, symbols, bounds).
  std::vector<ValueDef> input_signature;
  bool open = false;  // some input dimension is open
  // Some dimension the model fixes was opened ('?' in input_shapes): what
  // the model states about its outputs' sizes no longer holds.
  bool reopened = false;
  // ImportOptions::input_shapes_replace_declared: "x: [1] for the declared [3, 4]".
  std::vector<std::string> replaced_input_shapes;
  int64_t opset = 0;
  size_t constant_nodes = 0;
  // A body (subgraph) read by Reader::read_body: the outer-scope names it
  // captures, in the order of its trailing inputs.
  std::vector<std::string> captures;
  bool control_flow = false;  // some node (at any depth) has bodies
  // Per graph output: its kind (a sequence or an optional makes a staged
  // program) and, for those, its elements' dtype.
  std::vector<NonTensorType> output_kinds;
};

class Reader {
 public:
  Reader(const onnx_io::Model& model, const ImportOptions& options)
      : model_(model), proto_(model.proto()), gp_(model.proto().graph()), options_(options) {}
  // The reader of a body (subgraph) of a node that `parent` reads.
  Reader(Reader& parent, const ::onnx::GraphProto& body)
      : model_(parent.model_), proto_(parent.proto_), gp_(body), options_(parent.options_), parent_(&parent),
        opsets_(parent.opsets_) {
    out_.opset = parent.out_.opset;
  }

  Result<ReadGraph> read() {
    if (!proto_.has_graph()) return invalid_argument("the model has no graph");
    LOOM_RETURN_IF_ERROR(read_opsets());
    const auto& gp = gp_;
    out_.graph.name = gp.name();
    LOOM_RETURN_IF_ERROR(read_initializers());
    LOOM_RETURN_IF_ERROR(read_inputs());
    LOOM_ASSIGN_OR_RETURN(std::vector<int> order, sort_nodes());
    for (int n : order) LOOM_RETURN_IF_ERROR(read_node(n));
    for (const auto& o : gp.output()) {
      auto it = by_name_.find(o.name());
      if (it == by_name_.end()) {
        return invalid_argument("graph output '" + o.name() +
                                "' is not produced by any node, input or initializer");
      }
      out_.graph.outputs.push_back(it->second);
      NonTensorType kind;
      if (o.has_type()) {
        LOOM_ASSIGN_OR_RETURN(kind, non_tensor_type(o.type(), "graph output '" + o.name() + "'"));
      }
      out_.control_flow = out_.control_flow || kind.kind != ValueKind::kTensor;
      out_.output_kinds.push_back(kind);
    }
    // What the model declares about node outputs, for plugin-taken nodes and
    // to check inference against.
    out_.declared.resize(out_.graph.tensors.size());
    auto declare = [&](const ::onnx::ValueInfoProto& v) {
      auto it = by_name_.find(v.name());
      if (it == by_name_.end() || out_.graph.tensors[it->second].is_constant()) return;
      auto d = declared_of(v);
      if (d.ok()) out_.declared[it->second] = *d;  // an unusable statement is no statement
    };
    for (const auto& v : gp.value_info()) declare(v);
    for (const auto& v : gp.output()) declare(v);
    return std::move(out_);
  }

  // A body: its initializers and Constant nodes are constants; its inputs
  // take any type at run time (docs/control-flow.md), so they are read
  // without one; a name it reads from an enclosing scope becomes an input
  // after its own (a capture), or a constant of its own when the enclosing
  // tensor is one.
  Result<ReadGraph> read_body() {
    out_.graph.name = gp_.name();
    for (const auto& init : gp_.initializer()) {
      auto t = onnx_io::read_tensor(model_, init);
      if (!t.ok()) return t.status().with_context("initializer '" + init.name() + "'");
      graph::Tensor tensor{t->info().name, t->info().dtype, t->info().shape,
                           std::make_shared<const std::vector<std::byte>>(t->bytes().begin(), t->bytes().end())};
      LOOM_RETURN_IF_ERROR(add(std::move(tensor), "initializer").status());
    }
    for (const auto& in : gp_.input()) {
      if (in.name().empty()) return invalid_argument("an input has no name");
      if (by_name_.count(in.name())) continue;  // an initializer with a default, as in IR < 4
      DType dtype = DType::kInvalid;
      auto declared = declared_of(in);
      if (declared.ok()) dtype = declared->dtype;
      LOOM_ASSIGN_OR_RETURN(int32_t index, add(graph::Tensor{in.name(), dtype, {}, nullptr}, "input"));
      out_.graph.inputs.push_back(index);
    }
    LOOM_ASSIGN_OR_RETURN(std::vector<int> order, sort_nodes());
    for (int n : order) LOOM_RETURN_IF_ERROR(read_node(n));
    for (const auto& o : gp_.output()) {
      auto t = resolve(o.name());
      if (!t.ok()) return t.status().with_context("output '" + o.name() + "'");
      out_.graph.outputs.push_back(*t);
    }
    return std::move(out_);
  }

 private:
  // Whether `name` is defined so far here or in an enclosing scope.
  bool visible(const std::string& name) const {
    return by_name_.count(name) != 0 || (parent_ != nullptr && parent_->visible(name));
  }

  // The tensor `name` reads here: this graph's, or an enclosing scope's,
  // captured as a new input of this graph (a constant is copied instead).
  Result<int32_t> resolve(const std::string& name) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return it->second;
    if (parent_ == nullptr || !parent_->visible(name)) {
      return invalid_argument("'" + name + "' is produced by no node, input or initializer of this graph " +
                              (parent_ != nullptr ? "or of an enclosing one" : ""));
    }
    LOOM_ASSIGN_OR_RETURN(int32_t outer, parent_->resolve(name));
    const graph::Tensor& source = parent_->out_.graph.tensors[static_cast<size_t>(outer)];
    if (source.is_constant()) return add(source, "constant");
    LOOM_ASSIGN_OR_RETURN(int32_t index, add(graph::Tensor{name, source.dtype, {}, nullptr}, "capture"));
    out_.graph.inputs.push_back(index);
    out_.captures.push_back(name);
    return index;
  }

  Status read_opsets() {
    bool any = false;
    for (const auto& o : proto_.opset_import()) {
      if (is_default_domain(o.domain())) {
        out_.opset = o.version();
        any = true;
      } else {
        opsets_[o.domain()] = o.version();
      }
    }
    if (!any) {
      // Fine for a model made only of other domains' operators.
      for (const auto& node : proto_.graph().node()) {
        if (is_default_domain(node.domain())) {
          return invalid_argument("the model imports no opset of the default ONNX domain, but " +
                                  where_node(node) + " is in it");
        }
      }
      return Status();
    }
    LOOM_RETURN_IF_ERROR(check_default_opset(out_.opset));
    return Status();
  }

  Status read_initializers() {
    LOOM_ASSIGN_OR_RETURN(std::vector<onnx_io::TensorData> inits, onnx_io::read_initializers(model_));
    for (onnx_io::TensorData& t : inits) {
      graph::Tensor tensor;
      tensor.name = t.info().name;
      tensor.dtype = t.info().dtype;
      tensor.shape = t.info().shape;
      tensor.data = std::make_shared<const std::vector<std::byte>>(t.bytes().begin(), t.bytes().end());
      LOOM_RETURN_IF_ERROR(add(std::move(tensor), "initializer").status());
    }
    return Status();
  }

  Status read_inputs() {
    const auto& gp = gp_;
    std::vector<std::string> names;
    for (const auto& in : gp.input()) {
      if (!by_name_.count(in.name())) names.push_back(in.name());
    }
    for (const auto& [name, shape] : options_.input_shapes) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        return invalid_argument("a shape is given for input '" + name +
                                "', which the model does not have; its inputs are " +
                                list_names(names));
      }
    }
    for (const auto& [name, ranges] : options_.input_ranges) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        return invalid_argument("a range is given for input '" + name +
                                "', which the model does not have; its inputs are " +
                                list_names(names));
      }
    }
    for (const auto& in : gp.input()) {
      if (in.name().empty()) return invalid_argument("a graph input has no name");
      auto existing = by_name_.find(in.name());
      if (existing != by_name_.end()) {
        // IR < 4: an input that is also an initializer is a constant with a
        // default value; Loom keeps the initializer.
        if (out_.graph.tensors[existing->second].is_constant()) continue;
        return invalid_argument("graph input '" + in.name() + "' is listed twice");
      }
      if (in.has_type() && !in.type().has_tensor_type()) {  // a sequence or an optional
        LOOM_ASSIGN_OR_RETURN(NonTensorType kind, non_tensor_type(in.type(), "graph input '" + in.name() + "'"));
        ValueDef sig;
        sig.name = in.name();
        sig.kind = kind.kind;
        sig.dtype = kind.dtype;
        sig.unranked = true;
        out_.input_signature.push_back(std::move(sig));
        out_.control_flow = true;
        LOOM_ASSIGN_OR_RETURN(int32_t index, add(graph::Tensor{in.name(), kind.dtype, {}, nullptr}, "graph input"));
        out_.graph.inputs.push_back(index);
        continue;
      }
      auto declared = declared_of(in);
      if (!declared.ok()) return declared.status().with_context("graph input");
      LOOM_ASSIGN_OR_RETURN(graph::Tensor tensor, bind_input(in, *declared));
      Shape fixed = tensor.shape;  // open dimensions count as 1
      for (int64_t& dim : fixed) dim = std::max<int64_t>(dim, 1);
      if (!element_count(fixed).ok()) {
        return invalid_argument("graph input '" + in.name() + "' has an impossible shape " +
                                shape_to_string(tensor.shape) + " (too many elements)");
      }
      LOOM_ASSIGN_OR_RETURN(int32_t index, add(std::move(tensor), "graph input"));
      out_.graph.inputs.push_back(index);
    }
    return Status();
  }

  // The input's tensor (open dimensions -1) and its signature entry.
  Result<graph::Tensor> bind_input(const ::onnx::ValueInfoProto& in, const DeclaredType& d) {
    const std::string& name = in.name();
    if (d.dtype == DType::kInvalid) {
      return invalid_argument("graph input '" + name + "' has no element type");
    }
    graph::Tensor t{name, d.dtype, {}, nullptr};
    const Shape* given = nullptr;
    for (const auto& [n, s] : options_.input_shapes) {
      if (n == name) given = &s;
    }
    const std::vector<DimRange>* ranges = nullptr;
    for (const auto& [n, r] : options_.input_ranges) {
      if (n == name) ranges = &r;
    }
    if (given != nullptr) {
      for (int64_t dim : *given) {
        if (dim < -1) {
          return invalid_argument("the shape given for input '" + name + "', " +
                                  shape_to_string(*given) + ", has a negative dimension");
        }
      }
      const bool contradicts = d.has_shape && contradicts_declared(*given, d.dims);
      if (contradicts && options_.input_shapes_replace_declared) {
        // The caller's shape stands in for the model's statement, and what
        // the model states about its outputs may no longer hold.
        out_.replaced_input_shapes.push_back(name + ": " + shape_to_string(*given) + " for the declared " +
                                             shape_to_string(d.dims));
        out_.reopened = true;
      } else if (d.has_shape) {
        if (given->size() != d.dims.size()) {
          return invalid_argument("the shape given for input '" + name + "', " +
                                  shape_to_string(*given) + ", has rank " +
                                  std::to_string(given->size()) + "; the model's input has rank " +
                                  std::to_string(d.dims.size()));
        }
        for (size_t i = 0; i < d.dims.size(); ++i) {
          out_.reopened = out_.reopened || (d.dims[i] >= 0 && (*given)[i] < 0);
          if (d.dims[i] >= 0 && (*given)[i] >= 0 && d.dims[i] != (*given)[i]) {
            return invalid_argument("the shape given for input '" + name + "', " +
                                    shape_to_string(*given) + ", differs in dimension " +
                                    std::to_string(i) + " from the model's static size " +
                                    std::to_string(d.dims[i]));
          }
        }
      }
      t.shape = *given;
    } else if (!d.has_shape) {
      return invalid_argument("input '" + name + "' has no shape in the model (not even its rank); "
                              "give it, e.g. --input-shape " + name + "=1,3,224,224");
    } else {
      t.shape = d.dims;
    }
    ValueDef sig;
    sig.name = name;
    sig.dtype = d.dtype;
    sig.shape = t.shape;
    bool open = false, named = false;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      open = open || t.shape[i] < 0;
      const bool symbol = t.shape[i] < 0 && i < d.symbols.size() && !d.symbols[i].empty();
      sig.dim_symbols.push_back(symbol ? d.symbols[i] : std::string());
      named = named || symbol;
    }
    if (!named) sig.dim_symbols.clear();
    if (ranges != nullptr) {
      if (ranges->size() != t.shape.size()) {
        return invalid_argument("the range given for input '" + name + "' has " +
                                std::to_string(ranges->size()) + " dimensions; the input has rank " +
                                std::to_string(t.shape.size()));
      }
      for (size_t i = 0; i < ranges->size(); ++i) {
        const DimRange& r = (*ranges)[i];
        if (r.min == 0 && r.max == 0) continue;
        if (t.shape[i] >= 0) {
          return invalid_argument("input '" + name + "' dimension " + std::to_string(i) +
                                  " is fixed at " + std::to_string(t.shape[i]) +
                                  "; only an open dimension takes a range");
        }
        if (r.min < 0 || r.max < 0 || (r.max != 0 && r.min > r.max)) {
          return invalid_argument("input '" + name + "' dimension " + std::to_string(i) + ": " +
                                  std::to_string(r.min) + ".." + std::to_string(r.max) +
                                  " is not a range");
        }
      }
      sig.dim_min.resize(ranges->size());
      sig.dim_max.resize(ranges->size());
      for (size_t i = 0; i < ranges->size(); ++i) {
        sig.dim_min[i] = (*ranges)[i].min;
        sig.dim_max[i] = (*ranges)[i].max;
      }
    }
    out_.open = out_.open || open;
    out_.input_signature.push_back(std::move(sig));
    return t;
  }

  Result<int32_t> add(graph::Tensor tensor, std::string_view what) {
    if (by_name_.count(tensor.name)) {
      return invalid_argument(std::string(what) + " '" + tensor.name +
                              "' has the name of another tensor of the graph");
    }
    std::string name = tensor.name;
    const int32_t index = out_.graph.add_tensor(std::move(tensor));
    by_name_.emplace(std::move(name), index);
    return index;
  }

  std::string where(int n) const {
    const auto& node = gp_.node(n);
    const std::string name = node.name().empty() ? node.op_type() + "_" + std::to_string(n) : node.name();
    return "node '" + name + "' (" + node.op_type() + ")";
  }
  static std::string where_node(const ::onnx::NodeProto& node) {
    return "node '" + node.name() + "' (" + node.op_type() + ")";
  }

  // Kahn's algorithm, taking the lowest model index first so that a sorted
  // model keeps its order.
  Result<std::vector<int>> sort_nodes() {
    const auto& gp = gp_;
    const int count = gp.node_size();
    std::unordered_map<std::string, int> producer;
    for (int n = 0; n < count; ++n) {
      for (const std::string& o : gp.node(n).output()) {
        if (o.empty()) continue;
        if (by_name_.count(o)) {
          return invalid_argument(where(n) + " writes '" + o +
                                  "', which is a graph input or initializer");
        }
        if (!producer.emplace(o, n).second) {
          return invalid_argument(where(n) + " writes '" + o + "', which " +
                                  where(producer[o]) + " writes too");
        }
      }
    }
    std::vector<int> pending(count, 0);
    std::vector<std::vector<int>> users(count);
    for (int n = 0; n < count; ++n) {
      // A body's free names order its node after their producers too.
      std::vector<std::string> reads(gp.node(n).input().begin(), gp.node(n).input().end());
      const size_t own = reads.size();
      for (const auto& a : gp.node(n).attribute()) {
        if (a.has_g()) free_names(a.g(), reads);
      }
      std::unordered_set<int> counted;
      for (size_t k = 0; k < reads.size(); ++k) {
        const std::string& in = reads[k];
        if (in.empty() || by_name_.count(in)) continue;
        auto it = producer.find(in);
        if (it == producer.end()) {
          if (parent_ != nullptr && parent_->visible(in)) continue;  // captured
          return invalid_argument(where(n) + (k < own ? " reads '" : " has a body that reads '") + in +
                                  "', which no node, graph input or initializer " +
                                  (parent_ != nullptr ? "of this body or an enclosing graph " : "") + "produces");
        }
        if (it->second == n) {
          return invalid_argument(where(n) + " reads its own output '" + in + "'");
        }
        if (!counted.insert(it->second).second) continue;
        ++pending[n];
        users[it->second].push_back(n);
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int n = 0; n < count; ++n) {
      if (pending[n] == 0) ready.push(n);
    }
    std::vector<int> order;
    order.reserve(count);
    while (!ready.empty()) {
      const int n = ready.top();
      ready.pop();
      order.push_back(n);
      for (int u : users[n]) {
        if (--pending[u] == 0) ready.push(u);
      }
    }
    if (static_cast<int>(order.size()) != count) {
      for (int n = 0; n < count; ++n) {
        if (pending[n] > 0) {
          return invalid_argument("the graph has a cycle through " + where(n));
        }
      }
    }
    return order;
  }

  Status read_node(int n) {
    const auto& np = gp_.node(n);
    graph::Node node;
    node.name = np.name().empty() ? np.op_type() + "_" + std::to_string(n) : np.name();
    node.op_type = np.op_type();
    if (node.op_type.empty()) return invalid_argument("node " + std::to_string(n) + " has no op type");
    if (!is_default_domain(np.domain())) {
      node.domain = np.domain();
      auto it = opsets_.find(node.domain);
      if (it == opsets_.end()) {
        return invalid_argument("node '" + node.name + "' (" + node.op_type + ") is in domain '" +
                                node.domain + "', which the model does not import");
      }
      node.opset = it->second;
    } else {
      node.opset = out_.opset;
    }
    const std::string desc = passes::describe(node);

    if (node.domain.empty() && node.op_type == "Constant") {
      if (np.output_size() != 1 || np.output(0).empty()) {
        return invalid_argument(desc + " must have one output");
      }
      LOOM_ASSIGN_OR_RETURN(graph::Tensor t, constant_node_value(model_, np, np.output(0), desc));
      LOOM_RETURN_IF_ERROR(add(std::move(t), "output of " + desc).status());
      ++out_.constant_nodes;
      return Status();
    }
    std::vector<std::string> captures;  // of every body, in order of first use
    std::vector<std::pair<graph::Graph, std::vector<std::string>>> bodies;
    for (const auto& a : np.attribute()) {
      if (a.type() == ::onnx::AttributeProto::GRAPH) {
        Reader body(*this, a.g());
        auto read = body.read_body();
        if (!read.ok()) return read.status().with_context(desc + ", body '" + a.name() + "'");
        out_.control_flow = true;
        for (const std::string& c : read->captures) {
          if (std::find(captures.begin(), captures.end(), c) == captures.end()) captures.push_back(c);
        }
        node.bodies.push_back({a.name(), nullptr});
        bodies.emplace_back(std::move(read->graph), std::move(read->captures));
        continue;
      }
      if (a.type() == ::onnx::AttributeProto::TYPE_PROTO && node.op_type == "Optional") continue;  // run time decides
      LOOM_ASSIGN_OR_RETURN(AttributeDef def, convert_attribute(model_, a, desc));
      node.attributes.push_back(std::move(def));
    }
    // Every body takes every capture of the node, in one order (an If's
    // branches may capture different names).
    for (size_t b = 0; b < bodies.size(); ++b) {
      auto& [g, own] = bodies[b];
      const size_t first_capture = g.inputs.size() - own.size();
      std::vector<int32_t> formal(g.inputs.begin(), g.inputs.begin() + static_cast<std::ptrdiff_t>(first_capture));
      for (const std::string& c : captures) {
        auto it = std::find(own.begin(), own.end(), c);
        if (it != own.end()) {
          formal.push_back(g.inputs[first_capture + static_cast<size_t>(it - own.begin())]);
        } else {
          formal.push_back(g.add_tensor(graph::Tensor{c, DType::kInvalid, {}, nullptr}));
        }
      }
      g.inputs = std::move(formal);
      node.bodies[b].graph = std::make_shared<const graph::Graph>(std::move(g));
    }
    if (node.domain.empty() && node.op_type == "Split") {
      // Split into equal parts takes its part count from the node's outputs,
      // which infer() cannot see: record it the way opset 18 spells it.
      bool has = false;
      for (const AttributeDef& a : node.attributes) has |= a.name == "num_outputs";
      if (!has) {
        AttributeDef count;
        count.name = "num_outputs";
        count.kind = AttributeKind::kInt;
        count.i = np.output_size();
        node.attributes.push_back(std::move(count));
      }
    }
    for (const std::string& in : np.input()) {
      if (in.empty()) {
        node.inputs.push_back(graph::kNoTensor);
        continue;
      }
      LOOM_ASSIGN_OR_RETURN(int32_t t, resolve(in));  // sort_nodes() checked every name
      node.inputs.push_back(t);
    }
    for (const std::string& c : captures) {
      LOOM_ASSIGN_OR_RETURN(int32_t t, resolve(c));
      node.inputs.push_back(t);
    }
    node.captures = static_cast<int32_t>(captures.size());
    if (node.domain.empty() && (lowering::is_sequence_op(node.op_type) || lowering::is_optional_op(node.op_type))) {
      out_.control_flow = true;
    }
    if (node.domain.empty() && (node.op_type == "If" || node.op_type == "Loop" || node.op_type == "Scan")) {
      LOOM_RETURN_IF_ERROR(check_control_node(node, static_cast<size_t>(np.output_size()), desc));
    }
    // Optional outputs left out at the end are dropped; one left out in the
    // middle still needs a tensor, under a name of its own.
    int last = np.output_size();
    while (last > 0 && np.output(last - 1).empty()) --last;
    for (int k = 0; k < last; ++k) {
      std::string name = np.output(k);
      if (name.empty()) {
        name = node.name + ":unused" + std::to_string(k);
        while (by_name_.count(name)) name += "_";
      }
      LOOM_ASSIGN_OR_RETURN(int32_t t, add(graph::Tensor{name, DType::kInvalid, {}, nullptr},
                                           "output of " + desc));
      node.outputs.push_back(t);
    }
    if (node.outputs.empty()) return invalid_argument(desc + " has no output");
    if (is_expanded_contrib(node)) {
      // ONNX Runtime's QLinearAdd and friends: read as DequantizeLinear,
      // the f32 operator and QuantizeLinear (import_contrib.hpp).
      AddTensor add_tensor = [this](graph::Tensor t) {
        while (by_name_.count(t.name)) t.name += "_";
        return add(std::move(t), "tensor");
      };
      std::vector<graph::Node> expanded;
      LOOM_RETURN_IF_ERROR(expand_contrib_node(node, out_.opset, out_.graph, desc, add_tensor, &expanded));
      for (graph::Node& e : expanded) out_.graph.nodes.push_back(std::move(e));
      return Status();
    }
    if (node.domain.empty()) {
      AddConstant add_constant = [this](graph::Tensor t) {
        while (by_name_.count(t.name)) t.name += "_";
        return add(std::move(t), "constant");
      };
      LOOM_RETURN_IF_ERROR(normalize_node_form(node, out_.graph, desc, add_constant));
    }
    out_.graph.nodes.push_back(std::move(node));
    return Status();
  }

  const onnx_io::Model& model_;
  const ::onnx::ModelProto& proto_;
  const ::onnx::GraphProto& gp_;
  const ImportOptions& options_;
  Reader* parent_ = nullptr;  // a body's enclosing graph
  ReadGraph out_;
  std::unordered_map<std::string, int32_t> by_name_;
  std::unordered_map<std::string, int64_t> opsets_;
};

// Makes model input `t` a constant with the caller's value.
Status freeze_input(graph::Graph& g, int32_t t, const Tensor& value) {
  graph::Tensor& tensor = g.tensors[t];
  if (value.dtype() != tensor.dtype || value.shape() != tensor.shape) {
    return invalid_argument("the value given for input '" + tensor.name + "' is " +
                            std::string(dtype_name(value.dtype())) + " " +
                            shape_to_string(value.shape()) + "; the input is " +
                            std::string(dtype_name(tensor.dtype)) + " " +
                            shape_to_string(tensor.shape));
  }
  tensor.data = std::make_shared<const std::vector<std::byte>>(value.bytes().begin(),
                                                               value.bytes().end());
  g.inputs.erase(std::find(g.inputs.begin(), g.inputs.end(), t));
  return Status();
}

// An input dimension stays open: the graph is kept as read (less Identity
// nodes and what no output needs) for an open-shape program, whose runtime
// binds the shapes and runs the passes per binding. Checked here: every op
// has a reference kernel or a target that takes it, and with bounds given
// for every open dimension, the graph at both ends of them.
Result<ImportedModel> open_import(ReadGraph read, const ImportOptions& options,
                                  const kernels::KernelRegistry& kernels, ImportedModel result) {
  graph::Graph& g = read.graph;
  LOOM_RETURN_IF_ERROR(check_open_ops(g, &read.declared, options, kernels));
  result.control_flow = read.control_flow;
  if (options.remove_dead_nodes) result.stats.dead_nodes = passes::remove_dead_nodes(g);
  // Keep the declared types aligned with the tensors through compaction.
  std::vector<std::string> names(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) names[t] = g.tensors[t].name;
  std::unordered_map<std::string, DeclaredType> declared_by_name;
  for (size_t t = 0; t < read.declared.size() && t < g.tensors.size(); ++t) {
    declared_by_name.emplace(names[t], read.declared[t]);
  }
  passes::compact_tensors(g);
  result.declared.resize(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    auto it = declared_by_name.find(g.tensors[t].name);
    if (it != declared_by_name.end()) result.declared[t] = it->second;
  }
  Status valid = graph::validate(g, {.open = true});
  if (!valid.ok()) return internal_error("the imported graph is inconsistent: " + valid.message());

  result.open = true;
  result.signature.inputs = std::move(read.input_signature);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const int32_t t = g.outputs[i];
    ValueDef v;
    v.name = g.tensors[t].name;
    if (i < read.output_kinds.size() && read.output_kinds[i].kind != ValueKind::kTensor) {
      v.kind = read.output_kinds[i].kind;  // a sequence or an optional
      v.dtype = read.output_kinds[i].dtype;
      v.unranked = true;
      result.signature.outputs.push_back(std::move(v));
      continue;
    }
    const DeclaredType& d = result.declared[t];
    v.dtype = d.dtype;
    if (d.has_shape) {
      v.shape = d.dims;
      v.dim_symbols = d.symbols;
      // Sizes the model states were for the sizes it fixed, which an input
      // opened against the model's statement no longer has: open them all.
      if (read.reopened) {
        std::fill(v.shape.begin(), v.shape.end(), -1);
      }
    }
    result.signature.outputs.push_back(std::move(v));
  }

  // With bounds on every open dimension, infer the graph at both ends
  // (unless input values decide shapes: they are not known here).
  bool bounded = result.value_inputs.empty();
  bool any_open = false;
  for (const ValueDef& v : result.signature.inputs) {
    for (size_t d = 0; d < v.shape.size(); ++d) {
      any_open = any_open || v.shape[d] < 0;
      if (v.shape[d] < 0 && (d >= v.dim_max.size() || v.dim_min[d] == 0 || v.dim_max[d] == 0)) bounded = false;
    }
  }
  if (bounded && any_open && !result.control_flow) {
    lowering::OpenGraph open{g, result.declared, {}, false, options.keep_qdq_weights};
    for (const bool at_max : {false, true}) {
      std::vector<Shape> shapes;
      std::string binding;
      for (const ValueDef& v : result.signature.inputs) {
        Shape s = v.shape;
        for (size_t d = 0; d < s.size(); ++d) {
          if (s[d] < 0) s[d] = at_max ? v.dim_max[d] : v.dim_min[d];
        }
        binding += (binding.empty() ? "" : ", ") + v.name + "=" + shape_to_string(s);
        shapes.push_back(std::move(s));
      }
      auto bound = lowering::bind_open_graph(open, shapes, kernels, UINT64_MAX, {});
      if (!bound.ok()) {
        return bound.status().with_context(std::string("the declared ranges do not fit the graph at their ") +
                                           (at_max ? "maximum" : "minimum") + " (" + binding + ")");
      }
    }
  }
  result.graph = std::move(g);
  return result;
}

Result<ImportedModel> run_import(const onnx_io::Model& model, const ImportOptions& options,
                                 const kernels::KernelRegistry& kernels) {
  Reader reader(model, options);
  LOOM_ASSIGN_OR_RETURN(ReadGraph read, reader.read());
  ImportedModel result;
  result.stats.opset = read.opset;
  result.stats.model_nodes = static_cast<size_t>(model.proto().graph().node_size());
  result.stats.replaced_input_shapes = read.replaced_input_shapes;

  if (read.control_flow && inline_constant_ifs(read.graph) != 0) {
    read.control_flow = lowering::has_control_flow(read.graph);
  }
  if (options.remove_dead_nodes) result.stats.identity_nodes = passes::bypass_identities(read.graph);
  // Control flow: a staged program (docs/control-flow.md), whose parts are
  // bound as their inputs become known at run time, like an open graph.
  if (read.open || read.control_flow) return open_import(std::move(read), options, kernels, std::move(result));
  graph::Graph g;
  for (;;) {
    g = read.graph;  // constants are shared, not copied
    passes::InferStats infer_stats;
    std::optional<passes::NeedsValue> needs;
    passes::InferOptions infer;
    infer.plugin_takes = options.plugin_takes;
    infer.keep_qdq_weights = options.keep_qdq_weights;
    LOOM_RETURN_IF_ERROR(passes::infer_and_fold(g, read.declared, kernels, infer,
                                                options.fold_constants, infer_stats, needs));
    if (!needs) {
      result.stats.folded_nodes = read.constant_nodes + infer_stats.folded_nodes;
      break;
    }
    const graph::Node& node = g.nodes[needs->node];
    const std::vector<int32_t> sources = passes::source_inputs(g, needs->tensor);
    if (sources.empty()) return needs->cause.with_context(passes::describe(node));
    for (int32_t t : sources) {
      const std::string name = g.tensors[t].name;
      const Tensor* value = options.input_value ? options.input_value(name) : nullptr;
      if (value == nullptr && !passes::binds_values_per_run(g.tensors[t]) && node.domain.empty() &&
          lowering::is_value_shaped_op(node.op_type)) {
        // A detector's NonMaxSuppression on boxes computed from the image:
        // a staged program runs it on the host, at whatever size it gives.
        read.control_flow = true;
        return open_import(std::move(read), options, kernels, std::move(result));
      }
      if (value == nullptr && !passes::binds_values_per_run(g.tensors[t])) {
        return invalid_argument("input '" + name + "' (" + std::string(dtype_name(g.tensors[t].dtype)) + " " +
                                shape_to_string(g.tensors[t].shape) +
                                ") of the model decides the output shape of node '" + node.name + "' (" +
                                node.op_type + "); its value must be known at compile time (only an input "
                                "of at most " + std::to_string(passes::kMaxValueInputElements) +
                                " elements is bound per run)");
      }
      if (value == nullptr) {
        // Its values are known only when the program runs: an open-shape
        // program, which binds them per run.
        result.value_inputs.push_back(name + " (decides the output shape of node '" + node.name + "', " +
                                      node.op_type + ")");
        return open_import(std::move(read), options, kernels, std::move(result));
      }
      LOOM_RETURN_IF_ERROR(freeze_input(read.graph, t, *value));
      read.input_signature.erase(std::find_if(read.input_signature.begin(), read.input_signature.end(),
                                              [&](const ValueDef& v) { return v.name == name; }));
      result.stats.frozen_inputs.push_back(name);
    }
  }
  if (options.fold_batch_norm) {
    LOOM_ASSIGN_OR_RETURN(result.stats.fused_nodes, passes::fold_batch_norm(g));
  }
  if (options.remove_dead_nodes) result.stats.dead_nodes = passes::remove_dead_nodes(g);
  passes::compact_tensors(g);
  Status valid = graph::validate(g);
  if (!valid.ok()) return internal_error("the imported graph is inconsistent: " + valid.message());
  result.graph = std::move(g);
  return result;
}

}  // namespace

Result<ImportedModel> import_onnx(const onnx_io::Model& model, const ImportOptions& options,
                                  const kernels::KernelRegistry& kernels) {
  auto result = run_import(model, options, kernels);
  if (!result.ok()) return result.status().with_context(model.source());
  return result;
}

}  // namespace loom::compiler
