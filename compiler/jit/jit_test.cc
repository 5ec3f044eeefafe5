// Tests for JitCompiler, stamped once per ISA by kiln_isa_test: a Highway
// kernel built for the shard's ISA (run in-process, or under qemu for neon on
// x86), the cache (hits, corrupt entries, concurrency) and build errors.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "compiler/jit/isa_test_util.h"
#include "compiler/jit/jit_compiler.h"
#include "compiler/jit/sha256.h"

namespace kiln::jit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAddKernel[] = R"cc(
#include <stdint.h>

#include "hwy/highway.h"

namespace hn = hwy::HWY_NAMESPACE;

extern "C" void kiln_test_add(const float* a, const float* b, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

extern "C" const char* kiln_test_target() { return hwy::TargetName(HWY_TARGET); }

extern "C" int64_t kiln_test_lanes() {
  return static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
}
)cc";

// For emulated ISAs: runs the kernel on the same inputs as the in-process
// test and prints what the test checks.
constexpr char kAddMain[] = R"cc(
#include <stdint.h>
#include <stdio.h>

extern "C" void kiln_test_add(const float* a, const float* b, float* out, int64_t n);
extern "C" const char* kiln_test_target();
extern "C" int64_t kiln_test_lanes();

int main() {
  float a[37], b[37], out[37];
  for (int i = 0; i < 37; ++i) {
    a[i] = 0.5f * i;
    b[i] = 100.0f - 2.0f * i;
  }
  kiln_test_add(a, b, out, 37);
  printf("%s %lld\n", kiln_test_target(), (long long)kiln_test_lanes());
  for (int i = 0; i < 37; ++i) printf("%.9g\n", out[i]);
  return 0;
}
)cc";

constexpr int kN = 37;  // not a multiple of any vector width: exercises the tail

std::string ExpectedTargetName(const std::string& isa) {
  if (isa == "avx512") return "AVX3";
  if (isa == "avx2") return "AVX2";
  if (isa == "neon") return "NEON";
  return "SCALAR";  // what HWY_COMPILE_ONLY_SCALAR selects in Highway 1.0.3
}

std::string TestDir(absl::string_view leaf) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string name =
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  mkdir(dir.c_str(), 0700);
  return absl::StrCat(dir, "/", leaf);
}

// Each test has its own cache; the precompiled header (one per toolchain)
// is shared by the shard's tests, except where a test examines it.
JitOptions Options(const TestIsa& t) {
  JitOptions o;
  o.isa = t.isa;
  o.cache_dir = TestDir("cache");
  o.temp_dir = TestDir("tmp");
  const char* tmp = std::getenv("TEST_TMPDIR");
  o.precompiled_header_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/toolchain");
  return o;
}

