// File: runtime/control_flow.cc — the compiled If, Loop and Scan steps
// (runtime/control_flow.h).
#include "runtime/control_flow.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/graph/tensor.h"
#include "ir/loop/extern_schema.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

using ir::loop::Buffer;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

bool PlainStatic(const Buffer& b) {
  for (int64_t d : b.shape) {
    if (d < 0) return false;
  }
  return b.IsRowMajor();
}

// What the step's refusals and errors call the node: its label, escaped
// and capped for messages (ir/message.h).
std::string NodeOf(const Kernel& kernel) {
  return EscapeForMessage(kernel.ops.empty() ? kernel.name : kernel.ops[0]);
}

absl::Status Refuse(const Kernel& kernel, const std::string& why) {
  return absl::UnimplementedError(
      absl::StrCat("If '", EscapeForMessage(kernel.name), "' stays a reference call: ", why));
}

class IfStep final : public ExternStep {
 public:
  IfStep(std::string name, int32_t cond, CompiledBranch then_branch, CompiledBranch else_branch,
         std::vector<int32_t> outputs, std::vector<std::optional<ir::Shape>> output_shapes)
      : name_(std::move(name)),
        cond_(cond),
        outputs_(std::move(outputs)),
        output_shapes_(std::move(output_shapes)) {
    branches_[0] = std::move(else_branch);
    branches_[1] = std::move(then_branch);
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    const bool cond = *static_cast<const bool*>(buffers[cond_]);
    const CompiledBranch& b = branches_[cond ? 1 : 0];
    if (b.model == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "If '", name_, "': its ", cond ? "then" : "else",
          " branch cannot run with the input shapes this model was compiled for: ", b.unfit));
    }
    std::vector<const void*> in(b.inputs.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = buffers[b.inputs[i]];
    std::vector<void*> out(outputs_.size());
    for (size_t o = 0; o < out.size(); ++o) out[o] = buffers[outputs_[o]];
    return RunOnBuffers(*b.model, in, out, output_shapes_);
  }

 private:
  std::string name_;
  int32_t cond_;
  CompiledBranch branches_[2];  // else, then
  std::vector<int32_t> outputs_;
  // nullopt: an output of data-dependent shape (its buffer is the
  // ir::Tensor holding it).
  std::vector<std::optional<ir::Shape>> output_shapes_;
};

