// Tests for the reference LSTM, GRU, RNN, If and Loop kernels. Expected
// values are computed in the test from the ONNX cell equations, step by step.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph/graph.h"
#include "interp/interpreter.h"

namespace kiln::interp {
namespace {

using ir::AttributeMap;
using ir::DType;
using ir::Graph;
using ir::kNoValue;
using ir::Shape;
using ir::Tensor;
using ir::ValueId;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Tanh(double x) {
  return (std::exp(x) - std::exp(-x)) / (std::exp(x) + std::exp(-x));
}

ValueId Const(Graph& g, const std::string& name, Shape shape,
              std::vector<float> values) {
  ValueId id = g.AddValue(name, DType::kF32, shape);
  g.SetConstant(id, Tensor::FromVector<float>(shape, values));
  return id;
}

ValueId Input(Graph& g, const std::string& name, DType dtype, Shape shape) {
  ValueId id = g.AddValue(name, dtype, shape);
  g.AddInput(id);
  return id;
}

ValueId Output(Graph& g, const std::string& name, DType dtype, Shape shape) {
  ValueId id = g.AddValue(name, dtype, shape);
  g.AddOutput(id);
  return id;
}

void ExpectValues(const Tensor& t, const Shape& shape,
                  const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(t.GetAsDouble(i), want[i], tol) << "element " << i;
  }
}

// ---- LSTM

TEST(Lstm, HiddenOneTwoStepsByHand) {
  Graph g;
  ValueId x = Input(g, "x", DType::kF32, {2, 1, 1});
  // Gate rows in ONNX order i, o, f, c.
  ValueId w = Const(g, "w", {1, 4, 1}, {0.5f, 0.6f, 0.7f, 0.8f});
  ValueId r = Const(g, "r", {1, 4, 1}, {0.1f, 0.2f, 0.3f, 0.4f});
  ValueId b = Const(g, "b", {1, 8},
                    {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f, 0.07f, 0.08f});
  ValueId y = Output(g, "y", DType::kF32, {2, 1, 1, 1});
  ValueId yh = Output(g, "yh", DType::kF32, {1, 1, 1});
  ValueId yc = Output(g, "yc", DType::kF32, {1, 1, 1});
  g.AddNode("LSTM", {x, w, r, b}, {y, yh, yc}, {{"hidden_size", int64_t{1}}},
            "lstm");
  auto outs = interp::Run(g, {Tensor::FromVector<float>({2, 1, 1}, {1.0f, 2.0f})});
  ASSERT_TRUE(outs.ok()) << outs.status();

  const double wi = 0.5, wo = 0.6, wf = 0.7, wc = 0.8;
  const double ri = 0.1, ro = 0.2, rf = 0.3, rc = 0.4;
  const double bi = 0.01 + 0.05, bo = 0.02 + 0.06, bf = 0.03 + 0.07,
               bc = 0.04 + 0.08;
  double h = 0, c = 0;
  std::vector<double> ys;
  for (double xt : {1.0, 2.0}) {
    double i = Sigmoid(wi * xt + ri * h + bi);
    double f = Sigmoid(wf * xt + rf * h + bf);
    double cand = Tanh(wc * xt + rc * h + bc);
    c = f * c + i * cand;
    double o = Sigmoid(wo * xt + ro * h + bo);
    h = o * Tanh(c);
    ys.push_back(h);
  }
  ExpectValues((*outs)[0], {2, 1, 1, 1}, ys);
  ExpectValues((*outs)[1], {1, 1, 1}, {h});
  ExpectValues((*outs)[2], {1, 1, 1}, {c});
}

TEST(Lstm, PeepholesInitialStateAndInputForget) {
  // One step, hidden 1, zero weights for x: only h0, c0, biases, peepholes.
  for (int64_t input_forget : {0, 1}) {
    Graph g;
    ValueId x = Input(g, "x", DType::kF32, {1, 1, 1});
    ValueId w = Const(g, "w", {1, 4, 1}, {0, 0, 0, 0});
    ValueId r = Const(g, "r", {1, 4, 1}, {0.1f, 0.2f, 0.3f, 0.4f});
    ValueId b = Const(g, "b", {1, 8}, {0.5f, -0.5f, 0.25f, 0.1f, 0, 0, 0, 0});
    ValueId h0 = Const(g, "h0", {1, 1, 1}, {0.3f});
    ValueId c0 = Const(g, "c0", {1, 1, 1}, {-0.7f});
    ValueId p = Const(g, "p", {1, 3}, {0.9f, -0.8f, 0.6f});  // i, o, f
    ValueId yh = g.AddValue("yh", DType::kF32, {1, 1, 1});
    ValueId yc = g.AddValue("yc", DType::kF32, {1, 1, 1});
    g.AddOutput(yh);
    g.AddOutput(yc);
    g.AddNode("LSTM", {x, w, r, b, kNoValue, h0, c0, p}, {kNoValue, yh, yc},
              {{"input_forget", input_forget}}, "lstm");
    auto outs = interp::Run(g, {Tensor::FromVector<float>({1, 1, 1}, {3.0f})});
    ASSERT_TRUE(outs.ok()) << outs.status();

    const double h_prev = 0.3, c_prev = -0.7;
    double i = Sigmoid(0.1 * h_prev + 0.5 + 0.9 * c_prev);
    double f = input_forget ? 1 - i : Sigmoid(0.3 * h_prev + 0.25 + 0.6 * c_prev);
    double c = f * c_prev + i * Tanh(0.4 * h_prev + 0.1);
    double o = Sigmoid(0.2 * h_prev - 0.5 - 0.8 * c);
    ExpectValues((*outs)[0], {1, 1, 1}, {o * Tanh(c)});
    ExpectValues((*outs)[1], {1, 1, 1}, {c});
  }
}

TEST(Lstm, ClipBoundsGateInputs) {
  // A huge candidate input clipped to 0.5: c = i * tanh(0.5) with i = sig(0.5).
  Graph g;
  ValueId x = Input(g, "x", DType::kF32, {1, 1, 1});
  ValueId w = Const(g, "w", {1, 4, 1}, {100, 0, 0, 100});
  ValueId r = Const(g, "r", {1, 4, 1}, {0, 0, 0, 0});
  ValueId yh = Output(g, "yh", DType::kF32, {1, 1, 1});
  ValueId yc = Output(g, "yc", DType::kF32, {1, 1, 1});
  g.AddNode("LSTM", {x, w, r}, {kNoValue, yh, yc}, {{"clip", 0.5f}}, "lstm");
  auto outs = interp::Run(g, {Tensor::FromVector<float>({1, 1, 1}, {1.0f})});
  ASSERT_TRUE(outs.ok()) << outs.status();
  double c = Sigmoid(0.5) * Tanh(0.5);
  ExpectValues((*outs)[1], {1, 1, 1}, {c});
  ExpectValues((*outs)[0], {1, 1, 1}, {Sigmoid(0) * Tanh(c)});
}

TEST(Lstm, WrongWeightShapeNamesNode) {
  Graph g;
  ValueId x = Input(g, "x", DType::kF32, {2, 1, 1});
  ValueId w = Const(g, "w", {1, 3, 1}, {1, 2, 3});  // needs 4 gate rows
  ValueId r = Const(g, "r", {1, 4, 1}, {1, 2, 3, 4});
  ValueId y = Output(g, "y", DType::kF32, {2, 1, 1, 1});
  g.AddNode("LSTM", {x, w, r}, {y}, {}, "my_lstm");
  auto outs = interp::Run(g, {Tensor::FromVector<float>({2, 1, 1}, {1, 2})});
  ASSERT_FALSE(outs.ok());
  EXPECT_EQ(outs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outs.status().message().find("my_lstm"), std::string::npos)
      << outs.status();
  EXPECT_NE(outs.status().message().find("W has shape [1,3,1]"),
            std::string::npos)
      << outs.status();
}

TEST(Lstm, HiddenSizeMismatchAndBadActivation) {
  Graph g;
  ValueId x = Input(g, "x", DType::kF32, {1, 1, 1});
  ValueId w = Const(g, "w", {1, 4, 1}, {1, 2, 3, 4});
  ValueId r = Const(g, "r", {1, 4, 1}, {1, 2, 3, 4});
  ValueId y = Output(g, "y", DType::kF32, {1, 1, 1, 1});
  g.AddNode("LSTM", {x, w, r}, {y}, {{"hidden_size", int64_t{2}}}, "l1");
  auto outs = interp::Run(g, {Tensor::FromVector<float>({1, 1, 1}, {1})});
  ASSERT_FALSE(outs.ok());
  EXPECT_NE(outs.status().message().find("hidden_size"), std::string::npos);

  g.mutable_nodes()[0].attrs = {
      {"activations", std::vector<std::string>{"Sigmoid", "Gelu", "Tanh"}}};
  outs = interp::Run(g, {Tensor::FromVector<float>({1, 1, 1}, {1})});
  ASSERT_FALSE(outs.ok());
  EXPECT_EQ(outs.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(outs.status().message().find("Gelu"), std::string::npos);
}

// ---- RNN

TEST(Rnn, BidirectionalOutputLayout) {
  Graph g;
  ValueId x = Input(g, "x", DType::kF32, {2, 1, 1});
  ValueId w = Const(g, "w", {2, 1, 1}, {1.0f, 2.0f});  // forward, reverse
  ValueId r = Const(g, "r", {2, 1, 1}, {0.5f, 0.5f});
  ValueId y = Output(g, "y", DType::kF32, {2, 2, 1, 1});
  ValueId yh = Output(g, "yh", DType::kF32, {2, 1, 1});
  g.AddNode("RNN", {x, w, r}, {y, yh}, {{"direction", std::string("bidirectional")}},
            "rnn");
  auto outs = interp::Run(g, {Tensor::FromVector<float>({2, 1, 1}, {1.0f, 2.0f})});
  ASSERT_TRUE(outs.ok()) << outs.status();
  double f0 = Tanh(1.0 * 1.0);
  double f1 = Tanh(1.0 * 2.0 + 0.5 * f0);
  double r1 = Tanh(2.0 * 2.0);            // reverse starts at the last step
  double r0 = Tanh(2.0 * 1.0 + 0.5 * r1);
  // Y is [seq, num_directions, batch, hidden].
  ExpectValues((*outs)[0], {2, 2, 1, 1}, {f0, r0, f1, r1});
  ExpectValues((*outs)[1], {2, 1, 1}, {f1, r0});
}

TEST(Rnn, BidirectionalBatchMajorWithPerDirectionActivations) {
  // Forward uses Relu, reverse Affine(3, 1); layout 1 puts batch first.
  Graph g;
  ValueId x = Input(g, "x", DType::kF32, {1, 2, 1});
  ValueId w = Const(g, "w", {2, 1, 1}, {1, 1});
  ValueId r = Const(g, "r", {2, 1, 1}, {0.5f, 0.5f});
  ValueId y = Output(g, "y", DType::kF32, {1, 2, 2, 1});
  ValueId yh = Output(g, "yh", DType::kF32, {1, 2, 1});
  g.AddNode("RNN", {x, w, r}, {y, yh},
            {{"direction", std::string("bidirectional")},
             {"layout", int64_t{1}},
             {"activations", std::vector<std::string>{"Relu", "Affine"}},
             {"activation_alpha", std::vector<float>{3.0f}},
             {"activation_beta", std::vector<float>{1.0f}}},
            "rnn");
  auto outs = interp::Run(g, {Tensor::FromVector<float>({1, 2, 1}, {-1, 2})});
  ASSERT_TRUE(outs.ok()) << outs.status();
  // Forward: relu(-1) = 0, relu(2 + 0.5 * 0) = 2.
  // Reverse: 3 * 2 + 1 = 7 at t = 1, then 3 * (-1 + 0.5 * 7) + 1 = 8.5.
  // Y is [batch, seq, dirs, hidden]; Y_h is [batch, dirs, hidden].
  ExpectValues((*outs)[0], {1, 2, 2, 1}, {0, 8.5, 2, 7});
  ExpectValues((*outs)[1], {1, 2, 1}, {2, 8.5});
}

TEST(Rnn, SequenceLensForwardAndReverse) {
  // Affine(1, 0) with W = R = 1 makes h a running sum of x.
  for (std::string direction : {"forward", "reverse"}) {
    Graph g;
    ValueId x = Input(g, "x", DType::kF32, {3, 2, 1});
    ValueId w = Const(g, "w", {1, 1, 1}, {1});
    ValueId r = Const(g, "r", {1, 1, 1}, {1});
    ValueId lens = g.AddValue("lens", DType::kI32, {2});
    g.SetConstant(lens, Tensor::FromVector<int32_t>({2}, {3, 1}));
    ValueId y = Output(g, "y", DType::kF32, {3, 1, 2, 1});
    ValueId yh = Output(g, "yh", DType::kF32, {1, 2, 1});
    g.AddNode("RNN", {x, w, r, kNoValue, lens}, {y, yh},
              {{"direction", direction},
               {"activations", std::vector<std::string>{"Affine"}},
               {"activation_alpha", std::vector<float>{1.0f}},
               {"activation_beta", std::vector<float>{0.0f}}},
              "rnn");
    // x[t][b]: batch 0 is 1, 2, 3; batch 1 is 10, 20, 30.
    auto outs = interp::Run(g, {Tensor::FromVector<float>({3, 2, 1},
                                                  {1, 10, 2, 20, 3, 30})});
    ASSERT_TRUE(outs.ok()) << outs.status();
    if (direction == "forward") {
      ExpectValues((*outs)[0], {3, 1, 2, 1}, {1, 10, 3, 0, 6, 0});
    } else {
      ExpectValues((*outs)[0], {3, 1, 2, 1}, {6, 10, 5, 0, 3, 0});
    }
    ExpectValues((*outs)[1], {1, 2, 1}, {6, 10});
  }
}

TEST(Rnn, BatchMajorLayoutWithAffineInF64) {
  // layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden],
  // Y_h [batch, dirs, hidden]. h = 2 * (x + 0.5 h) + 0.5.
  Graph g;
  ValueId x = Input(g, "x", DType::kF64, {2, 2, 1});
  ValueId w = g.AddValue("w", DType::kF64, {1, 1, 1});
  g.SetConstant(w, Tensor::FromVector<double>({1, 1, 1}, {1.0}));
  ValueId r = g.AddValue("r", DType::kF64, {1, 1, 1});
  g.SetConstant(r, Tensor::FromVector<double>({1, 1, 1}, {0.5}));
  ValueId h0 = g.AddValue("h0", DType::kF64, {2, 1, 1});
  g.SetConstant(h0, Tensor::FromVector<double>({2, 1, 1}, {1.0, -1.0}));
  ValueId y = Output(g, "y", DType::kF64, {2, 2, 1, 1});
  ValueId yh = Output(g, "yh", DType::kF64, {2, 1, 1});
  g.AddNode("RNN", {x, w, r, kNoValue, kNoValue, h0}, {y, yh},
            {{"layout", int64_t{1}},
             {"activations", std::vector<std::string>{"Affine"}},
             {"activation_alpha", std::vector<float>{2.0f}},
             {"activation_beta", std::vector<float>{0.5f}}},
            "rnn");
  // Batch 0: x = 1, 2 with h0 = 1. Batch 1: x = 3, 4 with h0 = -1.
  auto outs = interp::Run(g, {Tensor::FromVector<double>({2, 2, 1}, {1, 2, 3, 4})});
  ASSERT_TRUE(outs.ok()) << outs.status();
  // b0: 2*(1 + 0.5) + 0.5 = 3.5, then 2*(2 + 1.75) + 0.5 = 8.
  // b1: 2*(3 - 0.5) + 0.5 = 5.5, then 2*(4 + 2.75) + 0.5 = 14.
  EXPECT_EQ((*outs)[0].dtype(), DType::kF64);
  ExpectValues((*outs)[0], {2, 2, 1, 1}, {3.5, 8, 5.5, 14}, 1e-12);
  ExpectValues((*outs)[1], {2, 1, 1}, {8, 14}, 1e-12);
}

// ---- GRU

TEST(Gru, LinearBeforeResetZeroAndOne) {
  for (int64_t lbr : {0, 1}) {
    Graph g;
    ValueId x = Input(g, "x", DType::kF32, {2, 1, 1});
    // Gate rows in ONNX order z, r, h.
    ValueId w = Const(g, "w", {1, 3, 1}, {0.1f, 0.2f, 0.3f});
    ValueId r = Const(g, "r", {1, 3, 1}, {0.4f, 0.5f, 0.6f});
    ValueId b = Const(g, "b", {1, 6}, {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f});
    ValueId h0 = Const(g, "h0", {1, 1, 1}, {0.5f});
    ValueId y = Output(g, "y", DType::kF32, {2, 1, 1, 1});
    ValueId yh = Output(g, "yh", DType::kF32, {1, 1, 1});
    g.AddNode("GRU", {x, w, r, b, kNoValue, h0}, {y, yh},
              {{"linear_before_reset", lbr}, {"hidden_size", int64_t{1}}},
              "gru");
    auto outs = interp::Run(g, {Tensor::FromVector<float>({2, 1, 1}, {1.0f, -2.0f})});
    ASSERT_TRUE(outs.ok()) << outs.status();
    double h = 0.5;
    std::vector<double> ys;
    for (double xt : {1.0, -2.0}) {
      double z = Sigmoid(0.1 * xt + 0.4 * h + 0.01 + 0.04);
      double rg = Sigmoid(0.2 * xt + 0.5 * h + 0.02 + 0.05);
      double hh = lbr == 0 ? Tanh(0.3 * xt + 0.6 * (rg * h) + 0.06 + 0.03)
                           : Tanh(0.3 * xt + rg * (0.6 * h + 0.06) + 0.03);
      h = (1 - z) * hh + z * h;
      ys.push_back(h);
    }
    ExpectValues((*outs)[0], {2, 1, 1, 1}, ys);
    ExpectValues((*outs)[1], {1, 1, 1}, {h});
  }
}

TEST(Gru, WrongRecurrenceShape) {
  Graph g;
  ValueId x = Input(g, "x", DType::kF32, {1, 1, 1});
  ValueId w = Const(g, "w", {1, 3, 1}, {1, 2, 3});
  ValueId r = Const(g, "r", {1, 4, 1}, {1, 2, 3, 4});
  ValueId y = Output(g, "y", DType::kF32, {1, 1, 1, 1});
  g.AddNode("GRU", {x, w, r}, {y}, {}, "gru7");
  auto outs = interp::Run(g, {Tensor::FromVector<float>({1, 1, 1}, {1})});
  ASSERT_FALSE(outs.ok());
  EXPECT_NE(outs.status().message().find("gru7"), std::string::npos);
  EXPECT_NE(outs.status().message().find("R has shape"), std::string::npos)
      << outs.status();
}

// ---- If

// A branch that returns the enclosing graph's value `outer` through a capture.
std::shared_ptr<const Graph> CaptureBranch(const std::string& outer) {
  auto g = std::make_shared<Graph>(outer + "_branch");
  ValueId v = g->AddValue(outer + "_inner", DType::kF32, {2});
  g->AddCapture(v, outer);
  g->AddOutput(v);
  return g;
}

Graph IfGraph(bool with_else) {
  Graph g;
  ValueId cond = Input(g, "cond", DType::kBool, {});
  Input(g, "a", DType::kF32, {2});
  Input(g, "b", DType::kF32, {2});
  ValueId out = Output(g, "out", DType::kF32, {2});
  AttributeMap attrs = {{"then_branch", CaptureBranch("a")}};
  if (with_else) attrs["else_branch"] = CaptureBranch("b");
  g.AddNode("If", {cond}, {out}, attrs, "choose");
  return g;
}

TEST(If, TakesEachBranchWithCapture) {
  Graph g = IfGraph(true);
  Tensor a = Tensor::FromVector<float>({2}, {1, 2});
  Tensor b = Tensor::FromVector<float>({2}, {3, 4});
  auto then_out = interp::Run(g, {Tensor::Scalar<bool>(true), a, b});
  ASSERT_TRUE(then_out.ok()) << then_out.status();
  ExpectValues((*then_out)[0], {2}, {1, 2});
  auto else_out = interp::Run(g, {Tensor::Scalar<bool>(false), a, b});
  ASSERT_TRUE(else_out.ok()) << else_out.status();
  ExpectValues((*else_out)[0], {2}, {3, 4});
}

TEST(If, OneElementCondAndConstantBranch) {
  Graph g;
  ValueId cond = Input(g, "cond", DType::kBool, {1});
  auto then_g = std::make_shared<Graph>("then");
  ValueId k = then_g->AddValue("k", DType::kI64, {});
  then_g->SetConstant(k, Tensor::Scalar<int64_t>(42));
  then_g->AddOutput(k);
  ValueId out = Output(g, "out", DType::kI64, {});
  g.AddNode("If", {cond}, {out},
            {{"then_branch", std::shared_ptr<const Graph>(then_g)},
             {"else_branch", std::shared_ptr<const Graph>(then_g)}});
  auto outs = interp::Run(g, {Tensor::FromVector<bool>({1}, {true})});
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_EQ((*outs)[0].GetAsInt64(0), 42);
}

TEST(If, MissingBranchAndNonScalarCond) {
  Graph g = IfGraph(false);
  Tensor a = Tensor::FromVector<float>({2}, {1, 2});
  auto missing = interp::Run(g, {Tensor::Scalar<bool>(false), a, a});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("choose"), std::string::npos);
  EXPECT_NE(missing.status().message().find("else_branch"), std::string::npos)
      << missing.status();

  Graph g2;
  ValueId cond = Input(g2, "cond", DType::kBool, {2});
  Input(g2, "a", DType::kF32, {2});
  ValueId out = Output(g2, "out", DType::kF32, {2});
  g2.AddNode("If", {cond}, {out},
             {{"then_branch", CaptureBranch("a")},
              {"else_branch", CaptureBranch("a")}},
             "choose2");
  auto bad = interp::Run(g2, {Tensor::FromVector<bool>({2}, {true, false}), a});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("choose2"), std::string::npos);
  EXPECT_NE(bad.status().message().find("cond"), std::string::npos)
      << bad.status();
}

