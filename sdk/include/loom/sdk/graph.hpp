// loom::sdk::GraphView: the verified, read-only view of the graph.fbs buffer
// a plugin's compile members receive (schemas/graph.fbs, file identifier
// "LMGR"; loom/sdk/compile.hpp for the members).
//
// Part of the C++17 plugin SDK, but NOT included by loom/plugin.hpp: it needs
// flatbuffers and the header flatc generates from graph.fbs
// (loom/graph/graph_generated.h), which CMake target Loom::graph_schema
// provides. Only plugins that compile include it, in every file that reads
// the graph and in the one with LOOM_SDK_DEFINE_ENTRY.
//
// What the compiler guarantees (graph.fbs's header comment is the contract)
// and what GraphView::open verifies again, so that the accessors below can
// be used without further checks on a view that opened:
//   - the buffer passes the flatbuffers verifier (bounded depth and tables),
//     starts on an 8-byte boundary and holds every int64 vector (shapes,
//     ints, t_shape) 8-byte aligned, so 64-bit reads in place are sound;
//   - every tensor index (graph inputs and outputs, node operands) is in
//     range; a node operand of -1 is an optional operand left out;
//   - every tensor has a known dtype and a static shape (no dimension < 0,
//     no element count overflow), except in an open graph (ABI 1.2, only
//     for a plugin declaring LOOM_PLUGIN_CAP_OPEN_SHAPES; the SDK's compile
//     entries open the graph so for such a plugin): there a dimension may be
//     -1, open, bound per execution; constants are static even then;
//   - a constant has either inline `data` of exactly its byte size or a
//     `parameter` name, never both, and every parameter is a graph input.
// What it does not check is operator semantics: op types, attribute values,
// operand counts and shapes are the plugin's to judge in compile_supported.
//
// Inline constant data, the true rule (core/src/graph/graph_codec.hpp): a
// constant arrives with inline `data` when it is of an integer or bool dtype
// (any size: shape operands such as Reshape's shape, Slice's starts), or of
// a floating-point dtype (f32, f16, bf16, f64) with at most 4096 bytes. So
// small weights and biases (up to 1024 f32 values) are inline constants, not
// execute inputs: a plugin must read them from data() (or refuse the node).
// Larger floating-point constants arrive as parameters: listed in
// Graph.inputs, so the compiled blob receives them as execute inputs, in
// Graph.inputs order.
//
// Ownership and threads: a GraphView borrows the buffer it was opened on,
// which the host keeps valid only for the compile_supported/compile call;
// copy whatever the blob needs. NodeView, TensorView and AttributeView borrow
// the GraphView. All accessors are const and may be used from several
// threads at once. Indices passed to accessors must be in range
// (i < node_count() and so on); the views never index out of what open
// verified.
#ifndef LOOM_SDK_GRAPH_HPP_
#define LOOM_SDK_GRAPH_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "loom/graph/graph_generated.h"
#include "loom/plugin.h"
#include "loom/sdk/status.hpp"

namespace loom::sdk {

// The generated flatbuffers types, for what the views do not wrap.
namespace graph_fb = ::loom::graph::fb;

// Bytes per element of `dtype`; 0 for LOOM_DTYPE_INVALID or an unknown value.
inline size_t dtype_size(loom_dtype_t dtype) {
  switch (dtype) {
    case LOOM_DTYPE_I8: case LOOM_DTYPE_U8: case LOOM_DTYPE_BOOL: return 1;
    case LOOM_DTYPE_F16: case LOOM_DTYPE_BF16: case LOOM_DTYPE_I16: case LOOM_DTYPE_U16: return 2;
    case LOOM_DTYPE_F32: case LOOM_DTYPE_I32: case LOOM_DTYPE_U32: return 4;
    case LOOM_DTYPE_F64: case LOOM_DTYPE_I64: case LOOM_DTYPE_U64: return 8;
    default: return 0;
  }
}

// "f32", "bool", ... for messages; "invalid" for anything unknown.
inline const char* dtype_name(loom_dtype_t dtype) {
  const auto d = static_cast<graph_fb::DType>(dtype);
  if (dtype < LOOM_DTYPE_INVALID || dtype > LOOM_DTYPE_BOOL) return "invalid";
  return d == graph_fb::DType::bool_ ? "bool" : graph_fb::EnumNameDType(d);
}

// "int", "floats", ... (ONNX's names) for messages.
inline const char* attribute_kind_name(graph_fb::AttributeKind kind) {
  static const char* const kNames[] = {"int", "float", "ints", "floats", "string", "tensor", "strings"};
  const auto k = static_cast<size_t>(kind);
  return k < sizeof kNames / sizeof kNames[0] ? kNames[k] : "unknown";
}

class GraphView;

// One tensor of the graph: an activation, a graph input, or a constant.
class TensorView {
 public:
  TensorView(const GraphView* graph, int32_t index) : graph_(graph), index_(index) {}

