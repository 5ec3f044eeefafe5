// File: passes/loop/tabulate_8bit_functions.h — pass `tabulate-8bit-functions`:
// inside a loop kernel, a u8 / i8 value that is a function of one loaded u8 /
// i8 element alone (with constants) and passes through float arithmetic on
// the way — the DequantizeLinear -> f -> QuantizeLinear of a QDQ model, for
// any elementwise f, and chains of them such as QDQ SiLU — becomes a lookup
// in a 256-entry constant table.
//
// The table is computed at compile time by running the replaced ops on the
// loop interpreter for each of the 256 inputs, so the lookup returns exactly
// what the ops would (ONNX's rounding half to even and saturation, as
// lowering writes them). The lookup is `load_indirect` of an i32[256]
// constant at the input value (an i8 value v reads entry v + 256 for v < 0,
// load_indirect's wrap), cast back to the 8-bit type; vector code gathers.
// Of nested candidates only the outermost ones still needed are tabulated;
// the ops only they read are removed. Identical tables are shared.
#ifndef KILN_PASSES_LOOP_TABULATE_8BIT_FUNCTIONS_H_
#define KILN_PASSES_LOOP_TABULATE_8BIT_FUNCTIONS_H_

#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes {

class Tabulate8BitFunctions : public LoopPass {
 public:
  absl::string_view name() const override { return "tabulate-8bit-functions"; }
  absl::StatusOr<bool> Run(ir::loop::LoopModule* program) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_TABULATE_8BIT_FUNCTIONS_H_
