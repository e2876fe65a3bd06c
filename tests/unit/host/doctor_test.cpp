// loom doctor's readers and checks: the ELF reader on real libraries and on
// corrupted copies (truncated at many points, wrong class and machine bytes,
// a patched DT_NEEDED name), the ld.so cache reader, and one diagnosis per
// kind of rejection, all without loading any plugin.
#include <elf.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include <nlohmann/json.hpp>

#include "common/mapped_file.hpp"
#include "host/discovery/conformance_stamp.hpp"
#include "host/discovery/doctor.hpp"
#include "host/discovery/elf_file.hpp"
#include "host/discovery/library_search.hpp"
#include "host_test_util.hpp"

namespace loom::host::testing {
namespace {

std::vector<std::byte> bytes_of(const fs::path& path) {
  const std::string text = read_text(path);
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

void write_bytes(const fs::path& path, const std::vector<std::byte>& bytes) {
  write_text(path, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

fs::path fake_library(const std::string& variant = "fake") {
  return variant_dir(variant) / ("libloom_" + variant + ".so");
}

// Replaces the first occurrence of `from` by `to` (same length) in `bytes`.
bool patch(std::vector<std::byte>& bytes, const std::string& from, const std::string& to) {
  const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const size_t at = view.find(from);
  if (at == std::string_view::npos || from.size() != to.size()) return false;
  std::memcpy(bytes.data() + at, to.data(), to.size());
  return true;
}

const DoctorCheck* find_check(const PluginDiagnosis& d, const std::string& name) {
  for (const auto& c : d.checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void expect_check(const PluginDiagnosis& d, const std::string& name, DoctorCheck::Outcome outcome,
                  const std::string& needle) {
  const DoctorCheck* c = find_check(d, name);
  ASSERT_NE(c, nullptr) << "no check " << name << " in\n" << d.to_string();
  EXPECT_EQ(c->outcome, outcome) << d.to_string();
  EXPECT_NE((c->detail + " " + c->fix).find(needle), std::string::npos) << d.to_string();
}

HostOptions doctor_options() { return isolated_options({}); }

TEST(ElfReader, FakePluginExportsTheEntryPointAndNeedsLibstdcxx) {
  auto file = MappedFile::open(fake_library());
  ASSERT_TRUE(file.ok());
  auto id = read_elf_identity(file->bytes(), "fake");
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(id->elf_class, host_elf_identity().elf_class);
  EXPECT_EQ(id->machine, host_elf_identity().machine);
  EXPECT_EQ(id->type, ET_DYN);
  auto info = read_elf_dynamic(file->bytes(), "fake");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->symbols_known);
  EXPECT_TRUE(info->exports_function("loom_plugin_query"));
  EXPECT_FALSE(info->exports_function("malloc"));  // undefined: imported, not exported
  EXPECT_NE(std::find(info->needed.begin(), info->needed.end(), "libc.so.6"), info->needed.end());
}

TEST(ElfReader, NoEntryVariantLacksTheEntryPoint) {
  auto file = MappedFile::open(fake_library("fake_no_entry"));
  ASSERT_TRUE(file.ok());
  auto info = read_elf_dynamic(file->bytes(), "fake_no_entry");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_FALSE(info->exports_function("loom_plugin_query"));
  // Its query under another name is hidden too: loom_add_plugin's version
  // script exports loom_plugin_query alone.
  EXPECT_FALSE(info->exports_function("fake_query_under_another_name"));
}

TEST(ElfReader, ThisTestProgramReads) {
  auto file = MappedFile::open("/proc/self/exe");
  ASSERT_TRUE(file.ok());
  auto info = read_elf_dynamic(file->bytes(), "self");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_FALSE(info->needed.empty());
}

TEST(ElfReader, NonElfAndTinyFilesAreRefused) {
  const std::string text = "#!/bin/sh\necho not a library\n";
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  auto id = read_elf_identity(bytes, "script");
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("not an ELF file"), std::string::npos);
  EXPECT_FALSE(read_elf_identity({}, "empty").ok());
  EXPECT_FALSE(read_elf_dynamic({}, "empty").ok());
}

// Every prefix length up to the end of the headers, then every 4093rd byte:
// each is read or refused with a message, never a read out of bounds (ASan
// checks this test).
TEST(ElfReader, TruncatedCopiesAreRefusedOrRead) {
  const std::vector<std::byte> whole = bytes_of(fake_library());
  size_t refused = 0;
  for (size_t size = 0; size < whole.size(); size += size < 4096 ? 1 : 4093) {
    std::vector<std::byte> cut(whole.begin(), whole.begin() + static_cast<long>(size));
    auto info = read_elf_dynamic(cut, "cut");
    if (!info.ok()) {
      ++refused;
      EXPECT_FALSE(info.status().message().empty());
    }
  }
  EXPECT_GT(refused, 4000u);
  // Cut where the section headers start: the symbol table cannot be found.
  Elf64_Ehdr header;
  std::memcpy(&header, whole.data(), sizeof header);
  std::vector<std::byte> most(whole.begin(), whole.begin() + static_cast<long>(header.e_shoff));
  auto info = read_elf_dynamic(most, "most");
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("section header 0"), std::string::npos)
      << info.status().message();
}

TEST(ElfReader, CorruptedHeaderFieldsAreRefused) {
  const std::vector<std::byte> whole = bytes_of(fake_library());
  Elf64_Ehdr header;
  std::memcpy(&header, whole.data(), sizeof header);
  const std::vector<std::pair<std::string, std::function<void(Elf64_Ehdr&)>>> edits = {
      {"program headers far away", [](Elf64_Ehdr& h) { h.e_phoff = UINT64_MAX - 8; }},
      {"program header size", [](Elf64_Ehdr& h) { h.e_phentsize = 12; }},
      {"section headers far away", [](Elf64_Ehdr& h) { h.e_shoff = uint64_t{1} << 40; }},
      {"section header size", [](Elf64_Ehdr& h) { h.e_shentsize = 3; }},
  };
  for (const auto& [what, edit] : edits) {
    std::vector<std::byte> copy = whole;
    Elf64_Ehdr h = header;
    edit(h);
    std::memcpy(copy.data(), &h, sizeof h);
    auto info = read_elf_dynamic(copy, "copy");
    EXPECT_FALSE(info.ok()) << what;
  }
  // Random bytes over the program and section headers: refused or read.
  for (uint32_t seed = 1; seed < 200; ++seed) {
    std::vector<std::byte> copy = whole;
    uint32_t x = seed * 2654435761u;
    for (int k = 0; k < 8; ++k) {
      x = x * 1103515245u + 12345u;
      const uint64_t at = (k % 2 == 0 ? header.e_phoff : header.e_shoff) + (x >> 8) % 512;
      if (at < copy.size()) copy[at] = static_cast<std::byte>(x >> 3);
    }
    (void)read_elf_dynamic(copy, "random");
  }
}

TEST(LdCache, SystemCacheParsesAndFindsLibc) {
  auto file = MappedFile::open("/etc/ld.so.cache");
  if (!file.ok()) GTEST_SKIP() << "no /etc/ld.so.cache: " << file.status().to_string();
  auto cache = parse_ld_cache(file->bytes(), "/etc/ld.so.cache");
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  EXPECT_TRUE(std::any_of(cache->begin(), cache->end(),
                          [](const LdCacheEntry& e) { return e.name == "libc.so.6"; }));
  // Truncated copies: refused with a message, never read past the end.
  const auto bytes = file->bytes();
  for (size_t size = 0; size < bytes.size(); size += size < 256 ? 1 : 997) {
    auto cut = parse_ld_cache(bytes.first(size), "cut");
    if (size < 48) {
      EXPECT_FALSE(cut.ok());
    }
  }
}

TEST(LdCache, ForeignAndLyingCachesAreRefused) {
  std::vector<std::byte> bytes(64, std::byte{0});
  EXPECT_FALSE(parse_ld_cache(bytes, "zeros").ok());
  const std::string magic = "glibc-ld.so.cache1.1";
  std::memcpy(bytes.data(), magic.data(), magic.size());
  const uint32_t count = 1000;
  std::memcpy(bytes.data() + 20, &count, 4);
  auto cache = parse_ld_cache(bytes, "lying");
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find("1000 entries"), std::string::npos);
  // One entry whose strings point past the end.
  const uint32_t one = 1, far = 5000;
  std::vector<std::byte> small(48 + 24, std::byte{0});
  std::memcpy(small.data(), magic.data(), magic.size());
  std::memcpy(small.data() + 20, &one, 4);
  std::memcpy(small.data() + 48 + 4, &far, 4);
  EXPECT_FALSE(parse_ld_cache(small, "far").ok());
}

TEST(Dependencies, FakePluginResolvesOnThisSystem) {
  auto file = MappedFile::open(fake_library());
  ASSERT_TRUE(file.ok());
  auto info = read_elf_dynamic(file->bytes(), "fake");
  ASSERT_TRUE(info.ok());
  DependencyReport report =
      resolve_dependencies(fake_library(), *info, LibrarySearchPath::from_system());
  EXPECT_TRUE(report.missing.empty()) << report.missing.front().name;
  EXPECT_GE(report.found.size(), info->needed.size());
}

// The diagnoses, one kind of rejection each, on copies of the fake plugin.
TEST(Doctor, HealthyPluginHasNoProblem) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  EXPECT_TRUE(d.accepted()) << d.to_string();
  EXPECT_EQ(d.plugin, "fake");
  for (const char* name : {"manifest", "library", "ELF", "dependencies", "entry point", "ABI",
                           "library hash"}) {
    expect_check(d, name, DoctorCheck::Outcome::kOk, "");
  }
  expect_check(d, "conformance", DoctorCheck::Outcome::kNote, "not stamped");
}

TEST(Doctor, BadManifestJson) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  write_text(manifest, "{\"name\": ");
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  EXPECT_FALSE(d.accepted());
  expect_check(d, "manifest", DoctorCheck::Outcome::kProblem, "not valid JSON");
  expect_check(d, "library", DoctorCheck::Outcome::kSkipped, "no valid manifest");
}

TEST(Doctor, MissingLibrary) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  fs::remove(dir.path() / "libloom_fake.so");
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "library", DoctorCheck::Outcome::kProblem, "does not exist");
  expect_check(d, "ELF", DoctorCheck::Outcome::kSkipped, "no library");
}

