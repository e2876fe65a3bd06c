// escape_control: what printing a name or message from a file or a plugin
// shows, and Status::to_string, which uses it.
#include <gtest/gtest.h>

#include <string>

#include "loom/status.hpp"

namespace loom {
namespace {

TEST(EscapeControl, ControlCharactersBecomeHexEscapes) {
  EXPECT_EQ(escape_control("plain name-1.0"), "plain name-1.0");
  EXPECT_EQ(escape_control("a\nb\tc\r"), "a\\x0ab\\x09c\\x0d");
  EXPECT_EQ(escape_control("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(escape_control(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(escape_control("del\x7f"), "del\\x7f");
  // C1 controls in UTF-8 (U+009B is a CSI on some terminals); other UTF-8
  // (U+00E9, U+4E2D) is kept.
  EXPECT_EQ(escape_control("\xc2\x9b" "2J"), "\\xc2\\x9b2J");
  EXPECT_EQ(escape_control("caf\xc3\xa9 \xe4\xb8\xad"), "caf\xc3\xa9 \xe4\xb8\xad");
  // A lone 0xc2 at the end is not a C1 control.
  EXPECT_EQ(escape_control("\xc2"), "\xc2");
}

TEST(EscapeControl, StatusToStringIsOneLine) {
  const Status s = invalid_argument("node 'evil\n\x1b]0;title\x07' is not supported");
  EXPECT_EQ(s.to_string(),
            "invalid_argument: node 'evil\\x0a\\x1b]0;title\\x07' is not supported");
  EXPECT_EQ(s.to_string().find('\n'), std::string::npos);
  // message() keeps the bytes: JSON writers escape them their own way.
  EXPECT_NE(s.message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace loom
