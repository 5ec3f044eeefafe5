// File: backends/onednn/engine.h — the one oneDNN CPU engine and stream of
// the process, shared by every OneDnnCall (oneDNN primitives are bound to an
// engine; creating one per call would waste memory and start-up time).
#ifndef KILN_BACKENDS_ONEDNN_ENGINE_H_
#define KILN_BACKENDS_ONEDNN_ENGINE_H_

#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn {

// CPU engine index 0, created on first use. May throw dnnl::error: call
// inside a try block (OneDnnCall does).
dnnl::engine& CpuEngine();
// The in-order stream on CpuEngine() that all calls execute on. CPU
// execution under OpenMP is synchronous: a primitive is done when execute()
// returns.
dnnl::stream& CpuStream();

// Executes reorder(src -> dst) once, on the calling thread alone (a team of
// one, restored afterwards): for one-time weight prepacking at primitive
// creation. A reorder only moves bytes, so the result does not depend on
// the team size; a team of two would fork and join an OpenMP team for every
// weight, and on a loaded host the join waits on a descheduled, spinning
// worker (docs/decisions/0028-one-thread-setting.md). May throw
// dnnl::error like any oneDNN call.
void ReorderOnce(dnnl::memory& src, dnnl::memory& dst);

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_ENGINE_H_
