#include "tensor_files/py_literal.hpp"

#include <string>

#include <gtest/gtest.h>

namespace loom::io::detail {
namespace {

using Kind = PyValue::Kind;

TEST(NpyPyLiteral, DictWithNumpyStyleTrailingCommaParses) {
  auto v = parse_py_literal(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->kind, Kind::kDict);
  ASSERT_EQ(v->items.size(), 6u);
  EXPECT_EQ(v->items[0].text, "descr");
  EXPECT_EQ(v->items[1].text, "<f4");
  EXPECT_EQ(v->items[3].kind, Kind::kBool);
  EXPECT_FALSE(v->items[3].boolean);
  ASSERT_EQ(v->items[5].kind, Kind::kTuple);
  ASSERT_EQ(v->items[5].items.size(), 2u);
  EXPECT_EQ(v->items[5].items[1].integer, 3);
}

TEST(NpyPyLiteral, OneTupleNeedsItsComma) {
  auto one = parse_py_literal("(3,)");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->kind, Kind::kTuple);
  ASSERT_EQ(one->items.size(), 1u);
  EXPECT_EQ(one->items[0].integer, 3);

  auto paren = parse_py_literal("( 3 )");
  ASSERT_TRUE(paren.ok());
  EXPECT_EQ(paren->kind, Kind::kInt);
  EXPECT_EQ(paren->integer, 3);
}

TEST(NpyPyLiteral, EmptyTupleListAndDictParse) {
  for (const char* text : {"()", "( )", "[]", "{}", "{ }"}) {
    auto v = parse_py_literal(text);
    ASSERT_TRUE(v.ok()) << text;
    EXPECT_TRUE(v->items.empty()) << text;
  }
}

TEST(NpyPyLiteral, StringsTakeBothQuotesAndEscapes) {
  auto v = parse_py_literal(R"(["a'b", 'c\'d', 'e\\f', 'g\n', 'h\q'])");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->items.size(), 5u);
  EXPECT_EQ(v->items[0].text, "a'b");
  EXPECT_EQ(v->items[1].text, "c'd");
  EXPECT_EQ(v->items[2].text, "e\\f");
  EXPECT_EQ(v->items[3].text, "g\n");
  EXPECT_EQ(v->items[4].text, "h\\q");
}

TEST(NpyPyLiteral, IntegersCoverTheInt64RangeAndPython2Longs) {
  auto v = parse_py_literal(
      "(0, -7, 9223372036854775807, -9223372036854775808, 3L, - 2)");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->items.size(), 6u);
  EXPECT_EQ(v->items[0].integer, 0);
  EXPECT_EQ(v->items[1].integer, -7);
  EXPECT_EQ(v->items[2].integer, INT64_MAX);
  EXPECT_EQ(v->items[3].integer, INT64_MIN);
  EXPECT_EQ(v->items[4].integer, 3);
  EXPECT_EQ(v->items[5].integer, -2);
}

TEST(NpyPyLiteral, NamesAreTrueFalseNone) {
  auto v = parse_py_literal("(True, False, None)");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->items[0].boolean);
  EXPECT_FALSE(v->items[1].boolean);
  EXPECT_EQ(v->items[2].kind, Kind::kNone);
}

TEST(NpyPyLiteral, NestedListsOfTuplesParse) {
  auto v = parse_py_literal("[('x', '<f4'), ('y', '<i8', (2,))]");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->kind, Kind::kList);
  EXPECT_EQ(v->items[1].items[2].items[0].integer, 2);
}

struct BadLiteral {
  const char* text;
  const char* message;
};

class NpyPyLiteralError : public ::testing::TestWithParam<BadLiteral> {};

TEST_P(NpyPyLiteralError, FailsNamingTheProblem) {
  auto v = parse_py_literal(GetParam().text);
  ASSERT_FALSE(v.ok()) << GetParam().text;
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find(GetParam().message), std::string::npos)
      << v.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, NpyPyLiteralError,
    ::testing::Values(
        BadLiteral{"", "expected a value, found end of header"},
        BadLiteral{"   ", "expected a value"},
        BadLiteral{"'abc", "column 0: unterminated string"},
        BadLiteral{"{'a': 'b\n'}", "column 6: unterminated string"},
        BadLiteral{"(1 2)", "expected ',' or ')', found '2'"},
        BadLiteral{"(1, 2", "expected ',' or ')', found end of header"},
        BadLiteral{"(,)", "expected a value, found ','"},
        BadLiteral{"[1, 2)", "expected ',' or ']'"},
        BadLiteral{"{'a' 1}", "expected ':' after a dict key"},
        BadLiteral{"{'a': 1 'b': 2}", "expected ',' or '}'"},
        BadLiteral{"true", "unknown name 'true'"},
        BadLiteral{"9223372036854775808", "does not fit in 64 bits"},
        BadLiteral{"-9223372036854775809", "does not fit in 64 bits"},
        BadLiteral{"012", "leading zero"},
        BadLiteral{"12abc", "in an integer"},
        BadLiteral{"-x", "expected a digit"},
        BadLiteral{"{} }", "after the end of the literal"},
        BadLiteral{"\x01", "found byte 0x01"},
        BadLiteral{"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
                   "nests deeper than 32"}));

}  // namespace
}  // namespace loom::io::detail