// A test's own precompiled header, in its cache.
JitOptions OptionsWithOwnHeader(const TestIsa& t) {
  JitOptions o = Options(t);
  o.precompiled_header_dir.clear();
  return o;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A tiny library whose kiln_test_answer() returns `value`.
std::vector<ir::loop::SourceFile> AnswerSources(int value) {
  return {{"answer", absl::StrCat("extern \"C\" int kiln_test_answer() { return ", value,
                                  "; }\n")}};
}

// Builds `sources` for the ISA under test and returns kiln_test_answer():
// loaded in-process, or as an executable under the emulator.
absl::StatusOr<int> BuildAndCallAnswer(JitCompiler& jit, const TestIsa& t,
                                       std::vector<ir::loop::SourceFile> sources,
                                       CompileStats* stats) {
  if (!t.emulated) {
    absl::StatusOr<std::shared_ptr<LoadedLibrary>> lib = jit.Compile(std::move(sources));
    if (!lib.ok()) return lib.status();
    *stats = (*lib)->stats();
    absl::StatusOr<void*> sym = (*lib)->Symbol("kiln_test_answer");
    if (!sym.ok()) return sym.status();
    return reinterpret_cast<int (*)()>(*sym)();
  }
  sources.push_back({"answer_main",
                     "#include <stdio.h>\nextern \"C\" int kiln_test_answer();\n"
                     "int main() { printf(\"%d\\n\", kiln_test_answer()); return 0; }\n"});
  absl::StatusOr<std::string> exe = jit.CompileExecutable(std::move(sources), stats);
  if (!exe.ok()) return exe.status();
  absl::StatusOr<RunResult> run = jit.RunExecutable(*exe, {});
  if (!run.ok()) return run.status();
  int value = 0;
  if (run->exit_code != 0 || !absl::SimpleAtoi(run->stdout_text, &value)) {
    return absl::InternalError(absl::StrCat("exit ", run->exit_code, ": ", run->stdout_text,
                                            run->stderr_text));
  }
  return value;
}

TEST(JitCompiler, HighwayKernelAddsWithTheIsasTarget) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitCompiler jit(Options(t));
  std::vector<float> a(kN), b(kN), expected(kN);
  for (int i = 0; i < kN; ++i) {
    a[i] = 0.5f * i;
    b[i] = 100.0f - 2.0f * i;
    expected[i] = 100.0f - 1.5f * i;  // exact in f32 for these i
  }
  std::string target;
  int64_t lanes = 0;
  std::vector<float> out(kN, -1.0f);
  if (!t.emulated) {
    absl::StatusOr<std::shared_ptr<LoadedLibrary>> lib = jit.Compile({{"add", kAddKernel}});
    ASSERT_TRUE(lib.ok()) << lib.status();
    EXPECT_FALSE((*lib)->stats().cache_hit);
    absl::StatusOr<void*> add = (*lib)->Symbol("kiln_test_add");
    absl::StatusOr<void*> name = (*lib)->Symbol("kiln_test_target");
    absl::StatusOr<void*> lanes_fn = (*lib)->Symbol("kiln_test_lanes");
    ASSERT_TRUE(add.ok() && name.ok() && lanes_fn.ok());
    reinterpret_cast<void (*)(const float*, const float*, float*, int64_t)>(*add)(
        a.data(), b.data(), out.data(), kN);
    target = reinterpret_cast<const char* (*)()>(*name)();
    lanes = reinterpret_cast<int64_t (*)()>(*lanes_fn)();
  } else {
    absl::StatusOr<std::string> exe =
        jit.CompileExecutable({{"add", kAddKernel}, {"add_main", kAddMain}});
    ASSERT_TRUE(exe.ok()) << exe.status();
    absl::StatusOr<RunResult> run = jit.RunExecutable(*exe, {});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->exit_code, 0) << run->stderr_text;
    std::vector<std::string> lines = absl::StrSplit(run->stdout_text, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), kN + 1u) << run->stdout_text;
    std::vector<std::string> head = absl::StrSplit(lines[0], ' ');
    ASSERT_EQ(head.size(), 2u);
    target = head[0];
    ASSERT_TRUE(absl::SimpleAtoi(head[1], &lanes));
    for (int i = 0; i < kN; ++i) ASSERT_TRUE(absl::SimpleAtof(lines[i + 1], &out[i]));
  }
  EXPECT_EQ(target, ExpectedTargetName(t.isa->name));
  EXPECT_EQ(lanes, t.isa->vector_bytes / 4);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(out[i], expected[i]) << "i=" << i;
}

TEST(JitCompiler, SecondCompileIsACacheHit) {
  KILN_TEST_ISA_OR_SKIP(t);
  CompileStats first, second;
  {
    JitCompiler jit(Options(t));
    absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(42), &first);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, 42);
  }
  JitCompiler jit(Options(t));  // a fresh compiler: the hit comes from disk
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(42), &second);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 42);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(first.hash, second.hash);
  EXPECT_EQ(first.path, second.path);
  EXPECT_EQ(first.hash.size(), 64u);
  EXPECT_TRUE(second.evicted_reason.empty());

  CompileStats other;  // different text, different entry
  v = BuildAndCallAnswer(jit, t, AnswerSources(7), &other);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 7);
  EXPECT_FALSE(other.cache_hit);
  EXPECT_NE(other.hash, first.hash);
}

