// Helpers for the importer tests: ONNX models built in code, test-only
// kernels for operators whose reference kernels live elsewhere (Gather,
// Unsqueeze, Concat, Reshape, Conv, BatchNormalization: minimal, just what
// the tests use), and a tiny interpreter that runs an imported graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/import.hpp"
#include "graph/graph.hpp"
#include "kernels/kernel.hpp"
#include "onnx/onnx_model.hpp"
#include "onnx/onnx_pb.h"
#include "onnx_fixtures.hpp"

namespace loom::compiler::testing {

using TP = ::onnx::TensorProto;

// Dimensions < 0 become dim_param "d<i>"; `no_shape` leaves the shape out.
void add_input(::onnx::ModelProto& m, const std::string& name, int32_t elem_type,
               std::vector<int64_t> dims, bool no_shape = false);
void add_output(::onnx::ModelProto& m, const std::string& name, int32_t elem_type,
                std::vector<int64_t> dims);
void add_value_info(::onnx::ModelProto& m, const std::string& name, int32_t elem_type,
                    std::vector<int64_t> dims);
::onnx::NodeProto& add_node(::onnx::ModelProto& m, const std::string& op,
                            std::vector<std::string> inputs, std::vector<std::string> outputs,
                            const std::string& name = "");
void attr_int(::onnx::NodeProto& n, const std::string& name, int64_t v);
void attr_ints(::onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v);
void attr_float(::onnx::NodeProto& n, const std::string& name, float v);
void init_f32(::onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims,
              const std::vector<float>& v);
void init_i64(::onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims,
              const std::vector<int64_t>& v);
void set_opset(::onnx::ModelProto& m, int64_t version);

std::unique_ptr<onnx_io::Model> parse(const ::onnx::ModelProto& m);
Result<ImportedModel> import(const ::onnx::ModelProto& m, const ImportOptions& options = {});
Result<ImportedModel> import(const ::onnx::ModelProto& m, const ImportOptions& options,
                             const kernels::KernelRegistry& registry);

// The reference kernels plus the test-only ones.
kernels::KernelRegistry test_registry();

// Runs `g` with the registry; `inputs` by name, f32 only. Returns every
// graph output's floats, in order.
Result<std::vector<std::vector<float>>> run_graph(
    const graph::Graph& g, const kernels::KernelRegistry& registry,
    const std::map<std::string, std::vector<float>>& inputs);

int32_t find_tensor(const graph::Graph& g, const std::string& name);
std::vector<int64_t> ints_of(const graph::Tensor& t);
std::vector<float> floats_of(const graph::Tensor& t);

}  // namespace loom::compiler::testing
