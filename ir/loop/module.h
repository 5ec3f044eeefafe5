// File: ir/loop/module.h — the loop module: a loop program plus how it binds
// to the model's interface (graph inputs/outputs) and its constants' data.
// Lowering produces it, loop passes transform it, the emitter, the runtime
// and the AOT writer consume it.
//
//   KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule m, lowering::LowerGraph(graph));
//   // m.program: buffers + kernels; m.inputs[k]: buffer of graph input k
#ifndef KILN_IR_LOOP_MODULE_H_
#define KILN_IR_LOOP_MODULE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"

namespace kiln::ir::loop {

struct LoopModule {
  LoopProgram program;
  // Buffer index of each graph input / output, in the graph's order.
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  // Data of each constant buffer (bound by buffer name at run time).
  std::map<int32_t, std::shared_ptr<const ir::Tensor>> constants;
  // Buffer name -> the model's value name it holds (for the API and
  // messages; model names never reach generated code).
  std::map<std::string, std::string> value_names;
};

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_MODULE_H_
