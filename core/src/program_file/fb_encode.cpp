#include <flatbuffers/flatbuffers.h>

#include <cstring>

#include "program_file/fb_codec.hpp"
#include "loom/fb/program_generated.h"

namespace loom::container {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// Empty strings and vectors are left out: they decode to the same empty value.
Offset<flatbuffers::String> opt_string(FlatBufferBuilder& b, const std::string& s) {
  return s.empty() ? 0 : b.CreateString(s);
}

template <typename T>
Offset<flatbuffers::Vector<T>> opt_vector(FlatBufferBuilder& b, const std::vector<T>& v) {
  return v.empty() ? 0 : b.CreateVector(v);
}

Offset<flatbuffers::Vector<Offset<fb::KeyValue>>> key_values(
    FlatBufferBuilder& b, const std::vector<KeyValue>& kvs) {
  if (kvs.empty()) return 0;
  std::vector<Offset<fb::KeyValue>> out;
  out.reserve(kvs.size());
  for (const KeyValue& kv : kvs) {
    auto key = b.CreateString(kv.key);
    out.push_back(fb::CreateKeyValue(b, key, opt_string(b, kv.value)));
  }
  return b.CreateVector(out);
}

fb::DType to_fb(DType d) { return static_cast<fb::DType>(static_cast<uint8_t>(d)); }

Offset<fb::Artifact> encode(FlatBufferBuilder& b, const ArtifactDef& a) {
  auto codegen_id = opt_string(b, a.codegen_id);
  auto loader_key = b.CreateString(a.loader_key);
  auto file_name = opt_string(b, a.file_name);
  auto metadata = key_values(b, a.metadata);
  return fb::CreateArtifact(b, codegen_id, loader_key, a.format_version, file_name,
                            a.content_segment, metadata);
}

Offset<fb::Delegate> encode(FlatBufferBuilder& b, const DelegateDef& d) {
  auto name = b.CreateString(d.name);
  auto variants = b.CreateVector(d.variants);  // required, even when empty
  auto specs = key_values(b, d.compile_specs);
  return fb::CreateDelegate(b, name, variants, specs);
}

Offset<fb::Value> encode(FlatBufferBuilder& b, const ValueDef& v) {
  auto name = opt_string(b, v.name);
  auto shape = opt_vector(b, v.shape);
  auto dim_order = opt_vector(b, v.dim_order);
  auto ints = opt_vector(b, v.ints);
  Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> symbols = 0;
  if (!v.dim_symbols.empty()) symbols = b.CreateVectorOfStrings(v.dim_symbols);
  auto dim_min = opt_vector(b, v.dim_min);
  auto dim_max = opt_vector(b, v.dim_max);
  return fb::CreateValue(b, name, static_cast<fb::ValueKind>(static_cast<uint8_t>(v.kind)),
                         to_fb(v.dtype), shape, dim_order, v.int_value, v.float_value, ints,
                         v.parameter, symbols, dim_min, dim_max, v.unranked);
}

Offset<fb::Attribute> encode(FlatBufferBuilder& b, const AttributeDef& a) {
  auto name = b.CreateString(a.name);
  auto ints = opt_vector(b, a.ints);
  auto floats = opt_vector(b, a.floats);
  auto s = opt_string(b, a.s);
  auto t_shape = opt_vector(b, a.t_shape);
  Offset<flatbuffers::Vector<uint8_t>> t_data = 0;
  if (!a.t_data.empty()) {
    t_data = b.CreateVector(reinterpret_cast<const uint8_t*>(a.t_data.data()), a.t_data.size());
  }
  Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> strings = 0;
  if (!a.strings.empty()) strings = b.CreateVectorOfStrings(a.strings);
  return fb::CreateAttribute(b, name,
                             static_cast<fb::AttributeKind>(static_cast<uint8_t>(a.kind)), a.i,
                             a.f, ints, floats, s, to_fb(a.t_dtype), t_shape, t_data, strings);
}

Offset<fb::Instruction> encode(FlatBufferBuilder& b, const InstructionDef& ins) {
  auto kernel = opt_string(b, ins.kernel);
  Offset<flatbuffers::Vector<Offset<fb::Attribute>>> attributes = 0;
  if (!ins.attributes.empty()) {
    std::vector<Offset<fb::Attribute>> out;
    for (const AttributeDef& a : ins.attributes) out.push_back(encode(b, a));
    attributes = b.CreateVector(out);
  }
  auto inputs = opt_vector(b, ins.inputs);
  auto outputs = opt_vector(b, ins.outputs);
  auto functions = opt_vector(b, ins.functions);
  return fb::CreateInstruction(b, static_cast<fb::OpCode>(static_cast<uint8_t>(ins.op)),
                               ins.delegate, kernel, attributes, inputs, outputs, ins.opset,
                               functions, ins.captures);
}

Offset<fb::MemoryPlan> encode(FlatBufferBuilder& b, const MemoryPlanDef& plan) {
  Offset<flatbuffers::Vector<const fb::MemorySlot*>> slots = 0;
  if (!plan.slots.empty()) {
    std::vector<fb::MemorySlot> out;
    out.reserve(plan.slots.size());
    for (const MemorySlotDef& s : plan.slots) out.emplace_back(s.value, s.offset, s.size);
    slots = b.CreateVectorOfStructs(out);
  }
  return fb::CreateMemoryPlan(b, plan.arena_size, plan.alignment, slots);
}

Offset<fb::Function> encode(FlatBufferBuilder& b, const FunctionDef& f) {
  auto name = b.CreateString(f.name);
  auto inputs = opt_vector(b, f.inputs);
  auto outputs = opt_vector(b, f.outputs);
  auto reflection = opt_string(b, f.reflection);
  Offset<flatbuffers::Vector<Offset<fb::Value>>> values = 0;
  if (!f.values.empty()) {
    std::vector<Offset<fb::Value>> out;
    for (const ValueDef& v : f.values) out.push_back(encode(b, v));
    values = b.CreateVector(out);
  }
  Offset<flatbuffers::Vector<Offset<fb::Instruction>>> instructions = 0;
  if (!f.instructions.empty()) {
    std::vector<Offset<fb::Instruction>> out;
    for (const InstructionDef& ins : f.instructions) out.push_back(encode(b, ins));
    instructions = b.CreateVector(out);
  }
  auto plan = encode(b, f.memory_plan);
  return fb::CreateFunction(b, name, inputs, outputs, reflection, values, instructions, plan,
                            f.graph_artifact, f.staged);
}

Offset<fb::Parameter> encode(FlatBufferBuilder& b, const ParameterDef& p) {
  auto name = b.CreateString(p.name);
  auto scope = opt_string(b, p.scope);
  auto shape = opt_vector(b, p.shape);
  auto archive = opt_string(b, p.archive);
  return fb::CreateParameter(b, name, scope, to_fb(p.dtype), shape, p.segment, p.offset,
                             p.size, p.checksum, archive);
}

template <typename Def>
auto encode_all(FlatBufferBuilder& b, const std::vector<Def>& defs)
    -> Offset<flatbuffers::Vector<decltype(encode(b, defs.front()))>> {
  if (defs.empty()) return 0;
  std::vector<decltype(encode(b, defs.front()))> out;
  out.reserve(defs.size());
  for (const Def& d : defs) out.push_back(encode(b, d));
  return b.CreateVector(out);
}

}  // namespace

std::vector<std::byte> encode_program(const ProgramDef& program) {
  FlatBufferBuilder b(4096);
  auto producer = opt_string(b, program.producer);
  auto artifacts = encode_all(b, program.artifacts);
  auto delegates = encode_all(b, program.delegates);
  auto functions = encode_all(b, program.functions);
  auto parameters = encode_all(b, program.parameters);
  auto metadata = key_values(b, program.metadata);
  auto root = fb::CreateProgram(b, producer, artifacts, delegates, functions, parameters,
                                metadata);
  fb::FinishProgramBuffer(b, root);
  std::vector<std::byte> out(b.GetSize());
  std::memcpy(out.data(), b.GetBufferPointer(), out.size());
  return out;
}

}  // namespace loom::container
