// The process-wide oneDNN CPU engine and stream.
#include "backends/onednn/engine.h"

#include "backends/onednn/threads.h"

namespace kiln::onednn {

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& CpuStream() {
  static dnnl::stream* stream = new dnnl::stream(CpuEngine());
  return *stream;
}

void ReorderOnce(dnnl::memory& src, dnnl::memory& dst) {
  struct RestoreThreads {
    int n;
    ~RestoreThreads() { (void)SetNumThreads(n); }
  } restore{NumThreads()};
  (void)SetNumThreads(1);
  dnnl::reorder(src, dst).execute(CpuStream(), src, dst);
  CpuStream().wait();
}

}  // namespace kiln::onednn
