// File: ir/loop/source_file.h — one generated source file: what the C++
// emitter produces and the JIT build and the AOT writer consume.
#ifndef KILN_IR_LOOP_SOURCE_FILE_H_
#define KILN_IR_LOOP_SOURCE_FILE_H_

#include <string>

namespace kiln::ir::loop {

// `name` is a sanitized identifier kiln chose ([A-Za-z_][A-Za-z0-9_]*, at
// most 128 chars): a translation unit written as <name>.cc, or with a ".h"
// suffix a header the translation units include.
struct SourceFile {
  std::string name;
  std::string text;
};

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_SOURCE_FILE_H_