TEST(If, BranchOutputCountAndDTypeMustMatch) {
  Graph g;
  ValueId cond = Input(g, "cond", DType::kBool, {});
  Input(g, "a", DType::kF32, {2});
  ValueId o1 = Output(g, "o1", DType::kF32, {2});
  ValueId o2 = Output(g, "o2", DType::kF32, {2});
  g.AddNode("If", {cond}, {o1, o2},
            {{"then_branch", CaptureBranch("a")},
             {"else_branch", CaptureBranch("a")}},
            "two_outs");
  Tensor a = Tensor::FromVector<float>({2}, {1, 2});
  auto outs = interp::Run(g, {Tensor::Scalar<bool>(true), a});
  ASSERT_FALSE(outs.ok());
  EXPECT_NE(outs.status().message().find("two_outs"), std::string::npos);

  Graph g2;
  ValueId cond2 = Input(g2, "cond", DType::kBool, {});
  Input(g2, "a", DType::kF32, {2});
  ValueId wrong = Output(g2, "wrong", DType::kI64, {2});
  g2.AddNode("If", {cond2}, {wrong},
             {{"then_branch", CaptureBranch("a")},
              {"else_branch", CaptureBranch("a")}},
             "typed");
  outs = interp::Run(g2, {Tensor::Scalar<bool>(true), a});
  ASSERT_FALSE(outs.ok());
  EXPECT_EQ(outs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outs.status().message().find("typed"), std::string::npos);
}

