// Tests of kilnc: its library (argument and shape parsing, error metrics,
// summaries, random inputs) and, end to end, the kilnc binary on the shipped
// tiny CNN (models/tiny_cnn), a corrupted copy of it and missing files.
#include "tools/kilnc_lib.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ir::DType;
using ir::Shape;
using ir::Tensor;

// ---------------------------------------------------------------- parsing

TEST(ParseDims, AcceptsDimsSeparatedByX) {
  EXPECT_EQ(*ParseDims("1x3x224x224"), (Shape{1, 3, 224, 224}));
  EXPECT_EQ(*ParseDims("7"), (Shape{7}));
  EXPECT_EQ(*ParseDims("2x0x5"), (Shape{2, 0, 5}));
}

TEST(ParseDims, RejectsMalformedDims) {
  for (const char* bad : {"", "x", "1x", "x3", "1xx3", "1x-3", "-1", "1xax3",
                          "1x3.5", " 1", "1X3", "1,3",
                          "99999999999999999999",
                          "4294967296x4294967296"}) {
    absl::StatusOr<Shape> s = ParseDims(bad);
    EXPECT_FALSE(s.ok()) << "'" << bad << "' parsed";
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(ParseShapeFlag, SplitsNameAtLastEquals) {
  auto s = ParseShapeFlag("input=1x3x32x32");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->first, "input");
  EXPECT_EQ(s->second, (Shape{1, 3, 32, 32}));
  auto odd = ParseShapeFlag("a=b=2x2");
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ(odd->first, "a=b");
  EXPECT_EQ(odd->second, (Shape{2, 2}));
}

TEST(ParseShapeFlag, RejectsBadFlags) {
  for (const char* bad : {"input", "=1x3", "input=", "input=1x", "input=1x-2",
                          "input=?x3"}) {
    absl::StatusOr<std::pair<std::string, Shape>> s = ParseShapeFlag(bad);
    EXPECT_FALSE(s.ok()) << "'" << bad << "' parsed";
    if (!s.ok()) {
      EXPECT_THAT(s.status().message(), HasSubstr(bad));
    }
  }
}

TEST(ParseInputFlag, SplitsAtFirstEquals) {
  auto s = ParseInputFlag("x=dir/a=b.pb");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->first, "x");
  EXPECT_EQ(s->second, "dir/a=b.pb");
  EXPECT_FALSE(ParseInputFlag("x").ok());
  EXPECT_FALSE(ParseInputFlag("=f.pb").ok());
  EXPECT_FALSE(ParseInputFlag("x=").ok());
}

TEST(ResolvePath, JoinsRelativePathsOnly) {
  EXPECT_EQ(ResolvePath("models/m", "/home/u"), "/home/u/models/m");
  EXPECT_EQ(ResolvePath("models/m", "/home/u/"), "/home/u/models/m");
  EXPECT_EQ(ResolvePath("/abs/m", "/home/u"), "/abs/m");
  EXPECT_EQ(ResolvePath("rel", ""), "rel");
}

