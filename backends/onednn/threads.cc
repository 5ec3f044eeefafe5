// Thread count and floating-point mode of oneDNN's GNU OpenMP runtime.
#include "backends/onednn/threads.h"

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "absl/strings/str_cat.h"

// libgomp's entry point for a parallel region, as GCC's `#pragma omp
// parallel` calls it: `fn(data)` on every thread of a `num_threads` team of
// the calling thread's pool (the pool oneDNN's and the kernels' regions
// use). Called directly so that compilers with another OpenMP ABI (clang, in
// the fuzz and sanitizer builds) build this file too.
extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads,
                              unsigned flags);

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

namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr uint64_t kFlushBits = 0x8040;  // MXCSR FTZ (bit 15) | DAZ (bit 6)
uint64_t ReadControl() { return _mm_getcsr(); }
void WriteControl(uint64_t v) { _mm_setcsr(static_cast<unsigned>(v)); }
#elif defined(__aarch64__)
constexpr uint64_t kFlushBits = uint64_t{1} << 24;  // FPCR.FZ
uint64_t ReadControl() {
  uint64_t v;
  asm volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}
void WriteControl(uint64_t v) { asm volatile("msr fpcr, %0" : : "r"(v)); }
#else
constexpr uint64_t kFlushBits = 0;
uint64_t ReadControl() { return 0; }
void WriteControl(uint64_t) {}
#endif

struct TeamControl {
  std::vector<uint64_t>* saved;  // per team thread
  bool restore;
};

// One team thread's part: save its control word and flush, or restore it.
void SetThreadControl(void* p) {
  auto* work = static_cast<TeamControl*>(p);
  const size_t t = static_cast<size_t>(omp_get_thread_num());
  if (t >= work->saved->size()) return;
  if (work->restore) {
    WriteControl((*work->saved)[t]);
  } else {
    (*work->saved)[t] = ReadControl();
    WriteControl((*work->saved)[t] | kFlushBits);
  }
}

void OnTeam(TeamControl* work) {
  if (work->saved->size() == 1) {
    SetThreadControl(work);
  } else {
    GOMP_parallel(&SetThreadControl, work, static_cast<unsigned>(work->saved->size()), 0);
  }
}

}  // namespace

bool FlushesDenormals() {
  return kFlushBits != 0 && (ReadControl() & kFlushBits) == kFlushBits;
}

ScopedFlushDenormals::ScopedFlushDenormals(bool enable) {
  if (!enable || kFlushBits == 0 || FlushesDenormals()) return;
  active_ = true;
  saved_.assign(static_cast<size_t>(omp_get_max_threads()), 0);
  TeamControl work{&saved_, /*restore=*/false};
  OnTeam(&work);
}

ScopedFlushDenormals::~ScopedFlushDenormals() {
  if (!active_) return;
  TeamControl work{&saved_, /*restore=*/true};
  OnTeam(&work);
}

}  // namespace kiln::onednn
