// File: interp/logical.cc — reference kernels of ONNX's logical family
// (onnx/defs/logical): comparisons with numpy broadcasting, And/Or/Xor/Not, BitShift.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "interp/elementwise.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using Result = absl::StatusOr<std::vector<Tensor>>;

template <typename F>
void RegisterCompare(OpRegistry* r, const char* op, F f) {
  r->Register(op, [f](OpContext& ctx) {
    return Binary<kNumeric, /*kBoolOut=*/true>(ctx, f);
  });
}

template <typename F>
void RegisterLogic(OpRegistry* r, const char* op, F f) {
  r->Register(op, [f](OpContext& ctx) {
    return Binary<kBool, /*kBoolOut=*/true>(ctx, f);
  });
}

Result Equal(OpContext& ctx) {
  return Binary<kAny, /*kBoolOut=*/true>(ctx,
                                         [](auto a, auto b) { return a == b; });
}

Result Not(OpContext& ctx) {
  return Unary<kBool>(ctx, [](bool x) { return !x; });
}

Result BitShift(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string direction,
                        ctx.node.Attr<std::string>("direction"));
  if (direction != "LEFT" && direction != "RIGHT") {
    return ctx.Error("direction must be LEFT or RIGHT, got '", direction, "'");
  }
  const bool left = direction == "LEFT";
  return Binary<kUnsigned>(ctx, [left](auto a, auto b) {
    using C = decltype(a);
    constexpr int kBits = 8 * sizeof(C);
    if (b >= C(kBits)) return C(0);
    return static_cast<C>(left ? a << b : a >> b);
  });
}

}  // namespace

void RegisterLogicalOps(OpRegistry* r) {
  r->Register("Equal", Equal);
  RegisterCompare(r, "Greater", [](auto a, auto b) { return a > b; });
  RegisterCompare(r, "Less", [](auto a, auto b) { return a < b; });
  RegisterCompare(r, "GreaterOrEqual", [](auto a, auto b) { return a >= b; });
  RegisterCompare(r, "LessOrEqual", [](auto a, auto b) { return a <= b; });
  r->Register("Not", Not);
  RegisterLogic(r, "And", [](bool a, bool b) { return a && b; });
  RegisterLogic(r, "Or", [](bool a, bool b) { return a || b; });
  RegisterLogic(r, "Xor", [](bool a, bool b) { return a != b; });
  r->Register("BitShift", BitShift);
}

}  // namespace kiln::interp
