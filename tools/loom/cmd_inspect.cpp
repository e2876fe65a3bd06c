#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/artifacts.hpp"
#include "loom/program.hpp"

namespace loom::cli {
namespace {

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

nlohmann::json value_json(const ValueDef& v) {
  nlohmann::json j = {{"name", v.name}, {"dtype", std::string(dtype_name(v.dtype))}, {"shape", v.shape}};
  if (v.unranked) j["unranked"] = true;  // a staged program's value: any rank
  if (v.kind != ValueKind::kTensor) j["kind"] = value_kind_name(v.kind);  // format 1.6
  return j;
}

const char* op_name(OpCode op) {
  switch (op) {
    case OpCode::kDelegateCall: return "delegate_call";
    case OpCode::kKernelCall: return "kernel_call";
    case OpCode::kMove: return "move";
    case OpCode::kFree: return "free";
    case OpCode::kCall: return "call";
    case OpCode::kControl: return "control";
  }
  return "?";
}

nlohmann::json to_json(const ProgramReader& reader, const ArtifactRegistry& registry) {
  const ProgramHead& h = reader.head();
  const ProgramDef& p = reader.program();
  nlohmann::json out;
  out["head"] = {{"version", std::to_string(h.major) + "." + std::to_string(h.minor)},
                 {"head_size", h.head_size},
                 {"required_features", h.required_features},
                 {"optional_features", h.optional_features},
                 {"flatbuffer", {{"offset", h.flatbuffer_offset}, {"size", h.flatbuffer_size}}},
                 {"segment_table", {{"offset", h.segment_table_offset}, {"count", h.segment_count}}},
                 {"file_size", h.file_size}};
  out["producer"] = p.producer;
  out["segments"] = nlohmann::json::array();
  for (const SegmentInfo& s : reader.segments()) {
    out["segments"].push_back({{"offset", s.offset}, {"size", s.size},
                               {"alignment", s.alignment}, {"xxh3", hex64(s.checksum)}});
  }
  out["artifacts"] = nlohmann::json::object();
  for (const auto& [key, set] : registry.sets()) {
    nlohmann::json list = nlohmann::json::array();
    for (const Artifact& a : set.artifacts) {
      list.push_back({{"index", a.index}, {"codegen_id", a.def->codegen_id},
                      {"file_name", a.def->file_name}, {"format_version", a.def->format_version},
                      {"segment", a.def->content_segment}, {"bytes", a.content.size()}});
    }
    out["artifacts"][key] = list;
  }
  out["delegates"] = nlohmann::json::array();
  for (const DelegateDef& d : p.delegates) {
    nlohmann::json variants = nlohmann::json::array();
    for (uint32_t v : d.variants) variants.push_back(p.artifacts[v].loader_key);
    out["delegates"].push_back({{"name", d.name}, {"variants", variants}});
  }
  out["functions"] = nlohmann::json::array();
  for (const FunctionDef& f : p.functions) {
    nlohmann::json fn = {{"name", f.name}, {"inputs", nlohmann::json::array()},
                         {"outputs", nlohmann::json::array()}};
    for (uint32_t v : f.inputs) fn["inputs"].push_back(value_json(f.values[v]));
    for (uint32_t v : f.outputs) fn["outputs"].push_back(value_json(f.values[v]));
    fn["values"] = f.values.size();
    fn["arena_bytes"] = f.memory_plan.arena_size;
    nlohmann::json instructions = nlohmann::json::array();
    for (const InstructionDef& ins : f.instructions) {
      nlohmann::json j = {{"op", op_name(ins.op)}, {"inputs", ins.inputs}, {"outputs", ins.outputs}};
      if (ins.op == OpCode::kKernelCall) j["kernel"] = ins.kernel;
      if (ins.op == OpCode::kDelegateCall) j["delegate"] = p.delegates[ins.delegate].name;
      if (ins.op == OpCode::kControl) j["kernel"] = ins.kernel;
      if (ins.op == OpCode::kCall || ins.op == OpCode::kControl) {
        nlohmann::json callees = nlohmann::json::array();
        for (uint32_t callee : ins.functions) callees.push_back(p.functions[callee].name);
        j["functions"] = callees;
      }
      if (ins.captures != 0) j["captures"] = ins.captures;
      instructions.push_back(j);
    }
    fn["instructions"] = instructions;
    auto abi = nlohmann::json::parse(f.reflection, nullptr, false);
    fn["abi"] = abi.is_discarded() ? nlohmann::json(f.reflection) : abi;
    out["functions"].push_back(fn);
  }
  out["parameters"] = nlohmann::json::array();
  for (const ParameterDef& prm : p.parameters) {
    nlohmann::json j = {{"name", prm.name}, {"dtype", std::string(dtype_name(prm.dtype))},
                        {"shape", prm.shape}, {"bytes", prm.size}};
    if (prm.archive.empty()) {
      j["storage"] = "inline";
      j["segment"] = prm.segment;
      j["offset"] = prm.offset;
    } else {
      j["storage"] = "external";
      j["archive"] = prm.archive;
      j["scope"] = prm.scope;
    }
    if (prm.checksum != 0) j["xxh3"] = hex64(prm.checksum);
    out["parameters"].push_back(j);
  }
  return out;
}

}  // namespace

int run_inspect(const InspectArgs& args) {
  auto reader = ProgramReader::open_file(args.file);
  if (!reader.ok()) return fail(reader.status().with_context(args.file));
  auto registry = ArtifactRegistry::build(**reader);
  if (!registry.ok()) return fail(registry.status().with_context(args.file));
  nlohmann::json j = to_json(**reader, *registry);
  if (args.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const auto& h = j["head"];
  std::cout << args.file << ": Loom program " << h["version"].get<std::string>() << ", "
            << h["file_size"].get<uint64_t>() << " bytes, producer '"
            << j["producer"].get<std::string>() << "'\n";
  std::cout << "  features: required " << h["required_features"].get<uint64_t>()
            << ", optional " << h["optional_features"].get<uint64_t>() << "\n";
  std::cout << "  flatbuffer: " << h["flatbuffer"]["size"].get<uint64_t>() << " bytes at "
            << h["flatbuffer"]["offset"].get<uint64_t>() << "\n";
  std::cout << "segments (" << j["segments"].size() << "):\n";
  size_t i = 0;
  for (const auto& s : j["segments"]) {
    std::cout << "  #" << i++ << "  offset " << s["offset"].get<uint64_t>() << "  size "
              << s["size"].get<uint64_t>() << "  align " << s["alignment"].get<uint32_t>()
              << "  xxh3 " << s["xxh3"].get<std::string>() << "\n";
  }
  std::cout << "artifacts by loader key:\n";
  for (const auto& [key, list] : j["artifacts"].items()) {
    std::cout << "  " << key << ":\n";
    for (const auto& a : list) {
      std::cout << "    [" << a["index"].get<uint32_t>() << "] " << a["file_name"].get<std::string>()
                << "  format v" << a["format_version"].get<uint32_t>() << "  "
                << a["bytes"].get<uint64_t>() << " bytes\n";
    }
  }
  std::cout << "delegates:\n";
  for (const auto& d : j["delegates"]) {
    std::cout << "  " << d["name"].get<std::string>() << "  variants:";
    for (const auto& v : d["variants"]) std::cout << " " << v.get<std::string>();
    std::cout << "\n";
  }
  std::cout << "functions:\n";
  for (const auto& f : j["functions"]) {
    auto sig = [](const nlohmann::json& list) {
      std::string s;
      for (const auto& v : list) {
        if (!s.empty()) s += ", ";
        s += v["name"].get<std::string>() + ": ";
        if (v.contains("kind")) {  // "x: sequence of f32"
          s += v["kind"].get<std::string>() + " of " + v["dtype"].get<std::string>();
          continue;
        }
        s += v["dtype"].get<std::string>();
        s += v.contains("unranked") ? std::string("[any rank]") : shape_to_string(v["shape"].get<std::vector<int64_t>>());
      }
      return s;
    };
    std::cout << "  " << f["name"].get<std::string>() << "(" << sig(f["inputs"]) << ") -> ("
              << sig(f["outputs"]) << ")  " << f["instructions"].size() << " instructions, arena "
              << f["arena_bytes"].get<uint64_t>() << " bytes\n";
  }
  std::cout << "parameters: " << j["parameters"].size() << "\n";
  for (const auto& p : j["parameters"]) {
    std::cout << "  " << p["name"].get<std::string>() << ": " << p["dtype"].get<std::string>()
              << shape_to_string(p["shape"].get<std::vector<int64_t>>()) << "  "
              << p["bytes"].get<uint64_t>() << " bytes  ";
    if (p["storage"] == "inline") {
      std::cout << "inline (segment " << p["segment"].get<int32_t>() << ")\n";
    } else {
      std::cout << "archive '" << p["archive"].get<std::string>() << "' scope '"
                << p["scope"].get<std::string>() << "'\n";
    }
  }
  return 0;
}

}  // namespace loom::cli
