// Manifest parsing: every field is checked and named in the error.
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "host_test_util.hpp"

namespace loom::host::testing {
namespace {

nlohmann::json good_manifest() {
  return nlohmann::json::parse(read_text(variant_dir("fake") / "fake.loom-plugin.json"));
}

Status parse_json(const TempDir& dir, const std::string& text) {
  fs::path path = dir.path() / "x.loom-plugin.json";
  write_text(path, text);
  return parse_manifest(path).status();
}

TEST(ParseManifest, BuiltManifestParsesWithLibraryBesideIt) {
  auto m = parse_manifest(variant_dir("fake") / "fake.loom-plugin.json");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->name, "fake");
  EXPECT_EQ(m->version, "1.0.0");
  EXPECT_EQ(m->abi_min, LOOM_ABI_VERSION(1, 0));
  EXPECT_EQ(m->abi_max, LOOM_ABI_VERSION(1, 1));  // what the fake's own query speaks
  EXPECT_EQ(m->loader_keys, std::vector<std::string>{"fake"});
  EXPECT_EQ(m->library, variant_dir("fake") / "libloom_fake.so");
  auto hash = hash_file(m->library);
  ASSERT_TRUE(hash.ok());
  EXPECT_EQ(*hash, m->library_hash);
}

TEST(ParseManifest, MissingFileIsNotFound) {
  TempDir dir;
  auto m = parse_manifest(dir.path() / "absent.loom-plugin.json");
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("absent.loom-plugin.json"), std::string::npos);
}

TEST(ParseManifest, DirectoryIsUnreadable) {
  TempDir dir;
  fs::create_directory(dir.path() / "d.loom-plugin.json");
  auto m = parse_manifest(dir.path() / "d.loom-plugin.json");
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("not a regular file"), std::string::npos);
}

TEST(ParseManifest, BadJsonCarriesParseError) {
  TempDir dir;
  Status st = parse_json(dir, "{\"name\": ");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not valid JSON"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("parse error"), std::string::npos) << st.message();
}

TEST(ParseManifest, EmptyFileIsBadJson) {
  TempDir dir;
  EXPECT_NE(parse_json(dir, "").message().find("not valid JSON"), std::string::npos);
}

TEST(ParseManifest, NonObjectIsRejected) {
  TempDir dir;
  EXPECT_NE(parse_json(dir, "[1, 2]").message().find("JSON object"), std::string::npos);
}

TEST(ParseManifest, EachMissingFieldIsNamed) {
  TempDir dir;
  for (const char* field :
       {"manifest_version", "name", "version", "abi", "loader_keys", "library", "library_hash"}) {
    nlohmann::json j = good_manifest();
    j.erase(field);
    Status st = parse_json(dir, j.dump());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(std::string("field '") + field + "' is missing"),
              std::string::npos)
        << st.message();
  }
}

TEST(ParseManifest, IllTypedFieldsAreNamed) {
  TempDir dir;
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"manifest_version", "1"},  {"name", 5},          {"version", nullptr},
      {"abi", "1.0"},             {"loader_keys", "fake"}, {"library", true},
      {"library_hash", 17},
  };
  for (const auto& [field, value] : cases) {
    nlohmann::json j = good_manifest();
    j[field] = value;
    Status st = parse_json(dir, j.dump());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find("field '" + field + "'"), std::string::npos) << st.message();
  }
}

// The library must be a file beside the manifest: paths are refused.
TEST(ParseManifest, LibraryOutsideTheManifestFolderIsRefused) {
  TempDir dir;
  for (const std::string& library :
       {std::string("../libloom_fake.so"), std::string("/usr/lib/libloom_fake.so"),
        std::string("sub/libloom_fake.so"), std::string(".."), std::string(".")}) {
    nlohmann::json j = good_manifest();
    j["library"] = library;
    Status st = parse_json(dir, j.dump());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << library;
    EXPECT_NE(st.message().find("field 'library' must be the file name of a library in the "
                                "manifest's folder"),
              std::string::npos)
        << st.message();
  }
}

