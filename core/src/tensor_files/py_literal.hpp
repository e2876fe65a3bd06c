// A parser for the small subset of Python literal syntax that .npy headers
// use: dicts, tuples, lists, strings, integers, True/False/None.
//
// numpy writes the header with repr() and reads it with ast.literal_eval, so
// a faithful reader needs a real (if tiny) parser rather than string search:
// keys come in any order, with any whitespace, trailing commas and both
// quote styles. Internal to loom_tensor_files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"

namespace loom::io::detail {

// One parsed literal. Only the fields of its kind are meaningful.
struct PyValue {
  enum class Kind { kString, kInt, kBool, kNone, kTuple, kList, kDict };

  Kind kind = Kind::kNone;
  std::string text;            // kString: the decoded characters
  int64_t integer = 0;         // kInt
  bool boolean = false;        // kBool
  std::vector<PyValue> items;  // kTuple, kList; kDict: key, value, key, ...
  size_t column = 0;           // where the literal starts, for messages
};

// "string", "int", "tuple", ...: for messages.
std::string_view py_kind_name(PyValue::Kind kind);

// Parses `text` as exactly one literal, surrounded by optional whitespace.
// Errors (invalid_argument) name the column and what was expected. Nesting
// deeper than 32 levels is refused so hostile input cannot exhaust the stack.
Result<PyValue> parse_py_literal(std::string_view text);

}  // namespace loom::io::detail