TEST(ParseCommandLine, CheckDefaultsMatchOnnxBackendTests) {
  auto cmd = ParseCommandLine({"check", "models/tiny_cnn"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->kind, Command::Kind::kCheck);
  EXPECT_EQ(cmd->check.dir, "models/tiny_cnn");
  EXPECT_EQ(cmd->check.tol.rtol, 1e-3);
  EXPECT_EQ(cmd->check.tol.atol, 1e-5);
  EXPECT_FALSE(cmd->check.tol.max_rel.has_value());
  EXPECT_FALSE(cmd->check.verbose);
}

TEST(ParseCommandLine, CheckFlagsInBothForms) {
  auto cmd = ParseCommandLine({"check", "--rtol=1e-4", "d", "--atol", "0",
                               "--max_rel", "2e-4", "-v"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->check.dir, "d");
  EXPECT_EQ(cmd->check.tol.rtol, 1e-4);
  EXPECT_EQ(cmd->check.tol.atol, 0.0);
  ASSERT_TRUE(cmd->check.tol.max_rel.has_value());
  EXPECT_EQ(*cmd->check.tol.max_rel, 2e-4);
  EXPECT_TRUE(cmd->check.verbose);
}

TEST(ParseCommandLine, RunFlags) {
  auto cmd = ParseCommandLine(
      {"run", "m.onnx", "--input", "a=a.pb", "--input=b=b.pb", "--shape",
       "c=1x2", "--seed=42", "--int-range=-3:3", "--save-outputs", "out",
       "--num-values=2"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  const RunOptions& r = cmd->run;
  EXPECT_EQ(cmd->kind, Command::Kind::kRun);
  EXPECT_EQ(r.model, "m.onnx");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0], (std::pair<std::string, std::string>("a", "a.pb")));
  EXPECT_EQ(r.inputs[1], (std::pair<std::string, std::string>("b", "b.pb")));
  ASSERT_EQ(r.shapes.size(), 1u);
  EXPECT_EQ(r.shapes[0].first, "c");
  EXPECT_EQ(r.shapes[0].second, (Shape{1, 2}));
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.int_low, -3);
  EXPECT_EQ(r.int_high, 3);
  EXPECT_EQ(r.save_outputs, "out");
  EXPECT_EQ(r.num_values, 2);
}

TEST(ParseCommandLine, HelpForToolAndEachCommand) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--help"}, {"-h"}, {"help"}}) {
    auto cmd = ParseCommandLine(args);
    ASSERT_TRUE(cmd.ok()) << cmd.status();
    EXPECT_EQ(cmd->kind, Command::Kind::kHelp);
    EXPECT_THAT(cmd->help_text, HasSubstr("usage: kilnc <command>"));
  }
  auto check = ParseCommandLine({"check", "--help"});
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(check->kind, Command::Kind::kHelp);
  EXPECT_THAT(check->help_text, HasSubstr("usage: kilnc check DIR"));
  auto run = ParseCommandLine({"help", "run"});
  ASSERT_TRUE(run.ok());
  EXPECT_THAT(run->help_text, HasSubstr("usage: kilnc run MODEL"));
}

TEST(ParseCommandLine, ArgumentErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "missing command"},
      {{"compile", "m.onnx"}, "unknown command 'compile'"},
      {{"--rtol=1", "check", "d"}, "unknown flag '--rtol=1'"},
      {{"check"}, "needs a folder"},
      {{"check", "a", "b"}, "one folder"},
      {{"check", "d", "--bogus"}, "unknown flag '--bogus'"},
      {{"check", "d", "--rtol=abc"}, "--rtol wants a finite number"},
      {{"check", "d", "--atol=-1"}, "--atol wants a finite number"},
      {{"check", "d", "--max-rel=inf"}, "--max-rel wants a finite number"},
      {{"check", "d", "--rtol"}, "--rtol needs a value"},
      {{"check", "d", "--verbose=1"}, "--verbose takes no value"},
      {{"run"}, "needs a model file"},
      {{"run", "m", "--shape", "x=1xq"}, "bad --shape 'x=1xq'"},
      {{"run", "m", "--shape", "x=1", "--shape", "x=2"}, "given twice"},
      {{"run", "m", "--input", "x"}, "bad --input 'x'"},
      {{"run", "m", "--input", "x=a", "--input", "x=b"}, "given twice"},
      {{"run", "m", "--seed=-1"}, "--seed wants"},
      {{"run", "m", "--int-range=5:5"}, "--int-range wants"},
      {{"run", "m", "--int-range=a:b"}, "--int-range wants"},
      {{"run", "m", "--num-values=x"}, "--num-values wants"},
      {{"run", "m", "--rtol=1"}, "unknown flag '--rtol=1'"},
  };
  for (const auto& [args, want] : cases) {
    absl::StatusOr<Command> cmd = ParseCommandLine(args);
    ASSERT_FALSE(cmd.ok()) << "accepted: " << ::testing::PrintToString(args);
    EXPECT_EQ(cmd.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(cmd.status().message(), HasSubstr(want));
    EXPECT_THAT(cmd.status().message(), HasSubstr("--help' for usage"));
  }
}