  int32_t index() const { return index_; }
  std::string name() const { return raw().name()->str(); }
  loom_dtype_t dtype() const { return static_cast<loom_dtype_t>(raw().dtype()); }
  size_t rank() const { return raw().shape() == nullptr ? 0 : raw().shape()->size(); }
  // Dimension `i` (< rank()); >= 0, or -1 for an open dimension (open
  // graphs only, see the top of this file).
  int64_t dim(size_t i) const { return raw().shape()->Get(static_cast<flatbuffers::uoffset_t>(i)); }
  // Whether a dimension is open (-1): then element_count() and byte_size()
  // are 0, and the shape is known only at execute.
  bool is_open() const {
    for (size_t i = 0; i < rank(); ++i) {
      if (dim(i) < 0) return true;
    }
    return false;
  }
  std::vector<int64_t> shape() const {
    std::vector<int64_t> s(rank());
    for (size_t i = 0; i < s.size(); ++i) s[i] = dim(i);
    return s;
  }
  // Product of the dimensions (1 for a scalar; verified not to overflow);
  // 0 for an open tensor.
  uint64_t element_count() const {
    uint64_t n = 1;
    for (size_t i = 0; i < rank(); ++i) {
      if (dim(i) < 0) return 0;
      n *= static_cast<uint64_t>(dim(i));
    }
    return n;
  }
  uint64_t byte_size() const { return element_count() * dtype_size(dtype()); }

  // Listed in Graph.inputs: the blob receives it as an execute input
  // (activations from outside the subgraph, and parameters).
  bool is_graph_input() const;
  // Listed in Graph.outputs: the blob writes it as an execute output.
  bool is_graph_output() const;

  // An inline constant: its little-endian, row-major bytes are in the graph
  // (see the rule at the top of this file).
  bool has_data() const { return raw().data() != nullptr; }
  // The inline bytes (nullptr without data); data_size() == byte_size().
  // Aligned to 16 bytes within the buffer only: copy (read_floats,
  // read_ints) rather than cast the pointer.
  const uint8_t* data() const { return has_data() ? raw().data()->data() : nullptr; }
  size_t data_size() const { return has_data() ? raw().data()->size() : 0; }
  // A weight bound at execute time by program parameter name; also a graph
  // input (is_graph_input()).
  bool is_parameter() const { return raw().parameter() != nullptr; }
  std::string parameter() const { return is_parameter() ? raw().parameter()->str() : std::string(); }
  // Either kind of constant: its value is the same on every execution.
  bool is_constant() const { return has_data() || is_parameter(); }

