#include "frontend/onnx/guarded_schemas.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "onnx/defs/shape_inference.h"

namespace kiln::frontend::onnx_internal {
namespace {

thread_local int64_t refusals = 0;

// An op whose libonnx inference (convPoolShapeInference,
// convTransposeShapeInference) needs guarding, and where its data and
// weights are (weights -1: a pool).
struct ConvLike {
  const char* op;
  int x_index;
  int w_index;
};

constexpr ConvLike kConvLike[] = {
    {"Conv", 0, 1},         {"ConvInteger", 0, 1}, {"QLinearConv", 0, 3},
    {"ConvTranspose", 0, 1}, {"AveragePool", 0, -1}, {"MaxPool", 0, -1},
    {"LpPool", 0, -1},
};

// `infer` behind the ONNX rules libonnx 1.12 relies on without checking:
// strides, dilations and kernel_shape are positive (it divides by the
// strides), and for the Conv family X is N x C x D1..Dn (rank 3 or more)
// with W of X's rank (it reads W's spatial rank worth of X's dims and
// dilations).
onnx::InferenceFunction Guard(onnx::InferenceFunction infer, ConvLike conv) {
  return [infer = std::move(infer), conv](onnx::InferenceContext& ctx) {
    for (const char* name : {"strides", "dilations", "kernel_shape"}) {
      const onnx::AttributeProto* a = ctx.getAttribute(name);
      if (a == nullptr) continue;
      for (int64_t v : a->ints()) {
        if (v < 1) {
          ++refusals;
          fail_shape_inference(kGuardRefusal, "attribute '", name, "' has ", v,
                               "; every value must be at least 1");
        }
      }
    }
    if (conv.w_index >= 0 && onnx::hasInputShape(ctx, conv.x_index) &&
        onnx::hasInputShape(ctx, conv.w_index)) {
      const int x_rank = onnx::getInputShape(ctx, conv.x_index).dim_size();
      const int w_rank = onnx::getInputShape(ctx, conv.w_index).dim_size();
      if (x_rank < 3 || w_rank != x_rank) {
        ++refusals;
        fail_shape_inference(kGuardRefusal, "the input has rank ", x_rank,
                             " and the weights rank ", w_rank,
                             "; both must have the same rank, at least 3 (N x C x D1 ...)");
      }
    }
    if (infer) infer(ctx);
  };
}

class GuardedSchemaRegistry final : public onnx::ISchemaRegistry {
 public:
  GuardedSchemaRegistry() {
    const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    const auto onnx_range = ranges.find(onnx::ONNX_DOMAIN);
    if (onnx_range == ranges.end()) return;
    // Every version of each guarded op: the schema each opset resolves to.
    for (const ConvLike& conv : kConvLike) {
      for (int v = onnx_range->second.first; v <= onnx_range->second.second; ++v) {
        const onnx::OpSchema* original = onnx::OpSchemaRegistry::Schema(conv.op, v);
        if (original == nullptr || guarded_.contains(original)) continue;
        auto copy = std::make_unique<onnx::OpSchema>(*original);
        copy->TypeAndShapeInferenceFunction(
            Guard(original->GetTypeAndShapeInferenceFunction(), conv));
        guarded_.emplace(original, std::move(copy));
      }
    }
  }

  const onnx::OpSchema* GetSchema(const std::string& key, const int max_inclusive_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(key, max_inclusive_version, domain);
    const auto it = guarded_.find(schema);
    return it == guarded_.end() ? schema : it->second.get();
  }

 private:
  // libonnx's schema -> its guarded copy.
  absl::flat_hash_map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> guarded_;
};

}  // namespace

int64_t GuardRefusals() { return refusals; }

const onnx::ISchemaRegistry* GuardedSchemas() {
  static const GuardedSchemaRegistry* const registry = new GuardedSchemaRegistry();
  return registry;
}

}  // namespace kiln::frontend::onnx_internal
