// File: interp/controlflow.cc — reference kernels of ONNX's controlflow family
// (onnx/defs/controlflow): If, Loop and Scan, running their subgraphs in the
// scope of the node.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;
using Outputs = std::vector<Tensor>;

absl::StatusOr<const ir::Graph*> SubgraphAttr(const OpContext& ctx,
                                              const char* key) {
  if (!ctx.node.HasAttr(key)) {
    return ctx.Error("missing subgraph attribute '", key, "'");
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> g,
                        ctx.node.Attr<std::shared_ptr<const ir::Graph>>(key));
  if (g == nullptr) return ctx.Error("subgraph attribute '", key, "' is empty");
  return g.get();
}

// A bool tensor with exactly one element, read as a scalar.
absl::StatusOr<bool> ReadBoolScalar(const OpContext& ctx, const Tensor& t,
                                    const char* what) {
  if (t.dtype() != DType::kBool || t.num_elements() != 1) {
    return ctx.Error(what, " must be a single bool, got ", t.TypeString());
  }
  return t.data<bool>()[0];
}

absl::StatusOr<std::vector<Tensor>> RunSubgraph(
    const OpContext& ctx, const char* key, const ir::Graph& g,
    absl::Span<const Tensor> inputs) {
  absl::StatusOr<std::vector<Tensor>> outs = ctx.run_subgraph(g, inputs);
  if (!outs.ok()) {
    return absl::Status(outs.status().code(),
                        absl::StrCat(ctx.node.Describe(), ": in ", key, ": ",
                                     outs.status().message()));
  }
  return outs;
}