  // Copies an f32 inline constant out; INVALID_ARGUMENT naming the tensor
  // when it is not one.
  Status read_floats(std::vector<float>* out) const {
    if (!has_data() || dtype() != LOOM_DTYPE_F32) return not_a("an f32 inline constant");
    out->resize(data_size() / sizeof(float));
    if (!out->empty()) std::memcpy(out->data(), data(), out->size() * sizeof(float));
    return Status();
  }
  // Copies an integer inline constant (i8, i16, i32, i64, u8, u16, u32, or
  // bool) out as int64 values. u64 values above INT64_MAX are refused.
  Status read_ints(std::vector<int64_t>* out) const {
    const loom_dtype_t d = dtype();
    const bool is_int = d == LOOM_DTYPE_I8 || d == LOOM_DTYPE_I16 || d == LOOM_DTYPE_I32 ||
                        d == LOOM_DTYPE_I64 || d == LOOM_DTYPE_U8 || d == LOOM_DTYPE_U16 ||
                        d == LOOM_DTYPE_U32 || d == LOOM_DTYPE_U64 || d == LOOM_DTYPE_BOOL;
    if (!has_data() || !is_int) return not_a("an integer inline constant");
    const size_t es = dtype_size(d);
    const uint8_t* p = data();
    out->resize(data_size() / es);
    for (size_t i = 0; i < out->size(); ++i, p += es) {
      uint64_t u = 0;
      for (size_t b = 0; b < es; ++b) u |= static_cast<uint64_t>(p[b]) << (8 * b);
      const bool is_signed = d == LOOM_DTYPE_I8 || d == LOOM_DTYPE_I16 || d == LOOM_DTYPE_I32 ||
                             d == LOOM_DTYPE_I64;
      if (is_signed && es < 8 && (u >> (8 * es - 1)) != 0) u |= ~uint64_t{0} << (8 * es);
      if (d == LOOM_DTYPE_U64 && u > static_cast<uint64_t>(INT64_MAX)) {
        return invalid_argument("tensor " + name() + ": value " + std::to_string(u) +
                                " does not fit int64");
      }
      (*out)[i] = static_cast<int64_t>(u);
    }
    return Status();
  }

  const graph_fb::Tensor& raw() const;

 private:
  Status not_a(const char* what) const {
    return invalid_argument("tensor " + name() + " (" + dtype_name(dtype()) + ", " +
                            (has_data() ? "inline data" : is_parameter() ? "a parameter"
                                                                          : "not a constant") +
                            ") is not " + what);
  }

  const GraphView* graph_;
  int32_t index_;
};

// One attribute of a node, as ONNX wrote it.
class AttributeView {
 public:
  explicit AttributeView(const graph_fb::Attribute* a) : a_(a) {}

  std::string name() const { return a_->name()->str(); }
  graph_fb::AttributeKind kind() const { return a_->kind(); }
  int64_t i() const { return a_->i(); }
  float f() const { return a_->f(); }
  std::vector<int64_t> ints() const {
    return a_->ints() == nullptr ? std::vector<int64_t>()
                                 : std::vector<int64_t>(a_->ints()->begin(), a_->ints()->end());
  }
  std::vector<float> floats() const {
    return a_->floats() == nullptr ? std::vector<float>()
                                   : std::vector<float>(a_->floats()->begin(), a_->floats()->end());
  }
  std::string s() const { return a_->s() == nullptr ? std::string() : a_->s()->str(); }
  const graph_fb::Attribute& raw() const { return *a_; }

 private:
  const graph_fb::Attribute* a_;
};

// One entry of an attribute allow-list (NodeView::check_attributes): an
// attribute the plugin implements, and the first opset of the node's domain
// in which the operator has it (1: every opset). A bare name converts:
// check_attributes({"axis", {"saturate", 19}}).
struct AttributeRule {
  AttributeRule(const char* attribute, int64_t first_opset = 1) : name(attribute), since(first_opset) {}
  const char* name;
  int64_t since;
};

// One node: an ONNX operator with its operands (tensor indices) and
// attributes. Nodes come in topological order.
//
// The checked reads below (attributes, constant operands) fail with a
// reason about this node that does not repeat its label ("attribute 'axis'
// is ints, expected int", "input 1 must be an inline i64 constant"): a
// plugin reports it after label(), as in "node n1 (Relu) is not supported:
// <reason>", or keeps it as the reason it declines the node.
class NodeView {
 public:
  NodeView(const GraphView* graph, size_t index) : graph_(graph), index_(index) {}

