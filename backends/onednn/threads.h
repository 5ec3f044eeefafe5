// File: backends/onednn/threads.h — the thread count oneDNN primitives (and
// kiln's OpenMP kernels) use.
//
// Debian's oneDNN 2.6 is built on GNU OpenMP (libgomp): every primitive runs
// its work in `#pragma omp parallel` regions opened from the thread that
// calls execute(). The team size is libgomp's nthreads-var, a per-thread
// setting (inherited from OMP_NUM_THREADS at start-up), so SetNumThreads must
// be called in the thread that runs the model. Generated kernels are built
// with -fopenmp and parallelize with `#pragma omp parallel for` from the same
// thread: they reuse the same libgomp thread pool and the same count, and
// since the wrapper runs kernels and oneDNN calls one after another, the two
// never oversubscribe the cores.
#ifndef KILN_BACKENDS_ONEDNN_THREADS_H_
#define KILN_BACKENDS_ONEDNN_THREADS_H_

#include "absl/status/status.h"

namespace kiln::onednn {

// Parallel regions opened later from the calling thread (oneDNN primitives,
// OpenMP kernels) use `num_threads` threads. InvalidArgument if < 1.
absl::Status SetNumThreads(int num_threads);

// The team size the next parallel region of the calling thread will get
// (omp_get_max_threads()).
int NumThreads();

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_THREADS_H_
