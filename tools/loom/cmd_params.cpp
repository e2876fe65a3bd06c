// `loom params`: make, inspect and edit IREE parameter archives (.irpa).
//
//   create -o OUT.irpa [NAME=FILE.npy ...] [--from-onnx MODEL.onnx] [--append]
//   dump FILE [--json]
//   repack IN -o OUT            one archive from a linked chain, later entries win
//   strip IN -o OUT             every entry a splat of zeros (metadata kept)
//   splat IN -o OUT --key NAME --pattern 0x3f800000
//   rename IN -o OUT OLD=NEW ...
//   extract FILE NAME -o OUT.npy [--raw]
//
// Entries made by create carry {"dtype":..,"shape":[..]} as metadata, which
// extract uses to rebuild the .npy. The editing actions read the whole chain
// and write one new archive (later entries win); the builder writes it
// beside OUT and renames it over, so OUT may be the input itself.
#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <system_error>

#include "commands.hpp"
#include "loom/npy.hpp"
#include "params_support.hpp"

#if LOOM_HAVE_ONNX
#include "loom/onnx_initializers.hpp"
#endif

namespace loom::cli {
namespace {

namespace fs = std::filesystem;
namespace irpa = loom::io::irpa;
using params::ArchiveCopier;

// extract writes a splat out in full; past this it is surely a mistake
// (a stripped multi-gigabyte weight), and the allocation could fail.
constexpr uint64_t kMaxMaterializedSplat = uint64_t{4} << 30;

// Each action returns the line it prints on success (what it wrote).
Result<std::string> create_archive(const ParamsArgs& args) {
  if (args.pairs.empty() && args.from_onnx.empty()) {
    return invalid_argument("params create: nothing to write; give NAME=FILE.npy ... or "
                            "--from-onnx MODEL.onnx");
  }
  if (args.alignment == 0 || (args.alignment & (args.alignment - 1)) != 0 ||
      args.alignment > irpa::kMaxDataAlignment) {
    return invalid_argument("--alignment " + std::to_string(args.alignment) +
                            " is not a power of two between 1 and " +
                            std::to_string(irpa::kMaxDataAlignment));
  }
  std::error_code ec;
  if (args.append && !fs::is_regular_file(args.output, ec)) {
    return not_found("--append: " + args.output + " is not an existing archive");
  }

  // Everything is loaded before the builder sees a span: the builder keeps
  // views until the archive is written.
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> names;
  for (const std::string& pair : args.pairs) {
    LOOM_ASSIGN_OR_RETURN(auto split, params::split_pair(pair, "NAME=FILE.npy"));
    auto& [name, path] = split;
    if (!names.insert(name).second) return invalid_argument("NAME '" + name + "' is given twice");
    LOOM_ASSIGN_OR_RETURN(Tensor t, io::read_npy(path));
    tensors.emplace_back(name, std::move(t));
  }
  irpa::ArchiveBuilder builder(args.alignment);
  for (const auto& [name, t] : tensors) {
    LOOM_RETURN_IF_ERROR(builder.add_data(name, t.bytes(),
                                          io::encode_tensor_metadata(t.dtype(), t.shape())));
  }

#if LOOM_HAVE_ONNX
  std::optional<OnnxInitializers> initializers;
  if (!args.from_onnx.empty()) {
    LOOM_ASSIGN_OR_RETURN(initializers, OnnxInitializers::read_file(args.from_onnx));
    if (initializers->entries().empty()) {
      return invalid_argument(args.from_onnx + ": the model has no initializers");
    }
    for (const OnnxInitializer& init : initializers->entries()) {
      if (!names.insert(init.name).second) {
        return invalid_argument("initializer '" + init.name + "' of " + args.from_onnx +
                                " has the name of a NAME=FILE.npy argument");
      }
      LOOM_RETURN_IF_ERROR(builder.add_data(init.name, init.bytes,
                                            io::encode_tensor_metadata(init.dtype, init.shape)));
    }
  }
#else
  if (!args.from_onnx.empty()) {
    return unimplemented("--from-onnx: loom was built without ONNX support "
                         "(configure with -DLOOM_WITH_ONNX=ON)");
  }
#endif

  Status st = args.append ? builder.append_to_file(args.output) : builder.write_file(args.output);
  if (!st.ok()) return st.with_context(args.output);
  return std::string(args.append ? "appended " : "wrote ") + std::to_string(names.size()) +
         (names.size() == 1 ? " entry" : " entries") + " to " +
         args.output;
}

Result<std::string> extract_entry(const ParamsArgs& args) {
  LOOM_ASSIGN_OR_RETURN(auto reader, params::open_archive(args.input));
  const irpa::Entry* entry = reader->find(args.name);
  if (!entry) return params::unknown_key(*reader, args.input, args.name);

  if (entry->length > static_cast<uint64_t>(INT64_MAX)) {
    return out_of_range("entry '" + entry->name + "' claims " + std::to_string(entry->length) +
                        " bytes");
  }
  params::TensorLayout layout{DType::kU8, {static_cast<int64_t>(entry->length)}};
  if (!args.raw) {
    LOOM_ASSIGN_OR_RETURN(auto from_metadata,
                          params::layout_from_metadata(entry->metadata, entry->length));
    if (from_metadata) layout = std::move(*from_metadata);
  }

  Tensor tensor;
  if (entry->type == irpa::EntryType::kSplat) {
    if (entry->length > kMaxMaterializedSplat) {
      return resource_exhausted("entry '" + entry->name + "' is a splat of " +
                                std::to_string(entry->length) + " bytes; extract writes "
                                "splats of at most " + std::to_string(kMaxMaterializedSplat));
    }
    LOOM_ASSIGN_OR_RETURN(tensor, Tensor::zeros(layout.dtype, layout.shape));
    std::span<std::byte> out(static_cast<std::byte*>(tensor.data()), tensor.byte_size());
    LOOM_RETURN_IF_ERROR(reader->read(*entry, 0, out));
  } else {
    LOOM_ASSIGN_OR_RETURN(auto bytes, reader->view(*entry));
    // A read-only view: write_npy only reads the tensor, and the mapping
    // stays alive in `reader` until it returns.
    void* data = const_cast<std::byte*>(bytes.data());
    LOOM_ASSIGN_OR_RETURN(tensor, Tensor::view(layout.dtype, layout.shape, data, bytes.size()));
  }
  Status st = io::write_npy(args.output, tensor);
  if (!st.ok() && dtype_name(layout.dtype) == "bf16") {
    return st.with_context("entry '" + entry->name + "' (pass --raw for its bytes)");
  }
  if (!st.ok()) return st;
  return "wrote entry '" + entry->name + "' as " + std::string(dtype_name(layout.dtype)) +
         shape_to_string(layout.shape) + " to " + args.output;
}

// The editing actions: read the chain, write one archive.
Result<std::string> transform_archive(const ParamsArgs& args) {
  std::optional<params::Pattern> pattern;
  if (args.action == "splat") {
    LOOM_ASSIGN_OR_RETURN(pattern, params::parse_pattern(args.pattern));
  }
  std::map<std::string, std::string> renames;
  if (args.action == "rename") {
    if (args.pairs.empty()) return invalid_argument("params rename: give OLD=NEW ...");
    std::set<std::string> targets;
    for (const std::string& pair : args.pairs) {
      LOOM_ASSIGN_OR_RETURN(auto split, params::split_pair(pair, "OLD=NEW"));
      if (!renames.emplace(split.first, split.second).second) {
        return invalid_argument("'" + split.first + "' is renamed twice");
      }
      if (!targets.insert(split.second).second) {
        return invalid_argument("two entries would be named '" + split.second + "'");
      }
    }
  }
  LOOM_ASSIGN_OR_RETURN(auto reader, params::open_archive(args.input));

  if (args.action == "splat" && !reader->find(args.key)) {
    return params::unknown_key(*reader, args.input, args.key);
  }
  for (const auto& [from, to] : renames) {
    if (!reader->find(from)) return params::unknown_key(*reader, args.input, from);
    if (reader->find(to) && !renames.count(to)) {
      return Status(StatusCode::kAlreadyExists, "cannot rename '" + from + "' to '" + to + "': " + args.input +
                            " already has an entry '" + to + "'");
    }
  }

  ArchiveCopier copier(*reader, args.input, args.output, args.inline_external);
  const params::Pattern zero{.bytes = {}, .length = 1};
  for (const irpa::Entry& e : reader->entries()) {
    Status st;
    if (args.action == "strip") {
      st = copier.add_splat(e, e.name, zero);
    } else if (args.action == "splat" && e.name == args.key) {
      st = copier.add_splat(e, e.name, *pattern);
    } else {
      auto it = renames.find(e.name);
      st = copier.copy(e, it == renames.end() ? e.name : it->second);
    }
    if (!st.ok()) return st.with_context(args.input);
  }
  Status st = copier.write();
  if (!st.ok()) return st.with_context(args.output);
  size_t n = reader->entries().size();
  return "wrote " + std::to_string(n) + (n == 1 ? " entry" : " entries") + " to " + args.output +
         " (" + args.action + ")";
}

CLI::App* add_action(CLI::App* params, ParamsArgs& args, const std::string& name,
                     const std::string& description) {
  CLI::App* sub = params->add_subcommand(name, description);
  sub->callback([&args, name] { args.action = name; });
  return sub;
}

void add_in_out(CLI::App* sub, ParamsArgs& args) {
  sub->add_option("IN", args.input, "Archive to read (.irpa)")->required();
  sub->add_option("-o,--output", args.output, "Archive to write (a new file)")->required();
}

}  // namespace

CLI::App* add_params_command(CLI::App& app, ParamsArgs& args) {
  CLI::App* params = app.add_subcommand("params", "Make, inspect and edit parameter archives "
                                                  "(IREE .irpa)");
  params->require_subcommand(1);

  CLI::App* create = add_action(params, args, "create", "Write an archive from .npy files "
                                                        "and/or an ONNX model's initializers");
  create->add_option("-o,--output", args.output, "Archive to write")->required();
  create->add_option("TENSORS", args.pairs, "NAME=FILE.npy: one entry per tensor");
  create->add_option("--from-onnx", args.from_onnx, "Add every initializer of this ONNX model");
  create->add_flag("--append", args.append, "Link the new entries onto the existing archive "
                                            "OUT (they replace entries of the same name)");
  create->add_option("--alignment", args.alignment, "Alignment of each entry's data in bytes "
                                                    "(default 64)");

  CLI::App* dump = add_action(params, args, "dump", "Show every header and entry of an archive");
  dump->add_option("FILE", args.input, "Archive (.irpa)")->required();
  dump->add_flag("--json", args.json, "Print JSON");

  CLI::App* repack = add_action(params, args, "repack", "Merge a linked chain into one archive "
                                                        "(later entries win)");
  add_in_out(repack, args);
  repack->add_flag("--inline-external", args.inline_external,
                   "Copy the bytes of external entries into the new archive");

  add_in_out(add_action(params, args, "strip", "Replace every entry by a splat of zeros of the "
                                               "same length (for tests without real weights)"),
             args);

  CLI::App* splat = add_action(params, args, "splat", "Replace one entry by a repeated pattern");
  add_in_out(splat, args);
  splat->add_option("--key", args.key, "Entry to replace")->required();
  splat->add_option("--pattern", args.pattern, "Hex pattern, little-endian, its width set by the "
                                               "digits: 0x3f800000 is f32 1.0")->required();
  splat->add_flag("--inline-external", args.inline_external,
                  "Copy the bytes of external entries into the new archive");

  CLI::App* rename = add_action(params, args, "rename", "Rename entries");
  add_in_out(rename, args);
  rename->add_option("RENAMES", args.pairs, "OLD=NEW")->required();
  rename->add_flag("--inline-external", args.inline_external,
                   "Copy the bytes of external entries into the new archive");

  CLI::App* extract = add_action(params, args, "extract", "Write one entry as a .npy file");
  extract->add_option("FILE", args.input, "Archive (.irpa)")->required();
  extract->add_option("NAME", args.name, "Entry to extract")->required();
  extract->add_option("-o,--output", args.output, ".npy file to write")->required();
  extract->add_flag("--raw", args.raw, "Write the bytes as a 1-D u8 array, ignoring metadata");
  return params;
}

int run_params(const ParamsArgs& args) {
  // The edge of the program: a failed allocation or a stray exception from
  // a library becomes the usual one-line error.
  try {
    if (args.action == "dump") return run_params_dump(args);
    Result<std::string> done = args.action == "create"    ? create_archive(args)
                               : args.action == "extract" ? extract_entry(args)
                                                          : transform_archive(args);
    if (!done.ok()) return fail(done.status());
    std::printf("%s\n", done->c_str());
    return 0;
  } catch (const std::bad_alloc&) {
    return fail(resource_exhausted("params " + args.action + ": out of memory"));
  } catch (const std::exception& e) {
    return fail(internal_error("params " + args.action + ": " + e.what()));
  }
}

}  // namespace loom::cli