absl::Status CheckOutputDType(const OpContext& ctx, int i, const Tensor& t,
                              const char* key) {
  const DType want = DeclaredDType(ctx, i, DType::kInvalid);
  if (want != DType::kInvalid && want != t.dtype()) {
    return ctx.Error(key, " produced ", t.TypeString(), " for output ", i,
                     ", which is declared ", ir::DTypeName(want));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> If(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* cond_t, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(bool cond, ReadBoolScalar(ctx, *cond_t, "cond"));
  const char* key = cond ? "then_branch" : "else_branch";
  KILN_ASSIGN_OR_RETURN(const ir::Graph* branch, SubgraphAttr(ctx, key));
  if (branch->outputs().size() != static_cast<size_t>(ctx.num_outputs())) {
    return ctx.Error(key, " has ", branch->outputs().size(),
                     " outputs, the node has ", ctx.num_outputs());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                        RunSubgraph(ctx, key, *branch, {}));
  for (int i = 0; i < static_cast<int>(outs.size()); ++i) {
    KILN_RETURN_IF_ERROR(CheckOutputDType(ctx, i, outs[i], key));
  }
  return outs;
}

// Stacks equally shaped tensors along a new leading axis.
absl::StatusOr<Tensor> Stack(const OpContext& ctx, int index,
                             const std::vector<Tensor>& parts) {
  const Tensor& first = parts.front();
  Shape shape = first.shape();
  shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  Tensor out(first.dtype(), shape);
  uint8_t* dst = static_cast<uint8_t*>(out.raw_data());
  for (const Tensor& part : parts) {
    if (part.dtype() != first.dtype() || part.shape() != first.shape()) {
      return ctx.Error("scan output ", index, " changes from ",
                       first.TypeString(), " to ", part.TypeString(),
                       " across iterations");
    }
    if (part.byte_size() > 0) {
      std::memcpy(dst, part.raw_data(), part.byte_size());
    }
    dst += part.byte_size();
  }
  return out;
}

// A Loop without a trip count whose condition never turns false would run
// forever; the reference gives up after this many iterations.
constexpr int64_t kMaxUnboundedIterations = int64_t{1} << 24;

absl::StatusOr<std::vector<Tensor>> Loop(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const ir::Graph* body, SubgraphAttr(ctx, "body"));
  if (ctx.num_inputs() < 2) {
    return ctx.Error("Loop takes at least 2 inputs (M, cond), got ",
                     ctx.num_inputs());
  }
  const int num_carried = ctx.num_inputs() - 2;
  const int num_body_outputs = static_cast<int>(body->outputs().size());
  if (static_cast<int>(body->inputs().size()) != 2 + num_carried) {
    return ctx.Error("body takes ", body->inputs().size(),
                     " inputs, expected ", 2 + num_carried,
                     " (iteration_num, cond and ", num_carried,
                     " loop-carried values)");
  }
  if (num_body_outputs < 1 + num_carried) {
    return ctx.Error("body has ", num_body_outputs, " outputs, expected at "
                     "least ", 1 + num_carried);
  }
  const int num_scan = num_body_outputs - 1 - num_carried;
  if (ctx.num_outputs() > num_carried + num_scan) {
    return ctx.Error("node has ", ctx.num_outputs(), " outputs, the body "
                     "yields ", num_carried, " loop-carried and ", num_scan,
                     " scan outputs");
  }

  int64_t max_trips = -1;  // -1: no trip count
  if (ctx.has_input(0)) {
    const Tensor& m = *ctx.inputs[0];
    if (!ir::IsInteger(m.dtype()) || m.num_elements() != 1) {
      return ctx.Error("M must be a single integer, got ", m.TypeString());
    }
    max_trips = std::max<int64_t>(0, m.GetAsInt64(0));
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(cond, ReadBoolScalar(ctx, *ctx.inputs[1], "cond"));
  }
  std::vector<Tensor> carried;
  for (int i = 0; i < num_carried; ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* v, ctx.Input(2 + i));
    carried.push_back(*v);
  }

  std::vector<std::vector<Tensor>> scans(num_scan);
  int64_t iter = 0;
  for (; cond && (max_trips < 0 || iter < max_trips); ++iter) {
    if (max_trips < 0 && iter >= kMaxUnboundedIterations) {
      return ctx.Error("no trip count and cond still true after ", iter,
                       " iterations");
    }
    std::vector<Tensor> body_inputs;
    body_inputs.push_back(Tensor::Scalar<int64_t>(iter));
    body_inputs.push_back(Tensor::Scalar<bool>(cond));
    for (Tensor& v : carried) body_inputs.push_back(std::move(v));
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                          RunSubgraph(ctx, "body", *body, body_inputs));
    KILN_ASSIGN_OR_RETURN(cond, ReadBoolScalar(ctx, outs[0], "body's cond"));
    for (int i = 0; i < num_carried; ++i) {
      carried[i] = std::move(outs[1 + i]);
    }
    for (int k = 0; k < num_scan; ++k) {
      scans[k].push_back(std::move(outs[1 + num_carried + k]));
    }
  }

  std::vector<Tensor> results = std::move(carried);
  for (int k = 0; k < num_scan; ++k) {
    if (!scans[k].empty()) {
      KILN_ASSIGN_OR_RETURN(Tensor stacked, Stack(ctx, k, scans[k]));
      results.push_back(std::move(stacked));
      continue;
    }
    // No iteration ran: an empty tensor shaped as declared where known.
    const int out_index = num_carried + k;
    const ir::Value& body_out = body->value(body->outputs()[1 + num_carried + k]);
    DType dtype = out_index < ctx.num_outputs()
                      ? DeclaredDType(ctx, out_index, DType::kInvalid)
                      : DType::kInvalid;
    if (dtype == DType::kInvalid) dtype = body_out.dtype;
    if (dtype == DType::kInvalid) dtype = DType::kF32;
    Shape shape = {0};
    if (body_out.shape_known &&
        std::all_of(body_out.shape.begin(), body_out.shape.end(),
                    [](int64_t d) { return d >= 0; })) {
      shape.insert(shape.end(), body_out.shape.begin(), body_out.shape.end());
    }
    results.push_back(Tensor(dtype, shape));
  }
  results.resize(std::min<size_t>(results.size(), ctx.num_outputs()));
  for (int i = 0; i < static_cast<int>(results.size()); ++i) {
    KILN_RETURN_IF_ERROR(CheckOutputDType(ctx, i, results[i], "body"));
  }
  return results;
}

// ---- Scan.

// Slice `index` along `axis` of t, with that axis removed.
Tensor SliceAlong(const Tensor& t, int64_t axis, int64_t index) {
  Shape shape = t.shape();
  const int64_t n = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out(t.dtype(), shape);
  int64_t outer = 1, inner = ir::DTypeSize(t.dtype());
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    if (inner > 0) std::memcpy(dst + o * inner, src + (o * n + index) * inner, inner);
  }
  return out;
}

// Stacks equally shaped parts along a new axis `axis`.
absl::StatusOr<Tensor> StackAlong(const OpContext& ctx,
                                  const std::vector<Tensor>& parts,
                                  int64_t axis, DType dtype, const Shape& empty_part) {
  const Shape part_shape = parts.empty() ? empty_part : parts[0].shape();
  if (axis < 0 || axis > static_cast<int64_t>(part_shape.size())) {
    return ctx.Error("scan output axis ", axis, " is out of range for rank ",
                     part_shape.size() + 1);
  }
  Shape shape = part_shape;
  const int64_t n = static_cast<int64_t>(parts.size());
  shape.insert(shape.begin() + axis, n);
  Tensor out(parts.empty() ? dtype : parts[0].dtype(), shape);
  int64_t outer = 1, inner = ir::DTypeSize(out.dtype());
  for (int64_t d = 0; d < axis; ++d) outer *= part_shape[d];
  for (size_t d = axis; d < part_shape.size(); ++d) inner *= part_shape[d];
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t t = 0; t < n; ++t) {
    if (parts[t].shape() != part_shape || parts[t].dtype() != out.dtype()) {
      return ctx.Error("scan output changes from ", parts[0].TypeString(),
                       " to ", parts[t].TypeString(), " across iterations");
    }
    const auto* src = static_cast<const uint8_t*>(parts[t].raw_data());
    for (int64_t o = 0; o < outer; ++o) {
      if (inner > 0) std::memcpy(dst + (o * n + t) * inner, src + o * inner, inner);
    }
  }
  return out;
}

