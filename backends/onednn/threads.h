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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace kiln::onednn {

// Parallel regions opened later from the calling thread (oneDNN primitives,
// OpenMP kernels) use `num_threads` threads. InvalidArgument if < 1.
absl::Status SetNumThreads(int num_threads);

// The team size the next parallel region of the calling thread will get
// (omp_get_max_threads()).
int NumThreads();

// Runs fn(i) for every i in [0, n) on min(n, NumThreads()) threads of the
// calling thread's OpenMP team (the team oneDNN's and the kernels' regions
// use), thread t taking i = t, t + team, ...; on one thread, in order on
// the caller. Returns when every call has returned, with their writes
// visible to the caller. Calls for distinct i must not conflict.
void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn);

// Subnormal floats flushed to zero while it lives: FTZ (results) and DAZ
// (operands) on x86, FZ on AArch64, set on the calling thread and on every
// thread of the OpenMP team its next parallel regions get (NumThreads()),
// and put back as they were when it ends. An arithmetic instruction that
// meets or makes a subnormal takes a microcode assist of ~100 cycles: a
// 22 MFLOP conv of a real model (ppocrv5-det) took 96 ms instead of ~1 ms.
// TensorFlow flushes in its thread pools by default; ONNX Runtime, PyTorch
// and OpenVINO offer it as an option. Values below 2^-126 (1.2e-38) become
// 0, far below any tolerance of a model's outputs.
//
// Nested scopes are free: a thread that already flushes is taken to be
// inside an enclosing scope whose team flushes too (a Loop body's run).
// Other CPUs: nothing changes.
class ScopedFlushDenormals {
 public:
  explicit ScopedFlushDenormals(bool enable);
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  // Per team thread (omp_get_thread_num; 0 is the calling thread), its
  // floating-point control word before the scope; null when inactive.
  std::unique_ptr<std::atomic<uint64_t>[]> saved_;
  size_t team_ = 0;
};

// Whether the calling thread flushes subnormals (for tests).
bool FlushesDenormals();

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_THREADS_H_
