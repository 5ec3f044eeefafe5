// ONNX LSTM / GRU / RNN extern kernels on oneDNN (OneDnnRnnKernel, reached
// through OneDnnExternKernel::Create) against the reference interpreter:
// each one-node graph is lowered, its extern kernel built and run on seeded
// random data, and every output it writes compared with interp::Run on
// the graph. Forms oneDNN cannot compute exactly must be Unimplemented.
#include "backends/onednn/rnn_kernel.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/rnn_sequence.h"
#include "backends/onednn/threads.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Tensor Random(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kF64) {
      t.data<double>()[i] = dist(gen);
    } else {
      t.data<float>()[i] = static_cast<float>(dist(gen));
    }
  }
  return t;
}

std::string C(const Shape& shape, uint32_t seed, DType dtype = DType::kF32) {
  return ir::PrintTensor(Random(dtype, shape, seed), ir::PrintOptions::Full());
}

std::string Dims(const Shape& s) { return absl::StrJoin(s, ","); }

// One recurrent node. Weights are constants unless `runtime_weights`;
// initial states are graph inputs.
struct RnnCase {
  std::string op = "LSTM";
  int64_t seq = 7, batch = 3, input = 4, hidden = 5;
  std::string direction = "forward";
  bool bias = true, init_h = false, init_c = false, peephole = false;
  bool runtime_weights = false;
  int64_t linear_before_reset = 0;
  bool y = true, yh = true, yc = true;  // yc: LSTM only
  std::string extra_attrs;              // ", name=value" appended
  std::string seq_lens;                 // constant literal, or "input"
  DType dtype = DType::kF32;

  int64_t Gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int64_t Dirs() const { return direction == "bidirectional" ? 2 : 1; }

  // The case without its constants' data, for failure messages.
  std::string Describe() const {
    return absl::StrCat(op, " seq ", seq, " batch ", batch, " input ", input, " hidden ",
                        hidden, " ", direction, " bias ", bias, " h0 ", init_h, " c0 ",
                        init_c, " P ", peephole, " lbr ", linear_before_reset,
                        " runtime_w ", runtime_weights, " outputs ", y, yh, yc,
                        " seq_lens '", seq_lens, "'", extra_attrs);
  }

  std::string Text() const {
    const int64_t D = Dirs(), G = Gates(), H = hidden, N = batch;
    const char* dt = dtype == DType::kF64 ? "f64" : "f32";
    std::vector<std::string> params = {absl::StrCat("%x: ", dt, "[", seq, ",", N, ",", input, "]")};
    std::string body;
    auto weight = [&](const char* name, const Shape& s, uint32_t seed) {
      if (runtime_weights) {
        params.push_back(absl::StrCat("%", name, ": ", dt, "[", Dims(s), "]"));
      } else {
        absl::StrAppend(&body, "  %", name, " = constant ", C(s, seed, dtype), "\n");
      }
    };
    weight("w", {D, G * H, input}, 2);
    weight("r", {D, G * H, H}, 3);
    if (bias) weight("b", {D, 2 * G * H}, 4);
    if (peephole) weight("p", {D, 3 * H}, 5);
    if (seq_lens == "input") {
      params.push_back(absl::StrCat("%lens: i32[", N, "]"));
    } else if (!seq_lens.empty()) {
      absl::StrAppend(&body, "  %lens = constant ", seq_lens, "\n");
    }
    if (init_h) params.push_back(absl::StrCat("%h0: ", dt, "[", D, ",", N, ",", H, "]"));
    if (init_c) params.push_back(absl::StrCat("%c0: ", dt, "[", D, ",", N, ",", H, "]"));
    std::vector<std::string> args = {"%x", "%w", "%r", bias ? "%b" : "_",
                                     seq_lens.empty() ? "_" : "%lens", init_h ? "%h0" : "_"};
    if (op == "LSTM") {
      args.push_back(init_c ? "%c0" : "_");
      args.push_back(peephole ? "%p" : "_");
    }
    while (args.back() == "_") args.pop_back();
    std::vector<std::string> outs = {y ? "%y" : "_", yh ? "%yh" : "_"};
    if (op == "LSTM") outs.push_back(yc ? "%yc" : "_");
    while (outs.back() == "_") outs.pop_back();
    std::vector<std::string> graph_outs, types;
    const std::string state = absl::StrCat(dt, "[", D, ",", N, ",", H, "]");
    for (const std::string& o : outs) {
      if (o == "_") continue;
      graph_outs.push_back(o);
      if (o == "%y") {
        types.push_back(absl::StrCat(dt, "[", seq, ",", D, ",", N, ",", H, "]"));
      } else {
        types.push_back(state);
      }
    }
    std::string attrs = absl::StrCat("direction=\"", direction, "\", hidden_size=", H);
    if (op == "GRU") absl::StrAppend(&attrs, ", linear_before_reset=", linear_before_reset);
    absl::StrAppend(&attrs, extra_attrs);
    return absl::StrCat("graph main(", absl::StrJoin(params, ", "), ") -> (",
                        absl::StrJoin(graph_outs, ", "), ") opset 17 {\n", body, "  ",
                        absl::StrJoin(outs, ", "), " = ", op, "(", absl::StrJoin(args, ", "),
                        ") {", attrs, "} : ", absl::StrJoin(types, ", "), "\n}\n");
  }
};