TEST(Doctor, WrongClassAndMachine) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  std::vector<std::byte> bytes = bytes_of(dir.path() / "libloom_fake.so");
  bytes[EI_CLASS] = std::byte{ELFCLASS32};
  write_bytes(dir.path() / "libloom_fake.so", bytes);
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "ELF", DoctorCheck::Outcome::kProblem, "class 32-bit");
  expect_check(d, "library hash", DoctorCheck::Outcome::kProblem, "the manifest records");

  bytes[EI_CLASS] = std::byte{ELFCLASS64};
  const uint16_t arm = EM_AARCH64 == host_elf_identity().machine ? EM_X86_64 : EM_AARCH64;
  std::memcpy(bytes.data() + 18, &arm, 2);
  write_bytes(dir.path() / "libloom_fake.so", bytes);
  d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "ELF", DoctorCheck::Outcome::kProblem, "machine " + elf_machine_name(arm));
  expect_check(d, "ELF", DoctorCheck::Outcome::kProblem, "rebuild the plugin for this host");
}

TEST(Doctor, NotAnElfFile) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  write_text(dir.path() / "libloom_fake.so", "not a library");
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "ELF", DoctorCheck::Outcome::kProblem, "not an ELF file");
}

TEST(Doctor, MissingDependency) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  std::vector<std::byte> bytes = bytes_of(dir.path() / "libloom_fake.so");
  ASSERT_TRUE(patch(bytes, std::string("libgcc_s.so.1") + '\0', std::string("libzzz_q.so.1") + '\0'));
  write_bytes(dir.path() / "libloom_fake.so", bytes);
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "dependencies", DoctorCheck::Outcome::kProblem, "not found: libzzz_q.so.1");
  expect_check(d, "dependencies", DoctorCheck::Outcome::kProblem, "LD_LIBRARY_PATH");
  // Found through LD_LIBRARY_PATH once a library of that name is there.
  LibrarySearchPath search = LibrarySearchPath::from_system();
  fs::create_directories(dir.path() / "deps");
  fs::copy_file(fake_library(), dir.path() / "deps" / "libzzz_q.so.1");
  search.ld_library_path.push_back((dir.path() / "deps").string());
  d = diagnose_manifest(manifest, doctor_options(), search);
  expect_check(d, "dependencies", DoctorCheck::Outcome::kOk, "all found");
}

