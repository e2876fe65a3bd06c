#include <algorithm>

#include "loom/artifacts.hpp"

namespace loom {

Result<ArtifactRegistry> ArtifactRegistry::build(const ProgramReader& reader) {
  ArtifactRegistry registry;
  const auto& artifacts = reader.program().artifacts;
  for (uint32_t i = 0; i < artifacts.size(); ++i) {
    const ArtifactDef& def = artifacts[i];
    if (def.loader_key.empty()) {
      return invalid_argument("artifact " + std::to_string(i) + " ('" +
                              def.file_name + "') has an empty loader key");
    }
    auto content = reader.artifact_content(i);
    if (!content.ok()) {
      return content.status().with_context("artifact " + std::to_string(i));
    }
    ArtifactSet& set = registry.sets_[def.loader_key];
    set.loader_key = def.loader_key;
    registry.by_index_.emplace_back(def.loader_key, set.artifacts.size());
    set.artifacts.push_back(Artifact{i, &def, *content});
  }
  return registry;
}

std::vector<std::string> ArtifactRegistry::keys() const {
  std::vector<std::string> out;
  out.reserve(sets_.size());
  for (const auto& [key, set] : sets_) out.push_back(key);
  return out;
}

const Artifact* ArtifactRegistry::artifact(uint32_t index) const {
  if (index >= by_index_.size()) return nullptr;
  const auto& [key, position] = by_index_[index];
  return &sets_.find(key)->second.artifacts[position];
}

const ArtifactSet* ArtifactRegistry::find(std::string_view loader_key) const {
  auto it = sets_.find(loader_key);
  return it == sets_.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, std::string_view>>
ArtifactRegistry::metadata_documents() const {
  std::vector<std::pair<std::string, std::string_view>> out;
  const ArtifactSet* set = find(kMetadataLoaderKey);
  if (set == nullptr) return out;
  for (const Artifact& a : set->artifacts) {
    std::string name = !a.def->file_name.empty() ? a.def->file_name
                                                  : a.def->codegen_id;
    out.emplace_back(std::move(name),
                     std::string_view(reinterpret_cast<const char*>(a.content.data()),
                                      a.content.size()));
  }
  return out;
}

}  // namespace loom