struct Lowered {
  ir::Graph graph;
  ir::loop::LoopModule lp;
  const ir::loop::Kernel* ext = nullptr;
};

absl::StatusOr<Lowered> Lower(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  Lowered l;
  l.graph = std::move(*g);
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(l.graph);
  if (!lp.ok()) return lp.status();
  l.lp = std::move(*lp);
  for (const ir::loop::Kernel& k : l.lp.program.kernels) {
    if (k.kind != ir::loop::Kernel::Kind::kExtern) continue;
    if (l.ext != nullptr) return absl::InternalError("more than one extern kernel");
    l.ext = &k;
  }
  if (l.ext == nullptr) return absl::InternalError("no extern kernel");
  return l;
}

// Builds the case's kernel on oneDNN, runs it twice on random inputs and
// compares every graph output with the reference interpreter's.
void CheckOnce(const RnnCase& c, ExternKernelInfo* info, const OneDnnCallOptions& options) {
  const std::string text = c.Text();
  SCOPED_TRACE(c.Describe());
  absl::StatusOr<Lowered> l = Lower(text);
  ASSERT_TRUE(l.ok()) << l.status();
  const ir::loop::Kernel& ext = *l->ext;
  std::vector<Tensor> inputs;
  std::map<int32_t, Tensor> storage;
  for (size_t i = 0; i < l->graph.inputs().size(); ++i) {
    const ir::Value& v = l->graph.value(l->graph.inputs()[i]);
    inputs.push_back(Random(v.dtype, v.shape, 1000 + 17 * i));
    storage.emplace(l->lp.inputs[i], inputs.back());
  }
  for (const auto& [b, data] : l->lp.constants) storage.emplace(b, *data);
  for (int32_t b : ext.call.outputs) {
    const ir::loop::Buffer& buf = l->lp.program.buffers[b];
    // NaN: a value the kernel fails to write cannot pass the comparison.
    Tensor t(buf.dtype, buf.shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = NAN;
    storage.emplace(b, std::move(t));
  }

  absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> k =
      OneDnnExternKernel::Create(l->lp.program, ext, l->lp.constants, options);
  ASSERT_TRUE(k.ok()) << k.status();
  std::vector<void*> in_ptrs, out_ptrs;
  for (int32_t b : ext.call.inputs) {
    ASSERT_TRUE(storage.count(b)) << "extern reads a buffer computed by a loop kernel";
    in_ptrs.push_back(storage.at(b).raw_data());
  }
  for (int32_t b : ext.call.outputs) out_ptrs.push_back(storage.at(b).raw_data());
  for (int rep = 0; rep < 2; ++rep) {
    absl::Status s = (*k)->Run(in_ptrs, out_ptrs);
    ASSERT_TRUE(s.ok()) << s;
  }

  absl::StatusOr<std::vector<Tensor>> want = interp::Run(l->graph, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), l->lp.outputs.size());
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  for (size_t o = 0; o < want->size(); ++o) {
    ASSERT_TRUE(storage.count(l->lp.outputs[o])) << "output " << o << " not an extern output";
    interp::CompareResult r =
        interp::CompareTensors(storage.at(l->lp.outputs[o]), (*want)[o], tol);
    EXPECT_TRUE(r.ok) << (*k)->info().call << ": output " << o << ": " << r.message;
  }
  if (info != nullptr) *info = (*k)->info();
}

// CheckOnce with `options`; an LSTM or GRU that both forms can run
// (constant weights) is also checked as oneDNN's RNN primitive and as an
// RnnSequence, whichever the rule picks. `info` is the `options` kernel's.
void CheckAgainstReference(const RnnCase& c, ExternKernelInfo* info = nullptr,
                           const OneDnnCallOptions& options = {}) {
  using Form = OneDnnCallOptions::RnnForm;
  CheckOnce(c, info, options);
  if (c.op == "RNN" || c.runtime_weights || options.rnn_form != Form::kAuto) return;
  for (Form form : {Form::kPrimitive, Form::kSequence}) {
    OneDnnCallOptions forced = options;
    forced.rnn_form = form;
    ExternKernelInfo forced_info;
    CheckOnce(c, &forced_info, forced);
    EXPECT_EQ(absl::StartsWith(forced_info.impl, "kiln:"), form == Form::kSequence)
        << forced_info.impl;
  }
}

absl::Status CreateStatus(const RnnCase& c) {
  absl::StatusOr<Lowered> l = Lower(c.Text());
  if (!l.ok()) return l.status();
  return OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, {}).status();
}

// ---- LSTM.

TEST(RnnKernelLstm, ForwardReportsCall) {
  RnnCase c;
  ExternKernelInfo info;
  CheckAgainstReference(c, &info);
  EXPECT_EQ(info.op, "lstm");
  EXPECT_EQ(info.call, "lstm[seq 7 batch 3 input 4 hidden 5 forward]+bias");
  EXPECT_FALSE(info.weight_layout.empty());
  EXPECT_FALSE(info.impl.empty());
  // W + R (any layout, at least their elements) + the bias.
  EXPECT_GE(info.prepacked_bytes, (4 * 5 * 4 + 4 * 5 * 5 + 4 * 5) * 4);
}

