// File: runtime/mutex.h — kiln::runtime::Mutex, a std::mutex that carries
// Abseil's thread-safety annotations, and its scoped MutexLock.
//
//   mutable Mutex mu_;
//   mutable std::vector<int> pool_ ABSL_GUARDED_BY(mu_);
//   ...
//   MutexLock lock(&mu_);
//   pool_.push_back(1);
//
// Why not absl::Mutex: the thread sanitizer (--config=tsan) sees a lock only
// through its interceptors (pthread_mutex_*) or through annotations compiled
// into the lock itself. Debian's libabsl is built without TSan, so an
// absl::Mutex gives TSan no happens-before edge and every access it guards
// is reported as a race. std::mutex locks through pthread_mutex_lock, which
// TSan intercepts in any build (docs/decisions/0057). The annotations keep
// clang's -Wthread-safety analysis as it was with absl::Mutex.
#ifndef KILN_RUNTIME_MUTEX_H_
#define KILN_RUNTIME_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace kiln::runtime {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_MUTEX_H_
