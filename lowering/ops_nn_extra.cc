// Lowerings of LRN (a windowed sum of squares over channels), Einsum (any
// equation over static shapes: one reduction kernel whose body multiplies
// the operands' loads), Trilu and EyeLike (index masks),
// MeanVarianceNormalization (Welford statistics).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "ir/status_macros.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

absl::Status LowerLrn(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
    return L.Error("needs a float input of rank >= 2");
  }
  KILN_ASSIGN_OR_RETURN(int64_t size, n.Attr<int64_t>("size"));
  KILN_ASSIGN_OR_RETURN(float alpha, n.AttrOr<float>("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(float beta, n.AttrOr<float>("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(float bias, n.AttrOr<float>("bias", 1.0f));
  if (size <= 0) return L.Error("size must be positive, got ", size);
  const int64_t channels = x.shape[1];
  const int64_t before = (size - 1) / 2;
  const DType dt = x.dtype;
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape, {size});
  const Coords it = k->IterCoords();
  const IndexExpr ch = k->Simplify(it[1] - before + k->r(0));
  Coords window = it;
  window[1] = ir::loop::Min(ir::loop::Max(ch, 0), std::max<int64_t>(channels - 1, 0));
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, window));
  const int32_t c = k->b().Index(ch);
  const int32_t inside = k->Bin(
      OpCode::kAnd, k->Bin(OpCode::kGe, c, k->Const(DType::kI64, 0)),
      k->Bin(OpCode::kLt, c, k->Const(DType::kI64, static_cast<double>(channels))));
  const int32_t sq = k->b().Reduce(
      ReduceKind::kSum,
      k->Sel(inside, k->Bin(OpCode::kMul, v, v), k->Const(dt, 0)));
  // bias + alpha / size * sum, with alpha / size in float as ONNX writes it.
  const int32_t base = k->Bin(
      OpCode::kAdd, k->Const(dt, bias),
      k->Bin(OpCode::kMul, k->Const(dt, alpha / static_cast<float>(size)), sq));
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  const int32_t y =
      k->Bin(OpCode::kDiv, xi, k->Bin(OpCode::kPow, base, k->Const(dt, beta)));
  k->Store(buffer, x.shape, it, y);
  return absl::OkStatus();
}

// Einsum labels: letters 0..51, the dims "..." stands for 52 onwards.
constexpr int kNumLetters = 52;

struct EinsumTerm {
  std::vector<int> labels;  // -1 marks where "..." stands
  bool has_ellipsis = false;
};

absl::StatusOr<EinsumTerm> ParseTerm(Lowerer& L, absl::string_view s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch >= 'A' && ch <= 'Z') {
      t.labels.push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      t.labels.push_back(26 + ch - 'a');
    } else if (ch == '.' && s.substr(i, 3) == "..." && !t.has_ellipsis) {
      t.has_ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else {
      return L.Error("bad einsum term (character ", static_cast<int>(ch), ")");
    }
  }
  return t;
}

// "..." expanded to `count` labels, right-aligned to `total`.
std::vector<int> ExpandEllipsis(const EinsumTerm& t, int count, int total) {
  std::vector<int> out;
  for (int l : t.labels) {
    if (l >= 0) {
      out.push_back(l);
      continue;
    }
    for (int j = 0; j < count; ++j) out.push_back(kNumLetters + total - count + j);
  }
  return out;
}

absl::Status LowerEinsum(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(std::string eq, n.Attr<std::string>("equation"));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  std::vector<EinsumTerm> terms;
  for (absl::string_view part : absl::StrSplit(eq.substr(0, arrow), ',')) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseTerm(L, part));
    terms.push_back(std::move(t));
  }
  if (n.inputs.empty()) return L.Error("needs at least one input");
  if (terms.size() != n.inputs.size()) {
    return L.Error("equation has ", terms.size(), " operands, node has ",
                   n.inputs.size(), " inputs");
  }
  std::vector<Operand> in;
  int ellipsis_rank = 0;
  std::vector<int> ellipsis_count(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(static_cast<int>(i)));
    if (!in.empty() && op.dtype != in.front().dtype) {
      return L.Error("operands differ in dtype");
    }
    if (op.dtype == DType::kBool) return L.Error("does not accept bool inputs");
    const int letters = static_cast<int>(terms[i].labels.size()) -
                        (terms[i].has_ellipsis ? 1 : 0);
    const int extra = static_cast<int>(op.shape.size()) - letters;
    if (extra < 0 || (extra > 0 && !terms[i].has_ellipsis)) {
      return L.Error("operand ", i, " ", ir::ShapeToString(op.shape),
                     " does not match its einsum term");
    }
    ellipsis_count[i] = extra;
    ellipsis_rank = std::max(ellipsis_rank, extra);
    in.push_back(std::move(op));
  }
  const int num_labels = kNumLetters + ellipsis_rank;
  std::vector<int64_t> size(num_labels, -1);
  std::vector<int> occurrences(num_labels, 0);
  std::vector<std::vector<int>> op_labels(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    op_labels[i] = ExpandEllipsis(terms[i], ellipsis_count[i], ellipsis_rank);
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      const int l = op_labels[i][d];
      const int64_t dim = in[i].shape[d];
      ++occurrences[l];
      if (size[l] == -1 || (l >= kNumLetters && size[l] == 1)) {
        size[l] = dim;
      } else if (dim != size[l] && !(l >= kNumLetters && dim == 1)) {
        return L.Error("einsum label sizes disagree (", size[l], " vs ", dim,
                       ") in operand ", i);
      }
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseTerm(L, eq.substr(arrow + 2)));
    out_labels = ExpandEllipsis(t, ellipsis_rank, ellipsis_rank);
    std::vector<bool> seen(num_labels, false);
    for (int l : out_labels) {
      if (size[l] == -1 || seen[l]) return L.Error("bad einsum output term");
      seen[l] = true;
    }
  } else {
    for (int j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kNumLetters + j);
    for (int l = 0; l < kNumLetters; ++l) {
      if (occurrences[l] == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> sum_labels;
  for (int l = 0; l < num_labels; ++l) {
    if (size[l] != -1 &&
        std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) {
      sum_labels.push_back(l);
    }
  }
  Shape out_dims;
  std::vector<int64_t> sum_dims;
  for (int l : out_labels) out_dims.push_back(size[l]);
  for (int l : sum_labels) sum_dims.push_back(size[l]);
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != out_dims || out.dtype != in[0].dtype) {
    return L.Error("output ", ir::DTypeName(out.dtype), ir::ShapeToString(out.shape),
                   " differs from the equation's ", ir::DTypeName(in[0].dtype),
                   ir::ShapeToString(out_dims));
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out_dims, sum_dims);
  std::vector<IndexExpr> label_var(num_labels);
  for (size_t j = 0; j < out_labels.size(); ++j) label_var[out_labels[j]] = k->i(j);
  for (size_t j = 0; j < sum_labels.size(); ++j) label_var[sum_labels[j]] = k->r(j);
  int32_t prod = -1;
  for (size_t i = 0; i < in.size(); ++i) {
    Coords c;
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      c.push_back(in[i].shape[d] == 1 ? Const(0) : label_var[op_labels[i][d]]);
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(in[i], c));
    prod = prod < 0 ? v : k->Bin(OpCode::kMul, prod, v);
  }
  if (!sum_dims.empty()) prod = k->b().Reduce(ReduceKind::kSum, prod);
  k->Store(buffer, out_dims, k->IterCoords(), prod);
  return absl::OkStatus();
}

