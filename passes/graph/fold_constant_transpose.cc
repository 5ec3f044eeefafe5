// Pass fold-constant-transpose.
#include "passes/graph/fold_constant_transpose.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

// The node's perm (default: reversed axes), InvalidArgument unless it is a
// permutation of [0, rank).
absl::StatusOr<std::vector<int64_t>> ReadPerm(const ir::Node& n, int64_t rank) {
  std::vector<int64_t> perm;
  if (n.HasAttr("perm")) {
    absl::StatusOr<std::vector<int64_t>> attr = n.Attr<std::vector<int64_t>>("perm");
    if (!attr.ok()) return attr.status();
    perm = *std::move(attr);
  } else {
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (size_t d = 0; valid && d < perm.size(); ++d) {
    valid = perm[d] >= 0 && perm[d] < rank && !seen[perm[d]];
    if (valid) seen[perm[d]] = true;
  }
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat(n.Describe(), ": perm [", absl::StrJoin(perm, ", "),
                     "] is not a permutation of the ", rank, " input axes"));
  }
  return perm;
}

ir::Tensor Permute(const ir::Tensor& in, const std::vector<int64_t>& perm) {
  const int64_t rank = in.rank();
  ir::Shape out_shape(rank);
  for (int64_t d = 0; d < rank; ++d) out_shape[d] = in.dim(perm[d]);
  ir::Tensor out(in.dtype(), out_shape);
  const std::vector<int64_t> in_strides = ir::RowMajorStrides(in.shape());
  const size_t elem = ir::DTypeSize(in.dtype());
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  std::vector<int64_t> index(rank, 0);
  for (int64_t o = 0; o < out.num_elements(); ++o) {
    int64_t i = 0;
    for (int64_t d = 0; d < rank; ++d) i += index[d] * in_strides[perm[d]];
    std::memcpy(dst + o * elem, src + i * elem, elem);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < out_shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<bool> FoldConstantTranspose::Run(ir::Graph* graph) {
  const absl::flat_hash_set<std::string> captured = CapturedNames(*graph);
  std::vector<bool> remove(graph->nodes().size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph->nodes().size(); ++i) {
    const ir::Node& n = graph->nodes()[i];
    if (!n.domain.empty() || n.op != "Transpose" || n.inputs.size() != 1 ||
        n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) {
      continue;
    }
    const ir::Tensor* in = graph->constant(n.inputs[0]);
    const ir::ValueId out = n.outputs[0];
    if (in == nullptr || IsGraphOutput(*graph, out) ||
        captured.contains(graph->value(out).name)) {
      continue;
    }
    absl::StatusOr<std::vector<int64_t>> perm = ReadPerm(n, in->rank());
    if (!perm.ok()) return perm.status();
    ir::Tensor folded = Permute(*in, *perm);
    ir::Value& v = graph->mutable_value(out);
    if ((v.dtype != ir::DType::kInvalid && v.dtype != folded.dtype()) ||
        (v.shape_known && v.shape != folded.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          n.Describe(), ": output is declared ", ir::DTypeName(v.dtype),
          v.shape_known ? ir::ShapeToString(v.shape) : "[*]", " but the transposed ",
          "constant is ", folded.TypeString()));
    }
    v.dtype = folded.dtype();
    v.shape = folded.shape();
    v.shape_known = true;
    graph->SetConstant(out, std::move(folded));
    remove[i] = true;
    changed = true;
  }
  if (!changed) return false;
  EraseNodes(graph, remove);
  return true;
}

}  // namespace kiln::passes