TEST(RnnKernelLstm, DirectionsStatesAndShapes) {
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    for (int64_t batch : {1, 3}) {
      for (int64_t hidden : {5, 17}) {
        for (int64_t seq : {1, 7}) {
          RnnCase c;
          c.direction = dir;
          c.batch = batch;
          c.hidden = hidden;
          c.seq = seq;
          c.init_h = c.init_c = (batch + hidden + seq) % 2 == 0;
          c.bias = hidden == 17 || seq == 1;
          CheckAgainstReference(c);
        }
      }
    }
  }
}

TEST(RnnKernelLstm, OnlyOneInitialState) {
  for (const char* dir : {"forward", "bidirectional"}) {
    RnnCase c;
    c.direction = dir;
    c.init_h = true;
    CheckAgainstReference(c);
    c.init_h = false;
    c.init_c = true;
    CheckAgainstReference(c);
  }
}

TEST(RnnKernelLstm, Peepholes) {
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    RnnCase c;
    c.direction = dir;
    c.peephole = true;
    c.init_c = true;
    c.hidden = 17;
    ExternKernelInfo info;
    CheckAgainstReference(c, &info);
    EXPECT_TRUE(absl::EndsWith(info.call, "+peephole")) << info.call;
  }
}

TEST(RnnKernelLstm, OptionalOutputs) {
  for (const char* dir : {"forward", "bidirectional"}) {
    RnnCase c;
    c.direction = dir;
    c.yh = c.yc = false;  // only Y
    CheckAgainstReference(c);
    c.y = false;  // only Y_h
    c.yh = true;
    CheckAgainstReference(c);
    c.yh = false;  // only Y_c
    c.yc = true;
    CheckAgainstReference(c);
  }
}

TEST(RnnKernelLstm, RuntimeWeightsAndUnpackedWeights) {
  RnnCase c;
  c.direction = "bidirectional";
  c.peephole = true;
  c.init_h = c.init_c = true;
  c.runtime_weights = true;
  ExternKernelInfo info;
  CheckAgainstReference(c, &info);
  EXPECT_EQ(info.prepacked_bytes, 0);
  c.runtime_weights = false;
  OneDnnCallOptions no_prepack;
  no_prepack.prepack_weights = false;
  no_prepack.rnn_form = OneDnnCallOptions::RnnForm::kPrimitive;
  CheckAgainstReference(c, &info, no_prepack);
  EXPECT_EQ(info.weight_layout, "ldigo");
  no_prepack.rnn_form = OneDnnCallOptions::RnnForm::kSequence;
  CheckAgainstReference(c, &info, no_prepack);
  EXPECT_EQ(info.weight_layout, "ab");
}

// ---- LSTM as a projection matmul plus kiln's recurrence (RnnSequence).

OneDnnCallOptions SequenceForm() {
  OneDnnCallOptions o;
  o.rnn_form = OneDnnCallOptions::RnnForm::kSequence;
  return o;
}

TEST(RnnKernelLstmSequence, HiddenSizesAcrossVectorBlocks) {
  // Hidden sizes below, at and across the recurrence's block of units (2
  // vectors: 32 floats on AVX-512, 16 on AVX2), with every direction.
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    for (int64_t hidden : {1, 16, 32, 33, 70}) {
      RnnCase c;
      c.direction = dir;
      c.hidden = hidden;
      c.batch = hidden % 2 == 0 ? 1 : 2;
      c.input = hidden == 70 ? 19 : 4;
      c.init_h = c.init_c = hidden != 16;
      c.bias = hidden != 33;
      ExternKernelInfo info;
      CheckAgainstReference(c, &info, SequenceForm());
      EXPECT_TRUE(absl::StartsWith(info.impl, "kiln:lstm_steps(")) << info.impl;
      EXPECT_EQ(info.op, "lstm");
    }
  }
}

TEST(RnnKernelSequence, BidirectionalOnOneAndTwoThreads) {
  // On two threads each direction runs on its own thread with its own
  // states; on one, one after the other. Both compute what the reference
  // does (and each other's bits: the work per direction is the same).
  const int before = NumThreads();
  for (int threads : {1, 2}) {
    ASSERT_TRUE(SetNumThreads(threads).ok());
    for (const char* op : {"LSTM", "GRU"}) {
      for (int64_t batch : {1, 2}) {
        RnnCase c;
        c.op = op;
        c.direction = "bidirectional";
        c.batch = batch;
        c.hidden = 45;
        c.input = 11;
        c.seq = 6;
        c.init_h = batch == 1;
        c.linear_before_reset = batch == 2 ? 1 : 0;
        SCOPED_TRACE(absl::StrCat(threads, " thread(s): ", c.Describe()));
        ExternKernelInfo info;
        CheckAgainstReference(c, &info, SequenceForm());
        EXPECT_TRUE(absl::StrContains(info.impl, "_steps(")) << info.impl;
      }
    }
  }
  ASSERT_TRUE(SetNumThreads(before).ok());
}