TEST(JitCompiler, FlagsArePartOfTheCacheKey) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitOptions o = Options(t);
  CompileStats plain, defined;
  JitCompiler jit(o);
  ASSERT_TRUE(BuildAndCallAnswer(jit, t, AnswerSources(1), &plain).ok());
  o.extra_flags = {"-DKILN_UNUSED_MACRO=1"};
  JitCompiler jit2(o);
  ASSERT_TRUE(BuildAndCallAnswer(jit2, t, AnswerSources(1), &defined).ok());
  EXPECT_FALSE(defined.cache_hit);
  EXPECT_NE(plain.hash, defined.hash);
}

TEST(JitCompiler, TruncatedCacheEntryIsRebuilt) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitCompiler jit(Options(t));
  CompileStats first, second, third;
  ASSERT_TRUE(BuildAndCallAnswer(jit, t, AnswerSources(5), &first).ok());
  struct stat st;
  ASSERT_EQ(stat(first.path.c_str(), &st), 0);
  ASSERT_EQ(truncate(first.path.c_str(), st.st_size / 2), 0);

  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(5), &second);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 5);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_THAT(second.evicted_reason, HasSubstr("checksum"));
  ASSERT_EQ(stat(second.path.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 0);

  v = BuildAndCallAnswer(jit, t, AnswerSources(5), &third);  // repaired entry
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(third.cache_hit);
}

TEST(JitCompiler, MissingMetaIsRebuilt) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitCompiler jit(Options(t));
  CompileStats first, second;
  ASSERT_TRUE(BuildAndCallAnswer(jit, t, AnswerSources(6), &first).ok());
  const std::string meta = absl::StrCat(jit.cache_dir(), "/", first.hash, ".meta");
  EXPECT_THAT(ReadAll(meta), HasSubstr(first.hash));
  ASSERT_EQ(unlink(meta.c_str()), 0);
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(6), &second);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 6);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_THAT(second.evicted_reason, HasSubstr(".meta"));
}

// A cached file whose record matches but which is not a loadable library
// (the record vouches for garbage) is caught by dlopen and rebuilt.
TEST(JitCompiler, UnloadableCachedLibraryIsRebuilt) {
  KILN_TEST_ISA_OR_SKIP(t);
  if (t.emulated) GTEST_SKIP() << "SKIPPED: dlopen is not used for emulated ISAs";
  JitCompiler jit(Options(t));
  CompileStats first, second;
  ASSERT_TRUE(BuildAndCallAnswer(jit, t, AnswerSources(8), &first).ok());
  const std::string garbage = "this is not an ELF file";
  std::ofstream(first.path, std::ios::binary | std::ios::trunc) << garbage;
  std::ofstream(absl::StrCat(jit.cache_dir(), "/", first.hash, ".meta"),
                std::ios::binary | std::ios::trunc)
      << "kiln-jit-cache v2\nhash " << first.hash << "\nkind so\nsize " << garbage.size()
      << "\nsha256 " << Sha256Hex(garbage) << "\n";
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(8), &second);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 8);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_THAT(second.evicted_reason, HasSubstr("dlopen"));
}

