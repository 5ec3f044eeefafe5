// File: isa/isa_table.h — the VecISA table generated from isa/isas.bzl's rows
// (kiln_isa_table in isa/isa_table.bzl); read it through isa/isa.h.
#ifndef KILN_ISA_ISA_TABLE_H_
#define KILN_ISA_ISA_TABLE_H_

#include <vector>

#include "isa/isa.h"

namespace kiln::isa::internal {

// One VecIsa per row, best (highest rank) first; built on first use.
const std::vector<VecIsa>& IsaTable();

}  // namespace kiln::isa::internal

#endif  // KILN_ISA_ISA_TABLE_H_