struct ScanSpec {
  const ir::Graph* body = nullptr;
  int num_state = 0, num_scan_in = 0, num_scan_out = 0;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// One Scan over `states` and `scan_inputs` (axes already normalized).
absl::StatusOr<std::vector<Tensor>> RunScan(const OpContext& ctx,
                                            const ScanSpec& s,
                                            std::vector<Tensor> states,
                                            const std::vector<const Tensor*>& scans) {
  int64_t len = -1;
  for (int i = 0; i < s.num_scan_in; ++i) {
    const int64_t l = scans[i]->dim(s.in_axes[i]);
    if (len >= 0 && l != len) {
      return ctx.Error("scan inputs have different lengths ", len, " and ", l);
    }
    len = l;
  }
  if (len < 0) len = 0;
  std::vector<std::vector<Tensor>> outs(s.num_scan_out);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Tensor> inputs = std::move(states);
    for (int i = 0; i < s.num_scan_in; ++i) {
      const int64_t at = s.in_dirs[i] ? len - 1 - t : t;
      inputs.push_back(SliceAlong(*scans[i], s.in_axes[i], at));
    }
    absl::StatusOr<std::vector<Tensor>> r = ctx.run_subgraph(*s.body, inputs);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat(ctx.node.Describe(), ": in body: ",
                                       r.status().message()));
    }
    if (r->size() != static_cast<size_t>(s.num_state + s.num_scan_out)) {
      return ctx.Error("body returned ", r->size(), " outputs");
    }
    states.assign(std::make_move_iterator(r->begin()),
                  std::make_move_iterator(r->begin() + s.num_state));
    for (int k = 0; k < s.num_scan_out; ++k) {
      outs[k].push_back(std::move((*r)[s.num_state + k]));
    }
  }
  std::vector<Tensor> result = std::move(states);
  for (int k = 0; k < s.num_scan_out; ++k) {
    if (s.out_dirs[k]) std::reverse(outs[k].begin(), outs[k].end());
    const ir::Value& bv = s.body->value(s.body->outputs()[s.num_state + k]);
    Shape empty_part;
    if (outs[k].empty()) {
      for (int64_t d : bv.shape) empty_part.push_back(std::max<int64_t>(d, 0));
    }
    int64_t axis = s.out_axes[k];
    const int64_t rank = static_cast<int64_t>(
        (outs[k].empty() ? empty_part : outs[k][0].shape()).size()) + 1;
    if (axis < 0) axis += rank;
    const DType dtype = bv.dtype == DType::kInvalid ? DType::kF32 : bv.dtype;
    KILN_ASSIGN_OR_RETURN(Tensor st, StackAlong(ctx, outs[k], axis, dtype, empty_part));
    result.push_back(std::move(st));
  }
  return result;
}

absl::StatusOr<std::vector<int64_t>> ScanInts(const OpContext& ctx,
                                              const char* name, int n) {
  return IntsOr(ctx, name, static_cast<size_t>(n), 0);
}