TEST(RnnKernelLstmSequence, EveryHighwayTarget) {
  // The block of units is 2 vectors of the target the recurrence runs on.
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const char* dir : {"forward", "bidirectional"}) {
      RnnCase c;
      c.direction = dir;
      c.hidden = 37;
      c.peephole = true;
      c.init_h = c.init_c = true;
      ExternKernelInfo info;
      CheckAgainstReference(c, &info, SequenceForm());
      EXPECT_TRUE(absl::StrContains(info.impl, absl::StrCat("(", hwy::TargetName(target), ")")))
          << info.impl;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(RnnKernelLstmSequence, PeepholesStatesAndOutputs) {
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    RnnCase c;
    c.direction = dir;
    c.peephole = true;
    c.init_c = true;
    c.hidden = 40;
    c.seq = 5;
    CheckAgainstReference(c, nullptr, SequenceForm());
    c.init_h = true;
    c.init_c = false;
    c.y = false;
    CheckAgainstReference(c, nullptr, SequenceForm());
    c.y = true;
    c.yh = c.yc = false;
    CheckAgainstReference(c, nullptr, SequenceForm());
  }
}

TEST(RnnKernelLstmSequence, RefusesWhatItDoesNotRun) {
  RnnCase c;
  c.runtime_weights = true;
  absl::StatusOr<Lowered> l = Lower(c.Text());
  ASSERT_TRUE(l.ok()) << l.status();
  absl::Status s =
      OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, SequenceForm())
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "run time")) << s;
  RnnCase rnn;
  rnn.op = "RNN";
  l = Lower(rnn.Text());
  ASSERT_TRUE(l.ok()) << l.status();
  s = OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, SequenceForm())
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

TEST(RnnKernelLstmSequence, AutoFollowsTheRule) {
  for (const char* op : {"LSTM", "GRU"}) {
    for (int64_t batch : {int64_t{1}, kRnnSequenceMaxBatch, kRnnSequenceMaxBatch + 1}) {
      RnnCase c;
      c.op = op;
      c.linear_before_reset = 1;
      c.batch = batch;
      c.hidden = 64;
      ExternKernelInfo info;
      CheckOnce(c, &info, {});
      EXPECT_EQ(absl::StartsWith(info.impl, "kiln:"), UseRnnSequence(batch))
          << op << " batch " << batch << ": " << info.impl;
    }
  }
}

// ---- LSTM over 8-bit recurrent weights (RnnSequence with a
// QuantizedRecurrence) against the reference interpreter running the ONNX
// pattern DequantizeLinear(q, scale, zero point) -> LSTM's R.

struct QuantCase {
  std::string direction = "forward";
  int64_t seq = 5, batch = 1, input = 6, hidden = 37;
  bool is_uint8 = false, per_column = false, zero_point = true, peephole = false;
  bool init = false;
  bool zp_absent = false;  // no zero point input: 0

  std::string Describe() const {
    return absl::StrCat(direction, " batch ", batch, " hidden ", hidden,
                        is_uint8 ? " u8" : " s8", per_column ? " per column" : " per direction",
                        zp_absent ? " zp absent" : zero_point ? " zp" : " zp 0",
                        peephole ? " P" : "", init ? " h0 c0" : "");
  }
};