TEST(ParseCommandLine, DoubleDashEndsFlags) {
  auto cmd = ParseCommandLine({"check", "--", "--weird-folder"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->check.dir, "--weird-folder");
}

// ---------------------------------------------------------------- metrics

testing::Tolerance Tol(double rtol, double atol) {
  testing::Tolerance t;
  t.rtol = rtol;
  t.atol = atol;
  return t;
}

// kilnc check's default tolerance.
testing::Tolerance KilncDefault() { return CheckOptions{}.tol; }

Tensor F32(Shape shape, std::vector<float> v) {
  return Tensor::FromVector<float>(std::move(shape), v);
}

TEST(CompareOutput, MetricsOnHandMadeTensors) {
  const Tensor ref = F32({4}, {1.0f, 2.0f, -4.0f, 0.0f});
  const Tensor got = F32({4}, {1.0f, 2.001f, -4.0f, 1e-6f});
  const testing::CompareResult m = testing::CompareTensors(got, ref, KilncDefault());
  EXPECT_TRUE(m.dtype_match);
  EXPECT_TRUE(m.shape_match);
  EXPECT_EQ(m.num_elements, 4);
  // Worst element: index 1, |2.001 - 2| = 1e-3 (to f32 precision).
  EXPECT_NEAR(m.max_abs_error, 1e-3, 1e-7);
  EXPECT_EQ(m.max_abs_index, 1);
  EXPECT_EQ(m.max_abs_ref, 4.0);
  EXPECT_EQ(m.rel_to_max, m.max_abs_error / 4);
  EXPECT_NEAR(m.rel_to_max, 1e-3 / 4, 1e-7);
  // Elements with |ref| > atol: 1, 2, -4; the largest ratio is 1e-3 / 2.
  ASSERT_TRUE(m.max_elementwise_rel.has_value());
  EXPECT_NEAR(*m.max_elementwise_rel, 5e-4, 1e-7);
  // 1e-3 <= 1e-5 + 1e-3 * 2 and 1e-6 <= 1e-5: everything within tolerance.
  EXPECT_EQ(m.mismatches, 0);
  EXPECT_TRUE(m.ok);

  // rtol 1e-4: 1e-3 > 1e-5 + 2e-4 fails index 1; 1e-6 <= 1e-5 still passes.
  const testing::CompareResult tight = testing::CompareTensors(got, ref, Tol(1e-4, 1e-5));
  EXPECT_EQ(tight.mismatches, 1);
  EXPECT_FALSE(tight.ok);

  // Norm-wise: 2.5e-4 of max|ref| passes 1e-3, fails 1e-4.
  testing::Tolerance loose;
  loose.max_rel = 1e-3;
  EXPECT_TRUE(testing::CompareTensors(got, ref, loose).ok);
  testing::Tolerance strict;
  strict.max_rel = 1e-4;
  EXPECT_FALSE(testing::CompareTensors(got, ref, strict).ok);
}

TEST(CompareOutput, ExactResultAndZeroReference) {
  const Tensor zeros = F32({3}, {0, 0, 0});
  const testing::CompareResult same = testing::CompareTensors(zeros, zeros, KilncDefault());
  EXPECT_TRUE(same.ok);
  EXPECT_EQ(same.max_abs_error, 0);
  EXPECT_EQ(same.max_abs_index, -1);
  EXPECT_EQ(same.rel_to_max, 0);
  EXPECT_FALSE(same.max_elementwise_rel.has_value());

  const testing::CompareResult off = testing::CompareTensors(F32({3}, {0, 0, 0.5f}), zeros,
                                         KilncDefault());
  EXPECT_FALSE(off.ok);
  EXPECT_TRUE(std::isinf(off.rel_to_max));
  EXPECT_EQ(off.max_abs_index, 2);
}

TEST(CompareOutput, NanMatchesOnlyNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor ref = F32({3}, {nan, inf, 1});
  EXPECT_TRUE(testing::CompareTensors(F32({3}, {nan, inf, 1}), ref, KilncDefault()).ok);
  const testing::CompareResult m = testing::CompareTensors(F32({3}, {0, inf, 1}), ref, KilncDefault());
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_TRUE(std::isinf(m.max_abs_error));
  EXPECT_EQ(m.max_abs_index, 0);
  EXPECT_FALSE(testing::CompareTensors(F32({3}, {nan, -inf, 1}), ref, KilncDefault()).ok);
  testing::Tolerance norm;
  norm.max_rel = 1.0;  // even a huge tolerance does not excuse a NaN
  EXPECT_FALSE(testing::CompareTensors(F32({3}, {0, inf, 1}), ref, norm).ok);
}

TEST(CompareOutput, IntegersAreExact) {
  const Tensor ref = Tensor::FromVector<int64_t>({3}, {1, 2, 1000000});
  EXPECT_TRUE(testing::CompareTensors(ref, ref, KilncDefault()).ok);
  const Tensor got = Tensor::FromVector<int64_t>({3}, {1, 2, 1000001});
  const testing::CompareResult m = testing::CompareTensors(got, ref, KilncDefault());
  EXPECT_FALSE(m.ok);  // within rtol 1e-3 but integers must match exactly
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_EQ(m.max_abs_error, 1);
}

TEST(CompareOutput, ShapeOrDtypeMismatchFails) {
  const Tensor ref = F32({2, 2}, {1, 2, 3, 4});
  const testing::CompareResult shape = testing::CompareTensors(F32({4}, {1, 2, 3, 4}), ref,
                                           KilncDefault());
  EXPECT_FALSE(shape.shape_match);
  EXPECT_TRUE(shape.dtype_match);
  EXPECT_FALSE(shape.ok);
  const Tensor f64 = Tensor::FromVector<double>({2, 2}, {1, 2, 3, 4});
  const testing::CompareResult dtype = testing::CompareTensors(f64, ref, KilncDefault());
  EXPECT_FALSE(dtype.dtype_match);
  EXPECT_TRUE(dtype.shape_match);
  EXPECT_EQ(dtype.max_abs_error, 0);  // values compared anyway
  EXPECT_FALSE(dtype.ok);
}

TEST(DescribeTolerance, BothForms) {
  EXPECT_EQ(testing::DescribeTolerance(KilncDefault()),
            "|got-ref| <= 1e-05 + 0.001*|ref| per element");
  testing::Tolerance t;
  t.max_rel = 1e-4;
  EXPECT_EQ(testing::DescribeTolerance(t), "max|got-ref| <= 0.0001 * max|ref| per output");
}

// ---------------------------------------------------------------- summaries

TEST(Summary, StatsSkipNonFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor t = F32({2, 3}, {1, -2, 4, nan, 3, -6});
  const TensorStats s = ComputeStats(t);
  EXPECT_EQ(s.min, -6);
  EXPECT_EQ(s.max, 4);
  EXPECT_EQ(s.mean, 0);  // (1 - 2 + 4 + 3 - 6) / 5
  EXPECT_EQ(s.num_nan, 1);
  EXPECT_EQ(s.num_inf, 0);
  EXPECT_EQ(SummarizeTensor("y", t, 2),
            "'y' f32[2,3]  min -6 max 4 mean 0 nan 1  [1, -2, ...]");
  EXPECT_EQ(SummarizeTensor("y", t, 0), "'y' f32[2,3]  min -6 max 4 mean 0 nan 1");
}

TEST(Summary, IntegersPrintAsIntegers) {
  const Tensor t = Tensor::FromVector<int64_t>({3}, {7, -1, 30000000000});
  EXPECT_EQ(SummarizeTensor("ids", t, 8),
            "'ids' i64[3]  min -1 max 3e+10 mean 1e+10  [7, -1, 30000000000]");
}

// ---------------------------------------------------------------- random

TEST(RandomTensor, DeterministicPerSeed) {
  auto a = RandomTensor(DType::kF32, {64}, 5, 0, 10);
  auto b = RandomTensor(DType::kF32, {64}, 5, 0, 10);
  auto c = RandomTensor(DType::kF32, {64}, 6, 0, 10);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(testing::CompareTensors(*a, *b, Tol(0, 0)).mismatches, 0);
  EXPECT_GT(testing::CompareTensors(*a, *c, Tol(0, 0)).mismatches, 50);
}

TEST(RandomTensor, FloatsLookStandardNormal) {
  auto t = RandomTensor(DType::kF32, {20000}, 1, 0, 10);
  ASSERT_TRUE(t.ok());
  double sum = 0, sq = 0;
  int64_t beyond_2sigma = 0;
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    const double v = t->GetAsDouble(i);
    sum += v;
    sq += v * v;
    if (std::abs(v) > 2) ++beyond_2sigma;
  }
  const double n = t->num_elements();
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
  EXPECT_NEAR(beyond_2sigma / n, 0.0455, 0.01);  // P(|Z| > 2)
}

