// Artifacts of a program grouped by loader key.
//
// Every artifact in a program is tagged with a loader key. The registry
// groups them into ArtifactSets, one per key, and knows which loader serves a
// key: the built-in "metadata" loader, or a plugin found by the PluginHost.
// Immutable after construction and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/program.hpp"
#include "loom/status.hpp"

namespace loom {

// The loader key of the built-in metadata loader.
inline constexpr std::string_view kMetadataLoaderKey = "metadata";

// The loader key of a delegate variant that the runtime runs on its own
// reference kernels, when no device can take the delegate (`loom compile
// --variants all` writes one per delegate). The artifact's content is the
// name of a function of the program that takes the delegate call's operands
// and gives its results, in order, and calls no delegates.
inline constexpr std::string_view kReferenceLoaderKey = "loom.reference";

// One artifact: its definition and its content, a view into the program.
struct Artifact {
  uint32_t index = 0;  // in ProgramDef::artifacts
  const ArtifactDef* def = nullptr;
  std::span<const std::byte> content;
};

// All artifacts that share one loader key, in program order.
struct ArtifactSet {
  std::string loader_key;
  std::vector<Artifact> artifacts;
};

class ArtifactRegistry {
 public:
  ArtifactRegistry() = default;

  // Groups the artifacts of `reader`; the registry views the reader's bytes
  // and must not outlive it.
  static Result<ArtifactRegistry> build(const ProgramReader& reader);

  // Every key present, sorted.
  std::vector<std::string> keys() const;
  // nullptr when no artifact has `loader_key`.
  const ArtifactSet* find(std::string_view loader_key) const;
  const std::map<std::string, ArtifactSet, std::less<>>& sets() const { return sets_; }
  // The artifact at `index` in ProgramDef::artifacts; nullptr when out of range.
  const Artifact* artifact(uint32_t index) const;

  // The built-in loader for "metadata" artifacts: each artifact's content is
  // a UTF-8 document (typically JSON); returned by file name (or codegen id
  // when it has none).
  std::vector<std::pair<std::string, std::string_view>> metadata_documents() const;

 private:
  std::map<std::string, ArtifactSet, std::less<>> sets_;
  // Per artifact index: its loader key and position in that key's set.
  std::vector<std::pair<std::string, size_t>> by_index_;
};

}  // namespace loom
