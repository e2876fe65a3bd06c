#include "program_builder/program_builder.hpp"

#include <algorithm>

#include "common/hash.hpp"
#include "program_file/function_layout.hpp"

namespace loom::tools {

uint32_t FunctionBuilder::input(std::string name, DType dtype, Shape shape) {
  uint32_t v = value(std::move(name), dtype, std::move(shape));
  def_->inputs.push_back(v);
  return v;
}

uint32_t FunctionBuilder::constant(uint32_t parameter) {
  const ParameterDef& p = owner_->writer_.program().parameters.at(parameter);
  uint32_t v = value(p.name, p.dtype, p.shape);
  def_->values[v].parameter = static_cast<int32_t>(parameter);
  return v;
}

uint32_t FunctionBuilder::value(std::string name, DType dtype, Shape shape) {
  ValueDef v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  def_->values.push_back(std::move(v));
  return static_cast<uint32_t>(def_->values.size() - 1);
}

void FunctionBuilder::output(uint32_t value) { def_->outputs.push_back(value); }

void FunctionBuilder::kernel_call(std::string op, std::vector<uint32_t> inputs,
                                  std::vector<uint32_t> outputs,
                                  std::vector<AttributeDef> attributes) {
  InstructionDef ins;
  ins.op = OpCode::kKernelCall;
  ins.kernel = std::move(op);
  ins.inputs = std::move(inputs);
  ins.outputs = std::move(outputs);
  ins.attributes = std::move(attributes);
  def_->instructions.push_back(std::move(ins));
}

void FunctionBuilder::delegate_call(uint32_t delegate, std::vector<uint32_t> inputs,
                                    std::vector<uint32_t> outputs) {
  InstructionDef ins;
  ins.op = OpCode::kDelegateCall;
  ins.delegate = static_cast<int32_t>(delegate);
  ins.inputs = std::move(inputs);
  ins.outputs = std::move(outputs);
  def_->instructions.push_back(std::move(ins));
}

ProgramBuilder::ProgramBuilder(std::string producer) {
  writer_.program().producer = std::move(producer);
}

uint32_t ProgramBuilder::add_parameter(std::string name, const Tensor& tensor) {
  uint32_t segment = writer_.add_segment(tensor.bytes(), 64);
  ParameterDef p;
  p.name = std::move(name);
  p.dtype = tensor.dtype();
  p.shape = tensor.shape();
  p.segment = static_cast<int32_t>(segment);
  p.offset = 0;
  p.size = tensor.byte_size();
  p.checksum = xxh3_64(tensor.bytes());
  writer_.program().parameters.push_back(std::move(p));
  return static_cast<uint32_t>(writer_.program().parameters.size() - 1);
}

uint32_t ProgramBuilder::add_external_parameter(std::string name, const Tensor& tensor,
                                                ArchiveRef where) {
  return add_external_parameter(std::move(name), tensor.dtype(), tensor.shape(),
                                std::move(where), xxh3_64(tensor.bytes()));
}

uint32_t ProgramBuilder::add_external_parameter(std::string name, DType dtype, Shape shape,
                                                ArchiveRef where, uint64_t checksum) {
  ParameterDef p;
  p.name = std::move(name);
  p.scope = std::move(where.scope);
  p.archive = std::move(where.archive);
  p.dtype = dtype;
  // A bad shape is left for the writer's validation to report by name.
  auto count = element_count(shape);
  p.size = count.ok() ? *count * dtype_size(dtype) : 0;
  p.shape = std::move(shape);
  p.checksum = checksum;
  writer_.program().parameters.push_back(std::move(p));
  return static_cast<uint32_t>(writer_.program().parameters.size() - 1);
}

uint32_t ProgramBuilder::add_artifact(std::string loader_key, uint32_t format_version,
                                      std::string file_name,
                                      std::span<const std::byte> content) {
  ArtifactDef a;
  a.loader_key = std::move(loader_key);
  a.format_version = format_version;
  a.file_name = std::move(file_name);
  a.codegen_id = writer_.program().producer;
  a.content_segment = static_cast<int32_t>(writer_.add_segment(content));
  writer_.program().artifacts.push_back(std::move(a));
  return static_cast<uint32_t>(writer_.program().artifacts.size() - 1);
}

uint32_t ProgramBuilder::add_delegate(std::string name, std::vector<uint32_t> variants) {
  DelegateDef d;
  d.name = std::move(name);
  d.variants = std::move(variants);
  writer_.program().delegates.push_back(std::move(d));
  return static_cast<uint32_t>(writer_.program().delegates.size() - 1);
}

FunctionBuilder ProgramBuilder::add_function(std::string name) {
  FunctionDef f;
  f.name = std::move(name);
  writer_.program().functions.push_back(std::move(f));
  return FunctionBuilder(this, &writer_.program().functions.back());
}

Result<ProgramWriter> ProgramBuilder::finish() {
  for (FunctionDef& f : writer_.program().functions) {
    plan_function_memory(f);
    f.reflection = function_reflection(f);
  }
  return std::move(writer_);
}

}  // namespace loom::tools
