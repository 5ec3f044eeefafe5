// Tests for testing/filecheck.h: each directive matching and failing.
#include "testing/filecheck.h"

#include <gtest/gtest.h>

namespace kiln::testing {
namespace {

constexpr char kOutput[] =
    "graph main(%x: f32[4]) -> (%z) {\n"
    "  %y = Relu(%x) : f32[4]\n"
    "  %z = Add(%y, %y) : f32[4]\n"
    "}\n";

TEST(FileCheck, OrderedChecks) {
  EXPECT_TRUE(RunFileCheck(kOutput, "CHECK: Relu\nCHECK: Add").ok());
  EXPECT_FALSE(RunFileCheck(kOutput, "CHECK: Add\nCHECK: Relu").ok());
}

TEST(FileCheck, NextAndSame) {
  EXPECT_TRUE(RunFileCheck(kOutput, "CHECK: Relu\nCHECK-NEXT: Add(%y,").ok());
  EXPECT_FALSE(RunFileCheck(kOutput, "CHECK: graph\nCHECK-NEXT: Add").ok());
  EXPECT_TRUE(RunFileCheck(kOutput, "CHECK: %z = Add\nCHECK-SAME: f32[4]").ok());
  EXPECT_FALSE(RunFileCheck(kOutput, "CHECK: %z = Add\nCHECK-SAME: Relu").ok());
}

TEST(FileCheck, Not) {
  EXPECT_TRUE(RunFileCheck(kOutput, "// CHECK-NOT: Identity\n// CHECK: Relu").ok());
  absl::Status s = RunFileCheck(kOutput, "CHECK: Relu\nCHECK-NOT: Add\nCHECK: }");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("check line 2"), std::string::npos) << s;
  // A trailing CHECK-NOT covers the rest of the output.
  EXPECT_FALSE(RunFileCheck(kOutput, "CHECK: Relu\nCHECK-NOT: Add").ok());
}

TEST(FileCheck, RegexAndWhitespace) {
  EXPECT_TRUE(RunFileCheck(kOutput, "CHECK: %{{[a-z]}} = Relu(%x)").ok());
  EXPECT_TRUE(RunFileCheck(kOutput, "CHECK: %y   =   Relu").ok());
  // Literal text is not a regex: '.' must not match any character.
  EXPECT_FALSE(RunFileCheck(kOutput, "CHECK: Relu.%x").ok());
}

TEST(FileCheck, OtherPrefix) {
  const char* checks = "CHECK: Add\nLOWERED: Relu\nLOWERED-NEXT: Add\nLOWERED-NOT: Exp";
  EXPECT_TRUE(RunFileCheck(kOutput, checks, "LOWERED").ok());
  EXPECT_FALSE(RunFileCheck(kOutput, "LOWERED: Exp\nCHECK: Relu", "LOWERED").ok());
  // CHECK lines are not LOWERED lines.
  EXPECT_EQ(RunFileCheck(kOutput, "CHECK: Relu", "LOWERED").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FileCheck, ChecksNothingIsAnError) {
  EXPECT_EQ(RunFileCheck(kOutput, "no directives").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunFileCheck(kOutput, "CHECK: {{[}}").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::testing