void CheckQuantized(const QuantCase& c) {
  SCOPED_TRACE(c.Describe());
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, H = c.hidden, G = 4, N = c.batch;
  std::mt19937 gen(77 + static_cast<uint32_t>(H * 3 + N + D));
  const DType qt = c.is_uint8 ? DType::kU8 : DType::kI8;
  Tensor q(qt, {D, G * H, H});
  for (int64_t i = 0; i < q.num_elements(); ++i) {
    if (c.is_uint8) {
      q.data<uint8_t>()[i] = static_cast<uint8_t>(gen() % 256);
    } else {
      q.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(gen() % 256) - 128);
    }
  }
  const int64_t params = c.per_column ? D * G * H : D;
  Tensor scale(DType::kF32, {params}), zp(qt, {params});
  for (int64_t i = 0; i < params; ++i) {
    scale.data<float>()[i] = 0.002f + 0.01f * static_cast<float>(gen() % 1000) / 1000.0f;
    if (c.is_uint8) {
      zp.data<uint8_t>()[i] = c.zero_point ? static_cast<uint8_t>(100 + gen() % 56) : 0;
    } else {
      zp.data<int8_t>()[i] =
          c.zero_point ? static_cast<int8_t>(static_cast<int>(gen() % 21) - 10) : 0;
    }
  }
  const Tensor w = Random(DType::kF32, {D, G * H, c.input}, 2);
  const Tensor b = Random(DType::kF32, {D, 2 * G * H}, 4);
  const Tensor peep = Random(DType::kF32, {D, 3 * H}, 5);
  auto print = [](const Tensor& t) { return ir::PrintTensor(t, ir::PrintOptions::Full()); };
  const std::string state = absl::StrCat("f32[", D, ",", N, ",", H, "]");
  std::string text = absl::StrCat("graph main(%x: f32[", c.seq, ",", N, ",", c.input, "]");
  if (c.init) absl::StrAppend(&text, ", %h0: ", state, ", %c0: ", state);
  absl::StrAppend(&text, ") -> (%y, %yh, %yc) opset 17 {\n  %w = constant ", print(w),
                  "\n  %b = constant ", print(b), "\n  %q = constant ", print(q),
                  "\n  %s = constant ", print(scale), "\n");
  if (!c.zp_absent) absl::StrAppend(&text, "  %z = constant ", print(zp), "\n");
  const char* dq_args = c.zp_absent ? "%s" : "%s, %z";
  if (c.per_column) {
    // Per column: the rows of q viewed as [D*4H, H], scale on axis 0.
    Tensor dims(DType::kI64, {2}), back(DType::kI64, {3});
    dims.data<int64_t>()[0] = D * G * H;
    dims.data<int64_t>()[1] = H;
    back.data<int64_t>()[0] = D;
    back.data<int64_t>()[1] = G * H;
    back.data<int64_t>()[2] = H;
    absl::StrAppend(&text, "  %dims = constant ", print(dims), "\n  %back = constant ",
                    print(back), "\n  %q2 = Reshape(%q, %dims) : ", c.is_uint8 ? "u8" : "i8",
                    "[", D * G * H, ",", H, "]\n  %r2 = DequantizeLinear(%q2, ", dq_args,
                    ") {axis=0} : f32[", D * G * H, ",", H,
                    "]\n  %r = Reshape(%r2, %back) : f32[", D, ",", G * H, ",", H, "]\n");
  } else {
    absl::StrAppend(&text, "  %r = DequantizeLinear(%q, ", dq_args, ") {axis=0} : f32[", D, ",",
                    G * H, ",", H, "]\n");
  }
  if (c.peephole) absl::StrAppend(&text, "  %p = constant ", print(peep), "\n");
  absl::StrAppend(&text, "  %y, %yh, %yc = LSTM(%x, %w, %r, %b, _, ",
                  c.init ? "%h0, %c0" : "_, _", c.peephole ? ", %p" : "",
                  ") {direction=\"", c.direction, "\", hidden_size=", H, "} : f32[", c.seq, ",",
                  D, ",", N, ",", H, "], ", state, ", ", state, "\n}\n");
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<Tensor> inputs = {Random(DType::kF32, {c.seq, N, c.input}, 11)};
  if (c.init) {
    inputs.push_back(Random(DType::kF32, {D, N, H}, 12));
    inputs.push_back(Random(DType::kF32, {D, N, H}, 13));
  }
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(*g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), 3u);

  RnnSequenceShape shape;
  shape.seq = c.seq;
  shape.batch = N;
  shape.input = c.input;
  shape.hidden = H;
  shape.dirs = D;
  shape.reverse = c.direction == "reverse";
  QuantizedRecurrence rq;
  rq.q = q.raw_data();
  rq.is_uint8 = c.is_uint8;
  rq.scale = scale.data<float>();
  rq.zero_point = c.zp_absent ? nullptr : zp.raw_data();
  rq.per_column = c.per_column;

  // The same LSTM as graph pass fuse-dequantize-lstm writes it
  // (kiln.FusedLSTM, scales [D] or [D, 4H]), lowered and run as an extern
  // kernel in each form: the 8-bit recurrence, and oneDNN's primitive over
  // the dequantized R.
  {
    const Shape pshape = c.per_column ? Shape{D, G * H} : Shape{D};
    absl::StatusOr<Tensor> s2 = scale.Reshaped(pshape);
    absl::StatusOr<Tensor> z2 = zp.Reshaped(pshape);
    ASSERT_TRUE(s2.ok() && z2.ok());
    std::string fused = absl::StrCat("graph main(%x: f32[", c.seq, ",", N, ",", c.input, "]");
    if (c.init) absl::StrAppend(&fused, ", %h0: ", state, ", %c0: ", state);
    absl::StrAppend(&fused, ") -> (%y, %yh, %yc) opset 17 {\n  %w = constant ", print(w),
                    "\n  %b = constant ", print(b), "\n  %q = constant ", print(q),
                    "\n  %s = constant ", print(*s2), "\n");
    if (!c.zp_absent) absl::StrAppend(&fused, "  %z = constant ", print(*z2), "\n");
    if (c.peephole) absl::StrAppend(&fused, "  %p = constant ", print(peep), "\n");
    absl::StrAppend(&fused, "  %y, %yh, %yc = kiln.FusedLSTM(%x, %w, %q, %b, _, ",
                    c.init ? "%h0, %c0, " : "_, _, ", c.peephole ? "%p, " : "_, ",
                    c.zp_absent ? "%s" : "%s, %z", ") {direction=\"", c.direction,
                    "\", hidden_size=", H, "} : f32[", c.seq, ",", D, ",", N, ",", H, "], ",
                    state, ", ", state, "\n}\n");
    absl::StatusOr<Lowered> l = Lower(fused);
    ASSERT_TRUE(l.ok()) << l.status() << "\n" << fused;
    const ir::loop::Kernel& ext = *l->ext;
    EXPECT_EQ(ext.call.op, "kiln.FusedLSTM");
    using Form = OneDnnCallOptions::RnnForm;
    for (Form form : {Form::kAuto, Form::kSequence, Form::kPrimitive}) {
      OneDnnCallOptions options;
      options.rnn_form = form;
      absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> k =
          OneDnnExternKernel::Create(l->lp.program, ext, l->lp.constants, options);
      ASSERT_TRUE(k.ok()) << k.status();
      const bool sequence = form == Form::kSequence || (form == Form::kAuto && N <= 2);
      EXPECT_EQ(absl::StartsWith((*k)->info().impl, "kiln:lstm_steps_s8r("), sequence)
          << (*k)->info().impl;
      std::map<int32_t, Tensor> storage;
      for (size_t i = 0; i < inputs.size(); ++i) storage.emplace(l->lp.inputs[i], inputs[i]);
      for (const auto& [buf, data] : l->lp.constants) storage.emplace(buf, *data);
      for (int32_t buf : ext.call.outputs) {
        const ir::loop::Buffer& bb = l->lp.program.buffers[buf];
        Tensor t(bb.dtype, bb.shape);
        for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = NAN;
        storage.emplace(buf, std::move(t));
      }
      std::vector<void*> in_ptrs, out_ptrs;
      for (int32_t buf : ext.call.inputs) {
        ASSERT_TRUE(storage.count(buf)) << "extern reads a buffer computed by a loop kernel";
        in_ptrs.push_back(storage.at(buf).raw_data());
      }
      for (int32_t buf : ext.call.outputs) out_ptrs.push_back(storage.at(buf).raw_data());
      for (int rep = 0; rep < 2; ++rep) {
        absl::Status st = (*k)->Run(in_ptrs, out_ptrs);
        ASSERT_TRUE(st.ok()) << st;
      }
      interp::Tolerance tol;
      tol.rtol = 1e-4;
      tol.atol = 1e-5;
      ASSERT_EQ(l->lp.outputs.size(), 3u);
      for (size_t o = 0; o < 3; ++o) {
        interp::CompareResult r =
            interp::CompareTensors(storage.at(l->lp.outputs[o]), (*want)[o], tol);
        EXPECT_TRUE(r.ok) << (*k)->info().call << ": output " << o << ": " << r.message;
      }
    }
  }

  absl::StatusOr<std::unique_ptr<RnnSequence>> seq =
      RnnSequence::Create(shape, w.data<float>(), rq, b.data<float>(),
                          c.peephole ? peep.data<float>() : nullptr, true, "test");
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_TRUE(absl::StartsWith((*seq)->impl(), "kiln:lstm_steps_s8r(")) << (*seq)->impl();
  // 1 byte per recurrent weight, not 4 (the rest is packed alike).
  const std::vector<float> r_f32(D * G * H * H, 0.0f);
  absl::StatusOr<std::unique_ptr<RnnSequence>> f32 =
      RnnSequence::Create(shape, w.data<float>(), r_f32.data(), b.data<float>(),
                          c.peephole ? peep.data<float>() : nullptr, true, "test");
  ASSERT_TRUE(f32.ok()) << f32.status();
  if (H >= 16) {  // below, the per-column scales and zero points weigh more
    EXPECT_GE((*f32)->packed_bytes() - (*seq)->packed_bytes(), 2 * D * G * H * H)
        << (*f32)->packed_bytes() << " vs " << (*seq)->packed_bytes();
  }
  std::vector<Tensor> got;
  for (const Tensor& t : *want) {
    Tensor n(DType::kF32, t.shape());
    for (int64_t i = 0; i < n.num_elements(); ++i) n.data<float>()[i] = NAN;
    got.push_back(std::move(n));
  }
  for (int rep = 0; rep < 2; ++rep) {
    absl::Status s = (*seq)->Run(inputs[0].data<float>(),
                                 c.init ? inputs[1].data<float>() : nullptr,
                                 c.init ? inputs[2].data<float>() : nullptr,
                                 got[0].data<float>(), got[1].data<float>(),
                                 got[2].data<float>());
    ASSERT_TRUE(s.ok()) << s;
  }
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  for (size_t o = 0; o < 3; ++o) {
    interp::CompareResult r = interp::CompareTensors(got[o], (*want)[o], tol);
    EXPECT_TRUE(r.ok) << "output " << o << ": " << r.message;
  }
}

