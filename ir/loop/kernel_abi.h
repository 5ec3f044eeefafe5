// File: ir/loop/kernel_abi.h — the entry every generated loop kernel has
// (backends/cpp writes it, runtime/ calls it, an AOT library's kernel table
// lists it) and the error bits it returns.
//
//   void* args[] = {x_storage, y_storage};  // the kernel's buffer arguments
//   int rc = fn(args);                      // 0, or kError* bits
#ifndef KILN_IR_LOOP_KERNEL_ABI_H_
#define KILN_IR_LOOP_KERNEL_ABI_H_

namespace kiln::ir::loop {

// Signature of every kernel entry (`extern "C" int <symbol>(void* const*
// args)`) and of an emitted program's run-all entry.
using KernelFn = int (*)(void* const* args);

// Error bits an entry returns (or-ed when several happen).
// An integer division or modulo divided by zero.
inline constexpr int kErrorIntegerDivByZero = 1;
// A load_indirect or store_indirect index (Gather*, Scatter*) outside
// [-extent, extent): the element is not read / written.
inline constexpr int kErrorIndexOutOfRange = 2;

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_KERNEL_ABI_H_