TEST(RandomTensor, IntegersStayInRange) {
  auto t = RandomTensor(DType::kI64, {1000}, 9, -3, 4);
  ASSERT_TRUE(t.ok());
  std::vector<int> seen(7, 0);
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    const int64_t v = t->GetAsInt64(i);
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    ++seen[v + 3];
  }
  for (int count : seen) EXPECT_GT(count, 50);
  auto b = RandomTensor(DType::kBool, {100}, 9, 0, 10);
  ASSERT_TRUE(b.ok());
  for (int64_t i = 0; i < b->num_elements(); ++i) {
    EXPECT_LE(b->GetAsInt64(i), 1);
  }
}

TEST(RandomTensor, Errors) {
  EXPECT_FALSE(RandomTensor(DType::kF32, {1, ir::kDynamicDim}, 0, 0, 10).ok());
  EXPECT_FALSE(RandomTensor(DType::kI8, {4}, 0, 0, 1000).ok());
  EXPECT_FALSE(RandomTensor(DType::kU8, {4}, 0, -1, 5).ok());
  EXPECT_FALSE(RandomTensor(DType::kI64, {4}, 0, 5, 5).ok());
  EXPECT_TRUE(RandomTensor(DType::kU8, {4}, 0, 0, 256).ok());
}

// ---------------------------------------------------------------- end to end

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kiln", "/", path);
}

