// Runs the module's compiler's preprocessor over <hwy/highway.h>.
#include "isa/static_target.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace kiln::isa {

absl::StatusOr<int64_t> StaticHwyTarget(const VecIsa& isa) {
  const std::string which = absl::StrCat("command -v ", isa.cxx, " >/dev/null 2>&1");
  if (std::system(which.c_str()) != 0) {
    return absl::NotFoundError(absl::StrCat("compiler ", isa.cxx, " is not installed"));
  }
  // One `#if` per target bit: HWY_STATIC_TARGET is an expression the
  // preprocessor can evaluate but not print. The flags are kiln's own
  // constants, never model text.
  std::string src = "#include <hwy/highway.h>\n";
  for (int bit = 0; bit < 63; ++bit) {
    absl::StrAppend(&src, "#if HWY_STATIC_TARGET == (1LL << ", bit,
                    ")\nkiln_target_bit=", bit, "\n#endif\n");
  }
  char path[] = "/tmp/kiln_hwy_target_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return absl::InternalError("mkstemp failed");
  FILE* f = fdopen(fd, "w");
  fputs(src.c_str(), f);
  fclose(f);
  const std::string cmd =
      absl::StrCat(isa.cxx, " ", absl::StrJoin(isa.cxx_flags, " "),
                   " -E -P -x c++ ", path, " 2>&1 | grep kiln_target_bit=");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen failed");
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  pclose(p);
  std::remove(path);
  absl::string_view v = absl::StripAsciiWhitespace(out);
  int bit = 0;
  if (!absl::ConsumePrefix(&v, "kiln_target_bit=") || !absl::SimpleAtoi(v, &bit)) {
    return absl::InternalError(
        absl::StrCat("cannot read HWY_STATIC_TARGET from: ", out));
  }
  return int64_t{1} << bit;
}

}  // namespace kiln::isa