absl::StatusOr<Outputs> Scan(OpContext& ctx) {
  if (!ctx.node.HasAttr("body")) return ctx.Error("missing attribute 'body'");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> body,
                        ctx.node.Attr<std::shared_ptr<const ir::Graph>>("body"));
  if (body == nullptr) return ctx.Error("attribute 'body' is empty");
  KILN_ASSIGN_OR_RETURN(int64_t m, ctx.node.Attr<int64_t>("num_scan_inputs"));
  const bool v8 = ctx.opset < 9;
  const int first = v8 ? 1 : 0;
  const int num_inputs = ctx.num_inputs() - first;
  if (m <= 0 || m > num_inputs) {
    return ctx.Error("num_scan_inputs ", m, " does not fit ", num_inputs,
                     " inputs");
  }
  ScanSpec s;
  s.body = body.get();
  s.num_scan_in = static_cast<int>(m);
  s.num_state = num_inputs - s.num_scan_in;
  s.num_scan_out = static_cast<int>(body->outputs().size()) - s.num_state;
  if (static_cast<int>(body->inputs().size()) != num_inputs || s.num_scan_out < 0) {
    return ctx.Error("body has ", body->inputs().size(), " inputs and ",
                     body->outputs().size(), " outputs for ", s.num_state,
                     " states and ", m, " scan inputs");
  }
  if (ctx.num_outputs() > s.num_state + s.num_scan_out) {
    return ctx.Error("node has ", ctx.num_outputs(), " outputs, the body yields ",
                     s.num_state + s.num_scan_out);
  }
  std::vector<const Tensor*> inputs;
  for (int i = 0; i < num_inputs; ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(first + i));
    inputs.push_back(t);
  }
  std::vector<Tensor> results;
  if (!v8) {
    KILN_ASSIGN_OR_RETURN(s.in_axes, ScanInts(ctx, "scan_input_axes", s.num_scan_in));
    KILN_ASSIGN_OR_RETURN(s.in_dirs, ScanInts(ctx, "scan_input_directions", s.num_scan_in));
    KILN_ASSIGN_OR_RETURN(s.out_axes, ScanInts(ctx, "scan_output_axes", s.num_scan_out));
    KILN_ASSIGN_OR_RETURN(s.out_dirs, ScanInts(ctx, "scan_output_directions", s.num_scan_out));
    for (int i = 0; i < s.num_scan_in; ++i) {
      const Tensor& t = *inputs[s.num_state + i];
      absl::StatusOr<int64_t> a = NormalizeAxis(s.in_axes[i], t.rank());
      if (!a.ok()) return ctx.Error("scan input ", i, ": ", a.status().message());
      s.in_axes[i] = *a;
    }
    std::vector<Tensor> states;
    for (int i = 0; i < s.num_state; ++i) states.push_back(*inputs[i]);
    const std::vector<const Tensor*> scans(inputs.begin() + s.num_state, inputs.end());
    KILN_ASSIGN_OR_RETURN(results, RunScan(ctx, s, std::move(states), scans));
  } else {
    // Scan-8: every input has a leading batch dim; scan inputs scan axis 1.
    KILN_ASSIGN_OR_RETURN(s.in_dirs, ScanInts(ctx, "directions", s.num_scan_in));
    s.in_axes.assign(s.num_scan_in, 0);
    s.out_axes.assign(s.num_scan_out, 0);
    s.out_dirs.assign(s.num_scan_out, 0);
    int64_t batch = -1;
    for (int i = 0; i < num_inputs; ++i) {
      const Tensor& t = *inputs[i];
      const int64_t min_rank = i < s.num_state ? 1 : 2;
      if (t.rank() < min_rank || (batch >= 0 && t.dim(0) != batch)) {
        return ctx.Error("input ", first + i, " ", t.TypeString(),
                         " lacks the shared batch dimension");
      }
      batch = t.dim(0);
    }
    if (ctx.has_input(0)) {
      const Tensor& lens = *ctx.inputs[0];
      const int64_t full = inputs[s.num_state]->dim(1);
      for (int64_t v : lens.ToInt64Vector()) {
        if (v != full) {
          return absl::UnimplementedError(absl::StrCat(
              ctx.node.Describe(), ": sequence_lens shorter than the scan "
              "length are not supported"));
        }
      }
    }
    std::vector<std::vector<Tensor>> per_batch(s.num_state + s.num_scan_out);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> states;
      for (int i = 0; i < s.num_state; ++i) states.push_back(SliceAlong(*inputs[i], 0, b));
      std::vector<Tensor> scan_slices;
      for (int i = 0; i < s.num_scan_in; ++i) {
        scan_slices.push_back(SliceAlong(*inputs[s.num_state + i], 0, b));
      }
      std::vector<const Tensor*> scans;
      for (const Tensor& t : scan_slices) scans.push_back(&t);
      KILN_ASSIGN_OR_RETURN(std::vector<Tensor> r,
                            RunScan(ctx, s, std::move(states), scans));
      for (size_t k = 0; k < r.size(); ++k) per_batch[k].push_back(std::move(r[k]));
    }
    for (size_t k = 0; k < per_batch.size(); ++k) {
      const DType dtype = DeclaredDType(ctx, static_cast<int>(k), DType::kF32);
      KILN_ASSIGN_OR_RETURN(Tensor t, StackAlong(ctx, per_batch[k], 0, dtype, {}));
      results.push_back(std::move(t));
    }
  }
  results.resize(std::min<size_t>(results.size(), ctx.num_outputs()));
  for (int i = 0; i < static_cast<int>(results.size()); ++i) {
    const DType want = DeclaredDType(ctx, i, results[i].dtype());
    if (want != results[i].dtype()) {
      return ctx.Error("body produced ", results[i].TypeString(), " for output ",
                       i, ", which is declared ", ir::DTypeName(want));
    }
  }
  return results;
}

}  // namespace

void RegisterControlFlowOps(OpRegistry* r) {
  r->Register("If", If);
  r->Register("Loop", Loop);
  r->Register("Scan", Scan);
}

}  // namespace kiln::interp