// Whether a branch output typed `info` may fill a buffer of `shape`: a
// static branch output must match it, one of data-dependent shape is
// checked on each run.
bool Fits(const TensorInfo& info, const ir::Shape& shape) {
  if (!info.shape_known) return true;
  if (info.shape.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (info.shape[d] >= 0 && info.shape[d] != shape[d]) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExternStep>> CreateIfStep(const LoopProgram& program,
                                                         const Kernel& kernel,
                                                         CompiledBranch then_branch,
                                                         CompiledBranch else_branch) {
  if (kernel.kind != Kernel::Kind::kExtern || kernel.call.inputs.empty()) {
    return InternalError("kernel '", EscapeForMessage(kernel.name), "' is not an If call");
  }
  for (bool d : ir::loop::DynamicOperands(kernel, /*outputs=*/false)) {
    if (d) return Refuse(kernel, "an input has a data-dependent shape");
  }
  const std::vector<bool> dynamic_out = ir::loop::DynamicOperands(kernel, /*outputs=*/true);
  if (kernel.call.attrs.count(ir::loop::kAttrBlockedInputs) > 0 ||
      kernel.call.attrs.count(ir::loop::kAttrBlockedOutputs) > 0) {
    return Refuse(kernel, "an operand is channel-blocked");
  }
  auto buffer = [&](int32_t b) -> const Buffer* {
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) return nullptr;
    return &program.buffers[b];
  };
  const Buffer* cond = buffer(kernel.call.inputs[0]);
  if (cond == nullptr || cond->dtype != ir::DType::kBool || cond->StorageSize().value_or(0) != 1) {
    return Refuse(kernel, "the condition is not one bool");
  }
  for (const CompiledBranch* br : {&then_branch, &else_branch}) {
    const char* which = br == &then_branch ? "then" : "else";
    if (br->model == nullptr && !br->unfit.empty()) continue;
    if (br->model == nullptr) {
      return InternalError("If '", EscapeForMessage(kernel.name), "': no ", which, " branch");
    }
    const std::vector<TensorInfo>& ins = br->model->inputs();
    const std::vector<TensorInfo>& outs = br->model->outputs();
    if (ins.size() != br->inputs.size() || outs.size() != kernel.call.outputs.size()) {
      return InternalError("If '", EscapeForMessage(kernel.name), "': the ", which,
                           " branch's interface does not match the call");
    }
    for (size_t i = 0; i < ins.size(); ++i) {
      const Buffer* b = buffer(br->inputs[i]);
      if (b == nullptr || !PlainStatic(*b) || b->dtype != ins[i].dtype || b->shape != ins[i].shape) {
        return Refuse(
            kernel, absl::StrCat("the ", which, " branch's input '", EscapeForMessage(ins[i].name),
                                 "' (", ir::TypeString(ins[i].dtype, ins[i].shape),
                                 ") is not a plain buffer of its type"));
      }
    }
    for (size_t o = 0; o < outs.size(); ++o) {
      const Buffer* b = buffer(kernel.call.outputs[o]);
      if (b != nullptr && dynamic_out[o] && b->dtype == outs[o].dtype) continue;
      if (b == nullptr || !PlainStatic(*b) || b->dtype != outs[o].dtype ||
          !Fits(outs[o], b->shape)) {
        return Refuse(kernel, absl::StrCat(
                                  "the ", which, " branch's output ", o, " is ",
                                  outs[o].shape_known ? ir::TypeString(outs[o].dtype, outs[o].shape)
                                                      : "of unknown rank",
                                  b == nullptr ? std::string(", not a buffer")
                                               : absl::StrCat(", the If's ",
                                                              ir::TypeString(b->dtype, b->shape))));
      }
    }
  }
  std::vector<std::optional<ir::Shape>> output_shapes;
  for (size_t o = 0; o < kernel.call.outputs.size(); ++o) {
    if (dynamic_out[o]) {
      output_shapes.push_back(std::nullopt);
    } else {
      output_shapes.push_back(program.buffers[kernel.call.outputs[o]].shape);
    }
  }
  return std::unique_ptr<ExternStep>(std::make_unique<IfStep>(
      NodeOf(kernel), kernel.call.inputs[0], std::move(then_branch), std::move(else_branch),
      kernel.call.outputs, std::move(output_shapes)));
}

// ---- Loop and Scan.

namespace {

bool StaticInfo(const TensorInfo& info) {
  if (!info.shape_known) return false;
  for (int64_t d : info.shape) {
    if (d < 0) return false;
  }
  return true;
}

int64_t NumElements(const ir::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ByteSize(ir::DType dtype, const ir::Shape& shape) {
  return NumElements(shape) * static_cast<int64_t>(ir::DTypeSize(dtype));
}

absl::Status RefuseOp(const char* op, const Kernel& kernel, const std::string& why) {
  return absl::UnimplementedError(
      absl::StrCat(op, " '", NodeOf(kernel), "' stays a reference call: ", why));
}

// Per-run scratch storage of `bytes` bytes (64-byte aligned).
absl::StatusOr<ir::Tensor> Scratch(int64_t bytes, const std::string& what) {
  return ir::Tensor::Create(ir::DType::kU8, {std::max<int64_t>(bytes, 1)}, what);
}

// The rows of a stacked output of data-dependent leading extent: slices of
// `slice_bytes` appended in place, the storage grown geometrically.
class GrowingStack {
 public:
  GrowingStack(ir::DType dtype, ir::Shape slice, std::string what)
      : dtype_(dtype), slice_(std::move(slice)), what_(std::move(what)),
        slice_bytes_(ByteSize(dtype_, slice_)) {}

  // The slice shape, where only the first iteration tells it (before any
  // row is stored).
  void SetSlice(ir::Shape slice) {
    slice_ = std::move(slice);
    slice_bytes_ = ByteSize(dtype_, slice_);
  }

  // Storage for row `row` (rows are appended in order).
  absl::StatusOr<char*> Row(int64_t row, int64_t hint) {
    if (row >= capacity_) {
      const int64_t cap = std::max<int64_t>({row + 1, 2 * capacity_, hint});
      ir::Shape shape = slice_;
      shape.insert(shape.begin(), cap);
      KILN_ASSIGN_OR_RETURN(ir::Tensor grown, ir::Tensor::Create(dtype_, shape, what_));
      if (rows_ > 0 && slice_bytes_ > 0) {
        std::memcpy(grown.raw_data(), data_.raw_data(), rows_ * slice_bytes_);
      }
      data_ = std::move(grown);
      capacity_ = cap;
    }
    rows_ = row + 1;
    return static_cast<char*>(data_.raw_data()) + row * slice_bytes_;
  }

  // The stacked value: [rows, slice...].
  absl::StatusOr<ir::Tensor> Take(int64_t rows) {
    ir::Shape shape = slice_;
    shape.insert(shape.begin(), rows);
    if (rows == capacity_ && rows > 0) return std::move(data_);
    KILN_ASSIGN_OR_RETURN(ir::Tensor out, ir::Tensor::Create(dtype_, shape, what_));
    if (rows > 0 && slice_bytes_ > 0) std::memcpy(out.raw_data(), data_.raw_data(), rows * slice_bytes_);
    return out;
  }

 private:
  ir::DType dtype_;
  ir::Shape slice_;
  std::string what_;
  int64_t slice_bytes_;
  ir::Tensor data_;
  int64_t capacity_ = 0, rows_ = 0;
};

// A Loop's first scan rows are reserved for this many bytes at most
// before the trip count proves they are needed.
constexpr int64_t kInitialStackBytes = int64_t{64} << 20;

class LoopStep final : public ExternStep {
 public:
  struct Carried {
    int32_t init = -1, out = -1;
    bool out_dynamic = false;
    ir::DType dtype = ir::DType::kF32;
    ir::Shape shape;
    int64_t bytes = 0;
  };
  struct ScanOut {
    int32_t out = -1;
    bool out_dynamic = false;
    ir::DType dtype = ir::DType::kF32;
    ir::Shape slice;
    int64_t slice_bytes = 0;
    int64_t rows = 0;  // a static output's leading extent
    // The body's slice has a data-dependent shape: it arrives as an
    // ir::Tensor each iteration, is checked against the first one's shape
    // and copied into its row.
    bool slice_dynamic = false;
  };

  LoopStep(std::string node, LoopCall call, std::shared_ptr<const CompiledModel> body,
           int64_t max_iterations, ir::DType trip_dtype, std::vector<Carried> carried,
           std::vector<ScanOut> scans)
      : node_(std::move(node)), call_(std::move(call)), body_(std::move(body)),
        max_iterations_(max_iterations), trip_dtype_(trip_dtype),
        carried_(std::move(carried)), scans_(std::move(scans)) {
    for (const TensorInfo& o : body_->outputs()) {
      output_shapes_.push_back(StaticInfo(o) ? std::optional<ir::Shape>(o.shape) : std::nullopt);
    }
    cond_dynamic_ = !output_shapes_[0].has_value();
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    int64_t trips = -1;  // none
    if (call_.trip_count >= 0) {
      const void* m = buffers[call_.trip_count];
      trips = trip_dtype_ == ir::DType::kI64 ? *static_cast<const int64_t*>(m)
                                             : *static_cast<const int32_t*>(m);
      trips = std::max<int64_t>(trips, 0);
    }
    bool cond = call_.cond < 0 || *static_cast<const bool*>(buffers[call_.cond]);
    if (call_.cond_passed_through && cond && trips > max_iterations_) {
      return LimitError(trips);
    }
    const size_t nc = carried_.size(), ns = scans_.size();
    // Two slots per carried value; slot 0 is the final value's buffer where
    // it is a plain one.
    std::vector<ir::Tensor> scratch;
    scratch.reserve(2 * nc + ns);
    std::vector<char*> slots(2 * nc);
    for (size_t c = 0; c < nc; ++c) {
      const Carried& v = carried_[c];
      for (int s = 0; s < 2; ++s) {
        if (s == 0 && v.out >= 0 && !v.out_dynamic) {
          slots[2 * c] = static_cast<char*>(buffers[v.out]);
          continue;
        }
        KILN_ASSIGN_OR_RETURN(ir::Tensor t,
                              Scratch(v.bytes, absl::StrCat("Loop '", node_, "' state")));
        scratch.push_back(std::move(t));
        slots[2 * c + s] = static_cast<char*>(scratch.back().raw_data());
      }
    }
    std::vector<GrowingStack> stacks;
    stacks.reserve(ns);
    std::vector<char*> discard(ns, nullptr);
    for (size_t k = 0; k < ns; ++k) {
      const ScanOut& so = scans_[k];
      stacks.emplace_back(so.dtype, so.slice,
                          absl::StrCat("Loop '", node_, "' scan output ", k));
      if (so.out < 0) {
        KILN_ASSIGN_OR_RETURN(ir::Tensor t,
                              Scratch(so.slice_bytes, absl::StrCat("Loop '", node_, "' scan")));
        scratch.push_back(std::move(t));
        discard[k] = static_cast<char*>(scratch.back().raw_data());
      }
    }
    int64_t iteration = 0;
    bool cond_in = cond, cond_out = cond;
    std::vector<const void*> in(body_->inputs().size());
    std::vector<void*> out(body_->outputs().size());
    // What the body yields of data-dependent shape: the condition, slices.
    ir::Tensor cond_tensor;
    std::vector<ir::Tensor> produced(ns);
    std::vector<ir::Shape> first_slice(ns);
    in[0] = &iteration;
    in[1] = &cond_in;
    for (size_t i = 0; i < call_.captures.size(); ++i) {
      in[2 + nc + i] = buffers[call_.captures[i]];
    }
    out[0] = cond_dynamic_ ? static_cast<void*>(&cond_tensor) : &cond_out;
    for (size_t c = 0; c < nc; ++c) in[2 + c] = buffers[carried_[c].init];
    for (; cond && (trips < 0 || iteration < trips); ++iteration) {
      if (iteration >= max_iterations_) return LimitError(trips);
      cond_in = cond;
      for (size_t c = 0; c < nc; ++c) out[1 + c] = slots[2 * c + (iteration & 1)];
      for (size_t k = 0; k < ns; ++k) {
        const ScanOut& so = scans_[k];
        if (so.slice_dynamic) {
          out[1 + nc + k] = &produced[k];
          continue;
        }
        char* row = discard[k];
        if (so.out >= 0 && !so.out_dynamic) {
          if (iteration >= so.rows) return RowsError(k, iteration + 1);
          row = static_cast<char*>(buffers[so.out]) + iteration * so.slice_bytes;
        } else if (so.out >= 0) {
          const int64_t hint =
              trips < 0 ? 16
                        : std::min(trips, std::max<int64_t>(
                                              16, kInitialStackBytes /
                                                      std::max<int64_t>(so.slice_bytes, 1)));
          KILN_ASSIGN_OR_RETURN(row, stacks[k].Row(iteration, hint));
        }
        out[1 + nc + k] = row;
      }
      absl::Status s = RunOnBuffers(*body_, in, out, output_shapes_);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("Loop '", node_, "', iteration ", iteration,
                                                   ": ", s.message()));
      }
      if (cond_dynamic_) {
        if (cond_tensor.dtype() != ir::DType::kBool || cond_tensor.num_elements() != 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Loop '", node_, "', iteration ", iteration, ": the body's condition is ",
              cond_tensor.TypeString(), ", not one bool"));
        }
        cond_out = cond_tensor.data<bool>()[0];
      }
      for (size_t k = 0; k < ns; ++k) {
        if (scans_[k].slice_dynamic) {
          KILN_RETURN_IF_ERROR(
              StoreSlice(k, iteration, trips, produced[k], buffers, &first_slice[k], &stacks[k]));
        }
      }
      cond = cond_out;
      for (size_t c = 0; c < nc; ++c) in[2 + c] = out[1 + c];
    }
    // Final values: where the last iteration wrote them (the initial values
    // when none ran).
    for (size_t c = 0; c < nc; ++c) {
      const Carried& v = carried_[c];
      if (v.out < 0 || in[2 + c] == buffers[v.out]) continue;
      void* dst = buffers[v.out];
      if (v.out_dynamic) {
        ir::Tensor& target = *static_cast<ir::Tensor*>(buffers[v.out]);
        KILN_ASSIGN_OR_RETURN(
            target, ir::Tensor::Create(v.dtype, v.shape,
                                       absl::StrCat("Loop '", node_, "' output")));
        dst = target.raw_data();
      }
      if (v.bytes > 0) std::memcpy(dst, in[2 + c], v.bytes);
    }
    for (size_t k = 0; k < ns; ++k) {
      const ScanOut& so = scans_[k];
      if (so.out < 0) continue;
      if (!so.out_dynamic) {
        if (iteration != so.rows) return RowsError(k, iteration);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(*static_cast<ir::Tensor*>(buffers[so.out]),
                            stacks[k].Take(iteration));
    }
    return absl::OkStatus();
  }

 private:
  // Slice `t` of data-dependent shape, yielded by iteration `iteration`,
  // into its row: every iteration's slice has the first one's type.
  absl::Status StoreSlice(size_t k, int64_t iteration, int64_t trips, const ir::Tensor& t,
                          absl::Span<void* const> buffers, ir::Shape* first,
                          GrowingStack* stack) const {
    const ScanOut& so = scans_[k];
    if (iteration == 0) {
      *first = t.shape();
      stack->SetSlice(t.shape());
    }
    if (t.dtype() != so.dtype || t.shape() != *first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Loop '", node_, "' scan output ", k, " changes from ",
          ir::TypeString(so.dtype, *first), " to ", t.TypeString(), " across iterations"));
    }
    if (so.out < 0) return absl::OkStatus();
    char* row = nullptr;
    if (!so.out_dynamic) {
      if (t.shape() != so.slice) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Loop '", node_, "' scan output ", k, " has slices of ", t.TypeString(),
            ", its declared rows are ", ir::TypeString(so.dtype, so.slice)));
      }
      if (iteration >= so.rows) return RowsError(k, iteration + 1);
      row = static_cast<char*>(buffers[so.out]) + iteration * so.slice_bytes;
    } else {
      const int64_t bytes = std::max<int64_t>(static_cast<int64_t>(t.byte_size()), 1);
      const int64_t hint =
          trips < 0 ? 16 : std::min(trips, std::max<int64_t>(16, kInitialStackBytes / bytes));
      KILN_ASSIGN_OR_RETURN(row, stack->Row(iteration, hint));
    }
    if (t.byte_size() > 0) std::memcpy(row, t.raw_data(), t.byte_size());
    return absl::OkStatus();
  }

  absl::Status LimitError(int64_t trips) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "Loop '", node_, "' would run more than ", max_iterations_, " iterations (",
        trips < 0 ? std::string("no trip count") : absl::StrCat("trip count ", trips),
        "), the limit CompileOptions::max_loop_iterations sets"));
  }
  absl::Status RowsError(size_t k, int64_t rows) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "Loop '", node_, "' scan output ", k, " is declared with ", scans_[k].rows,
        " rows, the loop yields ", rows, rows > scans_[k].rows ? " or more" : ""));
  }

  std::string node_;
  LoopCall call_;
  std::shared_ptr<const CompiledModel> body_;
  int64_t max_iterations_;
  ir::DType trip_dtype_;
  std::vector<Carried> carried_;
  std::vector<ScanOut> scans_;
  std::vector<std::optional<ir::Shape>> output_shapes_;
  bool cond_dynamic_ = false;
};