// Sizes a manifest declares are bounded: the file itself (refused unread
// past 64 KiB), each string field, the number of loader keys; control
// characters and non-ASCII bytes are refused, so that nothing printed from
// a manifest breaks a line or drives a terminal.
TEST(ParseManifest, SizesAndCharactersAreBounded) {
  TempDir dir;
  {
    nlohmann::json j = good_manifest();
    j["padding"] = std::string(70 * 1024, 'x');
    Status st = parse_json(dir, j.dump());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("bytes; a manifest is at most 65536"), std::string::npos) << st.message();
  }
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"name", std::string(65, 'n'), "is 65 characters long; at most 64"},
      {"version", std::string(300, '1'), "is 300 characters long; at most 64"},
      {"name", "fake\x1b[31m", "holds a control character"},
      {"name", "fa ke", "may hold only letters, digits"},
      {"name", "fa/ke", "may hold only letters, digits"},
      {"version", "1.0\n2.0", "holds a control character"},
      {"library", std::string("lib\0x.so", 8), "holds a control character"},
      {"library", std::string(256, 'l'), "at most 255"},
      {"loader_keys", nlohmann::json::array({"ok", std::string(129, 'k')}),
       "'loader_keys[1]' must be at most 128 printable"},
      {"loader_keys", nlohmann::json::array({"a\tb"}), "'loader_keys[0]' must be at most 128 printable"},
      {"loader_keys", nlohmann::json(std::vector<std::string>(65, "k")), "lists 65 keys; at most 64"},
  };
  for (const auto& [field, value, want] : cases) {
    nlohmann::json j = good_manifest();
    j[field] = value;
    Status st = parse_json(dir, j.dump());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << st.message();
  }
}

// A FIFO named like a manifest is refused without blocking discovery.
TEST(ParseManifest, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  fs::path path = dir.path() / "fifo.loom-plugin.json";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Status st = parse_manifest(path).status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();
}

TEST(ParseManifest, BadAbiVersionsAreNamed) {
  TempDir dir;
  nlohmann::json j = good_manifest();
  j["abi"]["min"] = "one";
  EXPECT_NE(parse_json(dir, j.dump()).message().find("field 'abi.min'"), std::string::npos);
  j = good_manifest();
  j["abi"].erase("max");
  EXPECT_NE(parse_json(dir, j.dump()).message().find("field 'abi.max' is missing"),
            std::string::npos);
  j = good_manifest();
  j["abi"]["min"] = "2.0";
  EXPECT_NE(parse_json(dir, j.dump()).message().find("min 2.0 above max 1.1"), std::string::npos);
}

TEST(ParseManifest, BadLoaderKeyEntryIsNamedByIndex) {
  TempDir dir;
  nlohmann::json j = good_manifest();
  j["loader_keys"] = {"fake", ""};
  EXPECT_NE(parse_json(dir, j.dump()).message().find("field 'loader_keys[1]'"),
            std::string::npos);
}

TEST(ParseManifest, UnknownManifestVersionIsRejected) {
  TempDir dir;
  nlohmann::json j = good_manifest();
  j["manifest_version"] = 2;
  Status st = parse_json(dir, j.dump());
  EXPECT_NE(st.message().find("is 2; this host reads version 1"), std::string::npos)
      << st.message();
}

TEST(ParseManifest, HashNotationIsChecked) {
  TempDir dir;
  nlohmann::json j = good_manifest();
  j["library_hash"] = "md5:0000";
  EXPECT_NE(parse_json(dir, j.dump()).message().find("'library_hash' must start with"),
            std::string::npos);
}

TEST(AbiVersion, ParsesAndFormats) {
  auto v = parse_abi_version("3.12");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, LOOM_ABI_VERSION(3, 12));
  EXPECT_EQ(format_abi_version(*v), "3.12");
  for (const char* bad : {"", "1", "1.", ".1", "1.2.3", "a.b", "-1.0", "70000.0", "1.0x"}) {
    EXPECT_FALSE(parse_abi_version(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace loom::host::testing