TEST(Doctor, MissingEntryPoint) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake_no_entry");
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "entry point", DoctorCheck::Outcome::kProblem, "loom_plugin_query is not exported");
}

TEST(Doctor, AbiRangeDisjoint) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake_abi2");
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "ABI", DoctorCheck::Outcome::kProblem, "speaks ABI 2.0-2.0");
}

TEST(Doctor, HashMismatch) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  nlohmann::json j = nlohmann::json::parse(read_text(manifest));
  j["library_hash"] = "xxh3-128:00000000000000000000000000000000";
  write_text(manifest, j.dump());
  PluginDiagnosis d = diagnose_manifest(manifest, doctor_options(), LibrarySearchPath::from_system());
  expect_check(d, "library hash", DoctorCheck::Outcome::kProblem, "loom-manifest");
}

TEST(Doctor, StampMissingOrMismatchedWhenRequired) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  HostOptions options = doctor_options();
  options.require_conformance = true;
  PluginDiagnosis d = diagnose_manifest(manifest, options, LibrarySearchPath::from_system());
  expect_check(d, "conformance", DoctorCheck::Outcome::kProblem, "loom conformance fake --stamp");
  auto m = parse_manifest(manifest);
  ASSERT_TRUE(m.ok());
  ConformanceStamp s;
  s.suite_version = "1.0";
  s.plugin = "fake";
  s.plugin_version = m->version;
  s.library_hash = "xxh3-128:11111111111111111111111111111111";
  s.stamped_at = "2026-11-25T00:00:00Z";
  ASSERT_TRUE(write_stamp(stamp_path_for(*m), s).ok());
  d = diagnose_manifest(manifest, options, LibrarySearchPath::from_system());
  expect_check(d, "conformance", DoctorCheck::Outcome::kProblem, "rebuilt since?");
  s.library_hash = m->library_hash;
  ASSERT_TRUE(write_stamp(stamp_path_for(*m), s).ok());
  d = diagnose_manifest(manifest, options, LibrarySearchPath::from_system());
  expect_check(d, "conformance", DoctorCheck::Outcome::kOk, "basic, suite 1.0");
  EXPECT_TRUE(d.accepted()) << d.to_string();
}