TEST(JitCompiler, CompileErrorReportsTheCompilerAndKeepsSources) {
  KILN_TEST_ISA_OR_SKIP(t);
  const std::string text = "int kiln_broken() { return kiln_undeclared_name; }\n";
  for (bool explicit_keep_dir : {false, true}) {
    JitOptions o = Options(t);
    if (explicit_keep_dir) o.keep_source_dir = TestDir("kept");
    JitCompiler jit(o);
    absl::Status s =
        t.emulated ? jit.CompileExecutable({{"broken", text}}).status()
                   : jit.Compile({{"broken", text}}).status();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(s.message(), HasSubstr("kiln_undeclared_name"));
    EXPECT_THAT(s.message(), HasSubstr("was not declared"));  // GCC's own words
    const std::string marker = "sources kept in ";
    const size_t at = s.message().find(marker);
    ASSERT_NE(at, absl::string_view::npos) << s.message();
    const absl::string_view rest = s.message().substr(at + marker.size());
    const std::string kept(rest.substr(0, rest.find('\n')));
    EXPECT_THAT(kept, HasSubstr(explicit_keep_dir ? o.keep_source_dir : o.temp_dir));
    EXPECT_EQ(ReadAll(kept + "/broken.cc"), text);
    EXPECT_THAT(ReadAll(kept + "/failed_command.txt"), HasSubstr("broken.cc"));
  }
}

// A cache that cannot be written makes a miss build into a private
// temporary cache, saying so, instead of failing in the C++ compiler.
TEST(JitCompiler, UnwritableCacheFallsBackToAPrivateOne) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitOptions o = Options(t);
  o.cache_dir = "/proc/self/kiln-cache";  // procfs: no directory can be made there
  o.temp_dir.clear();
  JitCompiler jit(o);
  CompileStats stats;
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(5), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 5);
  EXPECT_THAT(stats.cache_note, HasSubstr("'/proc/self/kiln-cache' is not writable"));
  EXPECT_THAT(stats.cache_note, HasSubstr("private temporary cache"));
  EXPECT_THAT(stats.path, Not(HasSubstr("/proc/")));
}

// Without JitOptions::temp_dir, a build's private directory is under the
// cache (a failed one keeps its sources there), not in $TMPDIR.
TEST(JitCompiler, BuildDirectoriesLiveUnderTheCache) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitOptions o = Options(t);
  o.temp_dir.clear();
  JitCompiler jit(o);
  const std::string text = "int kiln_broken() { return nope; }\n";
  absl::Status s = t.emulated ? jit.CompileExecutable({{"broken", text}}).status()
                              : jit.Compile({{"broken", text}}).status();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("sources kept in ", o.cache_dir, "/tmp/kiln_jit_")));
}

// Leftovers of killed processes older than the age are removed: build
// directories in the temp root and unpublished artifacts in the cache.
// Newer ones (a build running in another process) and other files stay.
TEST(JitCompiler, SweepRemovesOnlyStaleLeftovers) {
  const std::string cache = TestDir("sweep_cache");
  const std::string temp = cache + "/tmp";
  mkdir(cache.c_str(), 0700);
  mkdir(temp.c_str(), 0700);
  auto touch = [](const std::string& path, absl::Duration age) {
    std::ofstream(path) << "x";
    const time_t when = absl::ToTimeT(absl::Now() - age);
    struct timeval tv[2] = {{when, 0}, {when, 0}};
    ASSERT_EQ(utimes(path.c_str(), tv), 0) << path;
  };
  auto make_dir = [&](const std::string& dir, absl::Duration age) {
    mkdir(dir.c_str(), 0700);
    touch(dir + "/unit.cc", age);
    touch(dir + "/unit.o", age);
    const time_t when = absl::ToTimeT(absl::Now() - age);
    struct timeval tv[2] = {{when, 0}, {when, 0}};
    ASSERT_EQ(utimes(dir.c_str(), tv), 0) << dir;
  };
  make_dir(temp + "/kiln_jit_old", absl::Hours(30));
  make_dir(temp + "/kiln_jit_new", absl::Minutes(5));
  make_dir(temp + "/not_ours", absl::Hours(30));
  touch(cache + "/abc.tmp.123.0.so", absl::Hours(30));
  touch(cache + "/abd.tmp.124.0.so", absl::Minutes(1));
  touch(cache + "/abc.so", absl::Hours(30));
  EXPECT_EQ(SweepStaleBuildDirs(temp, cache, absl::Hours(24)), 2);
  struct stat st;
  EXPECT_NE(stat((temp + "/kiln_jit_old").c_str(), &st), 0);
  EXPECT_EQ(stat((temp + "/kiln_jit_new/unit.o").c_str(), &st), 0);
  EXPECT_EQ(stat((temp + "/not_ours/unit.o").c_str(), &st), 0);
  EXPECT_NE(stat((cache + "/abc.tmp.123.0.so").c_str(), &st), 0);
  EXPECT_EQ(stat((cache + "/abd.tmp.124.0.so").c_str(), &st), 0);
  EXPECT_EQ(stat((cache + "/abc.so").c_str(), &st), 0);
}

