// Tests of kilnc: its library (argument and shape parsing, error metrics,
// summaries, random inputs) and, end to end, the kilnc binary on the shipped
// tiny CNN (models/tiny_cnn), a corrupted copy of it and missing files.
#include "tools/kilnc_lib.h"

#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "interp/interpreter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/tensor.h"
#include "nlohmann/json.hpp"
#include "onnx/onnx_pb.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
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

TEST(ParseShapeSweepFlag, ExpandsOneBraceGroup) {
  auto s = ParseShapeSweepFlag("input_ids=1x{16..512:x2}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->first, "input_ids");
  EXPECT_EQ(s->second, (std::vector<Shape>{{1, 16}, {1, 32}, {1, 64}, {1, 128}, {1, 256},
                                           {1, 512}}));
  s = ParseShapeSweepFlag("x={1..7:+3}x4");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->second, (std::vector<Shape>{{1, 4}, {4, 4}, {7, 4}}));
  s = ParseShapeSweepFlag("x=2x{3..5}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->second, (std::vector<Shape>{{2, 3}, {2, 4}, {2, 5}}));
  s = ParseShapeSweepFlag("x=2x{8,1}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->second, (std::vector<Shape>{{2, 8}, {2, 1}}));
  s = ParseShapeSweepFlag("x=2x8");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->second, (std::vector<Shape>{{2, 8}}));
  for (const char* bad : {"x=1x{4..2}", "x=1x{1..4:x1}", "x=1x{1..4:+0}", "x={1}x{2}",
                          "x=1x{a..b}", "x=1x{1..4", "{1..2}", "x=1x{1,,2}", "x=1x{0..1:x2}",
                          "x=1x{1..5000}"}) {
    absl::StatusOr<std::pair<std::string, std::vector<Shape>>> r = ParseShapeSweepFlag(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed";
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), HasSubstr(bad));
    }
  }
}