TEST(RnnSequenceInt8Recurrence, TypesScalesDirectionsBatches) {
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    for (bool u8 : {false, true}) {
      for (bool per_column : {false, true}) {
        for (int64_t batch : {1, 2}) {
          QuantCase c;
          c.direction = dir;
          c.is_uint8 = u8;
          c.per_column = per_column;
          c.batch = batch;
          c.init = batch == 2;
          CheckQuantized(c);
        }
      }
    }
  }
}

TEST(RnnSequenceInt8Recurrence, ShapesPeepholesAndZeroPoints) {
  for (int64_t hidden : {1, 32, 70}) {
    for (bool zero_point : {false, true}) {
      QuantCase c;
      c.direction = "bidirectional";
      c.hidden = hidden;
      c.batch = hidden == 70 ? 3 : 2;
      c.zero_point = zero_point;
      c.is_uint8 = hidden == 32;
      c.per_column = hidden != 1;
      c.peephole = true;
      c.init = true;
      CheckQuantized(c);
    }
  }
}

TEST(RnnSequenceInt8Recurrence, AbsentZeroPointIsZero) {
  for (bool u8 : {false, true}) {
    for (bool per_column : {false, true}) {
      QuantCase c;
      c.direction = "bidirectional";
      c.is_uint8 = u8;
      c.per_column = per_column;
      c.zp_absent = true;
      CheckQuantized(c);
    }
  }
}