// ---- Loop

// Body (iter, cond_in, x_in) -> (cond_out, x_out, scan) where x_out is the
// captured `outer` value when given, else x_in; cond_out is the captured
// bool `stop_name` when given, else cond_in.
std::shared_ptr<const Graph> PassBody(const std::string& cond_capture) {
  auto body = std::make_shared<Graph>("body");
  ValueId iter = body->AddValue("iter", DType::kI64, {});
  ValueId cond_in = body->AddValue("cond_in", DType::kBool, {});
  ValueId x_in = body->AddValue("x_in", DType::kF32, {2});
  body->AddInput(iter);
  body->AddInput(cond_in);
  body->AddInput(x_in);
  ValueId cond_out = cond_in;
  if (!cond_capture.empty()) {
    cond_out = body->AddValue("cond_cap", DType::kBool, {});
    body->AddCapture(cond_out, cond_capture);
  }
  body->AddOutput(cond_out);
  body->AddOutput(x_in);
  body->AddOutput(iter);  // scan output: the iteration numbers
  return body;
}

TEST(Loop, TripCountScansIterationNumbers) {
  Graph g;
  ValueId m = Input(g, "m", DType::kI64, {});
  ValueId x = Input(g, "x", DType::kF32, {2});
  ValueId x_final = Output(g, "x_final", DType::kF32, {2});
  ValueId iters = Output(g, "iters", DType::kI64, {ir::kDynamicDim});
  g.AddNode("Loop", {m, kNoValue, x}, {x_final, iters},
            {{"body", PassBody("")}}, "loop");
  Tensor xv = Tensor::FromVector<float>({2}, {5, 6});
  auto outs = interp::Run(g, {Tensor::Scalar<int64_t>(4), xv});
  ASSERT_TRUE(outs.ok()) << outs.status();
  ExpectValues((*outs)[0], {2}, {5, 6});
  ExpectValues((*outs)[1], {4}, {0, 1, 2, 3});

  auto none = interp::Run(g, {Tensor::Scalar<int64_t>(0), xv});
  ASSERT_TRUE(none.ok()) << none.status();
  ExpectValues((*none)[0], {2}, {5, 6});
  EXPECT_EQ((*none)[1].shape(), (Shape{0}));
  EXPECT_EQ((*none)[1].dtype(), DType::kI64);
}