std::string TmpDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
  fs::remove_all(dir);
  return dir;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

// Runs the kilnc binary; `env` is prepended to the command ("VAR=value").
Result Kilnc(const std::vector<std::string>& args, const std::string& env = "") {
  std::string cmd = env.empty() ? "" : env + " ";
  cmd += Quote(Runfile("tools/kilnc"));
  for (const std::string& a : args) cmd += " " + Quote(a);
  cmd += " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

const std::string& TinyCnn() {
  static const std::string* dir = new std::string(Runfile("models/tiny_cnn"));
  return *dir;
}

// A writable copy of models/tiny_cnn (runfiles are read-only symlinks).
std::string CopyTinyCnn(const std::string& name) {
  const std::string dir = TmpDir(name);
  fs::copy(TinyCnn(), dir, fs::copy_options::recursive);
  return dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  fs::remove(path);
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST(KilncEndToEnd, CheckPassesOnShippedTinyCnn) {
  const Result r = Kilnc({"check", TinyCnn()});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.output, HasSubstr("test_data_set_0: run"));
  EXPECT_THAT(r.output, HasSubstr("PASS  output 0 'probs' f32[1,10]"));
  EXPECT_THAT(r.output, HasSubstr("result: PASS"));
}

TEST(KilncEndToEnd, RelativeFolderResolvesAgainstBuildWorkingDirectory) {
  const Result r = Kilnc({"check", "tiny_cnn", "--max-rel=1e-4"},
                         "BUILD_WORKING_DIRECTORY=" + Quote(Runfile("models")));
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.output, HasSubstr("max|got-ref| <= 0.0001 * max|ref|"));
}

