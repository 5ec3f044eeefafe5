// File: lowering/elementwise.cc — the elementwise kernel elementwise.h declares.
#include "lowering/elementwise.h"

#include "ir/status_macros.h"

namespace kiln::lowering::internal {
namespace {

bool Broadcasts(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return false;
  const size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 && in[d] != out[off + d]) return false;
  }
  return true;
}

float FloatAttr(const ir::Node& n, const char* name, float fallback,
                absl::Status* status) {
  absl::StatusOr<float> v = n.AttrOr<float>(name, fallback);
  if (!v.ok()) {
    *status = v.status();
    return fallback;
  }
  return *v;
}

}  // namespace

absl::Status Elementwise(Lowerer& L, const std::vector<Operand>& ins,
                         const Body& body) {
  const ir::Value& out = L.OutputValue(0);
  for (const Operand& in : ins) {
    if (!Broadcasts(in.shape, out.shape)) {
      return L.Error("input shape ", ir::ShapeToString(in.shape),
                     " does not broadcast to output shape ",
                     ir::ShapeToString(out.shape));
    }
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  const Coords c = k->IterCoords();
  std::vector<int32_t> vals;
  for (const Operand& in : ins) {
    KILN_ASSIGN_OR_RETURN(int32_t v, k->LoadBroadcast(in, c));
    vals.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(int32_t r, body(*k, vals));
  if (k->DTypeOf(r) != out.dtype) {
    return L.Error("computes ", ir::DTypeName(k->DTypeOf(r)),
                   " but output '", out.name, "' is declared ",
                   ir::DTypeName(out.dtype));
  }
  k->Store(buffer, out.shape, c, r);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Operand>> AllInputs(Lowerer& L, const ir::Node& n) {
  std::vector<Operand> ins;
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    if (!n.has_input(i)) continue;
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    ins.push_back(std::move(op));
  }
  if (ins.empty()) return L.Error("needs at least one input");
  return ins;
}

absl::Status RequireFloat(Lowerer& L, const Operand& op) {
  if (ir::IsFloat(op.dtype)) return absl::OkStatus();
  return L.Error("needs a float input, got ", ir::DTypeName(op.dtype));
}

absl::Status RequireSame(Lowerer& L, const std::vector<Operand>& ins) {
  for (const Operand& op : ins) {
    if (op.dtype != ins[0].dtype) {
      return L.Error("inputs have different dtypes ",
                     ir::DTypeName(ins[0].dtype), " and ",
                     ir::DTypeName(op.dtype));
    }
  }
  return absl::OkStatus();
}

LowerFn FloatUnary(Activation f) {
  return [f](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    KILN_RETURN_IF_ERROR(RequireFloat(L, x));
    const DType dt = x.dtype;
    return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      return f(k, v[0], dt);
    });
  };
}

LowerFn SimpleUnary(OpCode code, bool float_only) {
  return [code, float_only](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if (float_only) KILN_RETURN_IF_ERROR(RequireFloat(L, x));
    return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      return k.Un(code, v[0]);
    });
  };
}

LowerFn WithAttrs(
    std::vector<std::pair<const char*, float>> attrs,
    std::function<int32_t(Emitter&, int32_t, DType, const std::vector<float>&)>
        f) {
  return [attrs, f](Lowerer& L, const ir::Node& n) -> absl::Status {
    absl::Status st;
    std::vector<float> a;
    for (const auto& [name, def] : attrs) a.push_back(FloatAttr(n, name, def, &st));
    KILN_RETURN_IF_ERROR(st);
    return FloatUnary([&](Emitter& k, int32_t x, DType dt) {
      return f(k, x, dt, a);
    })(L, n);
  };
}

}  // namespace kiln::lowering::internal