  size_t index() const { return index_; }
  std::string name() const { return raw().name() == nullptr ? std::string() : raw().name()->str(); }
  std::string op_type() const { return raw().op_type()->str(); }
  // Empty for the default ONNX domain.
  std::string domain() const { return raw().domain() == nullptr ? std::string() : raw().domain()->str(); }
  // The opset of domain() the node was written for.
  int64_t opset() const { return raw().opset(); }
  // "node n1 (Relu)", or "node #3 (Relu)" when unnamed: for messages.
  std::string label() const {
    const std::string n = name();
    return "node " + (n.empty() ? "#" + std::to_string(index_) : n) + " (" + op_type() + ")";
  }

  size_t input_count() const { return raw().inputs() == nullptr ? 0 : raw().inputs()->size(); }
  // The tensor index of operand `i` (< input_count()), -1 when left out.
  int32_t input_index(size_t i) const { return raw().inputs()->Get(static_cast<flatbuffers::uoffset_t>(i)); }
  bool has_input(size_t i) const { return i < input_count() && input_index(i) >= 0; }
  // Operand `i`; only when has_input(i).
  TensorView input(size_t i) const { return TensorView(graph_, input_index(i)); }

  size_t output_count() const { return raw().outputs() == nullptr ? 0 : raw().outputs()->size(); }
  int32_t output_index(size_t i) const { return raw().outputs()->Get(static_cast<flatbuffers::uoffset_t>(i)); }
  bool has_output(size_t i) const { return i < output_count() && output_index(i) >= 0; }
  TensorView output(size_t i) const { return TensorView(graph_, output_index(i)); }

  size_t attribute_count() const { return raw().attributes() == nullptr ? 0 : raw().attributes()->size(); }
  AttributeView attribute(size_t i) const {
    return AttributeView(raw().attributes()->Get(static_cast<flatbuffers::uoffset_t>(i)));
  }
  // The attribute called `name`, or nullptr.
  const graph_fb::Attribute* find_attribute(const char* name) const {
    for (size_t i = 0; i < attribute_count(); ++i) {
      const graph_fb::Attribute* a = raw().attributes()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (std::strcmp(a->name()->c_str(), name) == 0) return a;
    }
    return nullptr;
  }
  bool has_attribute(const char* name) const { return find_attribute(name) != nullptr; }

  // The attribute allow-list: OK when every attribute of the node is one the
  // plugin implements at the node's opset, and none appears twice. A plugin
  // that calls this before reading attributes never ignores one it does not
  // know (an ignored attribute is a silently wrong result). Otherwise
  // INVALID_ARGUMENT: "attribute 'ceil_mode' is not supported",
  // "attribute 'saturate' is not supported at opset 13" (the rule names a
  // later first opset), "attribute 'axis' appears twice".
  Status check_attributes(std::initializer_list<AttributeRule> allowed) const {
    for (size_t i = 0; i < attribute_count(); ++i) {
      const char* name = raw().attributes()->Get(static_cast<flatbuffers::uoffset_t>(i))->name()->c_str();
      const AttributeRule* rule = nullptr;
      for (const AttributeRule& r : allowed) {
        if (std::strcmp(r.name, name) == 0) rule = &r;
      }
      if (rule == nullptr) return invalid_argument(std::string("attribute '") + name + "' is not supported");
      if (opset() < rule->since) {
        return invalid_argument(std::string("attribute '") + name + "' is not supported at opset " +
                                std::to_string(opset()));
      }
      for (size_t j = 0; j < i; ++j) {
        if (std::strcmp(raw().attributes()->Get(static_cast<flatbuffers::uoffset_t>(j))->name()->c_str(),
                        name) == 0) {
          return invalid_argument(std::string("attribute '") + name + "' appears twice");
        }
      }
    }
    return Status();
  }
  // Typed attribute reads: `fallback` when absent, INVALID_ARGUMENT naming
  // the attribute and both kinds when present with another kind.
  Status get_int(const char* name, int64_t fallback, int64_t* out) const {
    const graph_fb::Attribute* a = find_attribute(name);
    if (a != nullptr && a->kind() != graph_fb::AttributeKind::int_) return wrong_kind(a, "int");
    *out = a == nullptr ? fallback : a->i();
    return Status();
  }
  Status get_float(const char* name, float fallback, float* out) const {
    const graph_fb::Attribute* a = find_attribute(name);
    if (a != nullptr && a->kind() != graph_fb::AttributeKind::float_) return wrong_kind(a, "float");
    *out = a == nullptr ? fallback : a->f();
    return Status();
  }
  // Absent: `*out` left empty.
  Status get_ints(const char* name, std::vector<int64_t>* out) const {
    out->clear();
    const graph_fb::Attribute* a = find_attribute(name);
    if (a == nullptr) return Status();
    if (a->kind() != graph_fb::AttributeKind::ints) return wrong_kind(a, "ints");
    *out = AttributeView(a).ints();
    return Status();
  }
  Status get_string(const char* name, const char* fallback, std::string* out) const {
    const graph_fb::Attribute* a = find_attribute(name);
    if (a != nullptr && a->kind() != graph_fb::AttributeKind::string) return wrong_kind(a, "string");
    *out = a == nullptr ? std::string(fallback) : AttributeView(a).s();
    return Status();
  }

