// File: compiler/specializing_model_test.cc — a model compiled with its
// dynamic dims unbound runs any size (outputs equal to the reference
// interpreter's at each shape), keeps a bounded LRU of specializations, and
// refuses shapes that break its declared ones with errors naming both.
#include "compiler/specializing_model.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/compiler.h"
#include "compiler/test_util.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln {
namespace {

using compiler_testing::Random;

using ::testing::HasSubstr;
namespace ft = frontend::testing;

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

// y = Softmax(Relu(x @ W + b) + m): x f32[N,8], m f32[N,4] share the symbol
// N; W is a constant (a oneDNN MatMul), so each shape gets its own
// primitives and loop kernels.
std::string WriteModel(const std::string& name) {
  ft::ModelBuilder m(17);
  m.Input("x", onnx::TensorProto::FLOAT, {std::string("N"), int64_t{8}});
  m.Input("m", onnx::TensorProto::FLOAT, {std::string("N"), int64_t{4}});
  std::vector<float> w(32), b(4);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : w) v = dist(rng);
  for (float& v : b) v = dist(rng);
  m.Initializer("W", {8, 4}, w);
  m.Initializer("b", {4}, b);
  m.Node("MatMul", {"x", "W"}, {"xw"}, "matmul");
  m.Node("Add", {"xw", "b"}, {"xwb"}, "bias");
  m.Node("Relu", {"xwb"}, {"r"}, "relu");
  m.Node("Add", {"r", "m"}, {"s"}, "mask");
  ft::AttrInt(m.Node("Softmax", {"s"}, {"y"}, "softmax"), "axis", -1);
  m.Output("y", onnx::TensorProto::FLOAT, {std::string("N"), int64_t{4}});
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << m.Bytes();
  return path;
}

std::vector<ir::Tensor> Inputs(int64_t n) {
  return {Random({n, 8}, 100 + n), Random({n, 4}, 200 + n)};
}

// The reference interpreter's outputs: the model imported with N bound.
std::vector<ir::Tensor> Reference(const std::string& path, int64_t n) {
  frontend::ImportOptions io;
  io.input_shapes["x"] = {n, 8};
  io.input_shapes["m"] = {n, 4};
  absl::StatusOr<frontend::ImportResult> imported = frontend::ImportModelFile(path, io);
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (!imported.ok()) return {};
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(imported->graph, Inputs(n));
  EXPECT_TRUE(want.ok()) << want.status();
  return want.ok() ? *std::move(want) : std::vector<ir::Tensor>{};
}

void ExpectEqualToReference(const std::vector<ir::Tensor>& got,
                            const std::vector<ir::Tensor>& want, int64_t n) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    EXPECT_EQ(got[o].shape(), want[o].shape()) << "N=" << n;
    interp::CompareResult r =
        interp::CompareTensors(got[o], want[o], interp::Tolerance{1e-4, 1e-6, {}});
    EXPECT_TRUE(r.ok) << "N=" << n << " output " << o << ": " << r.message;
  }
}

CompileOptions Options(const std::string& cache) {
  CompileOptions o;
  o.cache_dir = TempPath(cache);  // a cache of its own: hits are this test's
  return o;
}

