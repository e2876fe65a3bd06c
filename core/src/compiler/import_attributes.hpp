// ONNX attributes and Constant nodes turned into Loom's forms (private to the
// importer). Errors name the node and the attribute.
#pragma once

#include <string>

#include "graph/graph.hpp"
#include "loom/program.hpp"
#include "lowering/graph_passes.hpp"
#include "loom/status.hpp"
#include "onnx/onnx_model.hpp"
#include "onnx/onnx_pb.h"

namespace loom::compiler {

// One attribute. Graph-valued attributes (If/Loop/Scan bodies) are
// kUnimplemented; sparse tensors and type protos too. `where` names the node
// ("node 'n' (If, opset 13)").
Result<AttributeDef> convert_attribute(const onnx_io::Model& model,
                                       const ::onnx::AttributeProto& attr,
                                       const std::string& where);

// The value of a Constant node (value, value_float(s), value_int(s)) as a
// constant tensor named `name`; sparse_value and strings are refused.
Result<graph::Tensor> constant_node_value(const onnx_io::Model& model,
                                          const ::onnx::NodeProto& node, const std::string& name,
                                          const std::string& where);

// The model's statement about a tensor value (dtype from elem_type, dims),
// or an error when its type is not a tensor Loom knows.
Result<lowering::passes::DeclaredType> declared_of(const ::onnx::ValueInfoProto& v);

}  // namespace loom::compiler
