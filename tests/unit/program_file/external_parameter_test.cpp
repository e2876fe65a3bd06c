// External parameters (bytes in a .irpa archive beside the program): the
// writer refuses and the reader rejects a declaration that could make a
// loader read outside the program's folder or accept the wrong bytes.
#include <gtest/gtest.h>

#include "container_test_support.hpp"

namespace loom {
namespace {

using testing::kInvalid;
using testing::fails_with;
using testing::open_fails_with;

// make_small_program's parameter 'w' (f32[5], 20 bytes) moved to an archive.
ParameterDef external_w() {
  ParameterDef p = testing::make_small_program().program().parameters[0];
  p.segment = -1;
  p.offset = 0;
  p.scope = "model";
  p.archive = "weights.irpa";
  p.checksum = 0x1234;
  return p;
}

class ExternalParameter : public ::testing::Test {
 protected:
  // The same declaration through both doors: the writer must refuse it, and
  // a hand-crafted file carrying it must be rejected by the reader.
  ::testing::AssertionResult rejected(const ParameterDef& p, std::string_view part) {
    ProgramWriter writer = testing::make_small_program();
    writer.program().parameters[0] = p;
    auto written = fails_with(writer.write_buffer(), kInvalid, part);
    if (!written) return written << " (writer)";
    ProgramDef program = testing::make_small_program().program();
    program.parameters[0] = p;
    auto file = testing::craft_unvalidated(program, {testing::pattern(100, 0),
                                                     testing::pattern(100, 50),
                                                     testing::pattern(100, 100)});
    auto read = open_fails_with(file, kInvalid, part);
    if (!read) return read << " (reader)";
    return ::testing::AssertionSuccess();
  }
};

TEST_F(ExternalParameter, WellFormedDeclarationRoundTrips) {
  ProgramWriter writer = testing::make_small_program();
  writer.program().parameters[0] = external_w();
  writer.program().parameters[0].archive = "sub/dir/./weights.irpa";
  auto file = writer.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const ParameterDef& p = (*reader)->program().parameters[0];
  EXPECT_EQ(p, writer.program().parameters[0]);
  EXPECT_EQ(p.scope, "model");
  EXPECT_EQ(p.checksum, 0x1234u);
  EXPECT_TRUE(fails_with((*reader)->parameter_bytes(0), StatusCode::kFailedPrecondition,
                         "parameter 'w' lives in external archive 'sub/dir/./weights.irpa'"));
}

TEST_F(ExternalParameter, EmptyScopeIsAllowed) {
  ProgramWriter writer = testing::make_small_program();
  writer.program().parameters[0] = external_w();
  writer.program().parameters[0].scope.clear();
  EXPECT_TRUE(writer.write_buffer().ok());
}

TEST_F(ExternalParameter, InlineAndExternalAtOnceIsRejected) {
  ParameterDef p = external_w();
  p.segment = 0;
  EXPECT_TRUE(rejected(p, "parameters[0] ('w'): external (archive 'weights.irpa') and inline "
                          "(segment 0, offset 0) at once"));
  p.segment = -1;
  p.offset = 16;
  EXPECT_TRUE(rejected(p, "parameters[0] ('w'): external (archive 'weights.irpa') and inline "
                          "(segment -1, offset 16) at once"));
}

TEST_F(ExternalParameter, AbsoluteArchivePathIsRejected) {
  ParameterDef p = external_w();
  p.archive = "/etc/weights.irpa";
  EXPECT_TRUE(rejected(p, "parameters[0].archive: '/etc/weights.irpa' is absolute"));
}

TEST_F(ExternalParameter, ArchivePathWithDotDotIsRejected) {
  for (const char* path : {"..", "../weights.irpa", "a/../../weights.irpa", "a/..", "a/../b"}) {
    ParameterDef p = external_w();
    p.archive = path;
    EXPECT_TRUE(rejected(p, "parameters[0].archive: '" + std::string(path) + "' contains '..'"))
        << path;
  }
}

TEST_F(ExternalParameter, NamesThatOnlyLookLikeDotDotAreAccepted) {
  for (const char* path : {"..weights.irpa", "a/...", "weights..irpa", "./w.irpa"}) {
    ProgramWriter writer = testing::make_small_program();
    writer.program().parameters[0] = external_w();
    writer.program().parameters[0].archive = path;
    auto file = writer.write_buffer();
    EXPECT_TRUE(file.ok()) << path << ": " << file.status().to_string();
  }
}

TEST_F(ExternalParameter, ArchivePathNamingAFolderIsRejected) {
  ParameterDef p = external_w();
  p.archive = "weights/";
  EXPECT_TRUE(rejected(p, "parameters[0].archive: 'weights/' names a folder"));
}

TEST_F(ExternalParameter, ArchivePathWithNulIsRejected) {
  ParameterDef p = external_w();
  p.archive = std::string("weights.irpa\0../../etc/passwd", 29);
  EXPECT_TRUE(rejected(p, "parameters[0].archive: path contains a NUL byte"));
}

TEST_F(ExternalParameter, EmptyNameIsRejected) {
  ParameterDef p = external_w();
  p.name.clear();
  EXPECT_TRUE(rejected(p, "parameters[0].name: an external parameter needs the name"));
}

TEST_F(ExternalParameter, SizeDisagreeingWithTypeIsRejected) {
  ParameterDef p = external_w();
  p.size = 24;
  EXPECT_TRUE(rejected(p, "parameters[0] ('w').size: 24 bytes, but f32 [5] takes 20"));
  p = external_w();
  p.dtype = DType::kF64;
  EXPECT_TRUE(rejected(p, "parameters[0] ('w').size: 20 bytes, but f64 [5] takes 40"));
}

TEST_F(ExternalParameter, ShapeOverflowingTwoToTheSixtyFourIsRejected) {
  ParameterDef p = external_w();
  p.shape = {int64_t{1} << 40, int64_t{1} << 23};  // 2^63 elements, 2^65 bytes
  EXPECT_TRUE(rejected(p, "parameters[0] ('w').size: 20 bytes, but f32 [1099511627776, "
                          "8388608] takes more than 2^64"));
  p.shape = {int64_t{1} << 40, int64_t{1} << 30};
  EXPECT_TRUE(rejected(p, "parameters[0] ('w').shape: shape [1099511627776, 1073741824] has "
                          "more elements than fit in 64 bits"));
  p.shape = {-1};
  EXPECT_TRUE(rejected(p, "parameters[0] ('w').shape: dimension 0 is -1"));
}

TEST_F(ExternalParameter, InvalidDtypeIsRejected) {
  ParameterDef p = external_w();
  p.dtype = DType::kInvalid;
  EXPECT_TRUE(rejected(p, "parameters[0] ('w').dtype: an external parameter needs a dtype"));
}

}  // namespace
}  // namespace loom