TEST(Loop, CondFromCaptureStopsAfterOneIteration) {
  Graph g;
  ValueId cond = Input(g, "cond", DType::kBool, {});
  Input(g, "stop", DType::kBool, {});
  ValueId x = Input(g, "x", DType::kF32, {2});
  ValueId x_final = Output(g, "x_final", DType::kF32, {2});
  ValueId iters = Output(g, "iters", DType::kI64, {-1});
  g.AddNode("Loop", {kNoValue, cond, x}, {x_final, iters},
            {{"body", PassBody("stop")}}, "loop");
  Tensor xv = Tensor::FromVector<float>({2}, {5, 6});
  auto once = interp::Run(g, {Tensor::Scalar<bool>(true), Tensor::Scalar<bool>(false),
                      xv});
  ASSERT_TRUE(once.ok()) << once.status();
  ExpectValues((*once)[1], {1}, {0});

  auto never = interp::Run(g, {Tensor::Scalar<bool>(false), Tensor::Scalar<bool>(false),
                       xv});
  ASSERT_TRUE(never.ok()) << never.status();
  ExpectValues((*never)[0], {2}, {5, 6});
  EXPECT_EQ((*never)[1].shape(), (Shape{0}));
}

TEST(Loop, SumsCounterWithAdd) {
  // sum_out = sum_in + iter over M = 5 iterations: 0+1+2+3+4 = 10, and the
  // running sums as the scan output.
  auto body = std::make_shared<Graph>("body");
  ValueId iter = body->AddValue("iter", DType::kI64, {});
  ValueId cond_in = body->AddValue("cond_in", DType::kBool, {});
  ValueId sum_in = body->AddValue("sum_in", DType::kI64, {});
  body->AddInput(iter);
  body->AddInput(cond_in);
  body->AddInput(sum_in);
  ValueId sum_out = body->AddValue("sum_out", DType::kI64, {});
  body->AddNode("Add", {sum_in, iter}, {sum_out});
  body->AddOutput(cond_in);
  body->AddOutput(sum_out);
  body->AddOutput(sum_out);

  Graph g;
  ValueId m = Input(g, "m", DType::kI64, {});
  ValueId cond = Input(g, "cond", DType::kBool, {});
  ValueId s0 = Input(g, "s0", DType::kI64, {});
  ValueId total = Output(g, "total", DType::kI64, {});
  ValueId sums = Output(g, "sums", DType::kI64, {5});
  g.AddNode("Loop", {m, cond, s0}, {total, sums},
            {{"body", std::shared_ptr<const Graph>(body)}}, "counter");
  auto outs = interp::Run(g, {Tensor::Scalar<int64_t>(5), Tensor::Scalar<bool>(true),
                      Tensor::Scalar<int64_t>(0)});
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_EQ((*outs)[0].GetAsInt64(0), 10);
  EXPECT_EQ((*outs)[1].ToInt64Vector(), (std::vector<int64_t>{0, 1, 3, 6, 10}));
}