TEST(JitCompiler, TwoTranslationUnitsAndAHeaderLinkTogether) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitCompiler jit(Options(t));
  CompileStats stats;
  absl::StatusOr<int> v = BuildAndCallAnswer(
      jit, t,
      {{"common.h", "int kiln_helper(int x);\n"},
       {"helper", "#include \"common.h\"\nint kiln_helper(int x) { return 3 * x; }\n"},
       {"answer", "#include \"common.h\"\n"
                  "extern \"C\" int kiln_test_answer() { return kiln_helper(14) + 1; }\n"}},
      &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 43);
  EXPECT_EQ(stats.translation_units, t.emulated ? 3 : 2);
}

// Two Highway units: kiln_test_answer() returns value * 1000 + the float
// lanes of the ISA's vectors.
std::vector<ir::loop::SourceFile> HighwayAnswerSources(int value) {
  return {{"lanes", "#include \"hwy/highway.h\"\nnamespace hn = hwy::HWY_NAMESPACE;\n"
                    "extern \"C\" int kiln_test_lanes_i() {\n"
                    "  return static_cast<int>(hn::Lanes(hn::ScalableTag<float>()));\n}\n"},
          {"answer", absl::StrCat("#include \"hwy/highway.h\"\n"
                                  "extern \"C\" int kiln_test_lanes_i();\n"
                                  "extern \"C\" int kiln_test_answer() { return ",
                                  value, " * 1000 + kiln_test_lanes_i(); }\n")}};
}

// Precompiled-header entries (pch-<hash>/) in a cache dir.
std::vector<std::string> PchDirs(const std::string& cache) {
  std::vector<std::string> dirs;
  if (DIR* d = opendir(cache.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("pch-", 0) == 0) dirs.push_back(absl::StrCat(cache, "/", name));
    }
    closedir(d);
  }
  return dirs;
}

TEST(JitCompiler, PrecompiledHeaderIsBuiltOnceAndReused) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitOptions o = OptionsWithOwnHeader(t);
  const int lanes = static_cast<int>(t.isa->vector_bytes / 4);
  CompileStats first, second;
  {
    JitCompiler jit(o);
    absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(5), &first);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, 5000 + lanes);
  }
  const std::vector<std::string> dirs = PchDirs(o.cache_dir);
  ASSERT_EQ(dirs.size(), 1u);
  struct stat st;
  EXPECT_EQ(stat(absl::StrCat(dirs[0], "/kiln_jit_pch.h.gch").c_str(), &st), 0);
  EXPECT_GT(first.precompiled_header_time, absl::ZeroDuration());
  EXPECT_GT(first.header_scan_time, absl::ZeroDuration());
  JitCompiler jit(o);  // another model: a library miss, a header hit
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(6), &second);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 6000 + lanes);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_EQ(second.precompiled_header_units, 2);
  EXPECT_EQ(second.precompiled_header_time, absl::ZeroDuration());
  // The recorded header list still matches the files: no rescan.
  EXPECT_EQ(second.header_scan_time, absl::ZeroDuration());
  EXPECT_EQ(PchDirs(o.cache_dir).size(), 1u);
}