TEST(ParseCommandLine, BenchTakesSeveralShapesPerInput) {
  absl::StatusOr<Command> c = ParseCommandLine(
      {"bench", "m", "--shape", "ids=1x{16..64:x2}", "--shape", "mask=1x16", "--shape",
       "mask=1x32", "--shape", "mask=1x64", "--shape", "other=3"});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->bench.sweep.size(), 2u);
  EXPECT_EQ(c->bench.sweep[0].first, "ids");
  EXPECT_EQ(c->bench.sweep[1].second, (std::vector<Shape>{{1, 16}, {1, 32}, {1, 64}}));
  // One shape: bound at compile time, as in every other command.
  ASSERT_EQ(c->compile.shapes.size(), 1u);
  EXPECT_EQ(c->compile.shapes[0].first, "other");

  c = ParseCommandLine({"bench", "m", "--shape", "ids=1x{1..3}", "--shape", "mask=1x{1..2}"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("as many shapes each"));
  c = ParseCommandLine({"run", "m", "--shape", "ids=1x{1..3}"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("only kilnc bench takes several"));
  c = ParseCommandLine({"bench", "m", "--shape", "ids=1x3", "--vs-static"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("--vs-static needs several shapes"));
  c = ParseCommandLine({"bench", "m", "--shape", "ids=1x{1..3}", "--vs-eager"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("--vs-eager takes one shape per input"));
}

TEST(SweepPointShapes, InputsNotGivenFollowTheirSymbols) {
  TensorInfo ids{"ids", DType::kI64, {1, 1}};
  ids.declared_shape = {ir::kDynamicDim, ir::kDynamicDim};
  ids.dim_params = {"batch", "sequence"};
  TensorInfo mask{"mask", DType::kI64, {1, 1}};
  mask.declared_shape = {ir::kDynamicDim, ir::kDynamicDim};
  mask.dim_params = {"batch", "sequence"};
  TensorInfo fixed{"fixed", DType::kF32, {3}};
  TensorInfo other{"other", DType::kF32, {1, 2}};
  other.declared_shape = {ir::kDynamicDim, 2};
  other.dim_params = {"", ""};
  absl::StatusOr<std::vector<Shape>> s =
      SweepPointShapes({ids, mask, fixed, other}, {{"ids", {2, 64}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::vector<Shape>{{2, 64}, {2, 64}, {3}, {1, 2}}));
  s = SweepPointShapes({ids, mask}, {{"nope", {2, 64}}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("no input 'nope'; its inputs: ids, mask"));
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
  EXPECT_TRUE(cmd->check.tol.atol_scaled);
  EXPECT_FALSE(cmd->check.tol.max_rel.has_value());
  EXPECT_FALSE(cmd->check.verbose);
  auto plain = ParseCommandLine({"check", "d", "--atol-absolute"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->check.tol.atol_scaled);
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
  const InputFlags& in = cmd->inputs;
  ASSERT_EQ(in.inputs.size(), 2u);
  EXPECT_EQ(in.inputs[0], (std::pair<std::string, std::string>("a", "a.pb")));
  EXPECT_EQ(in.inputs[1], (std::pair<std::string, std::string>("b", "b.pb")));
  ASSERT_EQ(cmd->compile.shapes.size(), 1u);
  EXPECT_EQ(cmd->compile.shapes[0].first, "c");
  EXPECT_EQ(cmd->compile.shapes[0].second, (Shape{1, 2}));
  EXPECT_EQ(in.seed, 42u);
  EXPECT_EQ(in.int_low, -3);
  EXPECT_EQ(in.int_high, 3);
  EXPECT_EQ(r.save_outputs, "out");
  EXPECT_EQ(r.num_values, 2);
  EXPECT_EQ(cmd->compile.engine, Engine::kCompiled);
}

TEST(ParseCommandLine, CompileFlagsOnEveryCommand) {
  for (const char* sub : {"check", "run", "compile", "explain", "bench", "profile"}) {
    auto cmd = ParseCommandLine({sub, "m", "--isa=avx2", "--threads", "3", "--mode=eager",
                                 "--disable-pass=fold-batch-norm", "--disable_pass",
                                 "eliminate-dead-code", "--no-prepack", "--shape",
                                 "x=1x3x8x8", "--cache-dir=/tmp/c",
                                 "--no-reference-fallback", "--deterministic"});
    ASSERT_TRUE(cmd.ok()) << sub << ": " << cmd.status();
    const CompileFlags& c = cmd->compile;
    EXPECT_EQ(c.isa, "avx2") << sub;
    EXPECT_EQ(c.threads, 3) << sub;
    EXPECT_EQ(c.engine, Engine::kEager) << sub;
    EXPECT_EQ(c.disabled_passes,
              (std::vector<std::string>{"fold-batch-norm", "eliminate-dead-code"}))
        << sub;
    EXPECT_FALSE(c.prepack) << sub;
    EXPECT_FALSE(c.reference_fallback) << sub;
    EXPECT_FALSE(ToCompileOptions(c, "/").reference_fallback) << sub;
    ASSERT_EQ(c.shapes.size(), 1u) << sub;
    EXPECT_EQ(c.shapes[0].second, (Shape{1, 3, 8, 8})) << sub;

    const CompileOptions o = ToCompileOptions(c, "/home/u");
    EXPECT_EQ(o.isa, "avx2");
    EXPECT_EQ(o.threads, 3);
    EXPECT_EQ(o.mode, CompileOptions::Mode::kEager);
    EXPECT_FALSE(o.prepack_weights);
    EXPECT_EQ(o.disabled_passes.size(), 2u);
    EXPECT_EQ(o.input_shapes.at("x"), (Shape{1, 3, 8, 8}));
    EXPECT_EQ(o.cache_dir, "/tmp/c");
    EXPECT_TRUE(o.deterministic);
    EXPECT_FALSE(ToCompileOptions(ParseCommandLine({sub, "m"})->compile, "/").deterministic);
  }
}

TEST(ParseCommandLine, DefaultsCompileWithTheBestIsa) {
  auto cmd = ParseCommandLine({"explain", "m.onnx"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->kind, Command::Kind::kExplain);
  const CompileOptions o = ToCompileOptions(cmd->compile, "/home/u");
  EXPECT_EQ(o.isa, "");
  EXPECT_EQ(o.threads, 0);
  EXPECT_EQ(o.mode, CompileOptions::Mode::kCompiled);
  EXPECT_TRUE(o.prepack_weights);
  EXPECT_EQ(o.cache_dir, "");  // the API's default
  EXPECT_FALSE(cmd->explain.json);
  auto rel = ParseCommandLine({"compile", "m.onnx", "--cache-dir=c"});
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(ToCompileOptions(rel->compile, "/home/u").cache_dir, "/home/u/c");
}

TEST(ParseCommandLine, EngineAndMode) {
  auto ref = ParseCommandLine({"check", "d", "--engine=reference"});
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->compile.engine, Engine::kReference);
  auto eager = ParseCommandLine({"run", "m", "--engine", "eager"});
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_EQ(eager->compile.engine, Engine::kEager);
  auto both = ParseCommandLine({"check", "d", "--engine=eager", "--mode=eager"});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->compile.engine, Engine::kEager);
  auto compiled = ParseCommandLine({"check", "d", "--engine=compiled"});
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ(compiled->compile.engine, Engine::kCompiled);
}

TEST(ParseCommandLine, NewCommandsFlags) {
  auto c = ParseCommandLine({"compile", "m.onnx", "--dump-dir", "d", "-v"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, Command::Kind::kCompile);
  EXPECT_EQ(c->compile_cmd.model, "m.onnx");
  EXPECT_EQ(c->compile_cmd.dump_dir, "d");
  EXPECT_TRUE(c->compile_cmd.verbose);

  auto e = ParseCommandLine({"explain", "--json", "m.onnx"});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->explain.model, "m.onnx");
  EXPECT_TRUE(e->explain.json);

  auto b = ParseCommandLine({"bench", "m.onnx"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->kind, Command::Kind::kBench);
  EXPECT_EQ(b->bench.min_time_s, 3.0);
  EXPECT_EQ(b->bench.min_iterations, 10);
  EXPECT_FALSE(b->bench.json);
  EXPECT_FALSE(b->bench.progress);
  EXPECT_FALSE(b->bench.vs_eager);
  b = ParseCommandLine({"bench", "m.onnx", "--vs-eager"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->bench.vs_eager);
  b = ParseCommandLine({"bench", "m.onnx", "--min-time=0.2", "--min-iterations=4",
                        "--warmup=0", "--json", "--progress", "--input", "x=x.pb",
                        "--seed=5", "--threads=1"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->bench.min_time_s, 0.2);
  EXPECT_EQ(b->bench.min_iterations, 4);
  EXPECT_EQ(b->bench.warmup, 0);
  EXPECT_TRUE(b->bench.json);
  EXPECT_TRUE(b->bench.progress);
  EXPECT_EQ(b->inputs.inputs.size(), 1u);
  EXPECT_EQ(b->inputs.seed, 5u);
  EXPECT_EQ(b->compile.threads, 1);

  auto p = ParseCommandLine({"profile", "m.onnx", "--trace=t.json", "--iterations", "3",
                             "--top=5", "--warmup=0"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kind, Command::Kind::kProfile);
  EXPECT_EQ(p->profile.trace, "t.json");
  EXPECT_EQ(p->profile.iterations, 3);
  EXPECT_EQ(p->profile.top, 5);
  EXPECT_EQ(p->profile.warmup, 0);
  auto pd = ParseCommandLine({"profile", "m.onnx"});
  ASSERT_TRUE(pd.ok());
  EXPECT_EQ(pd->profile.iterations, 10);
  EXPECT_EQ(pd->profile.top, 15);
  EXPECT_EQ(pd->profile.trace, "");

  auto a = ParseCommandLine({"aot", "m.onnx", "--out-dir=o", "--name=n", "--isas=avx2,scalar",
                             "--shards=2", "--shape=x=1x3"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, Command::Kind::kAot);
  EXPECT_EQ(a->aot.model, "m.onnx");
  EXPECT_EQ(a->aot.name, "n");
  EXPECT_EQ(a->aot.isas, (std::vector<std::string>{"avx2", "scalar"}));
  EXPECT_EQ(a->aot.shards, 2);
  EXPECT_EQ(a->aot.header_include, "o/n.h");
  EXPECT_EQ(a->aot.data_dir, "o");
  EXPECT_FALSE(a->aot.reference_calls);
  EXPECT_EQ(a->compile.shapes.size(), 1u);
  a = ParseCommandLine({"aot", "m.onnx", "--out-dir=o", "--name=n", "--reference-calls"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->aot.reference_calls);
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
  for (const char* sub : {"compile", "explain", "bench", "profile"}) {
    auto help = ParseCommandLine({sub, "m.onnx", "--help"});
    ASSERT_TRUE(help.ok()) << sub;
    EXPECT_EQ(help->kind, Command::Kind::kHelp);
    EXPECT_THAT(help->help_text, HasSubstr(absl::StrCat("usage: kilnc ", sub, " MODEL")));
    EXPECT_THAT(help->help_text, HasSubstr("--disable-pass=NAME"));
  }
}

TEST(ExitCodeFor, UserErrorsAreTwoOthersOne) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), kExitBadInput);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("x")), kExitBadInput);
  EXPECT_EQ(ExitCodeFor(absl::UnimplementedError("x")), kExitWrongResult);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("x")), kExitWrongResult);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("x")), kExitResourceExhausted);
}

TEST(ParseCommandLine, ArgumentErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "missing command"},
      {{"frobnicate", "m.onnx"}, "unknown command 'frobnicate'"},
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
      {{"run", "m", "--threads=0"}, "--threads wants an integer in [1, 1024]"},
      {{"check", "d", "--threads=abc"}, "--threads wants an integer"},
      {{"bench", "m", "--threads=-2"}, "--threads wants an integer"},
      {{"compile", "m", "--threads"}, "--threads needs a value"},
      {{"run", "m", "--mode=fast"}, "unknown --mode 'fast'; modes: compiled, eager"},
      {{"explain", "m", "--mode=reference"}, "unknown --mode 'reference'"},
      {{"check", "d", "--engine=fast"}, "unknown --engine 'fast'"},
      {{"check", "d", "--engine=reference", "--mode=eager"},
       "--engine=reference contradicts --mode=eager"},
      {{"bench", "m", "--engine=reference"}, "unknown flag '--engine=reference'"},
      {{"compile", "m", "--no-prepack=1"}, "--no-prepack takes no value"},
      {{"compile", "m", "--isa="}, "--isa needs a module name"},
      {{"compile", "m", "--dump-dir="}, "--dump-dir needs a folder"},
      {{"compile", "m", "--cache-dir="}, "--cache-dir needs a folder"},
      {{"compile", "m", "--disable-pass="}, "--disable-pass needs a pass name"},
      {{"compile", "m", "--shape", "x=1xq"}, "bad --shape 'x=1xq'"},
      {{"compile", "m", "--input", "x=a.pb"}, "unknown flag '--input'"},
      {{"compile"}, "compile needs a model file"},
      {{"compile", "a", "b"}, "takes one argument"},
      {{"explain", "m", "--json=yes"}, "--json takes no value"},
      {{"explain"}, "explain needs a model file"},
      {{"bench"}, "bench needs a model file"},
      {{"bench", "m", "--min-time=-1"}, "--min-time wants a finite number >= 0"},
      {{"bench", "m", "--min-time=nan"}, "--min-time wants"},
      {{"bench", "m", "--min-iterations=0"}, "--min-iterations wants an integer"},
      {{"bench", "m", "--warmup=x"}, "--warmup wants an integer"},
      {{"bench", "m", "--trace=t.json"}, "unknown flag '--trace=t.json'"},
      {{"profile", "m", "--iterations=0"}, "--iterations wants an integer in [1, "},
      {{"profile", "m", "--top=-1"}, "--top wants"},
      {{"profile", "m", "--trace="}, "--trace needs a file name"},
      {{"profile"}, "profile needs a model file"},
      {{"aot", "m", "--name=n"}, "aot needs --out-dir"},
      {{"aot", "m", "--out-dir=o"}, "aot needs --name"},
      {{"aot", "m", "--out-dir=o", "--name=n", "--shards=0"}, "--shards wants an integer"},
      {{"aot", "--out-dir=o", "--name=n"}, "aot needs a model file"},
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

interp::Tolerance Tol(double rtol, double atol) {
  interp::Tolerance t;
  t.rtol = rtol;
  t.atol = atol;
  return t;
}

// kilnc check's default tolerance.
interp::Tolerance KilncDefault() { return CheckOptions{}.tol; }

Tensor F32(Shape shape, std::vector<float> v) {
  return Tensor::FromVector<float>(std::move(shape), v);
}

TEST(CompareOutput, MetricsOnHandMadeTensors) {
  const Tensor ref = F32({4}, {1.0f, 2.0f, -4.0f, 0.0f});
  const Tensor got = F32({4}, {1.0f, 2.001f, -4.0f, 1e-6f});
  const interp::CompareResult m = interp::CompareTensors(got, ref, KilncDefault());
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
  const interp::CompareResult tight = interp::CompareTensors(got, ref, Tol(1e-4, 1e-5));
  EXPECT_EQ(tight.mismatches, 1);
  EXPECT_FALSE(tight.ok);

  // Norm-wise: 2.5e-4 of max|ref| passes 1e-3, fails 1e-4.
  interp::Tolerance loose;
  loose.max_rel = 1e-3;
  EXPECT_TRUE(interp::CompareTensors(got, ref, loose).ok);
  interp::Tolerance strict;
  strict.max_rel = 1e-4;
  EXPECT_FALSE(interp::CompareTensors(got, ref, strict).ok);
}

TEST(CompareOutput, ExactResultAndZeroReference) {
  const Tensor zeros = F32({3}, {0, 0, 0});
  const interp::CompareResult same = interp::CompareTensors(zeros, zeros, KilncDefault());
  EXPECT_TRUE(same.ok);
  EXPECT_EQ(same.max_abs_error, 0);
  EXPECT_EQ(same.max_abs_index, -1);
  EXPECT_EQ(same.rel_to_max, 0);
  EXPECT_FALSE(same.max_elementwise_rel.has_value());

  const interp::CompareResult off = interp::CompareTensors(F32({3}, {0, 0, 0.5f}), zeros,
                                         KilncDefault());
  EXPECT_FALSE(off.ok);
  EXPECT_TRUE(std::isinf(off.rel_to_max));
  EXPECT_EQ(off.max_abs_index, 2);
}

TEST(CompareOutput, NanMatchesOnlyNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor ref = F32({3}, {nan, inf, 1});
  EXPECT_TRUE(interp::CompareTensors(F32({3}, {nan, inf, 1}), ref, KilncDefault()).ok);
  const interp::CompareResult m = interp::CompareTensors(F32({3}, {0, inf, 1}), ref, KilncDefault());
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_TRUE(std::isinf(m.max_abs_error));
  EXPECT_EQ(m.max_abs_index, 0);
  EXPECT_FALSE(interp::CompareTensors(F32({3}, {nan, -inf, 1}), ref, KilncDefault()).ok);
  interp::Tolerance norm;
  norm.max_rel = 1.0;  // even a huge tolerance does not excuse a NaN
  EXPECT_FALSE(interp::CompareTensors(F32({3}, {0, inf, 1}), ref, norm).ok);
}

TEST(CompareOutput, IntegersAreExact) {
  const Tensor ref = Tensor::FromVector<int64_t>({3}, {1, 2, 1000000});
  EXPECT_TRUE(interp::CompareTensors(ref, ref, KilncDefault()).ok);
  const Tensor got = Tensor::FromVector<int64_t>({3}, {1, 2, 1000001});
  const interp::CompareResult m = interp::CompareTensors(got, ref, KilncDefault());
  EXPECT_FALSE(m.ok);  // within rtol 1e-3 but integers must match exactly
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_EQ(m.max_abs_error, 1);
}

TEST(CompareOutput, ShapeOrDtypeMismatchFails) {
  const Tensor ref = F32({2, 2}, {1, 2, 3, 4});
  const interp::CompareResult shape = interp::CompareTensors(F32({4}, {1, 2, 3, 4}), ref,
                                           KilncDefault());
  EXPECT_FALSE(shape.shape_match);
  EXPECT_TRUE(shape.dtype_match);
  EXPECT_FALSE(shape.ok);
  const Tensor f64 = Tensor::FromVector<double>({2, 2}, {1, 2, 3, 4});
  const interp::CompareResult dtype = interp::CompareTensors(f64, ref, KilncDefault());
  EXPECT_FALSE(dtype.dtype_match);
  EXPECT_TRUE(dtype.shape_match);
  EXPECT_EQ(dtype.max_abs_error, 0);  // values compared anyway
  EXPECT_FALSE(dtype.ok);
}

TEST(DescribeTolerance, BothForms) {
  EXPECT_EQ(interp::DescribeTolerance(KilncDefault()),
            "|got-ref| <= 1e-05*max(1,max|ref|) + 0.001*|ref| per element");
  EXPECT_EQ(interp::DescribeTolerance(Tol(1e-3, 1e-5)),
            "|got-ref| <= 1e-05 + 0.001*|ref| per element");
  interp::Tolerance t;
  t.max_rel = 1e-4;
  EXPECT_EQ(interp::DescribeTolerance(t), "max|got-ref| <= 0.0001 * max|ref| per output");
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
  EXPECT_EQ(interp::CompareTensors(*a, *b, Tol(0, 0)).mismatches, 0);
  EXPECT_GT(interp::CompareTensors(*a, *c, Tol(0, 0)).mismatches, 50);
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

// ---------------------------------------------------------------- bench

TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  // numpy.percentile(range(1, 11), [50, 90, 0, 100]) = 5.5, 9.1, 1, 10.
  const std::vector<double> v = {7, 1, 10, 3, 2, 9, 4, 8, 6, 5};
  EXPECT_DOUBLE_EQ(Quantile(v, 0.5), 5.5);
  EXPECT_NEAR(Quantile(v, 0.9), 9.1, 1e-12);
  EXPECT_DOUBLE_EQ(Quantile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Quantile(v, 1), 10);
  EXPECT_DOUBLE_EQ(Quantile({4}, 0.9), 4);
  EXPECT_DOUBLE_EQ(Quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3}, 0.5), 2);
}