// How slice `at` of a value sits in its storage: `outer` chunks of
// `inner` bytes, chunk o at byte (o * n + at) * inner. One chunk: the slice
// is contiguous and read or written in place.
struct SliceMap {
  int64_t outer = 1, n = 0, inner = 0;
  int64_t Offset(int64_t o, int64_t at) const { return (o * n + at) * inner; }
};

SliceMap MapAlong(const ir::Shape& shape, ir::DType dtype, size_t axis) {
  SliceMap m;
  m.n = shape[axis];
  m.inner = static_cast<int64_t>(ir::DTypeSize(dtype));
  for (size_t d = 0; d < axis; ++d) m.outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) m.inner *= shape[d];
  return m;
}

class ScanStep final : public ExternStep {
 public:
  struct Operand {
    int32_t buffer = -1;    // -1: an absent output
    int64_t batch_bytes = 0;  // bytes per batch entry (all of it unbatched)
    SliceMap map;           // within one batch entry
    bool reverse = false;
    int64_t slice_bytes = 0;
  };
  struct State {
    int32_t init = -1, out = -1;
    int64_t bytes = 0;  // per batch entry
  };

  ScanStep(std::string node, std::shared_ptr<const CompiledModel> body, int64_t batch,
           int64_t length, std::vector<State> states, std::vector<Operand> scan_in,
           std::vector<Operand> scan_out, std::vector<int32_t> captures)
      : node_(std::move(node)), body_(std::move(body)), batch_(batch), length_(length),
        states_(std::move(states)), scan_in_(std::move(scan_in)),
        scan_out_(std::move(scan_out)), captures_(std::move(captures)) {
    for (const TensorInfo& o : body_->outputs()) output_shapes_.push_back(o.shape);
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    const size_t ns = states_.size(), ni = scan_in_.size(), no = scan_out_.size();
    std::vector<ir::Tensor> scratch;
    scratch.reserve(2 * ns + ni + no);
    auto make = [&](int64_t bytes) -> absl::StatusOr<char*> {
      KILN_ASSIGN_OR_RETURN(ir::Tensor t,
                            Scratch(bytes, absl::StrCat("Scan '", node_, "' scratch")));
      scratch.push_back(std::move(t));
      return static_cast<char*>(scratch.back().raw_data());
    };
    // Slot 1 of each state, and slot 0 where the final state is absent.
    std::vector<char*> spare(ns, nullptr), lost(ns, nullptr);
    for (size_t s = 0; s < ns; ++s) {
      KILN_ASSIGN_OR_RETURN(spare[s], make(states_[s].bytes));
      if (states_[s].out < 0) {
        KILN_ASSIGN_OR_RETURN(lost[s], make(states_[s].bytes));
      }
    }
    // Slices that are not contiguous go through one scratch slice each.
    std::vector<char*> in_slice(ni, nullptr), out_slice(no, nullptr);
    for (size_t i = 0; i < ni; ++i) {
      if (scan_in_[i].map.outer != 1) {
        KILN_ASSIGN_OR_RETURN(in_slice[i], make(scan_in_[i].slice_bytes));
      }
    }
    for (size_t k = 0; k < no; ++k) {
      if (scan_out_[k].buffer < 0 || scan_out_[k].map.outer != 1) {
        KILN_ASSIGN_OR_RETURN(out_slice[k], make(scan_out_[k].slice_bytes));
      }
    }
    std::vector<const void*> in(body_->inputs().size());
    std::vector<void*> out(body_->outputs().size());
    for (size_t c = 0; c < captures_.size(); ++c) in[ns + ni + c] = buffers[captures_[c]];
    for (int64_t b = 0; b < batch_; ++b) {
      std::vector<char*> slot0(ns);
      for (size_t s = 0; s < ns; ++s) {
        const State& st = states_[s];
        in[s] = static_cast<const char*>(buffers[st.init]) + b * st.bytes;
        slot0[s] = st.out >= 0 ? static_cast<char*>(buffers[st.out]) + b * st.bytes : lost[s];
      }
      for (int64_t t = 0; t < length_; ++t) {
        for (size_t s = 0; s < ns; ++s) out[s] = (t & 1) ? spare[s] : slot0[s];
        for (size_t i = 0; i < ni; ++i) {
          const Operand& op = scan_in_[i];
          const int64_t at = op.reverse ? length_ - 1 - t : t;
          const char* base = static_cast<const char*>(buffers[op.buffer]) + b * op.batch_bytes;
          if (op.map.outer == 1) {
            in[ns + i] = base + op.map.Offset(0, at);
            continue;
          }
          for (int64_t o = 0; o < op.map.outer; ++o) {
            std::memcpy(in_slice[i] + o * op.map.inner, base + op.map.Offset(o, at),
                        op.map.inner);
          }
          in[ns + i] = in_slice[i];
        }
        for (size_t k = 0; k < no; ++k) {
          const Operand& op = scan_out_[k];
          const int64_t at = op.reverse ? length_ - 1 - t : t;
          out[ns + k] = out_slice[k] != nullptr
                            ? out_slice[k]
                            : static_cast<char*>(buffers[op.buffer]) + b * op.batch_bytes +
                                  op.map.Offset(0, at);
        }
        absl::Status status = RunOnBuffers(*body_, in, out, output_shapes_);
        if (!status.ok()) {
          return absl::Status(status.code(), absl::StrCat("Scan '", node_, "', iteration ", t,
                                                          ": ", status.message()));
        }
        for (size_t k = 0; k < no; ++k) {
          const Operand& op = scan_out_[k];
          if (op.buffer < 0 || op.map.outer == 1) continue;
          const int64_t at = op.reverse ? length_ - 1 - t : t;
          char* base = static_cast<char*>(buffers[op.buffer]) + b * op.batch_bytes;
          for (int64_t o = 0; o < op.map.outer; ++o) {
            std::memcpy(base + op.map.Offset(o, at), out_slice[k] + o * op.map.inner,
                        op.map.inner);
          }
        }
        for (size_t s = 0; s < ns; ++s) in[s] = out[s];
      }
      for (size_t s = 0; s < ns; ++s) {
        if (states_[s].out >= 0 && in[s] != slot0[s] && states_[s].bytes > 0) {
          std::memcpy(slot0[s], in[s], states_[s].bytes);
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string node_;
  std::shared_ptr<const CompiledModel> body_;
  int64_t batch_, length_;
  std::vector<State> states_;
  std::vector<Operand> scan_in_, scan_out_;
  std::vector<int32_t> captures_;
  std::vector<std::optional<ir::Shape>> output_shapes_;
};

const Buffer* BufferAt(const LoopProgram& program, int32_t b) {
  if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) return nullptr;
  return &program.buffers[b];
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExternStep>> CreateLoopStep(
    const LoopProgram& program, const Kernel& kernel, LoopCall call,
    std::shared_ptr<const CompiledModel> body, int64_t max_iterations) {
  if (kernel.kind != Kernel::Kind::kExtern) {
    return InternalError("kernel '", EscapeForMessage(kernel.name), "' is not a Loop call");
  }
  if (body == nullptr) return InternalError("Loop '", EscapeForMessage(kernel.name), "': no body");
  if (max_iterations <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_loop_iterations must be positive, got ", max_iterations));
  }
  auto refuse = [&](const std::string& why) { return RefuseOp("Loop", kernel, why); };
  if (kernel.call.attrs.count(ir::loop::kAttrBlockedInputs) > 0 ||
      kernel.call.attrs.count(ir::loop::kAttrBlockedOutputs) > 0) {
    return refuse("an operand is channel-blocked");
  }
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(program);
  auto is_dynamic = [&](int32_t b) {
    return b >= 0 && static_cast<size_t>(b) < dynamic.size() && dynamic[b];
  };
  const size_t nc = call.carried.size();
  const std::vector<TensorInfo>& ins = body->inputs();
  const std::vector<TensorInfo>& outs = body->outputs();
  if (ins.size() != 2 + nc + call.captures.size() || outs.size() < 1 + nc ||
      call.final_values.size() != nc || call.scan_outputs.size() != outs.size() - 1 - nc) {
    return InternalError("Loop '", EscapeForMessage(kernel.name),
                         "': the body's interface does not match the call");
  }
  auto one = [](const TensorInfo& t, ir::DType dtype) {
    return StaticInfo(t) && t.dtype == dtype && NumElements(t.shape) == 1;
  };
  // A condition of data-dependent shape is checked to be one bool per run.
  const bool cond_out_ok =
      one(outs[0], ir::DType::kBool) || (!StaticInfo(outs[0]) && outs[0].dtype == ir::DType::kBool);
  if (!one(ins[0], ir::DType::kI64) || !one(ins[1], ir::DType::kBool) || !cond_out_ok) {
    return refuse("the body's iteration number or condition is not one i64 / bool");
  }
  ir::DType trip_dtype = ir::DType::kI64;
  if (call.trip_count >= 0) {
    const Buffer* m = BufferAt(program, call.trip_count);
    if (m == nullptr || is_dynamic(call.trip_count) || !PlainStatic(*m) ||
        m->StorageSize().value_or(0) != 1 ||
        (m->dtype != ir::DType::kI64 && m->dtype != ir::DType::kI32)) {
      return refuse("the trip count is not one i64");
    }
    trip_dtype = m->dtype;
  }
  if (call.cond >= 0) {
    const Buffer* c = BufferAt(program, call.cond);
    if (c == nullptr || is_dynamic(call.cond) || !PlainStatic(*c) ||
        c->dtype != ir::DType::kBool || c->StorageSize().value_or(0) != 1) {
      return refuse("the condition is not one bool");
    }
  }
  auto plain_input = [&](int32_t b, const TensorInfo& info) {
    const Buffer* buf = BufferAt(program, b);
    return buf != nullptr && !is_dynamic(b) && PlainStatic(*buf) && StaticInfo(info) &&
           buf->dtype == info.dtype && buf->shape == info.shape;
  };
  std::vector<LoopStep::Carried> carried(nc);
  for (size_t c = 0; c < nc; ++c) {
    const TensorInfo& in = ins[2 + c];
    const TensorInfo& o = outs[1 + c];
    if (!plain_input(call.carried[c], in)) {
      return refuse(absl::StrCat("loop-carried value ", c, " ('", EscapeForMessage(in.name),
                                 "') is not a plain buffer of static shape"));
    }
    if (!StaticInfo(o) || o.dtype != in.dtype || o.shape != in.shape) {
      return refuse(absl::StrCat(
          "loop-carried value ", c, " ('", EscapeForMessage(in.name), "') enters the body as ",
          ir::TypeString(in.dtype, in.shape), " and leaves it as ",
          o.shape_known ? ir::TypeString(o.dtype, o.shape) : "a value of unknown rank",
          ": its shape may change between iterations"));
    }
    LoopStep::Carried& v = carried[c];
    v.init = call.carried[c];
    v.out = call.final_values[c];
    v.dtype = in.dtype;
    v.shape = in.shape;
    v.bytes = ByteSize(in.dtype, in.shape);
    if (v.out >= 0) {
      const Buffer* b = BufferAt(program, v.out);
      v.out_dynamic = is_dynamic(v.out);
      if (b == nullptr || b->dtype != v.dtype ||
          (!v.out_dynamic && (!PlainStatic(*b) || b->shape != v.shape))) {
        return refuse(absl::StrCat("final value ", c, " is not a plain buffer of type ",
                                   ir::TypeString(v.dtype, v.shape)));
      }
    }
  }
  for (size_t i = 0; i < call.captures.size(); ++i) {
    const TensorInfo& in = ins[2 + nc + i];
    if (!plain_input(call.captures[i], in)) {
      return refuse(absl::StrCat("the outer value '", EscapeForMessage(in.name),
                                 "' the body reads is not a plain buffer of static shape"));
    }
  }
  std::vector<LoopStep::ScanOut> scans(call.scan_outputs.size());
  for (size_t k = 0; k < scans.size(); ++k) {
    const TensorInfo& o = outs[1 + nc + k];
    LoopStep::ScanOut& so = scans[k];
    so.out = call.scan_outputs[k];
    so.dtype = o.dtype;
    so.slice_dynamic = !StaticInfo(o);
    if (!so.slice_dynamic) {
      so.slice = o.shape;
      so.slice_bytes = ByteSize(o.dtype, o.shape);
    }
    if (so.out < 0) continue;
    const Buffer* b = BufferAt(program, so.out);
    so.out_dynamic = is_dynamic(so.out);
    bool fits = b != nullptr && b->dtype == so.dtype && so.dtype != ir::DType::kInvalid;
    if (fits && !so.out_dynamic && so.slice_dynamic) {
      // Checked against the body's slices on each run.
      fits = PlainStatic(*b) && !b->shape.empty();
      if (fits) {
        so.slice.assign(b->shape.begin() + 1, b->shape.end());
        so.slice_bytes = ByteSize(so.dtype, so.slice);
        so.rows = b->shape[0];
      }
    } else if (fits && !so.out_dynamic) {
      fits = PlainStatic(*b) && b->shape.size() == so.slice.size() + 1 &&
             std::equal(so.slice.begin(), so.slice.end(), b->shape.begin() + 1);
      if (fits) so.rows = b->shape[0];
    }
    if (!fits) {
      return refuse(absl::StrCat("scan output ", k, " (slices ",
                                 so.slice_dynamic ? std::string("of data-dependent shape")
                                                  : ir::TypeString(so.dtype, so.slice),
                                 ") does not fit the Loop's output"));
    }
  }
  std::string node = NodeOf(kernel);
  return std::unique_ptr<ExternStep>(std::make_unique<LoopStep>(
      std::move(node), std::move(call), std::move(body), max_iterations, trip_dtype,
      std::move(carried), std::move(scans)));
}

absl::StatusOr<std::unique_ptr<ExternStep>> CreateScanStep(
    const LoopProgram& program, const Kernel& kernel, ScanCall call,
    std::shared_ptr<const CompiledModel> body) {
  if (kernel.kind != Kernel::Kind::kExtern) {
    return InternalError("kernel '", EscapeForMessage(kernel.name), "' is not a Scan call");
  }
  if (body == nullptr) return InternalError("Scan '", EscapeForMessage(kernel.name), "': no body");
  auto refuse = [&](const std::string& why) { return RefuseOp("Scan", kernel, why); };
  if (kernel.call.attrs.count(ir::loop::kAttrBlockedInputs) > 0 ||
      kernel.call.attrs.count(ir::loop::kAttrBlockedOutputs) > 0) {
    return refuse("an operand is channel-blocked");
  }
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(program);
  const size_t ns = call.states.size(), ni = call.scan_inputs.size();
  const std::vector<TensorInfo>& ins = body->inputs();
  const std::vector<TensorInfo>& outs = body->outputs();
  const size_t no = outs.size() < ns ? 0 : outs.size() - ns;
  if (ins.size() != ns + ni + call.captures.size() || outs.size() < ns ||
      call.final_states.size() != ns || call.scan_outputs.size() != no ||
      call.input_axes.size() != ni || call.input_reverse.size() != ni ||
      call.output_axes.size() != no || call.output_reverse.size() != no || ni == 0) {
    return InternalError("Scan '", EscapeForMessage(kernel.name),
                         "': the body's interface does not match the call");
  }
  // A buffer of the call, plain and static.
  auto plain = [&](int32_t b) -> const Buffer* {
    const Buffer* buf = BufferAt(program, b);
    if (buf == nullptr || dynamic[b] || !PlainStatic(*buf)) return nullptr;
    return buf;
  };
  for (const TensorInfo& t : ins) {
    if (!StaticInfo(t))
      return refuse(
          absl::StrCat("the body's input '", EscapeForMessage(t.name), "' is not static"));
  }
  for (const TensorInfo& t : outs) {
    if (!StaticInfo(t)) {
      return refuse(absl::StrCat("the body's output '", EscapeForMessage(t.name),
                                 "' has a data-dependent shape"));
    }
  }
  // The operand's shape within one batch entry.
  int64_t batch = 1;
  if (call.batched) {
    const Buffer* first = plain(call.states.empty() ? call.scan_inputs[0] : call.states[0]);
    if (first == nullptr || first->shape.empty()) return refuse("an operand is not a plain buffer");
    batch = first->shape[0];
  }
  auto entry = [&](const Buffer& b) -> std::optional<ir::Shape> {
    if (!call.batched) return b.shape;
    if (b.shape.empty() || b.shape[0] != batch) return std::nullopt;
    return ir::Shape(b.shape.begin() + 1, b.shape.end());
  };
  auto without = [](ir::Shape shape, size_t axis) {
    shape.erase(shape.begin() + axis);
    return shape;
  };
  std::vector<ScanStep::State> states(ns);
  for (size_t s = 0; s < ns; ++s) {
    const Buffer* b = plain(call.states[s]);
    std::optional<ir::Shape> shape = b == nullptr ? std::nullopt : entry(*b);
    if (!shape || b->dtype != ins[s].dtype || *shape != ins[s].shape ||
        outs[s].dtype != ins[s].dtype || outs[s].shape != ins[s].shape) {
      return refuse(absl::StrCat("state ", s, " ('", EscapeForMessage(ins[s].name),
                                 "') is not a plain buffer keeping its type ",
                                 ir::TypeString(ins[s].dtype, ins[s].shape)));
    }
    states[s].init = call.states[s];
    states[s].bytes = ByteSize(ins[s].dtype, ins[s].shape);
    states[s].out = call.final_states[s];
    if (states[s].out >= 0) {
      const Buffer* o = plain(states[s].out);
      if (o == nullptr || o->dtype != ins[s].dtype || entry(*o) != ins[s].shape) {
        return refuse(absl::StrCat("final state ", s, " is not a plain buffer of its type"));
      }
    }
  }
  int64_t length = -1;
  std::vector<ScanStep::Operand> scan_in(ni);
  for (size_t i = 0; i < ni; ++i) {
    const TensorInfo& info = ins[ns + i];
    const Buffer* b = plain(call.scan_inputs[i]);
    std::optional<ir::Shape> shape = b == nullptr ? std::nullopt : entry(*b);
    const size_t axis = static_cast<size_t>(call.input_axes[i]);
    if (!shape || axis >= shape->size() || b->dtype != info.dtype ||
        without(*shape, axis) != info.shape) {
      return refuse(absl::StrCat("scan input ", i, " does not slice into the body's '",
                                 info.name, "' (", ir::TypeString(info.dtype, info.shape), ")"));
    }
    if (length >= 0 && (*shape)[axis] != length) {
      return refuse("the scan inputs have different lengths");
    }
    length = (*shape)[axis];
    ScanStep::Operand& op = scan_in[i];
    op.buffer = call.scan_inputs[i];
    op.batch_bytes = ByteSize(b->dtype, *shape);
    op.map = MapAlong(*shape, b->dtype, axis);
    op.reverse = call.input_reverse[i];
    op.slice_bytes = ByteSize(info.dtype, info.shape);
  }
  std::vector<ScanStep::Operand> scan_out(no);
  for (size_t k = 0; k < no; ++k) {
    const TensorInfo& info = outs[ns + k];
    ScanStep::Operand& op = scan_out[k];
    op.buffer = call.scan_outputs[k];
    op.slice_bytes = ByteSize(info.dtype, info.shape);
    op.reverse = call.output_reverse[k];
    op.map.outer = 1;
    if (op.buffer < 0) continue;
    const Buffer* b = plain(op.buffer);
    std::optional<ir::Shape> shape = b == nullptr ? std::nullopt : entry(*b);
    const size_t axis = static_cast<size_t>(call.output_axes[k]);
    if (!shape || axis >= shape->size() || b->dtype != info.dtype || (*shape)[axis] != length ||
        without(*shape, axis) != info.shape) {
      return refuse(absl::StrCat("scan output ", k, " (slices ",
                                 ir::TypeString(info.dtype, info.shape),
                                 ") does not fit the Scan's output"));
    }
    op.batch_bytes = ByteSize(b->dtype, *shape);
    op.map = MapAlong(*shape, b->dtype, axis);
  }
  for (size_t c = 0; c < call.captures.size(); ++c) {
    const TensorInfo& info = ins[ns + ni + c];
    const Buffer* b = plain(call.captures[c]);
    if (b == nullptr || b->dtype != info.dtype || b->shape != info.shape) {
      return refuse(absl::StrCat("the outer value '", EscapeForMessage(info.name),
                                 "' the body reads is not a plain buffer of static shape"));
    }
  }
  return std::unique_ptr<ExternStep>(std::make_unique<ScanStep>(
      NodeOf(kernel), std::move(body), batch, length, std::move(states), std::move(scan_in),
      std::move(scan_out), std::move(call.captures)));
}

const char* ControlFlowOpName(ControlFlowCall::Op op) {
  switch (op) {
    case ControlFlowCall::Op::kIf:
      return "If";
    case ControlFlowCall::Op::kLoop:
      return "Loop";
    case ControlFlowCall::Op::kScan:
      return "Scan";
  }
  return "?";
}

namespace {

// What a compiled If's, Loop's or Scan's report line says of a subgraph;
// with reference calls, why the first one is one (in a branch typed from
// the outer shapes, a shape that depends on run-time data).
std::string SubgraphSummary(const CompileReport& r) {
  std::string s = absl::StrCat(r.loop_kernels, " loop kernels (", r.vectorized_kernels,
                               " vectorized), ", r.library_calls, " library calls (",
                               r.reference_calls, " reference)");
  for (const KernelReport& k : r.kernels) {
    if (k.backend != "reference" || k.reason.empty()) continue;
    absl::StrAppend(&s, " [first reference call: ", k.reason, "]");
    break;
  }
  return s;
}

}  // namespace

absl::StatusOr<PrebuiltStep> CreateControlFlowStep(
    const CompileOptions& options, const LoopProgram& program, const ControlFlowCall& call,
    std::vector<std::shared_ptr<const CompiledModel>> models) {
  using Op = ControlFlowCall::Op;
  if (call.kernel < 0 || static_cast<size_t>(call.kernel) >= program.kernels.size()) {
    return InternalError("control-flow call of kernel ", call.kernel, " outside its program");
  }
  const Kernel& kernel = program.kernels[call.kernel];
  const size_t expected = call.op == Op::kIf ? 2 : 1;
  if (models.size() != expected) {
    return InternalError(ControlFlowOpName(call.op), " '", EscapeForMessage(kernel.name), "' has ",
                         models.size(), " subgraph models, expected ", expected);
  }
  for (size_t m = 0; m < models.size(); ++m) {
    if (models[m] == nullptr && (call.op != Op::kIf || call.unfit[m].empty())) {
      return InternalError(ControlFlowOpName(call.op), " '", EscapeForMessage(kernel.name),
                           "' lacks a subgraph model");
    }
  }
  PrebuiltStep step;
  step.report.name = kernel.name;
  step.report.backend = "compiled";
  step.report.ops = kernel.ops;
  step.report.vectorized = true;
  step.report.call = ControlFlowOpName(call.op);
  for (const auto& m : models) {
    if (m == nullptr) continue;
    step.reference_calls += m->report().reference_calls;
    step.fallback_calls += m->report().fallback_calls;
  }
  absl::StatusOr<std::unique_ptr<ExternStep>> made;
  if (call.op == Op::kIf) {
    step.report.status = "branches";
    auto summary = [&](int k) {
      return models[k] != nullptr
                 ? SubgraphSummary(models[k]->report())
                 : absl::StrCat("not compiled, cannot run with these input shapes (",
                                call.unfit[k], ")");
    };
    step.report.reason = absl::StrCat("then: ", summary(0), "; else: ", summary(1));
    made = CreateIfStep(program, kernel, {models[0], call.then_buffers, call.unfit[0]},
                        {models[1], call.else_buffers, call.unfit[1]});
  } else if (call.op == Op::kLoop) {
    step.report.status = "body";
    step.report.reason = absl::StrCat("body: ", SubgraphSummary(models[0]->report()), "; at most ",
                                      options.max_loop_iterations, " iterations");
    made = CreateLoopStep(program, kernel, call.loop, models[0], options.max_loop_iterations);
  } else {
    step.report.status = "body";
    step.report.reason = absl::StrCat("body: ", SubgraphSummary(models[0]->report()));
    made = CreateScanStep(program, kernel, call.scan, models[0]);
  }
  KILN_RETURN_IF_ERROR(made.status());
  step.step = *std::move(made);
  return step;
}

}  // namespace kiln::runtime
