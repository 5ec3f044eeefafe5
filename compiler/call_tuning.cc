// The JIT's cached library-call tuner (compiler/call_tuning.h).
#include "compiler/call_tuning.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backends/onednn/call_tuner.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/threads.h"
#include "compiler/jit/jit_compiler.h"
#include "compiler/jit/sha256.h"
#include "ir/loop/text.h"

namespace kiln::compiler {
namespace {

// Bumped when what a cache entry means changes.
constexpr char kTuningCacheVersion[] = "kiln call tuning 1";

// What the choice depends on: the call (its kernel text with attributes and
// its buffers' types, shapes and strides), oneDNN's ISA and the team size.
std::string CacheKey(const ir::loop::LoopModule& module, const ir::loop::Kernel& kernel,
                     int threads) {
  jit::Sha256 h;
  h.Update(kTuningCacheVersion);
  h.Update(absl::StrCat("\nisa ", onednn::OneDnnCpuIsa(), "\nthreads ", threads, "\n"));
  h.Update(ir::loop::PrintKernel(module.program, kernel));
  for (const std::vector<int32_t>* list : {&kernel.call.inputs, &kernel.call.outputs}) {
    for (int32_t b : *list) {
      const ir::loop::Buffer& buffer = module.program.buffers[b];
      h.Update(absl::StrCat("\n", ir::DTypeName(buffer.dtype), " [",
                            absl::StrJoin(buffer.shape, ","), "] [",
                            absl::StrJoin(buffer.strides, ","), "] ",
                            module.constants.count(b) ? "const" : "var"));
    }
  }
  return h.HexDigest();
}

// A cache entry: the chosen form on the first line, the report's
// description on the second.
bool ReadEntry(const std::string& path, std::string* form, std::string* choice) {
  std::ifstream in(path);
  if (!in || !std::getline(in, *form) || !std::getline(in, *choice)) return false;
  return onednn::ParseActivationForm(*form).ok();
}

void WriteEntry(const std::string& dir, const std::string& path, const std::string& form,
                const std::string& choice) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return;
  // Written whole, then renamed: a concurrent compile reads all or nothing.
  const std::string temp = absl::StrCat(path, ".tmp", getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    if (!out) return;
    out << form << "\n" << choice << "\n";
    if (!out) return;
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) std::filesystem::remove(temp, ec);
}

}  // namespace

std::function<absl::StatusOr<std::string>(const ir::loop::LoopModule&, const ir::loop::Kernel&)>
CallTuner(const CompileOptions& options, std::vector<CompileReport::TunedCall>* log) {
  if (options.call_tuning == CompileOptions::CallTuning::kOff) return {};
  const std::string dir = absl::StrCat(
      options.cache_dir.empty() ? jit::DefaultCacheDir() : options.cache_dir, "/tuning");
  const bool time_misses = options.call_tuning == CompileOptions::CallTuning::kOn;
  const int threads = options.threads > 0 ? options.threads : onednn::NumThreads();
  const int64_t vector_channels =
      absl::StartsWith(onednn::OneDnnCpuIsa(), "avx512") ? 16 : 8;
  return [dir, time_misses, threads, vector_channels, log](
             const ir::loop::LoopModule& module,
             const ir::loop::Kernel& kernel) -> absl::StatusOr<std::string> {
    const std::optional<std::string> why =
        onednn::DoubtfulCall(module.program, kernel, vector_channels);
    if (!why) return std::string();
    CompileReport::TunedCall entry;
    entry.kernel = kernel.name;
    entry.why = *why;
    const std::string path = absl::StrCat(dir, "/", CacheKey(module, kernel, threads));
    std::string form;
    if (ReadEntry(path, &form, &entry.choice)) {
      entry.cached = true;
    } else if (!time_misses) {
      form = "rule";
      entry.choice = "rule (no cached choice)";
    } else {
      onednn::CallTuningOptions to;
      to.threads = threads;
      absl::StatusOr<onednn::CallTuning> tuning =
          onednn::TuneCall(module.program, kernel, module.constants, to);
      // A call oneDNN does not run keeps its kernel as it is (the runtime
      // decides, as without tuning).
      if (!tuning.ok()) return std::string();
      form = tuning->chosen;
      entry.choice = onednn::DescribeTuning(*tuning);
      WriteEntry(dir, path, form, entry.choice);
    }
    log->push_back(std::move(entry));
    return form == "rule" ? std::string() : form;
  };
}

}  // namespace kiln::compiler
