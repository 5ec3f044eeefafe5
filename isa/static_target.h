// File: isa/static_target.h — asks a module's compiler which Highway target
// its flags select (HWY_STATIC_TARGET after preprocessing), so tests can
// prove each module's flags really produce its target.
#ifndef KILN_ISA_STATIC_TARGET_H_
#define KILN_ISA_STATIC_TARGET_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "isa/isa.h"

namespace kiln::isa {

// NotFound when the module's compiler is not installed.
absl::StatusOr<int64_t> StaticHwyTarget(const VecIsa& isa);

}  // namespace kiln::isa

#endif  // KILN_ISA_STATIC_TARGET_H_
