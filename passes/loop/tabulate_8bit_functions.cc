// tabulate-8bit-functions: 8-bit functions of one 8-bit load become lookups
// in 256-entry tables computed on the loop interpreter (rules in
// tabulate_8bit_functions.h).
#include "passes/loop/tabulate_8bit_functions.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "passes/loop/fusion_util.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Tensor;
using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::IndexExpr;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;

constexpr int32_t kConstantSource = -1;  // a function of constants only
constexpr int32_t kManySources = -2;     // anything else
constexpr int64_t kEntries = 256;

bool IsEightBit(DType t) { return t == DType::kU8 || t == DType::kI8; }

// Per op: the load of an 8-bit buffer whose element alone (with constants)
// determines the op's value, or kConstantSource / kManySources.
std::vector<int32_t> SingleSources(const LoopProgram& p, const Kernel& k) {
  std::vector<int32_t> src(k.body.size(), kManySources);
  for (size_t i = 0; i < k.body.size(); ++i) {
    const Op& op = k.body[i];
    if (op.code == OpCode::kConstant) {
      src[i] = kConstantSource;
    } else if (op.code == OpCode::kLoad) {
      if (IsEightBit(p.buffers[op.buffer].dtype)) src[i] = static_cast<int32_t>(i);
    } else if ((op.code == OpCode::kCast || op.code == OpCode::kSelect ||
                ir::loop::IsElementwise(op.code)) &&
               loop_util::IsPureOp(op)) {
      int32_t s = kConstantSource;
      for (int32_t a : op.args) {
        if (src[a] == kConstantSource) continue;
        if (src[a] == kManySources || (s != kConstantSource && s != src[a])) {
          s = kManySources;
          break;
        }
        s = src[a];
      }
      src[i] = s;
    }
  }
  return src;
}

// The ops op `cut` depends on, itself included, the source load excluded
// (the others are constants and functions of the source): cone[j].
std::vector<bool> Cone(const Kernel& k, int32_t cut, int32_t source) {
  std::vector<bool> cone(k.body.size(), false);
  cone[cut] = true;
  for (int32_t j = cut; j >= 0; --j) {
    if (!cone[j]) continue;
    for (int32_t a : k.body[j].args) {
      if (a != source) cone[a] = true;
    }
  }
  return cone;
}

// Whether the cone computes in floats (a dequantize-f-quantize chain):
// only then is one gather cheaper than the ops it replaces.
bool WorthATable(const Kernel& k, const std::vector<bool>& cone) {
  for (size_t j = 0; j < k.body.size(); ++j) {
    const Op& op = k.body[j];
    if (cone[j] && ir::loop::IsElementwise(op.code) && ir::IsFloat(op.dtype)) return true;
  }
  return false;
}

// The value of op `cut` for each of the 256 bit patterns of the source
// element (entry b: the u8 value b, or the i8 value with those bits), by the
// loop interpreter, as i32.
absl::StatusOr<Tensor> ComputeTable(const LoopProgram& p, const Kernel& k, int32_t cut,
                                    int32_t source) {
  const std::vector<bool> cone = Cone(k, cut, source);
  LoopProgram t;
  const DType in_dtype = p.buffers[k.body[source].buffer].dtype;
  const int32_t x = t.AddBuffer("x", in_dtype, {kEntries}, BufferKind::kInput);
  const int32_t y = t.AddBuffer("y", k.body[cut].dtype, {kEntries}, BufferKind::kOutput);
  Kernel tk;
  tk.name = "table";
  tk.ranges = {kEntries};
  std::vector<int32_t> remap(k.body.size(), -1);
  Op load;
  load.code = OpCode::kLoad;
  load.dtype = in_dtype;
  load.buffer = x;
  load.index = IndexExpr::Variable(0);
  tk.body.push_back(load);
  remap[source] = 0;
  for (int32_t j = 0; j <= cut; ++j) {
    if (!cone[j]) continue;
    Op op = k.body[j];
    for (int32_t& a : op.args) a = remap[a];
    remap[j] = static_cast<int32_t>(tk.body.size());
    tk.body.push_back(std::move(op));
  }
  Op store;
  store.code = OpCode::kStore;
  store.buffer = y;
  store.index = IndexExpr::Variable(0);
  store.args = {remap[cut]};
  tk.body.push_back(store);
  t.kernels.push_back(std::move(tk));

  Tensor in(in_dtype, {kEntries});
  for (int64_t b = 0; b < kEntries; ++b) {
    static_cast<uint8_t*>(in.raw_data())[b] = static_cast<uint8_t>(b);
  }
  KILN_ASSIGN_OR_RETURN(auto out, ir::loop::RunLoopProgram(t, {{"x", in}}));
  const Tensor& values = out.at("y");
  Tensor table(DType::kI32, {kEntries});
  for (int64_t b = 0; b < kEntries; ++b) {
    table.data<int32_t>()[b] = values.dtype() == DType::kU8
                                   ? static_cast<int32_t>(values.data<uint8_t>()[b])
                                   : static_cast<int32_t>(values.data<int8_t>()[b]);
  }
  return table;
}