TEST(RnnSequenceInt8Recurrence, OnOneAndTwoThreadsEveryTarget) {
  const int before = NumThreads();
  for (int threads : {1, 2}) {
    ASSERT_TRUE(SetNumThreads(threads).ok());
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      QuantCase c;
      c.direction = "bidirectional";
      c.per_column = true;
      c.is_uint8 = true;
      c.batch = 2;
      SCOPED_TRACE(absl::StrCat(threads, " thread(s), ", hwy::TargetName(target)));
      CheckQuantized(c);
    }
    hwy::SetSupportedTargetsForTest(0);
  }
  ASSERT_TRUE(SetNumThreads(before).ok());
}

TEST(RnnSequenceInt8Recurrence, RefusesAGru) {
  RnnSequenceShape shape;
  shape.cell = SequenceCell::kGru;
  shape.seq = shape.batch = shape.input = shape.hidden = 1;
  const float w[3] = {0, 0, 0};
  const int8_t q[3] = {0, 0, 0};
  const float scale[1] = {1.0f};
  QuantizedRecurrence rq;
  rq.q = q;
  rq.scale = scale;
  absl::Status s = RnnSequence::Create(shape, w, rq, nullptr, nullptr, true, "node 'g'").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "node 'g'")) << s;
}

// ---- GRU as a projection matmul plus kiln's recurrence (RnnSequence).

TEST(RnnKernelGruSequence, RandomShapesBothResetFormsAllDirections) {
  // Seeded random sizes: hidden below, at and across the recurrence's block
  // of units (32 floats on AVX-512, 16 on AVX2), batch 1 and 2 (the odd row
  // and the row pair), every direction, with and without B and initial_h.
  std::mt19937 gen(69);
  std::uniform_int_distribution<int64_t> hidden_dist(1, 100), input_dist(1, 40),
      seq_dist(1, 9);
  for (int64_t lbr : {0, 1}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      for (int64_t batch : {1, 2}) {
        for (int rep = 0; rep < 3; ++rep) {
          RnnCase c;
          c.op = "GRU";
          c.linear_before_reset = lbr;
          c.direction = dir;
          c.batch = batch;
          c.hidden = hidden_dist(gen);
          c.input = input_dist(gen);
          c.seq = seq_dist(gen);
          c.init_h = rep != 1;
          c.bias = rep != 2;
          ExternKernelInfo info;
          CheckAgainstReference(c, &info, SequenceForm());
          EXPECT_TRUE(absl::StartsWith(info.impl, "kiln:gru_steps(")) << info.impl;
          EXPECT_EQ(info.op, "gru");
        }
      }
    }
  }
}

TEST(RnnKernelGruSequence, EveryHighwayTarget) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t lbr : {0, 1}) {
      RnnCase c;
      c.op = "GRU";
      c.linear_before_reset = lbr;
      c.direction = "bidirectional";
      c.hidden = 37;
      c.batch = 2;
      c.init_h = true;
      ExternKernelInfo info;
      CheckAgainstReference(c, &info, SequenceForm());
      EXPECT_TRUE(absl::StrContains(info.impl, absl::StrCat("(", hwy::TargetName(target), ")")))
          << info.impl;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(RnnKernelGruSequence, OptionalOutputsAndSequenceLens) {
  for (int64_t lbr : {0, 1}) {
    RnnCase c;
    c.op = "GRU";
    c.linear_before_reset = lbr;
    c.direction = "bidirectional";
    c.batch = 2;
    c.hidden = 40;
    c.yh = false;
    CheckAgainstReference(c, nullptr, SequenceForm());
    c.yh = true;
    c.y = false;
    c.init_h = true;
    CheckAgainstReference(c, nullptr, SequenceForm());
    c.y = true;
    c.seq_lens = "i32[2] [7, 7]";
    CheckAgainstReference(c, nullptr, SequenceForm());
    c.seq_lens = "i32[2] [7, 3]";
    absl::StatusOr<Lowered> l = Lower(c.Text());
    ASSERT_TRUE(l.ok()) << l.status();
    absl::Status s =
        OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, SequenceForm())
            .status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "sequence_lens")) << s;
  }
}

TEST(RnnKernelLstm, FullConstantSequenceLens) {
  RnnCase c;
  c.seq_lens = "i32[3] [7, 7, 7]";
  CheckAgainstReference(c);
}

// ---- GRU.

TEST(RnnKernelGru, BothResetFormsAllDirections) {
  for (int64_t lbr : {0, 1}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      for (int64_t batch : {1, 3}) {
        for (int64_t hidden : {5, 17}) {
          RnnCase c;
          c.op = "GRU";
          c.linear_before_reset = lbr;
          c.direction = dir;
          c.batch = batch;
          c.hidden = hidden;
          c.seq = hidden == 5 ? 7 : 1;
          c.init_h = batch == 3;
          c.bias = !(batch == 1 && hidden == 5);
          ExternKernelInfo info;
          CheckAgainstReference(c, &info);
          EXPECT_EQ(info.op, "gru");
          EXPECT_EQ(absl::StrContains(info.call, "linear_before_reset"), lbr == 1)
              << info.call;
        }
      }
    }
  }
}

TEST(RnnKernelGru, OptionalOutputsAndRuntimeWeights) {
  for (int64_t lbr : {0, 1}) {
    RnnCase c;
    c.op = "GRU";
    c.linear_before_reset = lbr;
    c.direction = "bidirectional";
    c.yh = false;
    CheckAgainstReference(c);
    c.yh = true;
    c.y = false;
    c.init_h = true;
    CheckAgainstReference(c);
    c.y = true;
    c.runtime_weights = true;
    CheckAgainstReference(c);
  }
}

