#include "frontend/onnx/guarded_schemas.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
    infer(ctx);
  };
}

// What libonnx's checker verifies and its inference and data-propagation
// functions rely on: at least the schema's minimum number of inputs and
// outputs, and every required attribute given. The checker only warns on
// opsets newer than libonnx knows, and Concat without 'axis' (a null
// dereference) or Split without outputs (a division by zero) crash
// libonnx. More inputs or outputs than the schema allows pass: a newer
// opset's form of the op may take them (ReduceMean-18's 'axes' input), and
// libonnx does not read past its own schema.
struct Arity {
  explicit Arity(const onnx::OpSchema& schema)
      : min_inputs(schema.min_input()), min_outputs(schema.min_output()) {
    for (const auto& [name, attribute] : schema.attributes()) {
      if (attribute.required) required.push_back(name);
    }
  }

  // Empty if the node `ctx` describes keeps the rules above, else why not.
  template <typename Context>
  std::string Violation(const Context& ctx) const {
    const int64_t inputs = static_cast<int64_t>(ctx.getNumInputs());
    const int64_t outputs = static_cast<int64_t>(ctx.getNumOutputs());
    if (inputs < min_inputs) {
      return absl::StrCat("it has ", inputs, " inputs; the operator takes at least ", min_inputs);
    }
    if (outputs < min_outputs) {
      return absl::StrCat("it has ", outputs, " outputs; the operator gives at least ",
                          min_outputs);
    }
    for (const std::string& name : required) {
      if (ctx.getAttribute(name) == nullptr) {
        return absl::StrCat("required attribute '", name, "' is missing");
      }
    }
    return "";
  }

  int64_t min_inputs;
  int64_t min_outputs;
  std::vector<std::string> required;
};

onnx::InferenceFunction GuardArity(onnx::InferenceFunction infer, Arity arity) {
  return [infer = std::move(infer), arity = std::move(arity)](onnx::InferenceContext& ctx) {
    const std::string violation = arity.Violation(ctx);
    if (!violation.empty()) {
      ++refusals;
      fail_shape_inference(kGuardRefusal, violation);
    }
    infer(ctx);
  };
}

// Data propagation runs apart from inference: a node the inference guard
// refuses propagates nothing, nor one whose required input has no type
// (libonnx's Shape propagator dereferences it: an input computed by a node
// whose inference failed).
onnx::DataPropagationFunction GuardArity(onnx::DataPropagationFunction propagate, Arity arity) {
  return [propagate = std::move(propagate),
          arity = std::move(arity)](onnx::DataPropagationContext& ctx) {
    if (!arity.Violation(ctx).empty()) return;
    for (int64_t i = 0; i < arity.min_inputs; ++i) {
      if (ctx.getInputType(i) == nullptr) return;
    }
    propagate(ctx);
  };
}

// Copies of libonnx's schemas with guarded inference functions, made when
// first asked for (there are about a thousand schemas; a model uses a few).
class GuardedSchemaRegistry final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_inclusive_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(key, max_inclusive_version, domain);
    // Ops without an inference function are inferred from their function
    // body, if any: left as they are.
    if (schema == nullptr || !schema->has_type_and_shape_inference_function()) return schema;
    absl::MutexLock lock(&mu_);
    std::unique_ptr<onnx::OpSchema>& guarded = guarded_[schema];
    if (guarded == nullptr) {
      onnx::InferenceFunction infer = schema->GetTypeAndShapeInferenceFunction();
      if (schema->domain() == onnx::ONNX_DOMAIN) {
        for (const ConvLike& conv : kConvLike) {
          if (schema->Name() == conv.op) infer = Guard(std::move(infer), conv);
        }
      }
      const Arity arity(*schema);
      guarded = std::make_unique<onnx::OpSchema>(*schema);
      guarded->TypeAndShapeInferenceFunction(GuardArity(std::move(infer), arity));
      if (schema->has_data_propagation_function()) {
        guarded->PartialDataPropagationFunction(
            GuardArity(schema->GetDataPropagationFunction(), arity));
      }
    }
    return guarded.get();
  }

 private:
  mutable absl::Mutex mu_;
  // libonnx's schema -> its guarded copy. A copy, once made, is never
  // moved or freed.
  mutable absl::flat_hash_map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> guarded_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

int64_t GuardRefusals() { return refusals; }

const onnx::ISchemaRegistry* GuardedSchemas() {
  static const GuardedSchemaRegistry* const registry = new GuardedSchemaRegistry();
  return registry;
}

}  // namespace kiln::frontend::onnx_internal
