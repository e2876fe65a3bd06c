#include <gtest/gtest.h>

#include <cstring>

#include "loom/artifacts.hpp"
#include "loom/program.hpp"

namespace loom {
namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

TEST(ArtifactRegistry, GroupsArtifactsByLoaderKeyInProgramOrder) {
  ProgramWriter writer;
  auto add = [&](std::string key, std::string name, std::string_view content) {
    ArtifactDef a;
    a.loader_key = std::move(key);
    a.file_name = std::move(name);
    a.content_segment = static_cast<int32_t>(writer.add_segment(bytes_of(content)));
    writer.program().artifacts.push_back(a);
  };
  add("cpu-simd", "a.bin", "AAAA");
  add("metadata", "info.json", "{\"model\":\"mlp\"}");
  add("cpu-simd", "b.bin", "BB");
  add("vulkan-compute", "c.spv", "CCC");
  auto file = writer.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();

  auto registry = ArtifactRegistry::build(**reader);
  ASSERT_TRUE(registry.ok());
  EXPECT_EQ(registry->keys(), (std::vector<std::string>{"cpu-simd", "metadata", "vulkan-compute"}));
  const ArtifactSet* cpu = registry->find("cpu-simd");
  ASSERT_NE(cpu, nullptr);
  ASSERT_EQ(cpu->artifacts.size(), 2u);
  EXPECT_EQ(cpu->artifacts[0].def->file_name, "a.bin");
  EXPECT_EQ(cpu->artifacts[1].index, 2u);
  EXPECT_EQ(cpu->artifacts[1].content.size(), 2u);
  EXPECT_EQ(registry->find("fpga-stub"), nullptr);

  auto docs = registry->metadata_documents();
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].first, "info.json");
  EXPECT_EQ(docs[0].second, "{\"model\":\"mlp\"}");
}

TEST(ArtifactRegistry, EmptyProgramHasNoKeys) {
  ProgramWriter writer;
  auto file = writer.write_buffer().value();
  auto reader = ProgramReader::open_buffer(file).value();
  auto registry = ArtifactRegistry::build(*reader).value();
  EXPECT_TRUE(registry.keys().empty());
  EXPECT_TRUE(registry.metadata_documents().empty());
}

}  // namespace
}  // namespace loom
