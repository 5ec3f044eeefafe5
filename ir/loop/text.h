// File: ir/loop/text.h — the readable text form of a LoopProgram: a printer
// and a parser that round-trip, for dumps between loop passes and golden
// tests.
//
//   buffer %x: f32[4,8] input
//   buffer %y: f32[4,8] strides=[1,4] output
//   kernel k0 "softmax" over (i0: 4, i1: 8) reduce (r0: 8) ops=["/Softmax"] {
//     %0 = load %x[i0*8 + r0]
//     %1 = reduce max %0
//     %2 = load %x[i0*8 + i1]
//     %3 = sub %2, %1
//     store %y[i0 + i1*4], %3
//   }
//   extern k1 "matmul" call "onednn.matmul"(%x, %w) -> (%z) {transpose_b=1} ops=["/MatMul"]
//
// Grammar (`#` starts a comment to the end of the line):
//   program := (buffer | kernel | extern)*
//   buffer  := 'buffer' %NAME ':' dtype '[' [INT, ...] ']'
//              ['strides' '=' '[' [INT, ...] ']'] buffer_kind
//   kernel  := 'kernel' NAME [STRING] 'over' '(' [var ':' INT, ...] ')'
//              ['reduce' '(' [var ':' INT, ...] ')'] [ops] [vec] '{' op* '}'
//   extern  := 'extern' NAME [STRING] 'call' STRING
//              '(' [%buf, ...] ')' '->' '(' [%buf, ...] ')'
//              ['{' [NAME '=' attr, ...] '}'] [ops] [vec]
//   ops     := 'ops' '=' '[' [STRING, ...] ']'
//   vec     := 'vec' '=' ('unchecked' | 'vectorized' | 'tiled' | 'scalar')
//              ['(' STRING ')']
//   op      := %v '=' 'load' %buf '[' index ']'
//            | 'store' %buf '[' index ']' ',' %v
//            | %v '=' 'load_indirect' %buf '[' index ']' ',' %n ','
//              'stride' INT ',' 'extent' INT
//            | 'store_indirect' %buf '[' index ']' ',' %n ',' 'stride' INT
//              ',' 'extent' INT ',' 'combine' (none|add|mul|max|min) ',' %v
//            | %v '=' 'constant' number ':' dtype
//            | %v '=' 'index' '[' index ']' ':' dtype
//            | %v '=' 'cast' %v ':' dtype
//            | %v '=' 'reduce' reduce_kind %v
//            | %v '=' OPNAME %v [',' %v [',' %v]]       (select, add, exp, ...)
//   attr    := INT | FLOAT | STRING | '[' INT, ... ']' | 'floats' '[' FLOAT, ... ']'
// `index` is an index expression (index_expr.h) over the kernel's variable
// names. Variable and value names are free in the input; the printer names
// variables i0.., r0.. and values %0, %1, ... in order. Floats print in the
// shortest form that reads back bit-exactly; integer constants of bool dtype
// are 0 or 1.
#ifndef KILN_IR_LOOP_TEXT_H_
#define KILN_IR_LOOP_TEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/loop_ir.h"

namespace kiln::ir::loop {

std::string PrintProgram(const LoopProgram& program);
// One kernel as PrintProgram prints it (with its trailing newline).
std::string PrintKernel(const LoopProgram& program, const Kernel& kernel);

// Errors are InvalidArgument "LINE:COL: ...". The result satisfies the
// grammar and names resolve (buffers, values, variables); run the verifier
// for everything else (bounds, dtypes).
absl::StatusOr<LoopProgram> ParseProgram(absl::string_view text);

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_TEXT_H_
