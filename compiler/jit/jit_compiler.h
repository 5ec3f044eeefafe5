// File: compiler/jit/jit_compiler.h — kiln's JIT: builds
// generated C++ translation units with the target ISA's compiler, caches the
// result by content hash, and loads it.
//
//   JitOptions opts;
//   opts.isa = *isa::SelectIsa("");
//   JitCompiler jit(opts);
//   KILN_ASSIGN_OR_RETURN(auto lib, jit.Compile({{"kernels_0", cpp_text}}));
//   KILN_ASSIGN_OR_RETURN(void* fn, lib->Symbol("kiln_kernel_0"));
//
// An ISA with an emulator (neon on x86) cannot be loaded into this process:
// CompileExecutable + RunExecutable build a standalone program and run it
// under the emulator instead (how NEON kernels are tested on x86).
#ifndef KILN_COMPILER_JIT_JIT_COMPILER_H_
#define KILN_COMPILER_JIT_JIT_COMPILER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ir/loop/source_file.h"
#include "isa/isa.h"

namespace kiln::jit {


// What the compile report shows for one Compile / CompileExecutable call.
struct CompileStats {
  bool cache_hit = false;
  absl::Duration wall_time;  // whole call: hashing, cache check, build, load
  std::string hash;          // the cache key, 64 hex digits
  std::string path;          // the cached .so or executable
  int translation_units = 0;
  // Units compiled against the cached precompiled header (JitOptions::
  // precompiled_header); 0 on a cache hit.
  int precompiled_header_units = 0;
  // Wall time this call spent making the precompiled header (zero when it
  // was there already); part of wall_time.
  absl::Duration precompiled_header_time;
  // Wall time this call spent listing and hashing the headers generated code
  // includes (zero when their recorded list still matches the files); part
  // of wall_time.
  absl::Duration header_scan_time;
  // Non-empty when a corrupt cache entry was found, deleted and rebuilt.
  std::string evicted_reason;
  // Non-empty when JitOptions::cache_dir could not be written and the build
  // went to a private temporary cache: says which and why.
  std::string cache_note;
};

struct JitOptions {
  // Target ISA; nullptr means isa::BestHostIsa().
  const isa::VecIsa* isa = nullptr;
  // Replaces isa->cxx when non-empty.
  std::string compiler;
  std::vector<std::string> optimization_flags = {"-O3", "-fPIC", "-shared", "-fopenmp",
                                                 "-std=c++17"};
  std::vector<std::string> extra_flags;  // after the ISA's and optimization flags
  std::vector<std::string> include_dirs;
  std::vector<std::string> link_flags;   // e.g. "-ldnnl", after the objects
  // Empty: DefaultCacheDir().
  std::string cache_dir;
  // Parent of the private build directories; empty: <cache_dir>/tmp. Build
  // directories older than a day left there by killed processes are removed
  // at the next build (SweepStaleBuildDirs).
  std::string temp_dir;
  // Where sources of a failed build are kept (in <dir>/<hash>/); empty: the
  // failed build's own directory under temp_dir is left in place.
  std::string keep_source_dir;
  // Units that include Highway get its headers from a GCC precompiled header
  // (built once per compiler, flags, ISA and header contents); a unit that
  // fails against it, or that GCC compiles without it (-Winvalid-pch), is
  // rebuilt without it and the header is discarded. The binaries are the
  // same either way (docs/decisions/0052-jit-cold-compile.md).
  bool precompiled_header = true;
  // Fewest Highway units for which a build makes the precompiled header when
  // it is missing (one that exists is always used). Making it costs about one
  // and a half units' compile, once per toolchain; every later build of a
  // Highway unit then skips most of its parse.
  int precompiled_header_min_units = 1;
  // Where the precompiled headers and the lists of the headers generated
  // code includes (their contents are part of every cache key) live: one
  // per toolchain, shared by caches. Empty: cache_dir.
  std::string precompiled_header_dir;
  // Per compiler process; a compile that runs longer fails.
  absl::Duration compile_timeout = absl::Minutes(10);
  // Per RunExecutable call.
  absl::Duration run_timeout = absl::Minutes(2);
};

// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln.
std::string DefaultCacheDir();

// Removes what builds in progress in this process have written outside the
// cache's final names (their build directories and temporary artifacts),
// and every other live RemovedOnSignal path. Async-signal-safe (system calls
// only, no allocation or locks), for a program's SIGINT/SIGTERM handler:
// kilnc calls it there. The library installs no handler in its host; what a
// killed process leaves is swept later (SweepStaleBuildDirs).
void RemoveBuildsInProgress();

// While it lives, RemoveBuildsInProgress deletes `path` (a file, or a
// directory tree up to 8 levels deep). Up to 64 at once; a path of 4096
// bytes or more is not registered.
class RemovedOnSignal {
 public:
  RemovedOnSignal(const std::string& path, bool is_dir);
  ~RemovedOnSignal();
  RemovedOnSignal(const RemovedOnSignal&) = delete;
  RemovedOnSignal& operator=(const RemovedOnSignal&) = delete;