TEST(KilncEndToEnd, AlteredExpectedOutputFails) {
  const std::string dir = CopyTinyCnn("altered");
  const std::string out = dir + "/test_data_set_0/output_0.pb";
  absl::StatusOr<Tensor> ref = frontend::LoadTensorFile(out);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->dtype(), DType::kF32);
  ref->data<float>()[3] += 0.05f;  // softmax outputs are ~0.1: far off
  absl::StatusOr<std::string> bytes = frontend::SerializeTensor(*ref, "probs");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  WriteFile(out, *bytes);

  const Result r = Kilnc({"check", dir});
  EXPECT_EQ(r.exit_code, kExitWrongResult) << r.output;
  EXPECT_THAT(r.output, HasSubstr("FAIL  output 0 'probs'"));
  EXPECT_THAT(r.output, HasSubstr("worst at flat index 3"));
  EXPECT_THAT(r.output, HasSubstr("result: FAIL"));
  // A loose enough tolerance accepts it.
  EXPECT_EQ(Kilnc({"check", dir, "--atol=0.1"}).exit_code, kExitOk);
}

TEST(KilncEndToEnd, ExpectedOutputOfWrongShapeFails) {
  const std::string dir = CopyTinyCnn("wrong_shape");
  const Tensor five = F32({1, 5}, {0.2f, 0.2f, 0.2f, 0.2f, 0.2f});
  absl::StatusOr<std::string> bytes = frontend::SerializeTensor(five, "probs");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  WriteFile(dir + "/test_data_set_0/output_0.pb", *bytes);
  const Result r = Kilnc({"check", dir});
  EXPECT_EQ(r.exit_code, kExitWrongResult) << r.output;
  EXPECT_THAT(r.output, HasSubstr("shape differ"));
}

TEST(KilncEndToEnd, BadInputExitsTwo) {
  Result r = Kilnc({"check", TmpDir("does_not_exist")});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no such folder"));

  const std::string truncated = CopyTinyCnn("truncated");
  fs::resize_file(truncated + "/model.onnx", 100);
  r = Kilnc({"check", truncated});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;

  const std::string no_data = CopyTinyCnn("no_data");
  fs::remove_all(no_data + "/test_data_set_0");
  r = Kilnc({"check", no_data});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no test_data_set_* folder"));

  const std::string bad_data = CopyTinyCnn("bad_data");
  WriteFile(bad_data + "/test_data_set_0/input_0.pb", "\xff\xff\xff garbage");
  r = Kilnc({"check", bad_data});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
}

TEST(KilncEndToEnd, UsageErrorsExitTwo) {
  Result r = Kilnc({"frobnicate"});
  EXPECT_EQ(r.exit_code, kExitBadInput);
  EXPECT_THAT(r.output, HasSubstr("unknown command 'frobnicate'"));
  r = Kilnc({"check", TinyCnn(), "--no-such-flag"});
  EXPECT_EQ(r.exit_code, kExitBadInput);
  EXPECT_THAT(r.output, HasSubstr("unknown flag"));
  r = Kilnc({});
  EXPECT_EQ(r.exit_code, kExitBadInput);
  r = Kilnc({"--help"});
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_THAT(r.output, HasSubstr("Commands:"));
  r = Kilnc({"run", "--help"});
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_THAT(r.output, HasSubstr("--save-outputs"));
}

