// File: ir/message_test.cc — escaping and capping of model text in messages.
#include "ir/message.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(EscapeForMessage, ControlBytesAreEscapedAndPrintableTextKept) {
  EXPECT_EQ(EscapeForMessage("conv_1/weights:0 é"), "conv_1/weights:0 é");
  EXPECT_EQ(EscapeForMessage("a\x1b[31mred\a\nb\tc\x7f"), "a\\x1b[31mred\\x07\\nb\\tc\\x7f");
  EXPECT_EQ(EscapeForMessage(std::string("nul\0byte", 8)), "nul\\x00byte");
}

TEST(EscapeForMessage, LongTextIsCutSayingHowMuch) {
  const std::string name(1 << 20, 'x');
  const std::string e = EscapeForMessage(name, 100);
  EXPECT_EQ(e, std::string(100, 'x') + "...[" + std::to_string((1 << 20) - 100) + " more bytes]");
}

TEST(SanitizedStatus, KeepsTheCodeAndCapsEveryLine) {
  const std::string huge(1 << 20, 'n');
  const absl::Status s =
      absl::InvalidArgumentError("node '" + huge + "\x1b]0;pwned\x07' (Relu): bad\nsecond line");
  const absl::Status one = SanitizedStatus(s, /*keep_line_breaks=*/false);
  EXPECT_EQ(one.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(one.message().size(), kMaxMessageLineBytes + 64);
  EXPECT_EQ(one.message().find('\n'), absl::string_view::npos);
  EXPECT_EQ(one.message().find('\x1b'), absl::string_view::npos);
  EXPECT_THAT(std::string(one.message()), HasSubstr("bytes left out]"));
  EXPECT_THAT(std::string(one.message()), HasSubstr("(Relu): bad\\nsecond line"));

  const absl::Status kept = SanitizedStatus(
      absl::InternalError("g++ failed:\nx.cc:1: error: \x1b[1mboom\x1b[0m"), true);
  EXPECT_EQ(kept.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(kept.message(), "g++ failed:\nx.cc:1: error: \\x1b[1mboom\\x1b[0m");
  EXPECT_TRUE(SanitizedStatus(absl::OkStatus(), false).ok());
}

TEST(MessageArg, EscapesStringsAndPassesLiteralsAndNumbers) {
  const std::string name = "mode\x1b\n";
  const absl::string_view view = name;
  EXPECT_EQ(absl::StrCat("unknown mode '", MessageArg(name), "' at ", MessageArg(3), " ",
                         MessageArg(view)),
            "unknown mode 'mode\\x1b\\n' at 3 mode\\x1b\\n");
  EXPECT_EQ(MessageArg(std::string(1000, 'x')).size(),
            256 + std::string("...[744 more bytes]").size());
}

TEST(SanitizedMessage, IsSanitizedStatusOnText) {
  EXPECT_EQ(SanitizedMessage("a\x07"
                             "b\nc",
                             /*keep_line_breaks=*/true),
            "a\\x07b\nc");
  EXPECT_EQ(SanitizedMessage("a\x07"
                             "b\nc",
                             /*keep_line_breaks=*/false),
            "a\\x07b\\nc");
}

}  // namespace
}  // namespace kiln
