// Thread count and floating-point mode of oneDNN's GNU OpenMP runtime.
#include "backends/onednn/threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <memory>

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

// What the team threads read: written by the calling thread before the
// parallel region and read inside it. Atomics with release / acquire,
// because libgomp's own synchronization is invisible to the thread
// sanitizer (decision 0057: kiln's code carries no suppressions).
struct TeamControl {
  std::atomic<std::atomic<uint64_t>*> saved{nullptr};  // per team thread
  std::atomic<size_t> size{0};
  std::atomic<bool> restore{false};
  // Team threads done: each thread's last access; the caller acquires it,
  // so its stack slot is reused only after every thread left it.
  std::atomic<size_t> done{0};
  std::atomic<size_t> team{1};  // the team libgomp gave (may be smaller)
};

// A team thread that was not in the flushing region has nothing to restore.
constexpr uint64_t kNotSaved = ~uint64_t{0};

// One team thread's part: save its control word and flush, or restore it.
void SetThreadControl(void* p) {
  auto* work = static_cast<TeamControl*>(p);
  const size_t t = static_cast<size_t>(omp_get_thread_num());
  std::atomic<uint64_t>* saved = work->saved.load(std::memory_order_acquire);
  if (t < work->size.load(std::memory_order_acquire)) {
    if (work->restore.load(std::memory_order_acquire)) {
      const uint64_t was = saved[t].load(std::memory_order_acquire);
      if (was != kNotSaved) WriteControl(was);
    } else {
      const uint64_t was = ReadControl();
      saved[t].store(was, std::memory_order_release);
      WriteControl(was | kFlushBits);
    }
  }
  work->team.store(static_cast<size_t>(omp_get_num_threads()), std::memory_order_relaxed);
  work->done.fetch_add(1, std::memory_order_acq_rel);
}

void OnTeam(std::atomic<uint64_t>* saved, size_t size, bool restore) {
  TeamControl work;
  work.saved.store(saved, std::memory_order_release);
  work.size.store(size, std::memory_order_release);
  work.restore.store(restore, std::memory_order_release);
  if (size == 1) {
    SetThreadControl(&work);
  } else {
    GOMP_parallel(&SetThreadControl, &work, static_cast<unsigned>(size), 0);
  }
  // GOMP_parallel has joined the team; this only makes that visible.
  while (work.done.load(std::memory_order_acquire) < work.team.load(std::memory_order_relaxed)) {
  }
}

// One ParallelFor: what each team thread reads, and the count of threads
// done (release / acquire, so the caller sees their writes under TSan too).
struct ForWork {
  int64_t n = 0;
  absl::FunctionRef<void(int64_t)>* fn = nullptr;
  std::atomic<size_t> done{0};
  std::atomic<size_t> team{1};
};

void RunShare(void* p) {
  auto* work = static_cast<ForWork*>(p);
  const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
  for (int64_t i = t; i < work->n; i += team) (*work->fn)(i);
  work->team.store(static_cast<size_t>(team), std::memory_order_relaxed);
  work->done.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace

void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn) {
  const int64_t team = std::min<int64_t>(n, NumThreads());
  if (team <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  ForWork work;
  work.n = n;
  work.fn = &fn;
  GOMP_parallel(&RunShare, &work, static_cast<unsigned>(team), 0);
  // GOMP_parallel has joined the team; this only makes that visible.
  while (work.done.load(std::memory_order_acquire) < work.team.load(std::memory_order_relaxed)) {
  }
}

bool FlushesDenormals() {
  return kFlushBits != 0 && (ReadControl() & kFlushBits) == kFlushBits;
}

ScopedFlushDenormals::ScopedFlushDenormals(bool enable) {
  if (!enable || kFlushBits == 0 || FlushesDenormals()) return;
  team_ = static_cast<size_t>(omp_get_max_threads());
  saved_ = std::make_unique<std::atomic<uint64_t>[]>(team_);
  for (size_t t = 0; t < team_; ++t) saved_[t].store(kNotSaved, std::memory_order_relaxed);
  OnTeam(saved_.get(), team_, /*restore=*/false);
}

ScopedFlushDenormals::~ScopedFlushDenormals() {
  if (saved_ != nullptr) OnTeam(saved_.get(), team_, /*restore=*/true);
}

}  // namespace kiln::onednn
