// File: isa/isa.h — a VecISA module is a policy, not an emitter: its name, how
// to tell whether the running CPU has it, the compiler and flags that build
// generated code for it, the Highway target those flags select, its vector
// width, and tuning knobs. Each is one row of isa/isas.bzl (its host
// detection in isa/<name>/); the table here is generated from the rows.
//
//   KILN_ASSIGN_OR_RETURN(const isa::VecIsa* target, isa::SelectIsa(flag));
//   std::vector<std::string> cmd = {target->cxx, target->cxx_flags...};
#ifndef KILN_ISA_ISA_H_
#define KILN_ISA_ISA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::isa {

struct VecIsa {
  std::string name;          // "avx512", the --isa= token and the test tag suffix
  int rank = 0;              // higher is preferred when several are supported
  int vector_bytes = 0;      // f32 lanes = vector_bytes / 4
  int64_t hwy_target = 0;    // the HWY_* bit its flags make Highway's static target
  std::string cxx;           // compiler for generated code
  std::vector<std::string> cxx_flags;  // ISA flags (optimization flags are the JIT's)
  std::string emulator;      // non-empty: run binaries under it (neon on x86)
  bool (*host_supports)() = nullptr;   // may generated code run on this CPU?
  // Tuning: elements per side of a 2-D transpose tile, and the smallest
  // number of elements worth a parallel loop.
  int transpose_tile = 8;
  int64_t parallel_grain = 32768;
};

// Every module, best first.
std::vector<const VecIsa*> AllIsas();
// nullptr if no module has that name.
const VecIsa* FindIsa(absl::string_view name);
// The best module this CPU runs (scalar at worst).
const VecIsa* BestHostIsa();
// `name` empty: the best host ISA. Otherwise that module, or InvalidArgument
// when unknown or when this CPU lacks it (never a SIGILL later).
absl::StatusOr<const VecIsa*> SelectIsa(absl::string_view name);

}  // namespace kiln::isa

#endif  // KILN_ISA_ISA_H_
