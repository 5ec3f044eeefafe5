// File: lowering/ops_scatter.h — internal to lowering/: registration of the
// lowerings that write at data-dependent places (ScatterElements, Scatter,
// ScatterND, MaxUnpool: store_indirect) and CumSum (ops_scatter.cc).
#ifndef KILN_LOWERING_OPS_SCATTER_H_
#define KILN_LOWERING_OPS_SCATTER_H_

#include "lowering/lowerer.h"

namespace kiln::lowering::internal {

// Registered before AddMiscLowerings, whose refusals only fill missing ops.
void AddScatterLowerings(LowerTable& table);

}  // namespace kiln::lowering::internal

#endif  // KILN_LOWERING_OPS_SCATTER_H_
