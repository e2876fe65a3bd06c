#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "program_file/fb_codec.hpp"
#include "program_file/format.hpp"
#include "loom/fb/program_generated.h"

namespace loom::container {
namespace {

// Decodes a verified buffer into ProgramDef. Flatbuffers may share a table
// or vector between many references, so a small hostile buffer could decode
// into a huge model; every decoded item is therefore charged the bytes it
// needs at least in an unshared buffer, and decoding stops once the charges
// exceed the buffer's size. A file from our writer never shares, so it
// always fits.
class Decoder {
 public:
  explicit Decoder(uint64_t budget) : budget_(budget) {}

  bool exceeded() const { return exceeded_; }

  ProgramDef program(const fb::Program& root) {
    ProgramDef out;
    charge(kTableCost);
    out.producer = str(root.producer());
    out.artifacts = all<ArtifactDef>(root.artifacts());
    out.delegates = all<DelegateDef>(root.delegates());
    out.functions = all<FunctionDef>(root.functions());
    out.parameters = all<ParameterDef>(root.parameters());
    out.metadata = key_values(root.metadata());
    return out;
  }

 private:
  static constexpr uint64_t kTableCost = 4;  // a table's soffset to its vtable

  bool charge(uint64_t bytes) {
    if (exceeded_ || bytes > budget_) {
      exceeded_ = true;
      return false;
    }
    budget_ -= bytes;
    return true;
  }

  std::string str(const flatbuffers::String* s) {
    if (!s || !charge(s->size())) return std::string();
    return s->str();
  }

  template <typename Out, typename In>
  std::vector<Out> scalars(const flatbuffers::Vector<In>* v) {
    std::vector<Out> out;
    if (!v || !charge(uint64_t{v->size()} * sizeof(In))) return out;
    out.reserve(v->size());
    // The verifier of flatbuffers 2.0.8 checks a vector's start for 4-byte
    // alignment only, so 8-byte elements of a crafted file may be misaligned:
    // copy them out instead of reading in place.
    const uint8_t* data = v->Data();
    for (uint32_t i = 0; i < v->size(); ++i) {
      In x;
      std::memcpy(&x, data + size_t{i} * sizeof(In), sizeof(In));
      out.push_back(static_cast<Out>(flatbuffers::EndianScalar(x)));
    }
    return out;
  }

  template <typename Def, typename Fb>
  std::vector<Def> all(const flatbuffers::Vector<flatbuffers::Offset<Fb>>* v) {
    std::vector<Def> out;
    if (!v || !charge(uint64_t{v->size()} * sizeof(flatbuffers::uoffset_t))) return out;
    out.reserve(v->size());
    for (const Fb* item : *v) {
      if (!charge(kTableCost)) break;
      out.push_back(decode(*item));
    }
    return out;
  }

  std::vector<KeyValue> key_values(
      const flatbuffers::Vector<flatbuffers::Offset<fb::KeyValue>>* kvs) {
    return all<KeyValue>(kvs);
  }

  static DType dtype(fb::DType d) { return static_cast<DType>(static_cast<uint8_t>(d)); }

  KeyValue decode(const fb::KeyValue& kv) { return {str(kv.key()), str(kv.value())}; }

  ArtifactDef decode(const fb::Artifact& a) {
    ArtifactDef out;
    out.codegen_id = str(a.codegen_id());
    out.loader_key = str(a.loader_key());
    out.format_version = a.format_version();
    out.file_name = str(a.file_name());
    out.content_segment = a.content_segment();
    out.metadata = key_values(a.metadata());
    return out;
  }

  DelegateDef decode(const fb::Delegate& d) {
    DelegateDef out;
    out.name = str(d.name());
    out.variants = scalars<uint32_t>(d.variants());
    out.compile_specs = key_values(d.compile_specs());
    return out;
  }

  ValueDef decode(const fb::Value& v) {
    ValueDef out;
    out.name = str(v.name());
    out.kind = static_cast<ValueKind>(static_cast<uint8_t>(v.kind()));
    out.dtype = dtype(v.dtype());
    out.shape = scalars<int64_t>(v.shape());
    out.dim_order = scalars<uint8_t>(v.dim_order());
    out.int_value = v.int_value();
    out.float_value = v.float_value();
    out.ints = scalars<int64_t>(v.ints());
    out.parameter = v.parameter();
    if (v.dim_symbols() != nullptr &&
        charge(uint64_t{v.dim_symbols()->size()} * sizeof(flatbuffers::uoffset_t))) {
      for (const flatbuffers::String* s : *v.dim_symbols()) out.dim_symbols.push_back(str(s));
    }
    out.dim_min = scalars<int64_t>(v.dim_min());
    out.dim_max = scalars<int64_t>(v.dim_max());
    out.unranked = v.unranked();
    return out;
  }

  AttributeDef decode(const fb::Attribute& a) {
    AttributeDef out;
    out.name = str(a.name());
    out.kind = static_cast<AttributeKind>(static_cast<uint8_t>(a.kind()));
    out.i = a.i();
    out.f = a.f();
    out.ints = scalars<int64_t>(a.ints());
    out.floats = scalars<float>(a.floats());
    out.s = str(a.s());
    out.t_dtype = dtype(a.t_dtype());
    out.t_shape = scalars<int64_t>(a.t_shape());
    std::vector<uint8_t> t_data = scalars<uint8_t>(a.t_data());
    out.t_data.resize(t_data.size());
    if (!t_data.empty()) std::memcpy(out.t_data.data(), t_data.data(), t_data.size());
    if (a.strings() != nullptr && charge(uint64_t{a.strings()->size()} * sizeof(flatbuffers::uoffset_t))) {
      for (const flatbuffers::String* s : *a.strings()) out.strings.push_back(str(s));
    }
    return out;
  }

