// Every way a .npy input can be wrong, each checked through both readers
// (parse_npy on bytes, read_npy on a file) for the same code and message.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/npy.hpp"
#include "npy_test_util.hpp"

namespace loom::io {
namespace {

using testing::raw;
using testing::npy_file;
using testing::TempDir;
using testing::to_bytes;

std::string with_dict(const std::string& dict, size_t data_bytes = 24) {
  return npy_file(dict, std::string(data_bytes, '\0'));
}

std::string f32_dict(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

struct BadFile {
  const char* name;
  std::string bytes;
  StatusCode code;
  std::string message;
};

void PrintTo(const BadFile& f, std::ostream* os) { *os << f.name; }

const StatusCode kInvalid = StatusCode::kInvalidArgument;
const StatusCode kUnimplemented = StatusCode::kUnimplemented;

std::vector<BadFile> bad_files() {
  return {
      {"Empty", "", kInvalid, "truncated: the file has 0 bytes"},
      {"TruncatedMagic", "\x93NUM", kInvalid,
       "truncated: the file has 4 bytes, the magic and version need 8"},
      {"BadMagic", raw("\x93NUMPX\x01\x00\x10\x00", 10), kInvalid,
       "bad magic: not a .npy file"},
      {"ZipNotNpy", raw("PK\x03\x04\x14\x00\x00\x00\x08\x00", 10), kInvalid,
       "bad magic"},
      {"TruncatedVersion", "\x93NUMPY\x01", kInvalid,
       "the magic and version need 8"},
      {"UnknownMajorVersion", raw("\x93NUMPY\x04\x00\x10\x00", 10),
       kUnimplemented, "unsupported .npy format version 4.0"},
      {"UnknownMinorVersion", raw("\x93NUMPY\x01\x01\x10\x00", 10),
       kUnimplemented, "version 1.1"},
      {"VersionZero", raw("\x93NUMPY\x00\x00\x10\x00", 10), kUnimplemented,
       "version 0.0"},
      {"TruncatedLengthField", raw("\x93NUMPY\x02\x00\x10\x00", 10), kInvalid,
       "the version 2.0 preamble needs 12"},
      {"HeaderLengthPastEof",
       raw("\x93NUMPY\x01\x00\xff\xff", 10) + "{'descr': '<f4'", kInvalid,
       "header length 65535 ends at byte 65545, past the end of the 25-byte "
       "file"},
      {"HugeV2HeaderLength", raw("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12),
       kInvalid, "ends at byte 4294967307, past the end of the 12-byte file"},
      {"EmptyHeader", npy_file("", ""), kInvalid,
       "header: column 1: expected a value, found end of header"},
      {"NonDictHeader", with_dict("['descr', '<f4']"), kInvalid,
       "header is list, expected a dict"},
      {"StringHeader", with_dict("'descr'"), kInvalid,
       "header is string, expected a dict"},
      {"MissingShape", with_dict("{'descr': '<f4', 'fortran_order': False}"),
       kInvalid, "header has no 'shape' key"},
      {"MissingDescr", with_dict("{'fortran_order': False, 'shape': (6,)}"),
       kInvalid, "header has no 'descr' key"},
      {"MissingFortranOrder", with_dict("{'descr': '<f4', 'shape': (6,)}"),
       kInvalid, "header has no 'fortran_order' key"},
      {"ExtraKey",
       with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
                 "'extra': 1}"),
       kInvalid, "unexpected key 'extra' in header"},
      {"DuplicateKey",
       with_dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                 "'shape': (6,)}"),
       kInvalid, "duplicate key 'descr'"},
      {"NonStringKey", with_dict("{1: '<f4'}"), kInvalid,
       "header key at column 1 is int, expected a string"},
      {"UnknownDescr",
       with_dict("{'descr': '<f3', 'fortran_order': False, 'shape': (6,)}"),
       kInvalid, "unknown dtype descr '<f3'"},
      {"GarbageDescr",
       with_dict("{'descr': 'hello', 'fortran_order': False, 'shape': (6,)}"),
       kInvalid, "unknown dtype descr 'hello'"},
      {"EmptyDescr",
       with_dict("{'descr': '', 'fortran_order': False, 'shape': (6,)}"),
       kInvalid, "unknown dtype descr ''"},
      {"ComplexDescr",
       with_dict("{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}"),
       kUnimplemented, "dtype '<c8' (complex) is not supported"},
      {"DatetimeDescr",
       with_dict("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (3,)}"),
       kUnimplemented, "(datetime) is not supported"},
      {"StructuredDescr",
       with_dict("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': "
                 "False, 'shape': (3,)}"),
       kUnimplemented, "structured dtypes are not supported"},
      {"IntDescr",
       with_dict("{'descr': 4, 'fortran_order': False, 'shape': (6,)}"),
       kInvalid, "'descr' is int, expected a string"},
      {"FortranOrder",
       with_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}"),
       kUnimplemented, "fortran_order is True"},
      {"NonBoolFortranOrder",
       with_dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}"),
       kInvalid, "'fortran_order' must be True or False, found int"},
      {"LowercaseFalse",
       with_dict("{'descr': '<f4', 'fortran_order': false, 'shape': (6,)}"),
       kInvalid, "unknown name 'false'"},
      {"NegativeDim", with_dict(f32_dict("(2, -3)")), kInvalid,
       "'shape' (2, -3): dimension 1 is negative (-3)"},
      {"ElementCountOverflow",
       with_dict(f32_dict("(4294967296, 4294967296)")), kInvalid,
       "more elements than fit in 64 bits"},
      {"ByteSizeOverflow", with_dict(f32_dict("(4611686018427387904,)")),
       kInvalid, "(4611686018427387904,) of f32 needs more bytes than fit"},
      {"DimLiteralTooBig", with_dict(f32_dict("(99999999999999999999,)")),
       kInvalid, "integer does not fit in 64 bits"},
      {"HugeShapeTinyFile", with_dict(f32_dict("(1000000000,)"), 8), kInvalid,
       "data too short: the data section has 8 bytes, shape (1000000000,) of "
       "f32 needs 4000000000"},
      {"DataShort", with_dict(f32_dict("(2, 3)"), 20), kInvalid,
       "data too short: the data section has 20 bytes, shape (2, 3) of f32 "
       "needs 24"},
      {"DataLong", with_dict(f32_dict("(2, 3)"), 28), kInvalid,
       "trailing bytes: the data section has 28 bytes, shape (2, 3) of f32 "
       "needs 24"},
      {"UnterminatedString", with_dict("{'descr': '<f4}"), kInvalid,
       "header: column 10: unterminated string"},
      {"BadTuple", with_dict(f32_dict("(2 3)")), kInvalid,
       "expected ',' or ')', found '3'"},
      {"UnclosedTuple", with_dict(f32_dict("(2, 3")), kInvalid,
       "column 57: expected a value, found '}'"},
      {"ShapeIsList", with_dict(f32_dict("[2, 3]")), kInvalid,
       "'shape' is list, expected a tuple of ints"},
      {"ShapeIsInt", with_dict(f32_dict("6")), kInvalid,
       "'shape' is int, expected a tuple of ints"},
      {"ShapeElementString", with_dict(f32_dict("('2', 3)")), kInvalid,
       "'shape' element 0 is string, expected an int"},
      {"GarbageAfterDict", npy_file(f32_dict("(6,)") + " x", std::string(24, '\0')),
       kInvalid, "unexpected 'x' after the end of the literal"},
      {"UnclosedDict",
       with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)"),
       kInvalid, "expected ',' or '}', found end of header"},
      {"MissingColon", with_dict("{'descr' '<f4'}"), kInvalid,
       "expected ':' after a dict key"},
      {"NulInHeader", with_dict(std::string("{'descr'\0: '<f4'}", 17)),
       kInvalid, "found byte 0x00"},
  };
}