  // Constant operands: ONNX passes many operator parameters as inputs
  // (Reshape's shape, Slice's starts, Clip's bounds, Resize's scales). Each
  // read below wants operand `i` to be an inline constant (has_data() and
  // not a graph input), so that the value is known at compile time;
  // otherwise INVALID_ARGUMENT "input 1 is missing", "input 1 must be an
  // inline constant".
  Status constant_input(size_t i, TensorView* out) const {
    if (!has_input(i)) return invalid_argument("input " + std::to_string(i) + " is missing");
    const TensorView t = input(i);
    if (!t.has_data() || t.is_graph_input()) {
      return invalid_argument("input " + std::to_string(i) + " must be an inline constant");
    }
    *out = t;
    return Status();
  }
  // A list of int64 values (shape, axes, pads, starts): an inline i64
  // constant of rank 1, as ONNX defines these operands. "input 1 is i32 of
  // rank 1, expected an inline i64 constant of rank 1" otherwise.
  Status constant_int64s(size_t i, std::vector<int64_t>* out) const {
    TensorView t(nullptr, -1);
    LOOM_SDK_RETURN_IF_ERROR(constant_input(i, &t));
    if (t.dtype() != LOOM_DTYPE_I64 || t.rank() != 1) return wrong_constant(i, t, "i64");
    return t.read_ints(out);
  }
  // A list of f32 values (Resize's scales): an inline f32 constant of rank
  // 1.
  Status constant_floats(size_t i, std::vector<float>* out) const {
    TensorView t(nullptr, -1);
    LOOM_SDK_RETURN_IF_ERROR(constant_input(i, &t));
    if (t.dtype() != LOOM_DTYPE_F32 || t.rank() != 1) return wrong_constant(i, t, "f32");
    return t.read_floats(out);
  }
  // One f32 value (Clip's min and max): an inline f32 constant of one
  // element, any rank.
  Status constant_float(size_t i, float* out) const {
    TensorView t(nullptr, -1);
    LOOM_SDK_RETURN_IF_ERROR(constant_input(i, &t));
    if (t.dtype() != LOOM_DTYPE_F32 || t.element_count() != 1) {
      return invalid_argument("input " + std::to_string(i) + " is " + dtype_name(t.dtype()) + " of " +
                              std::to_string(t.element_count()) +
                              " elements, expected an inline f32 scalar constant");
    }
    std::memcpy(out, t.data(), sizeof(float));
    return Status();
  }

  const graph_fb::Node& raw() const;

 private:
  Status wrong_kind(const graph_fb::Attribute* a, const char* expected) const {
    return invalid_argument("attribute '" + a->name()->str() + "' is " + attribute_kind_name(a->kind()) +
                            ", expected " + expected);
  }
  static Status wrong_constant(size_t i, const TensorView& t, const char* dtype) {
    return invalid_argument("input " + std::to_string(i) + " is " + dtype_name(t.dtype()) + " of rank " +
                            std::to_string(t.rank()) + ", expected an inline " + dtype + " constant of rank 1");
  }