TEST(JitCompiler, PrecompiledHeaderCanLiveOutsideTheCache) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitOptions o = OptionsWithOwnHeader(t);
  o.precompiled_header_dir = TestDir("toolchain");
  const int lanes = static_cast<int>(t.isa->vector_bytes / 4);
  CompileStats stats;
  {
    JitCompiler jit(o);
    ASSERT_TRUE(BuildAndCallAnswer(jit, t, HighwayAnswerSources(1), &stats).ok());
  }
  EXPECT_TRUE(PchDirs(o.cache_dir).empty());
  ASSERT_EQ(PchDirs(o.precompiled_header_dir).size(), 1u);
  o.cache_dir = TestDir("fresh_cache");  // a model never built, the header made
  JitCompiler jit(o);
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(2), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 2000 + lanes);
  EXPECT_FALSE(stats.cache_hit);
  EXPECT_EQ(stats.precompiled_header_units, 2);
  EXPECT_EQ(stats.precompiled_header_time, absl::ZeroDuration());
  EXPECT_TRUE(PchDirs(o.cache_dir).empty());
}

TEST(JitCompiler, DamagedPrecompiledHeaderStillBuildsCorrectly) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitOptions o = OptionsWithOwnHeader(t);
  const int lanes = static_cast<int>(t.isa->vector_bytes / 4);
  JitCompiler jit(o);
  CompileStats stats;
  ASSERT_TRUE(BuildAndCallAnswer(jit, t, HighwayAnswerSources(1), &stats).ok());
  const std::vector<std::string> dirs = PchDirs(o.cache_dir);
  ASSERT_EQ(dirs.size(), 1u);
  const std::string gch = absl::StrCat(dirs[0], "/kiln_jit_pch.h.gch");
  const std::string bytes = ReadAll(gch);
  ASSERT_FALSE(bytes.empty());
  {
    std::ofstream out(gch, std::ios::binary | std::ios::trunc);
    out << std::string(bytes.size(), 'x');  // same size: the .meta still agrees
  }
  // GCC does not use it (-Winvalid-pch): the units come from the plain
  // header, and the damaged one is dropped ...
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(2), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 2000 + lanes);
  EXPECT_EQ(stats.precompiled_header_units, 0);
  struct stat st;
  EXPECT_NE(stat(gch.c_str(), &st), 0);
  // ... and made again by the next build (whose units do not wait for it),
  // and used by the one after.
  v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(3), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 3000 + lanes);
  EXPECT_GT(stats.precompiled_header_time, absl::ZeroDuration());
  EXPECT_EQ(stat(gch.c_str(), &st), 0);
  v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(4), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 4000 + lanes);
  EXPECT_EQ(stats.precompiled_header_units, 2);
}

TEST(JitCompiler, PrecompiledHeaderOnlyWhenWanted) {
  KILN_TEST_ISA_OR_SKIP(t);
  const int lanes = static_cast<int>(t.isa->vector_bytes / 4);
  JitOptions o = OptionsWithOwnHeader(t);
  o.precompiled_header_min_units = 3;  // more Highway units than the build has
  CompileStats stats;
  JitCompiler jit(o);
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(3), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 3000 + lanes);
  EXPECT_EQ(stats.precompiled_header_units, 0);
  EXPECT_TRUE(PchDirs(o.cache_dir).empty());
  o.precompiled_header = false;
  o.precompiled_header_min_units = 1;
  JitCompiler off(o);
  v = BuildAndCallAnswer(off, t, HighwayAnswerSources(4), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 4000 + lanes);
  EXPECT_EQ(stats.precompiled_header_units, 0);
  EXPECT_TRUE(PchDirs(o.cache_dir).empty());
}