absl::Status LowerTrilu(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t upper, n.AttrOr<int64_t>("upper", 1));
  const size_t rank = x.shape.size();
  if (rank < 2) return L.Error("input must have rank >= 2");
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  const int32_t diff = k->b().Index(k->Simplify(it[rank - 1] - it[rank - 2]));
  int32_t kv = k->Const(DType::kI64, 0);
  if (L.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(Operand k_op, L.Input(1));
    if (ir::NumElements(k_op.shape) != 1 || !ir::IsInteger(k_op.dtype)) {
      return L.Error("k must be one integer");
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(k_op, Coords(k_op.shape.size(), Const(0))));
    kv = k->Cast(v, DType::kI64);
  }
  const int32_t keep = k->Bin(upper != 0 ? OpCode::kGe : OpCode::kLe, diff, kv);
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, it));
  k->Store(buffer, x.shape, it, k->Sel(keep, v, k->Const(x.dtype, 0)));
  return absl::OkStatus();
}

absl::Status LowerEyeLike(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t diag, n.AttrOr<int64_t>("k", 0));
  if (x.shape.size() != 2) return L.Error("input must be 2-D");
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != x.shape) return L.Error("output shape differs from the input's");
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  const Coords it = k->IterCoords();
  const int32_t on = k->Bin(OpCode::kEq, k->b().Index(k->Simplify(it[1] - it[0])),
                            k->Const(DType::kI64, static_cast<double>(diag)));
  int32_t y = on;
  if (out.dtype != DType::kBool) {
    y = k->Sel(on, k->Const(out.dtype, 1), k->Const(out.dtype, 0));
  }
  k->Store(buffer, out.shape, it, y);
  return absl::OkStatus();
}

absl::Status LowerMvn(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype)) return L.Error("needs a float input");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        n.AttrOr<std::vector<int64_t>>("axes", {0, 2, 3}));
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes) {
    std::optional<int64_t> norm = NormalizeAxis(a, rank);
    if (!norm.has_value() || reduced[*norm]) {
      return L.Error("axis ", a, " out of range or repeated");
    }
    reduced[*norm] = true;
  }
  std::vector<int64_t> red;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) red.push_back(x.shape[d]);
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape, red);
  const Coords it = k->IterCoords();
  Coords rc = it;
  int next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) rc[d] = k->r(next++);
  }
  KILN_ASSIGN_OR_RETURN(int32_t v1, k->Load(x, rc));
  const int32_t mean = k->b().Reduce(ReduceKind::kWelfordMean, v1);
  KILN_ASSIGN_OR_RETURN(int32_t v2, k->Load(x, rc));
  const int32_t var = k->b().Reduce(ReduceKind::kWelfordVar, v2);
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  const int32_t denom =
      k->Bin(OpCode::kAdd, k->Un(OpCode::kSqrt, var), k->Const(x.dtype, 1e-9));
  k->Store(buffer, x.shape, it,
           k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, xi, mean), denom));
  return absl::OkStatus();
}

}  // namespace

void AddNnExtraLowerings(LowerTable& t) {
  t["LRN"] = LowerLrn;
  t["Einsum"] = LowerEinsum;
  t["Trilu"] = LowerTrilu;
  t["EyeLike"] = LowerEyeLike;
  t["MeanVarianceNormalization"] = LowerMvn;
}

}  // namespace kiln::lowering::internal