TEST(LatencyStats, MedianP90MeanMinMax) {
  const LatencyStats s = ComputeLatencyStats({2, 4, 4, 4, 5, 5, 7, 9, 10, 50});
  EXPECT_EQ(s.iterations, 10);
  EXPECT_DOUBLE_EQ(s.median_ms, 5);
  EXPECT_NEAR(s.p90_ms, 10 + 0.1 * 40, 1e-9);  // between the 9th and 10th
  EXPECT_DOUBLE_EQ(s.mean_ms, 10);
  EXPECT_DOUBLE_EQ(s.min_ms, 2);
  EXPECT_DOUBLE_EQ(s.max_ms, 50);
}

TEST(BenchResultToJson, CarriesTheRequiredKeys) {
  BenchResult r;
  r.model = "m.onnx";
  r.isa = "avx2";
  r.mode = "compiled";
  r.threads = 1;
  r.compile_ms = 1200;
  r.compile_warm_ms = 30;
  r.latency = ComputeLatencyStats({1, 2, 3});
  r.peak_rss_bytes = 1 << 20;
  r.arena_bytes = 4096;
  const nlohmann::json j = nlohmann::json::parse(BenchResultToJson(r).dump());
  for (const char* key : {"median_ms", "p90_ms", "mean_ms", "iterations", "compile_ms",
                          "compile_warm_ms", "peak_rss_bytes", "arena_bytes", "threads",
                          "mode", "isa", "model"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["median_ms"], 2.0);
  EXPECT_EQ(j["iterations"], 3);
  EXPECT_EQ(j["arena_bytes"], 4096);
  EXPECT_EQ(j["isa"], "avx2");
}

TEST(ProgressLine, FillsWithTheSlowerOfTimeAndIterations) {
  EXPECT_EQ(ProgressLine(1.5, 3, 100, 10, 10), "\r[#####-----]  50%  1.5/3.0 s  100 runs");
  EXPECT_EQ(ProgressLine(5, 3, 2, 10, 10), "\r[##--------]  20%  5.0/3.0 s  2 runs");
  EXPECT_EQ(ProgressLine(9, 3, 20, 10, 4), "\r[####] 100%  9.0/3.0 s  20 runs");
  EXPECT_EQ(ProgressLine(0, 0, 0, 10, 4), "\r[----]   0%  0.0/0.0 s  0 runs");
}

TEST(FormatBytes, DecimalUnits) {
  EXPECT_EQ(FormatBytes(864), "864 B");
  EXPECT_EQ(FormatBytes(43210), "43.2 kB");
  EXPECT_EQ(FormatBytes(102146352), "102.1 MB");
  EXPECT_EQ(FormatBytes(int64_t{2500000000}), "2.50 GB");
}

// ---------------------------------------------------------------- profile

CompileReport TwoKernelReport() {
  CompileReport r;
  r.model = "m";
  KernelReport conv;
  conv.name = "conv_0";
  conv.backend = "onednn";
  conv.status = "library";
  conv.ops = {"Conv_0", "Relu_1"};
  conv.call = "conv[3x3 s1 g1 p1]+relu";
  KernelReport pool;
  pool.name = "k1_pool";
  pool.backend = "loop";
  pool.status = "scalar";
  pool.reason = "max over a window";
  pool.ops = {"MaxPool_2"};
  r.kernels = {conv, pool};
  return r;
}

std::vector<ProfiledRun> TwoRuns() {
  ProfiledRun a, b;
  a.start_us = 0;
  a.timings = {{0, 1.0, 30.0}, {1, 32.0, 10.0}};
  b.start_us = 100;
  b.timings = {{0, 0.5, 50.0}, {1, 51.0, 10.0}};
  return {a, b};
}

TEST(KernelLabel, NamesOpsAndCountsTheRest) {
  KernelReport k;
  k.name = "k";
  EXPECT_EQ(KernelLabel(k), "k");
  k.ops = {"a", "b", "c"};
  EXPECT_EQ(KernelLabel(k), "k (a, b, c)");
  EXPECT_EQ(KernelLabel(k, 2), "k (a, b, +1 more)");
}

TEST(KernelLabel, EscapesAndCapsTheModelsNodeNames) {
  KernelReport k;
  k.name = "k";
  k.ops = {"a\x1b[2J\x07", std::string(1 << 20, 'n')};
  const std::string label = KernelLabel(k);
  EXPECT_EQ(label.find('\x1b'), std::string::npos) << label;
  EXPECT_EQ(label.find('\x07'), std::string::npos) << label;
  EXPECT_LT(label.size(), 200u);
  EXPECT_TRUE(absl::StartsWith(label, "k (a\\x1b[2J\\x07, nnn")) << label;
}

TEST(ChromeTrace, OneCompleteEventPerKernelPerRun) {
  absl::StatusOr<nlohmann::json> t = ChromeTrace(TwoKernelReport(), TwoRuns());
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<nlohmann::json> x;
  for (const nlohmann::json& e : (*t)["traceEvents"]) {
    if (e["ph"] == "X") x.push_back(e);
  }
  ASSERT_EQ(x.size(), 4u);
  EXPECT_EQ(x[0]["name"], "conv_0 (Conv_0, Relu_1)");
  EXPECT_EQ(x[0]["ts"], 1.0);
  EXPECT_EQ(x[0]["dur"], 30.0);
  EXPECT_EQ(x[0]["args"]["backend"], "onednn");
  EXPECT_EQ(x[1]["args"]["status"], "scalar");
  EXPECT_EQ(x[1]["args"]["reason"], "max over a window");
  EXPECT_EQ(x[2]["ts"], 100.5);  // the second run's start + the kernel's offset
  EXPECT_EQ(x[3]["args"]["run"], 1);

  std::vector<ProfiledRun> bad = TwoRuns();
  bad[1].timings[1].kernel = 2;
  absl::StatusOr<nlohmann::json> b = ChromeTrace(TwoKernelReport(), bad);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInternal);
}