// The headers generated code includes are part of every key: a header
// that shadows <stdint.h> (and includes the real one) stands in for a new
// Highway.
TEST(JitCompiler, IncludedHeaderContentsArePartOfTheKey) {
  KILN_TEST_ISA_OR_SKIP(t);
  const int lanes = static_cast<int>(t.isa->vector_bytes / 4);
  JitOptions o = Options(t);
  const std::string include = TestDir("include");
  ASSERT_EQ(mkdir(include.c_str(), 0700), 0);
  auto write_header = [&](absl::string_view version) {
    std::ofstream out(absl::StrCat(include, "/stdint.h"), std::ios::binary | std::ios::trunc);
    out << "#include_next <stdint.h>\n// " << version << "\n";
  };
  write_header("version 1");
  o.include_dirs = {include};
  o.precompiled_header = false;  // the key alone is under test
  CompileStats first, changed, back;
  {
    JitCompiler jit(o);
    absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(1), &first);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, 1000 + lanes);
  }
  write_header("version 2");
  {
    JitCompiler jit(o);
    absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(1), &changed);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, 1000 + lanes);
  }
  EXPECT_FALSE(changed.cache_hit);
  EXPECT_NE(changed.hash, first.hash);
  write_header("version 1");  // the same contents again: the first entry
  JitCompiler jit(o);
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, HighwayAnswerSources(1), &back);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(back.cache_hit);
  EXPECT_EQ(back.hash, first.hash);
}

TEST(JitCompiler, ConcurrentCompilesOfTheSameSourceAllSucceed) {
  KILN_TEST_ISA_OR_SKIP(t);
  const JitOptions o = Options(t);
  constexpr int kThreads = 4;
  std::vector<absl::StatusOr<int>> values(kThreads, absl::UnknownError("not run"));
  std::vector<CompileStats> stats(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      JitCompiler jit(o);
      values[i] = BuildAndCallAnswer(jit, t, AnswerSources(99), &stats[i]);
    });
  }
  for (std::thread& th : threads) th.join();
  int misses = 0;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(values[i].ok()) << values[i].status();
    EXPECT_EQ(*values[i], 99);
    EXPECT_EQ(stats[i].path, stats[0].path);
    misses += stats[i].cache_hit ? 0 : 1;
  }
  EXPECT_EQ(misses, 1);  // the per-entry lock makes the others wait and hit
}

// Separate processes share the cache through the same lock and renames.
TEST(JitCompiler, ConcurrentCompilesFromSeveralProcessesBuildOnce) {
  KILN_TEST_ISA_OR_SKIP(t);
  const JitOptions o = Options(t);
  constexpr int kChildren = 3;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      JitCompiler jit(o);
      CompileStats stats;
      absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(77), &stats);
      _exit(!v.ok() || *v != 77 ? 2 : stats.cache_hit ? 0 : 1);
    }
    children.push_back(pid);
  }
  int misses = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_LE(WEXITSTATUS(status), 1) << "a child failed to build or run";
    misses += WEXITSTATUS(status);
  }
  EXPECT_EQ(misses, 1);
  JitCompiler jit(o);
  CompileStats stats;
  absl::StatusOr<int> v = BuildAndCallAnswer(jit, t, AnswerSources(77), &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 77);
  EXPECT_TRUE(stats.cache_hit);
}