 private:
  int slot_ = -1;
};

// Removes kiln_jit_* build directories in `temp_root` and *.tmp.* artifacts
// in `cache_dir` whose last change is older than `age` and that belong to
// this user: the leftovers of killed processes. Returns how many it removed.
int SweepStaleBuildDirs(const std::string& temp_root, const std::string& cache_dir,
                        absl::Duration age);

// A dlopen'ed JIT library; dlclose on destruction. Function pointers taken
// from it must not outlive it.
class LoadedLibrary {
 public:
  LoadedLibrary(void* handle, CompileStats stats);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  // NotFound when the library exports no such symbol.
  absl::StatusOr<void*> Symbol(absl::string_view name) const;
  const CompileStats& stats() const { return stats_; }

 private:
  void* handle_;
  CompileStats stats_;
};

struct RunResult {
  int exit_code = 0;  // 128 + signal when killed
  std::string stdout_text;
  std::string stderr_text;
};

// Compiles, caches and loads generated C++. Thread-safe; concurrent
// compiles of the same sources, from threads or processes, build once (a
// per-entry file lock) and publish atomically (write to a temp name, rename).
class JitCompiler {
 public:
  explicit JitCompiler(JitOptions options);

  // Builds a shared library from `sources` (or takes it from the cache) and
  // dlopens it. FailedPrecondition when the ISA cannot run in this process
  // (it needs an emulator, or this CPU lacks it); Internal with the
  // compiler's message and the kept sources' path when the build fails.
  absl::StatusOr<std::shared_ptr<LoadedLibrary>> Compile(std::vector<ir::loop::SourceFile> sources);

  // Builds a standalone executable (one translation unit defines main) for
  // the ISA, cached like libraries; returns its path.
  absl::StatusOr<std::string> CompileExecutable(std::vector<ir::loop::SourceFile> sources,
                                                CompileStats* stats = nullptr);

  // Runs an executable built by CompileExecutable, under the ISA's emulator
  // when it has one. A nonzero exit is a result, not an error.
  absl::StatusOr<RunResult> RunExecutable(const std::string& path,
                                          const std::vector<std::string>& args);

  // nullptr only when no ISA module is linked in (every call then fails).
  const isa::VecIsa* isa() const { return isa_; }
  const std::string& cache_dir() const { return cache_dir_; }

 private:
  enum class Kind { kSharedLibrary, kExecutable };
  struct Entry;

  absl::StatusOr<Entry> Build(Kind kind, const std::vector<ir::loop::SourceFile>& sources);

  JitOptions options_;
  const isa::VecIsa* isa_;
  std::string cache_dir_;
};

}  // namespace kiln::jit

#endif  // KILN_COMPILER_JIT_JIT_COMPILER_H_