// ---- RNN.

TEST(RnnKernelRnn, Activations) {
  for (const char* act : {"", "Tanh", "Relu", "Sigmoid"}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      RnnCase c;
      c.op = "RNN";
      c.direction = dir;
      c.init_h = true;
      c.hidden = 17;
      if (*act != '\0') {
        c.extra_attrs = absl::StrCat(", activations=[\"", act, "\"",
                                     c.Dirs() == 2 ? absl::StrCat(", \"", act, "\"") : "",
                                     "]");
      }
      ExternKernelInfo info;
      CheckAgainstReference(c, &info);
      EXPECT_EQ(info.op, "rnn");
    }
  }
}

// ---- Refused forms stay on the reference.

void ExpectUnimplemented(const RnnCase& c, const std::string& what) {
  absl::Status s = CreateStatus(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s << "\n" << c.Describe();
  EXPECT_TRUE(absl::StrContains(s.message(), what)) << s;
}

TEST(RnnKernelRefuses, FormsOneDnnComputesDifferently) {
  RnnCase c;
  c.extra_attrs = ", clip=0.5";
  ExpectUnimplemented(c, "clip");
  c.extra_attrs = ", input_forget=1";
  ExpectUnimplemented(c, "input_forget");
  c.extra_attrs = ", activations=[\"Sigmoid\", \"Relu\", \"Tanh\"]";
  ExpectUnimplemented(c, "activation 'Relu'");
  c.extra_attrs = ", activation_alpha=[0.5]";
  ExpectUnimplemented(c, "activation_alpha");
  c.extra_attrs = "";
  c.seq_lens = "i32[3] [7, 3, 7]";
  ExpectUnimplemented(c, "sequence_lens[1] = 3");
  c.seq_lens = "input";
  ExpectUnimplemented(c, "sequence_lens known only at run time");
  c.seq_lens = "";
  c.dtype = DType::kF64;
  ExpectUnimplemented(c, "f64");

  RnnCase gru;
  gru.op = "GRU";
  gru.extra_attrs = ", activations=[\"Sigmoid\", \"Relu\"]";
  ExpectUnimplemented(gru, "activation 'Relu'");
  RnnCase rnn;
  rnn.op = "RNN";
  rnn.direction = "bidirectional";
  rnn.extra_attrs = ", activations=[\"Tanh\", \"Relu\"]";
  ExpectUnimplemented(rnn, "different activations");
  rnn.direction = "forward";
  rnn.extra_attrs = ", activations=[\"LeakyRelu\"]";
  ExpectUnimplemented(rnn, "LeakyRelu");
}

TEST(RnnKernelRefuses, BatchMajorLayout) {
  // layout=1: X is [batch, seq, input]; the states [batch, dirs, hidden].
  const std::string text = absl::StrCat(R"(
graph main(%x: f32[3,7,4]) -> (%y) opset 17 {
  %w = constant )", C({1, 16, 4}, 2), R"(
  %r = constant )", C({1, 16, 4}, 3), R"(
  %y = LSTM(%x, %w, %r) {hidden_size=4, layout=1} : f32[3,7,1,4]
}
)");
  absl::StatusOr<Lowered> l = Lower(text);
  ASSERT_TRUE(l.ok()) << l.status();
  absl::Status s = OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "layout=1")) << s;
}

TEST(RnnKernelRefuses, BlockedBuffers) {
  absl::StatusOr<Lowered> l = Lower(RnnCase().Text());
  ASSERT_TRUE(l.ok()) << l.status();
  ir::loop::Kernel k = *l->ext;
  k.call.attrs["kiln_blocked_inputs"] = std::vector<int64_t>(k.call.inputs.size(), 0);
  EXPECT_TRUE(OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).ok());
  std::get<std::vector<int64_t>>(k.call.attrs["kiln_blocked_inputs"])[0] = 4;
  absl::Status s = OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

TEST(RnnKernelErrors, MalformedKernels) {
  absl::StatusOr<Lowered> l = Lower(RnnCase().Text());
  ASSERT_TRUE(l.ok()) << l.status();
  ir::loop::Kernel k = *l->ext;
  k.call.attrs["kiln_output_slots"] = std::vector<int64_t>{0};  // 3 outputs
  absl::Status s = OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), l->ext->name)) << s;
  k = *l->ext;
  std::swap(k.call.inputs[1], k.call.inputs[2]);  // W and R shapes swapped
  s = OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  k = *l->ext;
  k.call.inputs[0] = 9999;
  s = OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(RnnKernelErrors, RunChecksPointers) {
  absl::StatusOr<Lowered> l = Lower(RnnCase().Text());
  ASSERT_TRUE(l.ok()) << l.status();
  auto k = OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants);
  ASSERT_TRUE(k.ok()) << k.status();
  std::vector<void*> ins(l->ext->call.inputs.size(), nullptr);
  std::vector<void*> outs(l->ext->call.outputs.size(), nullptr);
  EXPECT_EQ((*k)->Run(ins, outs).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*k)->Run({}, {}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::onednn