TEST(Loop, NestedIfCapturesFromTwoScopesUp) {
  // The body holds an If whose branches capture the top graph's `a` and `b`;
  // the If's cond is the body's own cond input.
  auto body = std::make_shared<Graph>("body");
  ValueId iter = body->AddValue("iter", DType::kI64, {});
  ValueId cond_in = body->AddValue("cond_in", DType::kBool, {});
  ValueId x_in = body->AddValue("x_in", DType::kF32, {2});
  body->AddInput(iter);
  body->AddInput(cond_in);
  body->AddInput(x_in);
  ValueId picked = body->AddValue("picked", DType::kF32, {2});
  body->AddNode("If", {cond_in}, {picked},
                {{"then_branch", CaptureBranch("a")},
                 {"else_branch", CaptureBranch("b")}},
                "inner_if");
  body->AddOutput(cond_in);
  body->AddOutput(picked);

  Graph g;
  ValueId m = Input(g, "m", DType::kI64, {});
  Input(g, "a", DType::kF32, {2});
  Input(g, "b", DType::kF32, {2});
  ValueId x = Input(g, "x", DType::kF32, {2});
  ValueId out = Output(g, "out", DType::kF32, {2});
  g.AddNode("Loop", {m, kNoValue, x}, {out},
            {{"body", std::shared_ptr<const Graph>(body)}}, "loop");
  auto outs = interp::Run(g, {Tensor::Scalar<int64_t>(2),
                      Tensor::FromVector<float>({2}, {1, 2}),
                      Tensor::FromVector<float>({2}, {3, 4}),
                      Tensor::FromVector<float>({2}, {0, 0})});
  ASSERT_TRUE(outs.ok()) << outs.status();
  ExpectValues((*outs)[0], {2}, {1, 2});
}

