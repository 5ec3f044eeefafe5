// Thread count for oneDNN's GNU OpenMP runtime.
#include "backends/onednn/threads.h"

#include <omp.h>

#include "absl/strings/str_cat.h"

namespace kiln::onednn {

absl::Status SetNumThreads(int num_threads) {
  if (num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("thread count ", num_threads, " must be >= 1"));
  }
  omp_set_num_threads(num_threads);
  return absl::OkStatus();
}

int NumThreads() { return omp_get_max_threads(); }

}  // namespace kiln::onednn