TEST(Doctor, LibraryPathFindsItsManifest) {
  TempDir dir;
  dir.copy_variant("fake");
  PluginDiagnosis d = diagnose_library(dir.path() / "libloom_fake.so", doctor_options(),
                                       LibrarySearchPath::from_system());
  EXPECT_EQ(d.plugin, "fake");
  EXPECT_TRUE(d.accepted()) << d.to_string();
  fs::remove(dir.path() / "fake.loom-plugin.json");
  d = diagnose_library(dir.path() / "libloom_fake.so", doctor_options(),
                       LibrarySearchPath::from_system());
  expect_check(d, "manifest", DoctorCheck::Outcome::kProblem, "names libloom_fake.so");
  expect_check(d, "entry point", DoctorCheck::Outcome::kOk, "exported");
}

TEST(Doctor, NamesAreLookedUpInTheSearchFolders) {
  TempDir dir;
  dir.copy_variant("fake", "a");
  dir.copy_variant("fake_abi2", "b");
  const HostOptions options = isolated_options({dir.path() / "a", dir.path() / "b"});
  auto all = diagnose(options, "", LibrarySearchPath::from_system());
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_TRUE((*all)[0].accepted());
  EXPECT_FALSE((*all)[1].accepted());
  auto one = diagnose(options, "fake_abi2", LibrarySearchPath::from_system());
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  auto none = diagnose(options, "nonesuch", LibrarySearchPath::from_system());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("found: fake, fake_abi2"), std::string::npos);
}

}  // namespace
}  // namespace loom::host::testing