TEST(KilncEndToEnd, RunWithRandomInputsSummarizesOutputs) {
  const Result r = Kilnc({"run", TinyCnn() + "/model.onnx", "--seed=3"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("input 0 'input' f32[1,3,32,32]  min "));
  EXPECT_THAT(r.output, HasSubstr("(random, seed 3)"));
  EXPECT_THAT(r.output, HasSubstr("output 0 'probs' f32[1,10]  min "));
  EXPECT_THAT(r.output, HasSubstr("time: import "));
}

TEST(KilncEndToEnd, RunWithGivenInputReproducesPyTorch) {
  const std::string out_dir = TmpDir("saved");
  const Result r = Kilnc({"run", TinyCnn() + "/model.onnx", "--input",
                          "input=" + TinyCnn() + "/test_data_set_0/input_0.pb",
                          "--save-outputs", out_dir});
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  absl::StatusOr<Tensor> got = frontend::LoadTensorFile(out_dir + "/output_0.pb");
  absl::StatusOr<Tensor> want =
      frontend::LoadTensorFile(TinyCnn() + "/test_data_set_0/output_0.pb");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(testing::CompareTensors(*got, *want, KilncDefault()).ok);
  EXPECT_TRUE(fs::exists(out_dir + "/input_0.pb"));
}

TEST(KilncEndToEnd, RunRejectsUnknownInputName) {
  const Result r = Kilnc({"run", TinyCnn() + "/model.onnx", "--shape",
                          "nope=1x3x32x32"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'nope'"));
  EXPECT_EQ(Kilnc({"run", TmpDir("missing.onnx")}).exit_code, kExitBadInput);
}

// y = Relu(x) with x, y of type f32[N,4], N symbolic.
std::string WriteDynamicReluModel(const std::string& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("dynamic_relu");
  onnx::NodeProto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("y");
  for (auto* list : {g->mutable_input(), g->mutable_output()}) {
    onnx::ValueInfoProto* v = list->Add();
    v->set_name(list == g->mutable_input() ? "x" : "y");
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("N");
    tt->mutable_shape()->add_dim()->set_dim_value(4);
  }
  fs::create_directories(dir);
  const std::string path = dir + "/model.onnx";
  WriteFile(path, m.SerializeAsString());
  return path;
}

TEST(KilncEndToEnd, RunBindsDynamicDims) {
  const std::string model = WriteDynamicReluModel(TmpDir("dyn_run"));
  Result r = Kilnc({"run", model, "--shape", "x=3x4"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.output, HasSubstr("output 0 'y' f32[3,4]"));
  r = Kilnc({"run", model});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.output, HasSubstr("warning: "));  // N bound to 1
  EXPECT_THAT(r.output, HasSubstr("output 0 'y' f32[1,4]"));
}

TEST(KilncEndToEnd, CheckBindsDynamicDimsFromEachDataSet) {
  const std::string dir = TmpDir("dyn_check");
  WriteDynamicReluModel(dir);
  const std::vector<float> x = {-1, 2, -3, 4, 5, -6, 7, -8, 0.5f, -0.5f, 9, 1};
  const std::vector<float> relu = {0, 2, 0, 4, 5, 0, 7, 0, 0.5f, 0, 9, 1};
  for (int64_t n : {2, 3}) {
    const std::string ds = absl::StrCat(dir, "/test_data_set_", n - 2);
    fs::create_directories(ds);
    auto in = frontend::SerializeTensor(F32({n, 4}, x), "x");
    auto out = frontend::SerializeTensor(F32({n, 4}, relu), "y");
    ASSERT_TRUE(in.ok() && out.ok());
    WriteFile(ds + "/input_0.pb", *in);
    WriteFile(ds + "/output_0.pb", *out);
  }
  const Result r = Kilnc({"check", dir, "--atol=0", "--rtol=0"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.output, HasSubstr("re-imported with the shapes of test_data_set_0"));
  EXPECT_THAT(r.output, HasSubstr("re-imported with the shapes of test_data_set_1"));
  EXPECT_THAT(r.output, HasSubstr("PASS  output 0 'y' f32[3,4]"));
  EXPECT_THAT(r.output, HasSubstr("result: PASS (2 data set(s), 2 output(s)"));
}

}  // namespace
}  // namespace kiln::tools
