// Tests for ir/status_macros.h.
#include "ir/status_macros.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  KILN_ASSIGN_OR_RETURN(int h, Half(x));
  KILN_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status Check(bool ok) {
  KILN_RET_CHECK(ok);
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusMacros, RetCheckIsInternal) {
  EXPECT_TRUE(Check(true).ok());
  absl::Status s = Check(false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("this is a kiln bug"), std::string::npos);
}

}  // namespace
}  // namespace kiln