class Tabulator {
 public:
  explicit Tabulator(ir::loop::LoopModule* lp) : lp_(lp) {}

  absl::StatusOr<bool> RunOn(int kernel_index) {
    LoopProgram& p = lp_->program;
    const Kernel& k = p.kernels[kernel_index];
    const std::vector<int32_t> src = SingleSources(p, k);
    const int32_t n = static_cast<int32_t>(k.body.size());
    std::vector<bool> candidate(n, false);
    for (int32_t i = 0; i < n; ++i) {
      candidate[i] = src[i] >= 0 && src[i] != i && IsEightBit(k.body[i].dtype) &&
                     WorthATable(k, Cone(k, i, src[i]));
    }
    // Liveness with every candidate a lookup of its source: the candidates
    // still live are the outermost ones the kernel needs.
    std::vector<bool> live(n, false);
    for (int32_t i = n - 1; i >= 0; --i) {
      if (!loop_util::IsPureOp(k.body[i])) live[i] = true;
      if (!live[i]) continue;
      if (candidate[i]) {
        live[src[i]] = true;
        continue;
      }
      for (int32_t a : k.body[i].args) live[a] = true;
    }
    std::map<int32_t, int32_t> table_of;  // cut -> table buffer
    for (int32_t i = 0; i < n; ++i) {
      if (!candidate[i] || !live[i]) continue;
      // The cone is pure ops of known semantics on one 256-element input:
      // an error here is a kiln bug.
      absl::StatusOr<Tensor> table = ComputeTable(p, k, i, src[i]);
      if (!table.ok()) {
        return kiln::InternalError("kernel ", k.name, ": tabulating op #", i, ": ",
                                   table.status().message());
      }
      table_of[i] = TableBuffer(*std::move(table));
    }
    if (table_of.empty()) return false;

    Kernel& kk = p.kernels[kernel_index];
    std::vector<Op> body;
    std::vector<int32_t> remap(n, -1);
    auto append = [&](Op op) {
      body.push_back(std::move(op));
      return static_cast<int32_t>(body.size() - 1);
    };
    for (int32_t i = 0; i < n; ++i) {
      auto it = table_of.find(i);
      if (it == table_of.end()) {
        Op op = kk.body[i];
        for (int32_t& a : op.args) a = remap[a];
        remap[i] = append(std::move(op));
        continue;
      }
      Op index;
      index.code = OpCode::kCast;
      index.dtype = DType::kI32;
      index.args = {remap[src[i]]};
      const int32_t ix = append(std::move(index));
      Op lookup;
      lookup.code = OpCode::kLoadIndirect;
      lookup.dtype = DType::kI32;
      lookup.buffer = it->second;
      lookup.index = IndexExpr::Constant(0);
      lookup.args = {ix};
      lookup.extent = kEntries;
      lookup.stride = 1;
      const int32_t looked_up = append(std::move(lookup));
      Op narrow;
      narrow.code = OpCode::kCast;
      narrow.dtype = kk.body[i].dtype;
      narrow.args = {looked_up};
      remap[i] = append(std::move(narrow));
    }
    kk.body = std::move(body);
    loop_util::EliminateDeadOps(&kk);
    return true;
  }

 private:
  // A constant i32[256] buffer holding `table`, shared with an identical
  // table made before.
  int32_t TableBuffer(Tensor table) {
    std::string bytes(static_cast<const char*>(table.raw_data()), table.byte_size());
    auto it = tables_.find(bytes);
    if (it != tables_.end()) return it->second;
    LoopProgram& p = lp_->program;
    std::string name;
    do {
      name = absl::StrCat("kiln_table_", next_name_++);
    } while (p.FindBuffer(name) >= 0);
    const int32_t b = p.AddBuffer(name, DType::kI32, {kEntries}, BufferKind::kConstant);
    lp_->constants[b] = std::make_shared<const Tensor>(std::move(table));
    tables_.emplace(std::move(bytes), b);
    return b;
  }

  ir::loop::LoopModule* lp_;
  std::map<std::string, int32_t> tables_;
  int next_name_ = 0;
};

}  // namespace

absl::StatusOr<bool> Tabulate8BitFunctions::Run(ir::loop::LoopModule* lp) {
  Tabulator t(lp);
  bool changed = false;
  for (size_t k = 0; k < lp->program.kernels.size(); ++k) {
    if (lp->program.kernels[k].kind != Kernel::Kind::kLoop) continue;
    KILN_ASSIGN_OR_RETURN(bool c, t.RunOn(static_cast<int>(k)));
    changed = changed || c;
  }
  return changed;
}

}  // namespace kiln::passes
