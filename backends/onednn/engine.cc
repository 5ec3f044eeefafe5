// The process-wide oneDNN CPU engine and stream.
#include "backends/onednn/engine.h"

namespace kiln::onednn {

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& CpuStream() {
  static dnnl::stream* stream = new dnnl::stream(CpuEngine());
  return *stream;
}

}  // namespace kiln::onednn