class NpyError : public ::testing::TestWithParam<BadFile> {};

// One test per case, covering both readers, keeps the CTest process count
// (and the sanitizer run's start-up cost) down.
TEST_P(NpyError, BothReadersFailWithCodeAndMessage) {
  const BadFile& f = GetParam();
  {
    SCOPED_TRACE("parse_npy");
    auto t = parse_npy(to_bytes(f.bytes), "case.npy");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), f.code) << t.status().to_string();
    const std::string m = t.status().message();
    EXPECT_EQ(m.rfind("case.npy: ", 0), 0u) << m;
    EXPECT_NE(m.find(f.message), std::string::npos)
        << "message: " << m << "\nwanted: " << f.message;
  }
  {
    SCOPED_TRACE("read_npy");
    TempDir dir;
    auto path = dir.write("bad.npy", f.bytes);
    auto t = read_npy(path);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), f.code) << t.status().to_string();
    const std::string m = t.status().message();
    EXPECT_EQ(m.rfind(path.string() + ": ", 0), 0u) << m;
    EXPECT_NE(m.find(f.message), std::string::npos)
        << "message: " << m << "\nwanted: " << f.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Malformed, NpyError, ::testing::ValuesIn(bad_files()),
                         [](const auto& info) { return info.param.name; });

TEST(NpyFileError, MissingFileIsNotFound) {
  TempDir dir;
  auto path = dir.path() / "absent.npy";
  auto t = read_npy(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("absent.npy"), std::string::npos);
}

TEST(NpyFileError, DirectoryIsNotARegularFile) {
  TempDir dir;
  auto t = read_npy(dir.path());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not a regular file"), std::string::npos)
      << t.status().message();
}

TEST(NpyFileError, DefaultWhatIsBuffer) {
  auto t = parse_npy({});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message().rfind("buffer: ", 0), 0u)
      << t.status().message();
}

}  // namespace
}  // namespace loom::io