TEST(SpecializingModel, OneHandleRunsSeveralShapesAsTheReference) {
  const std::string path = WriteModel("several.onnx");
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options("cache_several")).CompileFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const CompiledModel& m = **model;
  ASSERT_EQ(m.inputs().size(), 2u);
  EXPECT_EQ(m.inputs()[0].shape, (ir::Shape{1, 8}));  // the compile-time one
  EXPECT_EQ(m.inputs()[0].declared_shape, (ir::Shape{ir::kDynamicDim, 8}));
  EXPECT_EQ(m.inputs()[0].dim_params, (std::vector<std::string>{"N", ""}));

  for (int64_t n : {1, 5, 17}) {
    absl::StatusOr<std::vector<ir::Tensor>> got = m.Run(Inputs(n));
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectEqualToReference(*got, Reference(path, n), n);
  }
  // RunNamed and RunInto at a fourth shape, RunInto's outputs resized.
  std::vector<ir::Tensor> in = Inputs(3);
  absl::StatusOr<std::vector<ir::Tensor>> named = m.RunNamed({{"x", in[0]}, {"m", in[1]}});
  ASSERT_TRUE(named.ok()) << named.status();
  ExpectEqualToReference(*named, Reference(path, 3), 3);
  std::vector<ir::Tensor> outs = NewOutputTensors(m);
  ASSERT_EQ(outs[0].shape(), (ir::Shape{1, 4}));
  ir::Tensor* out = &outs[0];
  ASSERT_TRUE(m.RunInto(in, {&out, 1}).ok());
  ExpectEqualToReference(outs, Reference(path, 3), 3);
  // And back to the first shape, compiled already.
  absl::StatusOr<std::vector<ir::Tensor>> again = m.Run(Inputs(5));
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectEqualToReference(*again, Reference(path, 5), 5);

  const CompileReport& r = m.report();
  ASSERT_EQ(r.specializations.size(), 4u);  // N = 1, 5, 17, 3
  EXPECT_EQ(r.specializations[0].shapes, "x: [1,8], m: [1,4]");
  EXPECT_EQ(r.specializations[2].shapes, "x: [17,8], m: [17,4]");
  EXPECT_EQ(r.live_specializations, 4);
  for (const CompileReport::ShapeSpecialization& s : r.specializations) {
    EXPECT_GT(s.compile_ms, 0) << s.shapes;
    EXPECT_TRUE(s.live) << s.shapes;
  }
  EXPECT_THAT(r.ToText(), HasSubstr("shape specializations: 4 compiled"));
  EXPECT_THAT(r.ToJson(), HasSubstr("\"shape_specializations\""));
}

TEST(SpecializingModel, LruKeepsAtMostItsCapacityAndRebuildsFromTheDiskCache) {
  const std::string path = WriteModel("lru.onnx");
  CompileOptions options = Options("cache_lru");
  options.max_shape_specializations = 2;
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(options).CompileFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const CompiledModel& m = **model;
  for (int64_t n : {2, 3, 2, 4, 2}) {  // N=1, then 2, 3 evicts 1, 4 evicts 3
    absl::StatusOr<std::vector<ir::Tensor>> got = m.Run(Inputs(n));
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectEqualToReference(*got, Reference(path, n), n);
    EXPECT_LE(m.report().live_specializations, 2);
  }
  const CompileReport& r = m.report();
  ASSERT_EQ(r.specializations.size(), 4u);  // 1, 2, 3, 4: 2 stayed (recently used)
  EXPECT_FALSE(r.specializations[0].live);
  EXPECT_TRUE(r.specializations[1].live);
  EXPECT_FALSE(r.specializations[2].live);
  EXPECT_TRUE(r.specializations[3].live);
  // A fresh cache: each new shape is its own C++ build (the cache key
  // covers the shapes, which are constants in the generated code).
  EXPECT_FALSE(r.specializations[0].jit_cache_hit);
  EXPECT_FALSE(r.specializations[1].jit_cache_hit);
  EXPECT_FALSE(r.specializations[2].jit_cache_hit);
  // N=1 again: evicted, so recompiled, its build from the disk cache.
  absl::StatusOr<std::vector<ir::Tensor>> first = m.Run(Inputs(1));
  ASSERT_TRUE(first.ok()) << first.status();
  ExpectEqualToReference(*first, Reference(path, 1), 1);
  ASSERT_EQ(m.report().specializations.size(), 5u);
  EXPECT_EQ(m.report().specializations[4].shapes, "x: [1,8], m: [1,4]");
  EXPECT_TRUE(m.report().specializations[4].jit_cache_hit);
  EXPECT_EQ(m.report().live_specializations, 2);
}