TEST(KernelTotals, SortedByTimeWithShares) {
  const CompileReport r = TwoKernelReport();
  const std::vector<KernelTotal> t = KernelTotals(r, TwoRuns());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kernel, 0);
  EXPECT_DOUBLE_EQ(t[0].total_us, 80);
  EXPECT_EQ(t[0].calls, 2);
  EXPECT_DOUBLE_EQ(t[0].share, 0.8);
  EXPECT_DOUBLE_EQ(t[1].share, 0.2);
  const std::string table = FormatKernelTable(r, t, 2, 1);
  EXPECT_THAT(table, HasSubstr("top 1 of 2 kernels"));
  EXPECT_THAT(table, HasSubstr("0.040   80.0%  onednn"));  // 80 us over 2 runs
  EXPECT_THAT(table, HasSubstr("conv_0 (Conv_0, Relu_1)"));
  EXPECT_THAT(table, Not(HasSubstr("k1_pool")));
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
  std::string out;     // stdout
  std::string err;     // stderr
  std::string output;  // stdout, then stderr
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs the kilnc binary; `env` is prepended to the command ("VAR=value"),
// `shell` to the whole shell line ("ulimit -v N && "). Compiled code goes to
// a JIT cache in the test's temporary folder.
Result Kilnc(const std::vector<std::string>& args, const std::string& env = "",
             const std::string& shell = "") {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string base = tmp ? tmp : "/tmp";
  static int calls = 0;
  const std::string err_file = absl::StrCat(base, "/kilnc_stderr_", calls++, ".txt");
  std::string cmd = shell + "XDG_CACHE_HOME=" + Quote(base + "/xdg_cache") + " ";
  if (!env.empty()) cmd += env + " ";
  cmd += Quote(Runfile("tools/kilnc"));
  for (const std::string& a : args) cmd += " " + Quote(a);
  cmd += " 2>" + Quote(err_file);
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.err = ReadFile(err_file);
  r.output = r.out + r.err;
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

TEST(KilncEndToEnd, CheckPassesOnShippedTinyCnnOnEveryEngine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> engines = {
      {{}, "engine: compiled, isa "},
      {{"--mode=eager"}, "engine: eager, isa "},
      {{"--engine=eager", "--threads=1"}, "engine: eager, isa "},
      {{"--engine=reference"}, "engine: reference interpreter"},
  };
  for (const auto& [flags, engine_line] : engines) {
    std::vector<std::string> args = {"check", TinyCnn()};
    args.insert(args.end(), flags.begin(), flags.end());
    const Result r = Kilnc(args);
    EXPECT_EQ(r.exit_code, kExitOk) << r.output;
    EXPECT_THAT(r.output, HasSubstr(engine_line));
    EXPECT_THAT(r.output, HasSubstr(engine_line == "engine: reference interpreter"
                                        ? "; import "
                                        : "; compile "));
    EXPECT_THAT(r.output, HasSubstr("test_data_set_0: run"));
    EXPECT_THAT(r.output, HasSubstr("PASS  output 0 'probs' f32[1,10]"));
    EXPECT_THAT(r.output, HasSubstr("result: PASS"));
  }
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
  EXPECT_THAT(r.output, HasSubstr("worst mismatch at flat index 3"));
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
  EXPECT_THAT(r.output, HasSubstr("time: compile "));
  EXPECT_THAT(r.output, HasSubstr("engine: compiled"));
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
  EXPECT_TRUE(interp::CompareTensors(*got, *want, KilncDefault()).ok);
  EXPECT_TRUE(fs::exists(out_dir + "/input_0.pb"));
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// kilnc never writes over a file the command reads (the model, an --input),
// however it is spelled, and never over an existing data set's files
// without --force; a refused command leaves every file as it was.
TEST(KilncEndToEnd, UserFilesAreNeverOverwritten) {
  const std::string dir = CopyTinyCnn("overwrite");
  const std::string model = dir + "/model.onnx";
  const std::string data = dir + "/test_data_set_0";
  const std::string model_bytes = ReadBytes(model);
  const std::string input_bytes = ReadBytes(data + "/input_0.pb");
  const std::string output_bytes = ReadBytes(data + "/output_0.pb");
  fs::create_symlink(model, dir + "/link.onnx");

  for (const std::string& trace : {model, dir + "/link.onnx", dir + "/./model.onnx"}) {
    const Result r = Kilnc({"profile", model, "--iterations=1", "--trace=" + trace});
    EXPECT_EQ(r.exit_code, kExitBadInput) << trace << ": " << r.output;
    EXPECT_THAT(r.err, HasSubstr("is an input of this command")) << trace;
  }
  Result r = Kilnc({"run", model, "--seed=5", "--save-outputs=" + data});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.err, HasSubstr("--force"));
  // --force may replace a data set's files, but not the run's own input.
  r = Kilnc({"run", model, "--input", "input=" + data + "/input_0.pb",
             "--save-outputs=" + data, "--force"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.err, HasSubstr("is an input of this command"));
  EXPECT_EQ(ReadBytes(model), model_bytes);
  EXPECT_EQ(ReadBytes(data + "/input_0.pb"), input_bytes);
  EXPECT_EQ(ReadBytes(data + "/output_0.pb"), output_bytes);

  r = Kilnc({"run", model, "--seed=5", "--save-outputs=" + data, "--force"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_NE(ReadBytes(data + "/input_0.pb"), input_bytes);
  const std::string trace = dir + "/trace.json";
  r = Kilnc({"profile", model, "--iterations=1", "--trace=" + trace});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_TRUE(nlohmann::json::accept(ReadBytes(trace)));
  // No temporary file is left next to what was written.
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".kiln-tmp-"), std::string::npos) << e.path();
  }
}

// The JIT build folders and unpublished artifacts below <cache>/tmp and
// <cache> (not yet renamed into place).
std::vector<std::string> JitLeftovers(const std::string& cache) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const std::string& dir : {cache, cache + "/tmp"}) {
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (absl::StartsWith(name, "kiln_jit_") || name.find(".tmp.") != std::string::npos) {
        found.push_back(e.path().string());
      }
    }
  }
  return found;
}

