#include "tensor_files/py_literal.hpp"

#include <limits>
#include <utility>

namespace loom::io::detail {

namespace {

constexpr int kMaxDepth = 32;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
         c == '_';
}

// A printable rendering of one character for messages; header bytes may be
// anything.
std::string describe_char(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<PyValue> parse_all() {
    skip_space();
    LOOM_ASSIGN_OR_RETURN(PyValue value, parse_value(0));
    skip_space();
    if (pos_ != text_.size()) {
      return error("unexpected " + describe_char(text_[pos_]) +
                   " after the end of the literal");
    }
    return value;
  }

 private:
  Status error(std::string message) const {
    return invalid_argument("column " + std::to_string(pos_) + ": " +
                            std::move(message));
  }
  Status error_found(std::string_view expected) const {
    std::string found =
        pos_ < text_.size() ? describe_char(text_[pos_]) : "end of header";
    return error("expected " + std::string(expected) + ", found " + found);
  }

  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  Result<PyValue> parse_value(int depth) {
    if (depth > kMaxDepth) {
      return error("literal nests deeper than " + std::to_string(kMaxDepth) +
                   " levels");
    }
    if (pos_ >= text_.size()) return error_found("a value");
    char c = text_[pos_];
    if (c == '\'' || c == '"') return parse_string();
    if (c == '-' || is_digit(c)) return parse_int();
    if (c == '(') return parse_sequence(PyValue::Kind::kTuple, ')', depth);
    if (c == '[') return parse_sequence(PyValue::Kind::kList, ']', depth);
    if (c == '{') return parse_dict(depth);
    if (is_ident(c)) return parse_name();
    return error_found("a value");
  }

  Result<PyValue> parse_string() {
    PyValue v;
    v.kind = PyValue::Kind::kString;
    v.column = pos_;
    char quote = text_[pos_++];
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        pos_ = v.column;
        return error("unterminated string");
      }
      char c = text_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        v.text += c;
        continue;
      }
      if (pos_ >= text_.size()) continue;  // reported as unterminated above
      char e = text_[pos_++];
      switch (e) {
        case '\\': case '\'': case '"': v.text += e; break;
        case 'n': v.text += '\n'; break;
        case 't': v.text += '\t'; break;
        case 'r': v.text += '\r'; break;
        case '0': v.text += '\0'; break;
        // Python keeps unknown escapes verbatim.
        default: v.text += '\\'; v.text += e; break;
      }
    }
    return v;
  }

  Result<PyValue> parse_int() {
    PyValue v;
    v.kind = PyValue::Kind::kInt;
    v.column = pos_;
    bool negative = at('-');
    if (negative) {
      ++pos_;
      skip_space();
    }
    if (pos_ >= text_.size() || !is_digit(text_[pos_])) {
      return error_found("a digit");
    }
    // Accumulate the magnitude as unsigned so INT64_MIN is representable.
    constexpr uint64_t kMaxMagnitude =
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    uint64_t limit = negative ? kMaxMagnitude + 1 : kMaxMagnitude;
    uint64_t magnitude = 0;
    size_t digits_start = pos_;
    while (pos_ < text_.size() && is_digit(text_[pos_])) {
      uint64_t d = static_cast<uint64_t>(text_[pos_] - '0');
      if (magnitude > (limit - d) / 10) {
        pos_ = v.column;
        return error("integer does not fit in 64 bits");
      }
      magnitude = magnitude * 10 + d;
      ++pos_;
    }
    if (pos_ - digits_start > 1 && text_[digits_start] == '0') {
      pos_ = digits_start;
      return error("integer with a leading zero");
    }
    // Python 2 numpy wrote shapes as longs: "(3L, 4L)".
    if (at('L')) ++pos_;
    if (pos_ < text_.size() && is_ident(text_[pos_])) {
      return error("unexpected " + describe_char(text_[pos_]) +
                   " in an integer");
    }
    v.integer = negative ? static_cast<int64_t>(0 - magnitude)
                         : static_cast<int64_t>(magnitude);
    return v;
  }

  Result<PyValue> parse_name() {
    PyValue v;
    v.column = pos_;
    size_t start = pos_;
    while (pos_ < text_.size() && is_ident(text_[pos_])) ++pos_;
    std::string_view name = text_.substr(start, pos_ - start);
    if (name == "True" || name == "False") {
      v.kind = PyValue::Kind::kBool;
      v.boolean = name == "True";
    } else if (name == "None") {
      v.kind = PyValue::Kind::kNone;
    } else {
      pos_ = start;
      return error("unknown name '" + std::string(name) +
                   "' (only True, False and None are literals)");
    }
    return v;
  }

  // "(a, b)", "(a,)", "()", "[a, b,]"; "(a)" is a parenthesised value, as in
  // Python, not a tuple.
  Result<PyValue> parse_sequence(PyValue::Kind kind, char close, int depth) {
    PyValue v;
    v.kind = kind;
    v.column = pos_;
    ++pos_;
    bool saw_comma = false;
    skip_space();
    while (!at(close)) {
      LOOM_ASSIGN_OR_RETURN(PyValue item, parse_value(depth + 1));
      v.items.push_back(std::move(item));
      skip_space();
      if (at(',')) {
        saw_comma = true;
        ++pos_;
        skip_space();
        continue;
      }
      if (!at(close)) {
        return error_found(std::string("',' or '") + close + "'");
      }
    }
    ++pos_;
    if (kind == PyValue::Kind::kTuple && v.items.size() == 1 && !saw_comma) {
      return std::move(v.items.front());
    }
    return v;
  }

  Result<PyValue> parse_dict(int depth) {
    PyValue v;
    v.kind = PyValue::Kind::kDict;
    v.column = pos_;
    ++pos_;
    skip_space();
    while (!at('}')) {
      LOOM_ASSIGN_OR_RETURN(PyValue key, parse_value(depth + 1));
      skip_space();
      if (!at(':')) return error_found("':' after a dict key");
      ++pos_;
      skip_space();
      LOOM_ASSIGN_OR_RETURN(PyValue value, parse_value(depth + 1));
      v.items.push_back(std::move(key));
      v.items.push_back(std::move(value));
      skip_space();
      if (at(',')) {
        ++pos_;
        skip_space();
        continue;
      }
      if (!at('}')) return error_found("',' or '}'");
    }
    ++pos_;
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string_view py_kind_name(PyValue::Kind kind) {
  switch (kind) {
    case PyValue::Kind::kString: return "string";
    case PyValue::Kind::kInt: return "int";
    case PyValue::Kind::kBool: return "bool";
    case PyValue::Kind::kNone: return "None";
    case PyValue::Kind::kTuple: return "tuple";
    case PyValue::Kind::kList: return "list";
    case PyValue::Kind::kDict: return "dict";
  }
  return "unknown";
}

Result<PyValue> parse_py_literal(std::string_view text) {
  return Parser(text).parse_all();
}

}  // namespace loom::io::detail