// Threads running different shapes at once: compiles of new shapes and
// evictions of specializations other threads are running stay correct.
TEST(SpecializingModel, RunIsSafeFromManyThreadsAcrossShapes) {
  const std::string path = WriteModel("threads.onnx");
  CompileOptions options = Options("cache_threads");
  options.max_shape_specializations = 2;
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(options).CompileFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int64_t> sizes = {1, 2, 3, 4};
  std::map<int64_t, std::vector<ir::Tensor>> want;
  for (int64_t n : sizes) want[n] = Reference(path, n);
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const int64_t n = sizes[(t + i) % sizes.size()];
        absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(Inputs(n));
        if (!got.ok()) {
          failures[t] = std::string(got.status().message());
          return;
        }
        interp::CompareResult r = interp::CompareTensors(
            (*got)[0], want[n][0], interp::Tolerance{1e-4, 1e-6, {}});
        if (!r.ok) {
          failures[t] = absl::StrCat("N=", n, ": ", r.message);
          return;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  EXPECT_LE((*model)->report().live_specializations, 2);
}

TEST(SpecializingModel, ShapesThatBreakTheDeclaredOnesNameTheInputAndBothShapes) {
  const std::string path = WriteModel("bad.onnx");
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options("cache_bad")).CompileFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const CompiledModel& m = **model;

  absl::StatusOr<std::vector<ir::Tensor>> r =
      m.Run({Random({2, 8, 1}, 1), Random({2, 4}, 2)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "input 0 'x': the model declares f32[N,8] (rank 2), got f32[2,8,1] (rank 3)");

  r = m.Run({Random({2, 9}, 1), Random({2, 4}, 2)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "input 0 'x': the model declares f32[N,8], got f32[2,9] (dim 1 must be 8)");

  r = m.Run({Random({2, 8}, 1), Random({3, 4}, 2)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "input 1 'm': the model declares f32[N,4], got f32[3,4], but input 0 'x' "
            "(declared f32[N,8]) is f32[2,8]: dim 'N' must be one size");

  ir::Tensor ints(ir::DType::kI64, {2, 8});
  r = m.Run({ints, Random({2, 4}, 2)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "input 0 'x': expected f32[N,8], got i64[2,8]");

  r = m.Run({Random({2, 8}, 1)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "the model takes 2 inputs, got 1");

  // Nothing was compiled for them.
  EXPECT_EQ(m.report().specializations.size(), 1u);
}

TEST(SpecializingModel, BoundInputsAndZeroCapacityKeepOneShape) {
  const std::string path = WriteModel("fixed.onnx");
  CompileOptions options = Options("cache_fixed");
  options.max_shape_specializations = 0;
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(options).CompileFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->report().specializations.empty());
  EXPECT_TRUE((*model)->inputs()[0].declared_shape.empty());
  absl::StatusOr<std::vector<ir::Tensor>> r = (*model)->Run(Inputs(2));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "input 0 'x': expected f32[1,8], got f32[2,8]");

  // Every dynamic input bound: a static model, as before.
  options.max_shape_specializations = 4;
  options.input_shapes["x"] = {6, 8};
  options.input_shapes["m"] = {6, 4};
  model = Compiler(options).CompileFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->report().specializations.empty());
  r = (*model)->Run(Inputs(6));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectEqualToReference(*r, Reference(path, 6), 6);

  options.max_shape_specializations = -1;
  model = Compiler(options).CompileFile(path);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpecializingModel, ProfileRunsAtTheCompileTimeShapes) {
  const std::string path = WriteModel("profile.onnx");
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options("cache_profile")).CompileFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<CompiledModel::KernelTiming> timings;
  absl::StatusOr<std::vector<ir::Tensor>> r = (*model)->Profile(Inputs(1), &timings);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(timings.size(), (*model)->report().kernels.size());
  r = (*model)->Profile(Inputs(3), &timings);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("x: [1,8], m: [1,4]"));
}

}  // namespace
}  // namespace kiln