// kilnc stopped by SIGTERM while the C++ compiler runs leaves no build
// folder or temporary artifact behind, and dies of the signal.
TEST(KilncEndToEnd, SigtermDuringTheJitBuildLeavesNoTemporaries) {
  const std::string cache = TmpDir("sigterm_cache");
  fs::create_directories(cache);
  const std::string kilnc = Runfile("tools/kilnc");
  const std::string model = TinyCnn() + "/model.onnx";
  const std::string cache_flag = "--cache-dir=" + cache;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
    execl(kilnc.c_str(), kilnc.c_str(), "run", model.c_str(), cache_flag.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for the build folder to exist, then stop kilnc.
  bool building = false;
  for (int i = 0; i < 600 && !building; ++i) {
    building = !JitLeftovers(cache).empty();
    if (!building) usleep(50 * 1000);
  }
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(building) << "no JIT build folder appeared in " << cache << "/tmp";
  // A build that finished in the last moment exits 0; otherwise SIGTERM.
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
  }
  EXPECT_THAT(JitLeftovers(cache), ::testing::IsEmpty());
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

// A model of one node, `op`, with the given inputs (f32 with static
// shapes, or int64 initializers) and one f32 output y of rank `out_rank`,
// its dims unknown.
struct OneNodeModel {
  std::string op;
  int out_rank;
  std::vector<std::pair<std::string, std::vector<int64_t>>> f32_inputs;
  std::vector<std::pair<std::string, std::vector<int64_t>>> i64_initializers;
};

std::string WriteOneNodeModel(const std::string& dir, const OneNodeModel& spec) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("one_node");
  onnx::NodeProto* node = g->add_node();
  node->set_op_type(spec.op);
  node->set_name("the_node");
  for (const auto& [name, dims] : spec.f32_inputs) {
    node->add_input(name);
    onnx::ValueInfoProto* v = g->add_input();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (const auto& [name, values] : spec.i64_initializers) {
    node->add_input(name);
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  node->add_output("y");
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  auto* ytt = y->mutable_type()->mutable_tensor_type();
  ytt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int d = 0; d < spec.out_rank; ++d) {
    ytt->mutable_shape()->add_dim()->set_dim_param(absl::StrCat("d", d));
  }
  fs::create_directories(dir);
  const std::string path = dir + "/model.onnx";
  WriteFile(path, m.SerializeAsString());
  return path;
}

// An invalid model is the user's fault on every engine: exit 2 with an
// error naming the node, whether kiln finds it compiling or the reference
// interpreter finds it running.
TEST(KilncEndToEnd, InvalidModelExitsTwoOnEveryEngine) {
  const std::vector<std::pair<std::string, OneNodeModel>> models = {
      {"add_mismatch", {"Add", 1, {{"a", {2}}, {"b", {3}}}, {}}},
      {"negative_dim", {"ConstantOfShape", 2, {}, {{"shape", {2, -3}}}}},
  };
  for (const auto& [name, spec] : models) {
    const std::string model = WriteOneNodeModel(TmpDir(name), spec);
    for (const char* engine : {"compiled", "eager", "reference"}) {
      const Result r = Kilnc({"run", model, absl::StrCat("--engine=", engine)});
      EXPECT_EQ(r.exit_code, kExitBadInput) << name << " on " << engine << ": " << r.output;
      EXPECT_THAT(r.err, HasSubstr("'the_node'")) << name << " on " << engine;
    }
  }
  // check, on a folder with a data set for the model without inputs.
  const std::string dir = TmpDir("negative_dim_check");
  WriteOneNodeModel(dir, models[1].second);
  fs::create_directories(dir + "/test_data_set_0");
  absl::StatusOr<std::string> expected =
      frontend::SerializeTensor(ir::Tensor::Scalar<float>(0.0f), "y");
  ASSERT_TRUE(expected.ok()) << expected.status();
  WriteFile(dir + "/test_data_set_0/output_0.pb", *expected);
  for (const char* engine : {"compiled", "eager", "reference"}) {
    const Result r = Kilnc({"check", dir, absl::StrCat("--engine=", engine)});
    EXPECT_EQ(r.exit_code, kExitBadInput) << "check on " << engine << ": " << r.output;
    EXPECT_THAT(r.err, HasSubstr("'the_node' (ConstantOfShape)")) << engine;
    EXPECT_THAT(r.err, HasSubstr("negative dimension -3")) << engine;
  }
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

// One process compiles the model once, then runs each shape of the sweep
// (its first run compiling that shape's specialization).
TEST(KilncEndToEnd, BenchSweepsShapesOfDynamicDims) {
  const std::string model = WriteDynamicReluModel(TmpDir("dyn_bench"));
  Result r = Kilnc({"bench", model, "--shape", "x={2..4}x4", "--shape", "x=9x4", "--json",
                    "--min-time=0", "--min-iterations=2", "--warmup=0", "--threads=1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j["shapes"].size(), 4u) << r.out;
  EXPECT_EQ(j["shapes"][0]["shapes"], "x: [2,4]");
  EXPECT_EQ(j["shapes"][3]["shapes"], "x: [9,4]");
  for (const nlohmann::json& p : j["shapes"]) {
    EXPECT_TRUE(p["compiled"].get<bool>()) << p;
    EXPECT_GE(p["iterations"].get<int>(), 2) << p;
    EXPECT_GE(p["first_run_ms"].get<double>(), p["compile_ms"].get<double>()) << p;
  }
  // --vs-static: a static build per shape, the same C++ as the
  // specialization's (a JIT cache hit), timed alternately.
  r = Kilnc({"bench", model, "--shape", "x={2,3}x4", "--vs-static", "--json", "--min-time=0",
             "--min-iterations=2", "--warmup=0", "--threads=1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  const nlohmann::json v = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(v.is_object()) << r.out;
  ASSERT_EQ(v["shapes"].size(), 2u) << r.out;
  for (const nlohmann::json& p : v["shapes"]) {
    EXPECT_GT(p["static_median_ms"].get<double>(), 0) << p;
    EXPECT_TRUE(p["static_compile_cache_hit"].get<bool>()) << p;
  }
  r = Kilnc({"bench", model, "--shape", "x={2..3}x5", "--min-time=0", "--min-iterations=1"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input 0 'x': the model declares f32[N,4], got f32[2,5]"));
}

// Sanitizer runtimes map shadow memory far beyond any ulimit -v.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif
#else
constexpr bool kUnderSanitizer = false;
#endif

// Tensors under the per-tensor cap that do not fit in the address space
// kilnc may use (ulimit -v, 1 GB) end with ResourceExhausted naming the
// tensor and exit 3, never std::bad_alloc's abort, on every engine.
TEST(KilncEndToEnd, MemoryExhaustionIsAnErrorNotACrash) {
  if (kUnderSanitizer) {
    GTEST_SKIP() << "ASan/TSan/MSan reserve terabytes of address space: ulimit -v cannot run";
  }
  const std::string model = WriteDynamicReluModel(TmpDir("oom"));
  const std::string limit = "ulimit -v 1000000 && ";
  // 12 GiB: kilnc's random input data does not fit.
  for (const char* engine : {"--engine=compiled", "--engine=reference"}) {
    const Result r = Kilnc({"run", model, "--shape", "x=805306368x4", engine}, "", limit);
    EXPECT_EQ(r.exit_code, kExitResourceExhausted) << engine << "\n" << r.output;
    EXPECT_THAT(r.err, HasSubstr("RESOURCE_EXHAUSTED: input 'x': out of memory: random data "
                                 "f32[805306368,4] needs 12884901888 bytes"))
        << engine;
  }
  // 512 MB: the input fits, the output (or the reference interpreter's
  // copy of the input) does not. The JIT build runs first without the
  // limit so that only the run is under it.
  const std::vector<std::string> shape = {"--shape", "x=32000000x4"};
  std::vector<std::string> compile = {"compile", model};
  compile.insert(compile.end(), shape.begin(), shape.end());
  const Result built = Kilnc(compile);
  ASSERT_EQ(built.exit_code, kExitOk) << built.output;
  std::vector<std::string> run = {"run", model};
  run.insert(run.end(), shape.begin(), shape.end());
  Result r = Kilnc(run, "", limit);
  EXPECT_EQ(r.exit_code, kExitResourceExhausted) << r.output;
  EXPECT_THAT(r.err, HasSubstr("out of memory: output 'y' f32[32000000,4] needs 512000000 "
                               "bytes (0.48 GiB)"));
  std::vector<std::string> bench = {"bench", model, "--warmup=1", "--min-iterations=1"};
  bench.insert(bench.end(), shape.begin(), shape.end());
  r = Kilnc(bench, "", limit);
  EXPECT_EQ(r.exit_code, kExitResourceExhausted) << r.output;
  EXPECT_THAT(r.err, HasSubstr("kilnc bench: RESOURCE_EXHAUSTED: out of memory: output 'y' "
                               "f32[32000000,4] needs 512000000 bytes"));
  run.push_back("--engine=reference");
  r = Kilnc(run, "", limit);
  EXPECT_EQ(r.exit_code, kExitResourceExhausted) << r.output;
  EXPECT_THAT(r.err, HasSubstr("out of memory: "));
  EXPECT_THAT(r.err, HasSubstr("f32[32000000,4] needs 512000000 bytes"));
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
  for (const char* engine : {"compiled", "reference"}) {
    const Result r = Kilnc({"check", dir, "--atol=0", "--rtol=0",
                            absl::StrCat("--engine=", engine)});
    const std::string again = engine == std::string("reference") ? "re-imported" : "re-compiled";
    EXPECT_EQ(r.exit_code, kExitOk) << r.output;
    EXPECT_THAT(r.output, HasSubstr(again + " with the shapes of test_data_set_0"));
    EXPECT_THAT(r.output, HasSubstr(again + " with the shapes of test_data_set_1"));
    EXPECT_THAT(r.output, HasSubstr("PASS  output 0 'y' f32[3,4]"));
    EXPECT_THAT(r.output, HasSubstr("result: PASS (2 data set(s), 2 output(s)"));
  }
}

// Outputs of data-dependent shape: nz = NonZero(x), i64[2,?]; sel = If(c)
// with branches Relu(x) (f32[2,3]) and ReduceMax(x, axis 1) (f32[2,1]), so
// f32[2,?]. x: f32[2,3], c: bool[].
std::string WriteDataDependentModel(const std::string& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("data_dependent");
  auto add_value = [](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                      const std::string& name, int elem_type, std::vector<int64_t> dims) {
    onnx::ValueInfoProto* v = list->Add();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    tt->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0) {
        tt->mutable_shape()->add_dim()->set_dim_param(absl::StrCat(name, "_n"));
      } else {
        tt->mutable_shape()->add_dim()->set_dim_value(d);
      }
    }
  };
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  add_value(g->mutable_input(), "c", onnx::TensorProto::BOOL, {});
  onnx::NodeProto* nz = g->add_node();
  nz->set_op_type("NonZero");
  nz->set_name("nz");
  nz->add_input("x");
  nz->add_output("nz");
  onnx::NodeProto* cond = g->add_node();
  cond->set_op_type("If");
  cond->set_name("if");
  cond->add_input("c");
  cond->add_output("sel");
  for (bool then : {true, false}) {
    onnx::AttributeProto* a = cond->add_attribute();
    a->set_name(then ? "then_branch" : "else_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* b = a->mutable_g();
    b->set_name(then ? "then" : "else");
    onnx::NodeProto* n = b->add_node();
    n->set_op_type(then ? "Relu" : "ReduceMax");
    n->add_input("x");
    n->add_output(then ? "then_out" : "else_out");
    if (!then) {
      onnx::AttributeProto* axes = n->add_attribute();
      axes->set_name("axes");
      axes->set_type(onnx::AttributeProto::INTS);
      axes->add_ints(1);
    }
    add_value(b->mutable_output(), then ? "then_out" : "else_out", onnx::TensorProto::FLOAT,
              {2, then ? 3 : 1});
  }
  add_value(g->mutable_output(), "nz", onnx::TensorProto::INT64, {2, -1});
  add_value(g->mutable_output(), "sel", onnx::TensorProto::FLOAT, {2, -1});
  fs::create_directories(dir);
  const std::string path = dir + "/model.onnx";
  WriteFile(path, m.SerializeAsString());
  return path;
}

// The model of WriteDataDependentModel with two data sets (c true, c false),
// their outputs computed by the reference interpreter.
std::string WriteDataDependentCase(const std::string& name) {
  const std::string dir = TmpDir(name);
  const std::string model = WriteDataDependentModel(dir);
  absl::StatusOr<frontend::ImportResult> imported = frontend::ImportModelFile(model);
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (!imported.ok()) return dir;
  const Tensor x = F32({2, 3}, {0, 1.5f, 0, -2, 3, 0});
  for (int set = 0; set < 2; ++set) {
    Tensor c(DType::kBool, {});
    c.data<bool>()[0] = set == 0;
    absl::StatusOr<std::vector<Tensor>> want = interp::Run(imported->graph, {x, c});
    EXPECT_TRUE(want.ok()) << want.status();
    if (!want.ok()) return dir;
    const std::string ds = absl::StrCat(dir, "/test_data_set_", set);
    fs::create_directories(ds);
    int k = 0;
    for (const auto& [t, n] : {std::pair<const Tensor*, const char*>{&x, "x"}, {&c, "c"}}) {
      absl::StatusOr<std::string> bytes = frontend::SerializeTensor(*t, n);
      EXPECT_TRUE(bytes.ok());
      WriteFile(absl::StrCat(ds, "/input_", k++, ".pb"), *bytes);
    }
    for (size_t o = 0; o < want->size(); ++o) {
      absl::StatusOr<std::string> bytes =
          frontend::SerializeTensor((*want)[o], o == 0 ? "nz" : "sel");
      EXPECT_TRUE(bytes.ok());
      WriteFile(absl::StrCat(ds, "/output_", o, ".pb"), *bytes);
    }
  }
  return dir;
}

std::vector<std::string> DataSetInputs(const std::string& dir, int set) {
  const std::string ds = absl::StrCat(dir, "/test_data_set_", set);
  return {"--input", "x=" + ds + "/input_0.pb", "--input", "c=" + ds + "/input_1.pb"};
}

std::vector<std::string> Cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(KilncEndToEnd, DataDependentShapesCheckAndRun) {
  const std::string dir = WriteDataDependentCase("dd_check");
  const Result check = Kilnc({"check", dir, "--atol=0", "--rtol=0"});
  EXPECT_EQ(check.exit_code, kExitOk) << check.output;
  EXPECT_THAT(check.output, HasSubstr("result: PASS (2 data set(s), 4 output(s)"));
  // x has 3 non-zeros; c true selects Relu(x), c false ReduceMax(x, axis 1).
  const Result then = Kilnc(Cat({"run", dir + "/model.onnx"}, DataSetInputs(dir, 0)));
  EXPECT_EQ(then.exit_code, kExitOk) << then.output;
  EXPECT_THAT(then.output, HasSubstr("output 0 'nz' i64[2,3]"));
  EXPECT_THAT(then.output, HasSubstr("output 1 'sel' f32[2,3]"));
  const Result other = Kilnc(Cat({"run", dir + "/model.onnx"}, DataSetInputs(dir, 1)));
  EXPECT_EQ(other.exit_code, kExitOk) << other.output;
  EXPECT_THAT(other.output, HasSubstr("output 1 'sel' f32[2,1]"));
}

TEST(KilncEndToEnd, DataDependentShapesBench) {
  const std::string dir = WriteDataDependentCase("dd_bench");
  for (int set : {0, 1}) {
    const Result r = Kilnc(Cat({"bench", dir + "/model.onnx", "--json", "--min-time=0",
                                "--min-iterations=3", "--warmup=1", "--threads=1"},
                               DataSetInputs(dir, set)));
    ASSERT_EQ(r.exit_code, kExitOk) << r.output;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_GE(j["iterations"].get<int>(), 3);
  }
  const Result eager = Kilnc(Cat({"bench", dir + "/model.onnx", "--json", "--min-time=0",
                                  "--min-iterations=2", "--warmup=0", "--vs-eager"},
                                 DataSetInputs(dir, 1)));
  ASSERT_EQ(eager.exit_code, kExitOk) << eager.output;
  EXPECT_THAT(eager.out, HasSubstr("\"vs_eager_rounds\":2"));
}

TEST(KilncEndToEnd, DataDependentShapesProfile) {
  const std::string dir = WriteDataDependentCase("dd_profile");
  const std::string trace = TmpDir("dd_trace.json");
  const Result r = Kilnc(Cat({"profile", dir + "/model.onnx", "--iterations=2",
                              "--trace=" + trace},
                             DataSetInputs(dir, 0)));
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.out, HasSubstr("2 profiled"));
  const nlohmann::json t = nlohmann::json::parse(ReadFile(trace), nullptr, false);
  ASSERT_TRUE(t.is_object()) << ReadFile(trace);
}

// --memory-limit: the budget counts the arena, the constants and the
// prepacked weights the compile report lists; a model over it is refused at
// compile time (exit 3) with the planned bytes and the budget, one at it
// compiles. A model whose arena and constants alone are over it is refused
// before any weight is prepacked.
TEST(KilncEndToEnd, MemoryLimitIsCheckedAtCompileTime) {
  const std::string model = TinyCnn() + "/model.onnx";
  const Result explained = Kilnc({"explain", model, "--json"});
  ASSERT_EQ(explained.exit_code, kExitOk) << explained.output;
  const nlohmann::json j = nlohmann::json::parse(explained.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << explained.out;
  // The budget counts the weights as loaded: those kept, and those released
  // once their calls prepacked them (the conv weights here).
  const int64_t released = j["released_constant_bytes"].get<int64_t>();
  const int64_t constants = j["constant_bytes"].get<int64_t>() + released;
  const int64_t prepacked = j["prepacked_bytes"].get<int64_t>();
  const int64_t arena = j["arena_bytes"].get<int64_t>();
  ASSERT_GT(released, 0);
  ASSERT_GT(prepacked, 0);

  Result r = Kilnc({"compile", model, "--memory-limit=1000"});
  EXPECT_EQ(r.exit_code, kExitResourceExhausted) << r.output;
  EXPECT_THAT(r.err, HasSubstr("RESOURCE_EXHAUSTED: model '"));
  EXPECT_THAT(r.err, HasSubstr("over its memory limit of 1000 bytes"));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(" bytes before its weights are prepacked (arena ")));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(" + constants ", constants, "), over")));
  // The planned arena, as the message states it: the report's (the arena
  // also holds outputs copied out of it, so it is at least the report's).
  const size_t arena_at = r.err.find("(arena ");
  ASSERT_NE(arena_at, std::string::npos) << r.err;
  const int64_t planned_arena = std::stoll(r.err.substr(arena_at + 7));
  EXPECT_GE(planned_arena, arena);
  const int64_t total = planned_arena + constants + prepacked;

  // Over the limit only with the prepacked weights: refused after them.
  r = Kilnc({"compile", model, absl::StrCat("--memory-limit=", total - 1)});
  EXPECT_EQ(r.exit_code, kExitResourceExhausted) << r.output;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("needs ", total, " bytes (arena ", planned_arena,
                                            " + constants ", constants,
                                            " + prepacked weights ", prepacked, ")")));
  r = Kilnc({"compile", model, absl::StrCat("--memory-limit=", total)});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  r = Kilnc({"run", model, absl::StrCat("--memory-limit=", total)});
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  r = Kilnc({"run", model, "--memory-limit=1000"});
  EXPECT_EQ(r.exit_code, kExitResourceExhausted) << r.output;
  // check too: a model that does not fit is 3, not a wrong result (1).
  r = Kilnc({"check", TinyCnn(), "--memory-limit=1000"});
  EXPECT_EQ(r.exit_code, kExitResourceExhausted) << r.output;
  EXPECT_THAT(r.out, HasSubstr("compile: FAIL RESOURCE_EXHAUSTED: model '"));
  EXPECT_EQ(Kilnc({"check", TinyCnn(), absl::StrCat("--memory-limit=", total)}).exit_code,
            kExitOk);
  EXPECT_EQ(Kilnc({"compile", model, "--memory-limit=-5"}).exit_code, kExitBadInput);
  EXPECT_EQ(Kilnc({"compile", model, "--memory-limit=1G"}).exit_code, kExitBadInput);
}

TEST(KilncEndToEnd, ExplainJsonListsKernels) {
  const Result r = Kilnc({"explain", TinyCnn() + "/model.onnx", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j["kernels"].is_array());
  ASSERT_GE(j["kernels"].size(), 1u);
  for (const nlohmann::json& k : j["kernels"]) {
    EXPECT_TRUE(k["name"].is_string()) << k;
    EXPECT_TRUE(k["ops"].is_array()) << k;
    EXPECT_TRUE(k["vectorized"].is_boolean()) << k;
    EXPECT_TRUE(k["reason"].is_string()) << k;
    // Loop kernels list their ops without a vector form (maybe none).
    EXPECT_EQ(k.contains("unvectorized_ops"), k["backend"] == "loop") << k;
    if (k["backend"] == "loop") EXPECT_TRUE(k["unvectorized_ops"].is_array()) << k;
  }
  // The tiny CNN's convolutions and its Gemm are library calls.
  ASSERT_TRUE(j["extern_calls"].is_array());
  ASSERT_GE(j["extern_calls"].size(), 1u);
  for (const nlohmann::json& x : j["extern_calls"]) {
    for (const char* key : {"op", "post_ops", "weight_layout", "prepacked_bytes"}) {
      EXPECT_TRUE(x.contains(key)) << key << " in " << x;
    }
  }
  EXPECT_TRUE(j.contains("reorders"));

  const Result text = Kilnc({"explain", TinyCnn() + "/model.onnx"});
  ASSERT_EQ(text.exit_code, kExitOk) << text.output;
  EXPECT_THAT(text.out, HasSubstr("ops: "));
  EXPECT_THAT(text.out, HasSubstr("post-ops: "));
  EXPECT_THAT(text.out, HasSubstr("memory: arena "));
}

TEST(KilncEndToEnd, BenchJsonIsOneParsableLine) {
  const std::string user_cache = TmpDir("bench_user_cache");
  const std::string tmp = TmpDir("bench_tmp");
  fs::create_directories(tmp);
  const Result r = Kilnc({"bench", TinyCnn() + "/model.onnx", "--json", "--min-time=0.2",
                          "--threads=1", "--progress"},
                         "XDG_CACHE_HOME=" + Quote(user_cache) + " TMPDIR=" + Quote(tmp));
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "not one line: " << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << r.out;
  for (const char* key : {"median_ms", "p90_ms", "mean_ms", "iterations", "compile_ms",
                          "compile_warm_ms", "peak_rss_bytes", "arena_bytes", "threads",
                          "mode", "isa", "model"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing in " << r.out;
  }
  EXPECT_GE(j["iterations"].get<int>(), 10);
  EXPECT_GT(j["median_ms"].get<double>(), 0);
  EXPECT_GE(j["p90_ms"].get<double>(), j["median_ms"].get<double>());
  EXPECT_GT(j["peak_rss_bytes"].get<int64_t>(), 1 << 20);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["mode"], "compiled");
  EXPECT_FALSE(j["compile_cache_hit"].get<bool>());  // a fresh cache
  EXPECT_TRUE(j["compile_warm_cache_hit"].get<bool>());
  EXPECT_THAT(r.err, HasSubstr("runs"));  // the progress bar
  // The cold compile's cache was temporary (a folder under the user's
  // cache's tmp/, removed), and the user's cache holds no library, only the
  // toolchain's precompiled header (pch-*/) and header list (headers-*),
  // which the cold compile made; $TMPDIR was not used.
  EXPECT_TRUE(fs::is_empty(tmp));
  EXPECT_GT(j["compile_precompiled_header_ms"].get<double>(), 0);
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(user_cache)) {
    const std::string rel = fs::relative(e.path(), user_cache).string();
    EXPECT_TRUE(e.is_directory() || absl::StartsWith(rel, "kiln/pch-") ||
                absl::StartsWith(rel, "kiln/headers-"))
        << "left in the user's cache: " << e.path();
  }

  const Result human = Kilnc({"bench", TinyCnn() + "/model.onnx", "--min-time=0",
                              "--min-iterations=3", "--warmup=1"});
  ASSERT_EQ(human.exit_code, kExitOk) << human.output;
  EXPECT_THAT(human.out, HasSubstr("compile: cold "));
  EXPECT_THAT(human.out, HasSubstr("latency: median "));
  EXPECT_THAT(human.out, HasSubstr("peak RSS "));
  EXPECT_THAT(human.err, Not(HasSubstr("runs")));  // stderr is not a terminal
}

TEST(KilncEndToEnd, BenchVsEagerTimesBothInterleaved) {
  const Result r = Kilnc({"bench", TinyCnn() + "/model.onnx", "--json", "--min-time=0",
                          "--min-iterations=5", "--warmup=1", "--vs-eager", "--threads=1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["vs_eager_rounds"].get<int>(), 5);
  EXPECT_GT(j["eager_median_ms"].get<double>(), 0);
  EXPECT_GT(j["interleaved_median_ms"].get<double>(), 0);
  EXPECT_NEAR(j["speedup_vs_eager"].get<double>(),
              j["eager_median_ms"].get<double>() / j["interleaved_median_ms"].get<double>(),
              1e-9);
  // Eager materializes every intermediate: its arena is never smaller.
  EXPECT_GE(j["eager_arena_bytes"].get<int64_t>(), j["arena_bytes"].get<int64_t>());

  const Result human = Kilnc({"bench", TinyCnn() + "/model.onnx", "--min-time=0",
                              "--min-iterations=3", "--warmup=0", "--vs-eager"});
  ASSERT_EQ(human.exit_code, kExitOk) << human.output;
  EXPECT_THAT(human.out, HasSubstr("vs eager (3 interleaved rounds): compiled median "));
}

TEST(KilncEndToEnd, BenchWarmOnlyCompilesOnceFromTheGivenCache) {
  const std::string cache = TmpDir("bench_warm_only_cache");
  const std::vector<std::string> args = {"bench", TinyCnn() + "/model.onnx", "--json",
                                         "--min-time=0", "--min-iterations=2",
                                         "--warmup=0", "--warm-only",
                                         "--cache-dir=" + cache};
  const Result first = Kilnc(args);  // fills the cache
  ASSERT_EQ(first.exit_code, kExitOk) << first.output;
  const Result r = Kilnc(args);
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_FALSE(j.contains("compile_ms"));
  EXPECT_TRUE(j["compile_warm_cache_hit"].get<bool>());
  EXPECT_GT(j["median_ms"].get<double>(), 0);
}

TEST(KilncEndToEnd, ProfileWritesATraceWithAnEventPerKernelPerRun) {
  const std::string trace = TmpDir("trace.json");
  const Result r = Kilnc({"profile", TinyCnn() + "/model.onnx", "--trace=" + trace,
                          "--iterations=3"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  const nlohmann::json t = nlohmann::json::parse(ReadFile(trace), nullptr, false);
  ASSERT_TRUE(t.is_object()) << ReadFile(trace);
  std::map<std::string, int> per_name;
  int events = 0;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++events;
    ++per_name[e["name"].get<std::string>()];
    EXPECT_GE(e["dur"].get<double>(), 0);
    EXPECT_TRUE(e["args"]["backend"].is_string());
  }
  // The explain report of the same compile says how many kernels there are.
  const Result ex = Kilnc({"explain", TinyCnn() + "/model.onnx", "--json"});
  ASSERT_EQ(ex.exit_code, kExitOk) << ex.output;
  const size_t num_kernels = nlohmann::json::parse(ex.out)["kernels"].size();
  EXPECT_EQ(events, static_cast<int>(3 * num_kernels));
  for (const auto& [name, n] : per_name) EXPECT_EQ(n % 3, 0) << name;
  EXPECT_THAT(r.out, HasSubstr("top "));
  EXPECT_THAT(r.out, HasSubstr("share"));
}

TEST(KilncEndToEnd, CompileDumpsIrAndSources) {
  const std::string dump = TmpDir("dump");
  const Result r = Kilnc({"compile", TinyCnn() + "/model.onnx", "--dump-dir", dump,
                          "--verbose"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_THAT(r.out, HasSubstr("loop kernels "));
  EXPECT_THAT(r.out, HasSubstr("backend"));  // the per-kernel table
  ASSERT_TRUE(fs::is_directory(dump + "/loop"));
  EXPECT_FALSE(fs::is_empty(dump + "/loop"));
  ASSERT_TRUE(fs::is_directory(dump + "/graph"));
  EXPECT_FALSE(fs::is_empty(dump + "/graph"));
  ASSERT_TRUE(fs::is_directory(dump + "/cpp"));
  EXPECT_FALSE(fs::is_empty(dump + "/cpp"));
}

TEST(KilncEndToEnd, NewCommandsRejectBadInput) {
  const std::string model = TinyCnn() + "/model.onnx";
  const std::string missing = TmpDir("missing.onnx");
  for (const char* sub : {"compile", "explain", "bench", "profile"}) {
    Result r = Kilnc({sub, missing});
    EXPECT_EQ(r.exit_code, kExitBadInput) << sub << ": " << r.output;
    EXPECT_THAT(r.err, HasSubstr("no such model file")) << sub;
    r = Kilnc({sub, model, "--threads=zero"});
    EXPECT_EQ(r.exit_code, kExitBadInput) << sub << ": " << r.output;
    EXPECT_THAT(r.err, HasSubstr("--threads wants")) << sub;
    r = Kilnc({sub, model, "--mode=turbo"});
    EXPECT_EQ(r.exit_code, kExitBadInput) << sub << ": " << r.output;
    EXPECT_THAT(r.err, HasSubstr("unknown --mode 'turbo'")) << sub;
  }
  Result r = Kilnc({"compile", model, "--isa=mmx"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.err, HasSubstr("mmx"));
  r = Kilnc({"check", TinyCnn(), "--disable-pass=no-such-pass"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.err, HasSubstr("no-such-pass"));
  const std::string truncated = CopyTinyCnn("truncated_compile");
  fs::resize_file(truncated + "/model.onnx", 100);
  r = Kilnc({"explain", truncated + "/model.onnx"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  r = Kilnc({"bench", model, "--input", "nope=" + TinyCnn() + "/test_data_set_0/input_0.pb",
             "--min-time=0"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.err, HasSubstr("'nope'"));
  r = Kilnc({"profile", model, "--trace=/no/such/dir/t.json"});
  EXPECT_EQ(r.exit_code, kExitBadInput) << r.output;
  EXPECT_THAT(r.err, HasSubstr("cannot write"));
}

}  // namespace
}  // namespace kiln::tools