  const GraphView* graph_;
  size_t index_;
};

// A verified graph.fbs buffer. Default-constructed it is empty; open() fills
// it. Copyable (it copies a flag per tensor); borrows the buffer.
class GraphView {
 public:
  // Verifies `size` bytes at `data` as described at the top of this file.
  // INVALID_ARGUMENT naming the first problem and where it is otherwise:
  //   "graph.fbs: missing file identifier \"LMGR\""
  //   "graph.fbs: node 0 input 0: tensor index 99 out of range (2 tensors)"
  //   "graph.fbs: tensor 3 (w): data of 12 bytes, expected 4 x 4"
  // Work and memory are linear in `size`. Thread-safe.
  // With `allow_open_dims` (ABI 1.2, LOOM_PLUGIN_CAP_OPEN_SHAPES) a
  // dimension of -1 is accepted in a tensor that is not a constant.
  static Status open(const void* data, size_t size, GraphView* out, bool allow_open_dims = false);

  // Whether any tensor has an open dimension (only after open() with
  // allow_open_dims).
  bool has_open_dims() const { return has_open_dims_; }

  std::string name() const { return graph_->name() == nullptr ? std::string() : graph_->name()->str(); }

  size_t node_count() const { return graph_->nodes() == nullptr ? 0 : graph_->nodes()->size(); }
  NodeView node(size_t i) const { return NodeView(this, i); }

  size_t tensor_count() const { return tensor_flags_.size(); }
  TensorView tensor(size_t i) const { return TensorView(this, static_cast<int32_t>(i)); }

  // Graph.inputs / Graph.outputs: the blob's execute inputs and outputs, in
  // this order.
  size_t input_count() const { return graph_->inputs() == nullptr ? 0 : graph_->inputs()->size(); }
  TensorView input(size_t i) const {
    return TensorView(this, graph_->inputs()->Get(static_cast<flatbuffers::uoffset_t>(i)));
  }
  size_t output_count() const { return graph_->outputs() == nullptr ? 0 : graph_->outputs()->size(); }
  TensorView output(size_t i) const {
    return TensorView(this, graph_->outputs()->Get(static_cast<flatbuffers::uoffset_t>(i)));
  }

  // The generated root table, for fields the views do not wrap.
  const graph_fb::Graph& raw() const { return *graph_; }
  // The verified bytes the view was opened on (borrowed, see above): for a
  // plugin that keeps its own reader or passes the graph on.
  const void* buffer() const { return buffer_; }
  size_t buffer_size() const { return buffer_size_; }

 private:
  friend class TensorView;
  friend class NodeView;
  static constexpr uint8_t kInput = 1, kOutput = 2;