// Generated kernels use OpenMP; libgomp's worker threads outlive the call.
// Unloading the library must not unload libgomp (this test binary does not
// link it) while those threads live.
TEST(JitCompiler, OpenMpLibraryCanBeReleasedWhileWorkersLive) {
  KILN_TEST_ISA_OR_SKIP(t);
  if (t.emulated) GTEST_SKIP() << "SKIPPED: in-process loading only";
  JitCompiler jit(Options(t));
  absl::StatusOr<std::shared_ptr<LoadedLibrary>> lib = jit.Compile(
      {{"omp_sum", "#include <stdint.h>\n"
                   "extern \"C\" int64_t kiln_test_omp_sum(int64_t n) {\n"
                   "  int64_t s = 0;\n"
                   "#pragma omp parallel for reduction(+ : s) num_threads(2)\n"
                   "  for (int64_t i = 0; i < n; ++i) s += i;\n"
                   "  return s;\n"
                   "}\n"}});
  ASSERT_TRUE(lib.ok()) << lib.status();
  absl::StatusOr<void*> sym = (*lib)->Symbol("kiln_test_omp_sum");
  ASSERT_TRUE(sym.ok()) << sym.status();
  auto fn = reinterpret_cast<int64_t (*)(int64_t)>(*sym);
  EXPECT_EQ(fn(100000), int64_t{100000} * 99999 / 2);
  lib->reset();  // drops the last reference: dlclose
  // Idle OpenMP workers keep running their spin/sleep loop meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Loading it again is a cache hit and still works.
  absl::StatusOr<std::shared_ptr<LoadedLibrary>> again = jit.Compile(
      {{"omp_sum", "#include <stdint.h>\n"
                   "extern \"C\" int64_t kiln_test_omp_sum(int64_t n) {\n"
                   "  int64_t s = 0;\n"
                   "#pragma omp parallel for reduction(+ : s) num_threads(2)\n"
                   "  for (int64_t i = 0; i < n; ++i) s += i;\n"
                   "  return s;\n"
                   "}\n"}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->stats().cache_hit);
}

TEST(JitCompiler, EmulatedIsaCannotBeLoaded) {
  KILN_TEST_ISA_OR_SKIP(t);
  if (!t.emulated) GTEST_SKIP() << "SKIPPED: ISA '" << t.isa->name << "' runs natively";
  JitCompiler jit(Options(t));
  absl::Status s = jit.Compile(AnswerSources(1)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("CompileExecutable"));
}

TEST(JitCompiler, RunExecutableReportsOutputAndExitCode) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitCompiler jit(Options(t));
  absl::StatusOr<std::string> exe = jit.CompileExecutable(
      {{"prog", "#include <stdio.h>\n"
                "int main(int argc, char** argv) {\n"
                "  printf(\"%d:%s\", argc, argc > 1 ? argv[1] : \"\");\n"
                "  fprintf(stderr, \"to stderr\");\n"
                "  return 3;\n}\n"}});
  ASSERT_TRUE(exe.ok()) << exe.status();
  absl::StatusOr<RunResult> run = jit.RunExecutable(*exe, {"a b;$(x)"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 3);
  EXPECT_EQ(run->stdout_text, "2:a b;$(x)");  // one argument, no shell
  EXPECT_EQ(run->stderr_text, "to stderr");
}

TEST(JitCompiler, RejectsUnsanitizedSourceNames) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitCompiler jit(Options(t));
  for (const char* name : {"../evil", "a b", "", "x.cc", "1abc"}) {
    absl::Status s = jit.CompileExecutable({{name, "int main() {}\n"}}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << name;
    EXPECT_THAT(s.message(), HasSubstr("sanitized identifier")) << name;
  }
  absl::Status dup =
      jit.CompileExecutable({{"a", "int main() {}\n"}, {"a", "int x;\n"}}).status();
  EXPECT_THAT(dup.message(), HasSubstr("appears twice"));
  absl::Status headers_only = jit.CompileExecutable({{"a.h", "int x;\n"}}).status();
  EXPECT_THAT(headers_only.message(), HasSubstr("no translation unit"));
}

TEST(JitCompiler, MissingCompilerIsAFailedPrecondition) {
  KILN_TEST_ISA_OR_SKIP(t);
  JitOptions o = Options(t);
  o.compiler = "/nonexistent/kiln-g++";
  JitCompiler jit(o);
  absl::Status s = jit.CompileExecutable(AnswerSources(1)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/kiln-g++"));
}

TEST(JitCompiler, DefaultCacheDirFollowsXdgThenHome) {
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const char* old_home = std::getenv("HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "", saved_home = old_home ? old_home : "";
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  setenv("HOME", "/h", 1);
  EXPECT_EQ(DefaultCacheDir(), "/x/cache/kiln");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultCacheDir(), "/h/.cache/kiln");
  if (old_xdg) setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (old_home) setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace kiln::jit
