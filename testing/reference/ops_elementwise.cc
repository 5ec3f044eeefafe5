// Reference kernels: elementwise ops (see op_registry.h for the family's list).
#include "testing/reference/kernel_util.h"
#include "testing/reference/op_registry.h"

namespace kiln::reference {

void RegisterElementwiseOps(OpRegistry* registry) {}

}  // namespace kiln::reference