  const graph_fb::Graph* graph_ = nullptr;
  const void* buffer_ = nullptr;
  size_t buffer_size_ = 0;
  bool has_open_dims_ = false;
  std::vector<uint8_t> tensor_flags_;  // kInput | kOutput per tensor
};

inline const graph_fb::Tensor& TensorView::raw() const {
  return *graph_->graph_->tensors()->Get(static_cast<flatbuffers::uoffset_t>(index_));
}
inline bool TensorView::is_graph_input() const {
  return (graph_->tensor_flags_[static_cast<size_t>(index_)] & GraphView::kInput) != 0;
}
inline bool TensorView::is_graph_output() const {
  return (graph_->tensor_flags_[static_cast<size_t>(index_)] & GraphView::kOutput) != 0;
}
inline const graph_fb::Node& NodeView::raw() const {
  return *graph_->graph_->nodes()->Get(static_cast<flatbuffers::uoffset_t>(index_));
}

inline Status GraphView::open(const void* data, size_t size, GraphView* out, bool allow_open_dims) {
  *out = GraphView();
  // Verifier limits: a graph is a few tables per node; these bound the
  // verifier's work on hostile input without limiting real graphs.
  constexpr flatbuffers::uoffset_t kMaxDepth = 64;
  constexpr flatbuffers::uoffset_t kMaxTables = 10'000'000;
  if (data == nullptr || size == 0) return invalid_argument("graph.fbs: empty buffer");
  if (size < 8 || !graph_fb::GraphBufferHasIdentifier(data)) {
    return invalid_argument("graph.fbs: missing file identifier \"LMGR\"");
  }
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return invalid_argument("graph.fbs: " + std::to_string(size) +
                            " bytes, more than a flatbuffer can hold");
  }
  flatbuffers::Verifier verifier(static_cast<const uint8_t*>(data), size, kMaxDepth, kMaxTables);
  if (!graph_fb::VerifyGraphBuffer(verifier)) {
    return invalid_argument("graph.fbs: the buffer of " + std::to_string(size) +
                            " bytes fails flatbuffers verification");
  }
  // The verifier checks a vector's alignment only to 4 bytes (its length
  // field) and a scalar's relative to the buffer's start: 64-bit fields are
  // read in place, so the buffer must start 8-byte aligned and every int64
  // vector must be too (a hostile buffer can put one at 4 mod 8: UB on read).
  if (reinterpret_cast<uintptr_t>(data) % alignof(int64_t) != 0) {
    return invalid_argument("graph.fbs: the buffer does not start on an 8-byte boundary");
  }
  auto misaligned = [data](const flatbuffers::Vector<int64_t>* v) {
    // (An empty vector has nothing to read; builders may leave it at 4 mod 8.)
    return v != nullptr && v->size() != 0 && (reinterpret_cast<uintptr_t>(v->Data()) -
                            reinterpret_cast<uintptr_t>(data)) % alignof(int64_t) != 0;
  };
  auto offset_of = [data](const flatbuffers::Vector<int64_t>* v) {
    return std::to_string(reinterpret_cast<uintptr_t>(v->Data()) -
                          reinterpret_cast<uintptr_t>(data));
  };
  GraphView g;
  g.graph_ = graph_fb::GetGraph(data);
  g.buffer_ = data;
  g.buffer_size_ = size;
  const size_t tensors = g.graph_->tensors() == nullptr ? 0 : g.graph_->tensors()->size();
  g.tensor_flags_.assign(tensors, 0);
  auto check_index = [&](int32_t t, bool allow_absent, const std::string& where) -> Status {
    if (t == -1 && allow_absent) return Status();
    if (t < 0 || static_cast<size_t>(t) >= tensors) {
      return invalid_argument("graph.fbs: " + where + ": tensor index " + std::to_string(t) +
                              " out of range (" + std::to_string(tensors) + " tensors)");
    }
    return Status();
  };
  for (size_t i = 0; i < tensors; ++i) {
    const graph_fb::Tensor& t = *g.graph_->tensors()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const std::string where = "graph.fbs: tensor " + std::to_string(i) + " (" + t.name()->str() + ")";
    // The raw value is checked before it becomes a loom_dtype_t: a value
    // outside the enumeration is not one (UBSan: invalid enum load).
    const int64_t raw_dtype = static_cast<int64_t>(t.dtype());
    if (raw_dtype < 0 || raw_dtype > LOOM_DTYPE_BOOL ||
        dtype_size(static_cast<loom_dtype_t>(raw_dtype)) == 0) {
      return invalid_argument(where + ": unknown dtype " + std::to_string(raw_dtype));
    }
    const auto dtype = static_cast<loom_dtype_t>(raw_dtype);
    if (misaligned(t.shape())) {
      return invalid_argument(where + ": the shape's int64 elements at byte " +
                              offset_of(t.shape()) + " are not 8-byte aligned");
    }
    uint64_t count = 1;
    const size_t rank = t.shape() == nullptr ? 0 : t.shape()->size();
    const bool constant = t.data() != nullptr || t.parameter() != nullptr;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t dim = t.shape()->Get(static_cast<flatbuffers::uoffset_t>(d));
      if (dim == -1 && allow_open_dims && !constant) {
        g.has_open_dims_ = true;
        continue;
      }
      if (dim == -1 && allow_open_dims) {
        return invalid_argument(where + ": dimension " + std::to_string(d) +
                                " is open (-1), but a constant's shape is static");
      }
      if (dim < 0) {
        return invalid_argument(where + ": dimension " + std::to_string(d) + " is " +
                                std::to_string(dim) + "; shapes are static");
      }
      if (dim != 0 && count > (uint64_t{1} << 56) / static_cast<uint64_t>(dim)) {
        return invalid_argument(where + ": the shape's element count overflows");
      }
      count *= static_cast<uint64_t>(dim);
    }
    if (t.data() != nullptr && t.parameter() != nullptr) {
      return invalid_argument(where + ": has both data and parameter");
    }
    if (t.data() != nullptr && t.data()->size() != count * dtype_size(dtype)) {
      return invalid_argument(where + ": data of " + std::to_string(t.data()->size()) +
                              " bytes, expected " + std::to_string(count) + " x " +
                              std::to_string(dtype_size(dtype)));
    }
  }
  for (size_t i = 0; i < g.input_count(); ++i) {
    const int32_t t = g.graph_->inputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
    LOOM_SDK_RETURN_IF_ERROR(check_index(t, false, "graph input " + std::to_string(i)));
    g.tensor_flags_[static_cast<size_t>(t)] |= kInput;
  }
  for (size_t i = 0; i < g.output_count(); ++i) {
    const int32_t t = g.graph_->outputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
    LOOM_SDK_RETURN_IF_ERROR(check_index(t, false, "graph output " + std::to_string(i)));
    g.tensor_flags_[static_cast<size_t>(t)] |= kOutput;
  }
  for (size_t i = 0; i < tensors; ++i) {
    const graph_fb::Tensor& t = *g.graph_->tensors()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (t.parameter() != nullptr && (g.tensor_flags_[i] & kInput) == 0) {
      return invalid_argument("graph.fbs: tensor " + std::to_string(i) + " (" + t.name()->str() +
                              ") is parameter " + t.parameter()->str() +
                              " but not listed in Graph.inputs");
    }
  }
  for (size_t n = 0; n < g.node_count(); ++n) {
    const graph_fb::Node& node = *g.graph_->nodes()->Get(static_cast<flatbuffers::uoffset_t>(n));
    const std::string where = "node " + std::to_string(n);
    for (int pass = 0; pass < 2; ++pass) {
      const auto* list = pass == 0 ? node.inputs() : node.outputs();
      const size_t count = list == nullptr ? 0 : list->size();
      for (size_t i = 0; i < count; ++i) {
        LOOM_SDK_RETURN_IF_ERROR(check_index(list->Get(static_cast<flatbuffers::uoffset_t>(i)), true,
                                             where + (pass == 0 ? " input " : " output ") +
                                                 std::to_string(i)));
      }
    }
    const size_t attrs = node.attributes() == nullptr ? 0 : node.attributes()->size();
    for (size_t a = 0; a < attrs; ++a) {
      const graph_fb::Attribute& attr =
          *node.attributes()->Get(static_cast<flatbuffers::uoffset_t>(a));
      if (attr.kind() < graph_fb::AttributeKind::MIN || attr.kind() > graph_fb::AttributeKind::MAX) {
        return invalid_argument("graph.fbs: " + where + " (" + node.op_type()->str() +
                                "): attribute " + attr.name()->str() + " has unknown kind " +
                                std::to_string(static_cast<int>(attr.kind())));
      }
      for (const flatbuffers::Vector<int64_t>* v : {attr.ints(), attr.t_shape()}) {
        if (misaligned(v)) {
          return invalid_argument("graph.fbs: " + where + " (" + node.op_type()->str() +
                                  "): attribute " + attr.name()->str() + ": int64 elements at byte " +
                                  offset_of(v) + " are not 8-byte aligned");
        }
      }
    }
  }
  *out = std::move(g);
  return Status();
}

}  // namespace loom::sdk

#endif  // LOOM_SDK_GRAPH_HPP_