TEST(Loop, ErrorsNameTheNode) {
  // Body missing its loop-carried input.
  auto body = std::make_shared<Graph>("body");
  ValueId iter = body->AddValue("iter", DType::kI64, {});
  ValueId cond_in = body->AddValue("cond_in", DType::kBool, {});
  body->AddInput(iter);
  body->AddInput(cond_in);
  body->AddOutput(cond_in);
  Graph g;
  ValueId m = Input(g, "m", DType::kI64, {});
  ValueId x = Input(g, "x", DType::kF32, {2});
  ValueId out = Output(g, "out", DType::kF32, {2});
  g.AddNode("Loop", {m, kNoValue, x}, {out},
            {{"body", std::shared_ptr<const Graph>(body)}}, "bad_loop");
  Tensor xv = Tensor::FromVector<float>({2}, {1, 2});
  auto outs = interp::Run(g, {Tensor::Scalar<int64_t>(1), xv});
  ASSERT_FALSE(outs.ok());
  EXPECT_EQ(outs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outs.status().message().find("bad_loop"), std::string::npos)
      << outs.status();

  // No body at all.
  g.mutable_nodes()[0].attrs.clear();
  outs = interp::Run(g, {Tensor::Scalar<int64_t>(1), xv});
  ASSERT_FALSE(outs.ok());
  EXPECT_NE(outs.status().message().find("body"), std::string::npos);

  // Non-scalar trip count.
  Graph g2;
  ValueId m2 = Input(g2, "m", DType::kI64, {2});
  ValueId x2 = Input(g2, "x", DType::kF32, {2});
  ValueId x_final = Output(g2, "x_final", DType::kF32, {2});
  g2.AddNode("Loop", {m2, kNoValue, x2}, {x_final}, {{"body", PassBody("")}},
             "loop_m");
  outs = interp::Run(g2, {Tensor::FromVector<int64_t>({2}, {1, 2}), xv});
  ASSERT_FALSE(outs.ok());
  EXPECT_NE(outs.status().message().find("loop_m"), std::string::npos);
}

}  // namespace
}  // namespace kiln::interp
