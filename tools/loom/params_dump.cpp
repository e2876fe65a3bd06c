// `loom params dump FILE [--json]`: every header of the chain and every
// entry a reader sees (ArchiveReader drops entries replaced by a later
// header of the chain), with offsets, lengths, alignment, metadata and
// splat patterns.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "params_support.hpp"

namespace loom::cli {
namespace {

namespace irpa = loom::io::irpa;
using json = nlohmann::json;

json range(uint64_t offset, uint64_t length) { return {{"offset", offset}, {"length", length}}; }

// Names and metadata are arbitrary bytes: shown printable, the rest as \xNN.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// The largest power of two (up to 4096) dividing `offset`: how the bytes
// really lie, next to the alignment the entry asks for.
uint64_t actual_alignment(uint64_t offset) {
  uint64_t a = 1;
  while (a < irpa::kFileAlignment && offset % (a * 2) == 0) a *= 2;
  return a;
}

json header_json(const irpa::HeaderInfo& h, size_t index) {
  return {{"index", index},
          {"offset", h.offset},
          {"version", std::to_string(h.version_major) + "." + std::to_string(h.version_minor)},
          {"header_size", h.header_size},
          {"next_header_offset", h.next_header_offset},
          {"flags", h.flags},
          {"entry_count", h.entry_count},
          {"entry_segment", range(h.entry_segment_offset, h.entry_segment_length)},
          {"metadata_segment", range(h.metadata_segment_offset, h.metadata_segment_length)},
          {"storage_segment", range(h.storage_segment_offset, h.storage_segment_length)}};
}

json entry_json(const irpa::Entry& e) {
  json j = {{"header", e.header_index},
            {"entry_offset", e.entry_offset},
            {"name", e.name},
            {"type", std::string(irpa::entry_type_name(e.type))},
            {"flags", e.flags},
            {"minimum_alignment", e.minimum_alignment},
            {"length", e.length},
            {"metadata", e.metadata}};
  switch (e.type) {
    case irpa::EntryType::kData:
      j["data_offset"] = e.data_offset;
      j["data_alignment"] = actual_alignment(e.data_offset);
      break;
    case irpa::EntryType::kSplat:
      j["pattern"] = params::format_pattern(e.pattern, e.pattern_length);
      j["pattern_length"] = e.pattern_length;
      break;
    case irpa::EntryType::kExternal:
      j["external_path"] = e.external_path;
      j["external_offset"] = e.external_offset;
      break;
    case irpa::EntryType::kSkip:
      break;
  }
  return j;
}

json archive_json(const irpa::ArchiveReader& reader) {
  json out;
  out["file_size"] = reader.file_bytes().size();
  out["headers"] = json::array();
  for (size_t i = 0; i < reader.headers().size(); ++i) {
    out["headers"].push_back(header_json(reader.headers()[i], i));
  }
  out["entries"] = json::array();
  for (const irpa::Entry& e : reader.entries()) out["entries"].push_back(entry_json(e));
  return out;
}

void print_text(const std::string& file, const json& j) {
  auto u64 = [](const json& v) { return v.get<uint64_t>(); };
  auto rng = [&](const json& r) {
    return "+" + std::to_string(u64(r["offset"])) + " (" + std::to_string(u64(r["length"])) +
           " bytes)";
  };
  std::cout << file << ": IREE parameter archive, " << u64(j["file_size"]) << " bytes, "
            << j["headers"].size() << " header(s), " << j["entries"].size() << " entries\n";
  for (const json& h : j["headers"]) {
    std::cout << "header #" << u64(h["index"]) << " at " << u64(h["offset"]) << ": version "
              << h["version"].get<std::string>() << ", header_size " << u64(h["header_size"])
              << ", next " << (u64(h["next_header_offset"]) ? "+" +
                               std::to_string(u64(h["next_header_offset"])) : "none")
              << ", flags " << u64(h["flags"]) << ", " << u64(h["entry_count"]) << " entries\n"
              << "  entry segment " << rng(h["entry_segment"]) << ", metadata segment "
              << rng(h["metadata_segment"]) << ", storage segment " << rng(h["storage_segment"])
              << "\n";
    for (const json& e : j["entries"]) {
      if (u64(e["header"]) != u64(h["index"])) continue;
      std::cout << "  " << e["type"].get<std::string>() << " '"
                << printable(e["name"].get_ref<const std::string&>()) << "'  length "
                << u64(e["length"]);
      const std::string type = e["type"];
      if (type == "data") {
        std::cout << "  at " << u64(e["data_offset"]) << " (aligned " << u64(e["data_alignment"])
                  << ")";
      } else if (type == "splat") {
        std::cout << "  pattern " << e["pattern"].get<std::string>() << " ("
                  << u64(e["pattern_length"]) << " bytes)";
      } else if (type == "external") {
        std::cout << "  file '" << printable(e["external_path"].get_ref<const std::string&>())
                  << "' at " << u64(e["external_offset"]);
      }
      std::cout << "  min align " << u64(e["minimum_alignment"]) << "  flags " << u64(e["flags"])
                << "  entry @" << u64(e["entry_offset"]);
      std::cout << "\n";
      const std::string& metadata = e["metadata"].get_ref<const std::string&>();
      if (!metadata.empty()) std::cout << "    metadata " << printable(metadata) << "\n";
    }
  }
}

}  // namespace

int run_params_dump(const ParamsArgs& args) {
  auto reader = params::open_archive(args.input);
  if (!reader.ok()) return fail(reader.status());
  json j = archive_json(**reader);
  if (args.json) {
    // Names and metadata need not be UTF-8; replace what JSON cannot carry.
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    print_text(args.input, j);
  }
  return 0;
}

}  // namespace loom::cli