  InstructionDef decode(const fb::Instruction& ins) {
    InstructionDef out;
    out.op = static_cast<OpCode>(static_cast<uint8_t>(ins.op()));
    out.delegate = ins.delegate();
    out.kernel = str(ins.kernel());
    out.attributes = all<AttributeDef>(ins.attributes());
    out.inputs = scalars<uint32_t>(ins.inputs());
    out.outputs = scalars<uint32_t>(ins.outputs());
    out.opset = ins.opset();
    out.functions = scalars<uint32_t>(ins.functions());
    out.captures = ins.captures();
    return out;
  }

  MemoryPlanDef decode(const fb::MemoryPlan* plan) {
    MemoryPlanDef out;
    if (!plan || !charge(kTableCost)) return out;
    out.arena_size = plan->arena_size();
    out.alignment = plan->alignment();
    const auto* slots = plan->slots();
    if (slots && charge(uint64_t{slots->size()} * sizeof(fb::MemorySlot))) {
      out.slots.reserve(slots->size());
      const uint8_t* data = slots->Data();  // possibly misaligned, as above
      for (uint32_t i = 0; i < slots->size(); ++i) {
        fb::MemorySlot s;
        std::memcpy(&s, data + size_t{i} * sizeof(fb::MemorySlot), sizeof(fb::MemorySlot));
        out.slots.push_back({s.value(), s.offset(), s.size()});
      }
    }
    return out;
  }

  FunctionDef decode(const fb::Function& f) {
    FunctionDef out;
    out.name = str(f.name());
    out.inputs = scalars<uint32_t>(f.inputs());
    out.outputs = scalars<uint32_t>(f.outputs());
    out.reflection = str(f.reflection());
    out.values = all<ValueDef>(f.values());
    out.instructions = all<InstructionDef>(f.instructions());
    out.memory_plan = decode(f.memory_plan());
    out.graph_artifact = f.graph_artifact();
    out.staged = f.staged();
    return out;
  }

  ParameterDef decode(const fb::Parameter& p) {
    ParameterDef out;
    out.name = str(p.name());
    out.scope = str(p.scope());
    out.dtype = dtype(p.dtype());
    out.shape = scalars<int64_t>(p.shape());
    out.segment = p.segment();
    out.offset = p.offset();
    out.size = p.size();
    out.checksum = p.checksum();
    out.archive = str(p.archive());
    return out;
  }

  uint64_t budget_;
  bool exceeded_ = false;
};

}  // namespace

Result<ProgramDef> decode_program(std::span<const std::byte> flatbuffer) {
  if (flatbuffer.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return invalid_argument("flatbuffer: " + std::to_string(flatbuffer.size()) +
                            " bytes exceed the flatbuffers limit of " +
                            std::to_string(FLATBUFFERS_MAX_BUFFER_SIZE) + " bytes");
  }
  // Generated accessors read scalars in place, so the buffer must sit at an
  // address aligned for its widest scalar; a caller's span may not.
  std::unique_ptr<uint64_t[]> aligned_copy;
  const auto* data = reinterpret_cast<const uint8_t*>(flatbuffer.data());
  if (reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) != 0) {
    aligned_copy.reset(new (std::nothrow) uint64_t[flatbuffer.size() / 8 + 1]);
    if (!aligned_copy) {
      return resource_exhausted("flatbuffer: cannot allocate " +
                                std::to_string(flatbuffer.size()) + " bytes for an aligned copy");
    }
    std::memcpy(aligned_copy.get(), data, flatbuffer.size());
    data = reinterpret_cast<const uint8_t*>(aligned_copy.get());
  }
  if (flatbuffer.size() < 8 || !fb::ProgramBufferHasIdentifier(data)) {
    return invalid_argument(std::string("flatbuffer: missing file identifier \"") +
                            kFlatbufferIdentifier + "\"");
  }
  flatbuffers::Verifier::Options options;
  options.max_depth = kVerifierMaxDepth;
  // Every table takes at least 4 bytes, so an honest buffer never has more
  // than size / 4 of them; a lower cap keeps shared-table tricks cheap.
  options.max_tables = static_cast<uint32_t>(
      std::min<uint64_t>(kVerifierMaxTables, flatbuffer.size() / 4 + 1));
  flatbuffers::Verifier verifier(data, flatbuffer.size(), options);
  if (!fb::VerifyProgramBuffer(verifier)) {
    return invalid_argument("flatbuffer: verification failed (" +
                            std::to_string(flatbuffer.size()) +
                            " bytes; an offset, size, alignment or required field is bad, or "
                            "nesting/table limits were exceeded)");
  }
  Decoder decoder(flatbuffer.size());
  ProgramDef out = decoder.program(*fb::GetProgram(data));
  if (decoder.exceeded()) {
    return invalid_argument("flatbuffer: decoding needs more than its " +
                            std::to_string(flatbuffer.size()) +
                            " bytes (tables or vectors shared by many references)");
  }
  return out;
}

}  // namespace loom::container
