// File: tools/kilnc.cc — kiln's command line tool, on kiln's public API
// (compiler/compiler.h).
//   kilnc check DIR      compile an ONNX test folder's model, run it, compare
//   kilnc run MODEL      run a model on given or seeded random inputs
//   kilnc compile MODEL  compile and print the report (--dump-dir: the IRs)
//   kilnc explain MODEL  every kernel, its ops, backend and vectorization
//   kilnc bench MODEL    compile times, latency, memory
//   kilnc profile MODEL  per-kernel times and a Chrome/Perfetto trace
//   kilnc opt FILE       run named passes on a text-IR file (tools/opt.h)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "compiler/aot_writer.h"
#include "compiler/compiler.h"
#include "compiler/jit/jit_compiler.h"
#include "frontend/onnx/importer.h"
#include "interp/interpreter.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/kilnc_lib.h"
#include "tools/opt.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

std::string WorkingDir() {
  const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
  return wd == nullptr ? "" : wd;
}

double MsSince(absl::Time start) { return absl::ToDoubleMilliseconds(absl::Now() - start); }

std::string Sci(double v) { return absl::StrFormat("%.3g", v); }

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// Every message kilnc prints passes ir/message.h's sanitizing: model text
// (names, op types, attribute values) in it is escaped and capped.
int BadInput(absl::string_view command, absl::string_view message) {
  std::cerr << "kilnc " << command << ": " << SanitizedMessage(message, /*keep_line_breaks=*/false)
            << "\n";
  return kExitBadInput;
}

// Reports a failed step: exit 2 when the user's input is at fault, 3 when
// memory ran out, else 1.
int Failed(absl::string_view command, const absl::Status& status) {
  std::cerr << "kilnc " << command << ": "
            << SanitizedStatus(status, /*keep_line_breaks=*/true).ToString() << "\n";
  return ExitCodeFor(status);
}

// Inputs that could not be made: bad input (exit 2), or random data too
// big for memory (ResourceExhausted, exit 3).
int InputsFailed(absl::string_view command, const absl::Status& status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) return Failed(command, status);
  return BadInput(command, status.message());
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) {
    std::cerr << "warning: " << SanitizedMessage(w, /*keep_line_breaks=*/false) << "\n";
  }
}

// test_data_set_N folders of `dir`, ordered by N (non-numeric names last).
std::vector<std::string> DataSetFolders(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, "test_data_set_")) continue;
    std::error_code dir_ec;
    if (!fs::is_directory(it->path(), dir_ec)) continue;
    int64_t n;
    if (!absl::SimpleAtoi(name.substr(14), &n)) n = INT64_MAX;
    found.emplace_back(n, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [n, name] : found) names.push_back(name);
  return names;
}

// Loads prefix_0.pb, prefix_1.pb, ... until one is missing. `declared` is
// the model's inputs or outputs: a bf16 value's file may hold UINT16 bits
// (frontend::LoadTensorFile).
absl::StatusOr<std::vector<ir::Tensor>> LoadNumbered(const std::string& folder,
                                                     absl::string_view prefix,
                                                     const std::vector<TensorInfo>& declared) {
  std::vector<ir::Tensor> tensors;
  for (size_t k = 0;; ++k) {
    const std::string path = absl::StrCat(folder, "/", prefix, "_", k, ".pb");
    if (!IsFile(path)) break;
    absl::StatusOr<ir::Tensor> t = frontend::LoadTensorFile(
        path, k < declared.size() ? declared[k].dtype : ir::DType::kInvalid);
    if (!t.ok()) return t.status();
    tensors.push_back(*std::move(t));
  }
  return tensors;
}

std::string ThreadsText(int threads) {
  return threads > 0 ? absl::StrCat(threads) : "default";
}

// The OpenMP team Run uses: --threads, else OMP_NUM_THREADS, else the cores.
int EffectiveThreads(int threads) {
  if (threads > 0) return threads;
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env != nullptr) {
    const std::vector<std::string> levels = absl::StrSplit(env, ',');
    int n;
    if (absl::SimpleAtoi(levels[0], &n) && n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string KernelCounts(const CompileReport& r) {
  return absl::StrCat(r.kernels.size(), " kernels (", r.loop_kernels, " loop, ",
                      r.vectorized_kernels, " vectorized; ", r.library_calls,
                      " library calls", r.reference_calls > 0
                          ? absl::StrCat(", ", r.reference_calls, " on the reference interpreter")
                          : "",
                      ")");
}

std::string CompileTimeText(const CompileReport& r, double wall_ms) {
  return absl::StrCat(FormatMs(wall_ms), " (jit ",
                      r.jit_cache_hit ? "cache hit" : FormatMs(r.jit_ms), ")");
}

// A model ready to run on one engine: compiled by kiln, or imported for the
// reference interpreter. Lets check and run treat the engines alike.
class Executable {
 public:
  static absl::StatusOr<Executable> Load(const std::string& path,
                                         const CompileFlags& flags) {
    Executable e;
    e.engine_ = flags.engine;
    const absl::Time t0 = absl::Now();
    if (flags.engine == Engine::kReference) {
      frontend::ImportOptions io;
      for (const auto& [name, shape] : flags.shapes) io.input_shapes[name] = shape;
      absl::StatusOr<frontend::ImportResult> imported =
          frontend::ImportModelFile(path, io);
      if (!imported.ok()) return imported.status();
      e.load_ms_ = MsSince(t0);
      e.warnings_ = imported->warnings;
      e.graph_ = std::make_shared<ir::Graph>(std::move(imported->graph));
      for (ir::ValueId id : e.graph_->inputs()) e.inputs_.push_back(Info(*e.graph_, id));
      for (ir::ValueId id : e.graph_->outputs()) e.outputs_.push_back(Info(*e.graph_, id));
      return e;
    }
    absl::StatusOr<std::unique_ptr<CompiledModel>> model =
        Compiler(ToCompileOptions(flags, WorkingDir())).CompileFile(path);
    if (!model.ok()) return model.status();
    e.load_ms_ = MsSince(t0);
    e.model_ = std::shared_ptr<CompiledModel>(std::move(*model));
    e.warnings_ = e.model_->report().warnings;
    e.inputs_ = e.model_->inputs();
    e.outputs_ = e.model_->outputs();
    return e;
  }

  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& inputs) const {
    if (model_ != nullptr) return model_->Run(inputs);
    return interp::Run(*graph_, inputs);
  }

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  double load_ms() const { return load_ms_; }

  // "model: ..." and "engine: ..." lines.
  std::string ModelLine() const {
    if (graph_ != nullptr) {
      return absl::StrCat("opset ", graph_->opset(), ", ", graph_->nodes().size(),
                          " nodes, ", inputs_.size(), " input(s), ", outputs_.size(),
                          " output(s); import ", FormatMs(load_ms_));
    }
    return absl::StrCat(inputs_.size(), " input(s), ", outputs_.size(),
                        " output(s); compile ",
                        CompileTimeText(model_->report(), load_ms_));
  }
  std::string EngineLine() const {
    if (graph_ != nullptr) return "reference interpreter";
    const CompileReport& r = model_->report();
    return absl::StrCat(EngineName(engine_), ", isa ", r.isa, ", threads ",
                        ThreadsText(r.threads), "; ", KernelCounts(r));
  }
  // The narrowest float type the model holds values in (CompileReport::
  // model_float; the imported graph's for the reference engine).
  ir::DType ModelFloat() const {
    if (model_ != nullptr) return model_->report().model_float;
    for (ir::ValueId v = 0; v < graph_->num_values(); ++v) {
      if (graph_->value(v).dtype == ir::DType::kF16) return ir::DType::kF16;
    }
    return ir::DType::kF32;
  }
  // The precision library calls compute in ("f32" on the reference engine).
  std::string Precision() const {
    return model_ != nullptr ? model_->report().precision : std::string("f32");
  }
  // How the load step is named in messages.
  const char* LoadVerb() const { return graph_ != nullptr ? "import" : "compile"; }

 private:
  static TensorInfo Info(const ir::Graph& g, ir::ValueId id) {
    const ir::Value& v = g.value(id);
    return TensorInfo{v.name, v.dtype, v.shape};
  }

  Engine engine_ = Engine::kCompiled;
  std::shared_ptr<CompiledModel> model_;
  std::shared_ptr<ir::Graph> graph_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<std::string> warnings_;
  double load_ms_ = 0;
};

// Whether `inputs` fit the model's inputs (count, dtype, shape). On a
// mismatch, `why` says what differs.
bool InputsFit(const std::vector<TensorInfo>& want, const std::vector<ir::Tensor>& inputs,
               std::string* why) {
  if (inputs.size() != want.size()) {
    *why = absl::StrCat("the data set has ", inputs.size(),
                        " input(s), the model takes ", want.size());
    return false;
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorInfo& v = want[k];
    if (v.dtype != inputs[k].dtype() || v.shape != inputs[k].shape()) {
      *why = absl::StrCat("input_", k, ".pb is ", inputs[k].TypeString(), ", model input '",
                          EscapeForMessage(v.name), "' is ", ir::DTypeName(v.dtype),
                          ir::ShapeToString(v.shape));
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------- inputs

// Tensors given with --input, loaded; their shapes bind the model's inputs.
struct GivenInputs {
  std::map<std::string, ir::Tensor> tensors;
  std::map<std::string, std::string> paths;
};

absl::StatusOr<GivenInputs> LoadGivenInputs(const InputFlags& in, CompileFlags* flags) {
  GivenInputs given;
  for (const auto& [name, file] : in.inputs) {
    const std::string path = ResolvePath(file, WorkingDir());
    absl::StatusOr<ir::Tensor> t = frontend::LoadTensorFile(path);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", name, ": ", t.status().ToString()));
    }
    bool shape_given = false;
    for (const auto& [n, shape] : flags->shapes) {
      if (n != name) continue;
      shape_given = true;
      if (shape != t->shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--shape ", name, "=", ir::ShapeToString(shape), " contradicts --input ", name,
            " of shape ", ir::ShapeToString(t->shape())));
      }
    }
    if (!shape_given) flags->shapes.emplace_back(name, t->shape());
    given.paths[name] = path;
    given.tensors.emplace(name, *std::move(t));
  }
  return given;
}

// The model's inputs: given tensors where there are, seeded random data
// elsewhere. `sources` (if not null) gets where each one came from.
absl::StatusOr<std::vector<ir::Tensor>> MakeInputs(const std::vector<TensorInfo>& want,
                                                   const GivenInputs& given,
                                                   const InputFlags& in,
                                                   const CompileFlags& flags,
                                                   std::vector<std::string>* sources) {
  std::vector<std::string> names;
  for (const TensorInfo& v : want) names.push_back(v.name);
  auto is_input = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const auto& [name, file] : in.inputs) {
    if (!is_input(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input ", name, ": the model has no input '", name,
          "'; its inputs: ", absl::StrJoin(names, ", ")));
    }
  }
  for (const auto& [name, shape] : flags.shapes) {
    if (!is_input(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--shape ", name, ": the model has no input '", name,
          "'; its inputs: ", absl::StrJoin(names, ", ")));
    }
  }
  std::vector<ir::Tensor> inputs;
  for (size_t k = 0; k < want.size(); ++k) {
    const TensorInfo& v = want[k];
    auto it = given.tensors.find(v.name);
    if (it != given.tensors.end()) {
      if (it->second.dtype() != v.dtype) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input ", v.name, " is ", it->second.TypeString(),
                         ", the model wants ", ir::DTypeName(v.dtype)));
      }
      inputs.push_back(it->second);
      if (sources) sources->push_back(absl::StrCat("from ", given.paths.at(v.name)));
      continue;
    }
    // Decorrelate inputs: each gets its own stream from the seed.
    absl::StatusOr<ir::Tensor> t = RandomTensor(
        v.dtype, v.shape, in.seed + 0x9E3779B97F4A7C15ull * k, in.int_low, in.int_high);
    if (!t.ok()) {
      return absl::Status(t.status().code(),
                          absl::StrCat("input '", v.name, "': ", t.status().message()));
    }
    inputs.push_back(*std::move(t));
    if (sources) sources->push_back(absl::StrCat("random, seed ", in.seed));
  }
  return inputs;
}

// ---------------------------------------------------------------- check

int RunCheck(const Command& cmd) {
  const CheckOptions& opts = cmd.check;
  const std::string dir = ResolvePath(opts.dir, WorkingDir());
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return BadInput("check", absl::StrCat("no such folder: ", dir));
  }
  const std::string model_path = dir + "/model.onnx";
  if (!IsFile(model_path)) {
    return BadInput("check", absl::StrCat("no model.onnx in ", dir));
  }
  const std::vector<std::string> data_sets = DataSetFolders(dir);
  if (data_sets.empty()) {
    return BadInput("check", absl::StrCat("no test_data_set_* folder in ", dir));
  }

  CompileFlags flags = cmd.compile;
  absl::StatusOr<Executable> exe = Executable::Load(model_path, flags);
  if (!exe.ok()) {
    if (ExitCodeFor(exe.status()) == kExitBadInput) {
      return BadInput("check", exe.status().ToString());
    }
    std::cout << "kilnc check " << dir << "\n"
              << "compile: FAIL "
              << SanitizedStatus(exe.status(), /*keep_line_breaks=*/false).ToString() << "\n"
              << "result: FAIL (the model did not compile)\n";
    // Out of memory (or over --memory-limit) is 3, as on every command.
    return ExitCodeFor(exe.status()) == kExitResourceExhausted ? kExitResourceExhausted
                                                               : kExitWrongResult;
  }
  // An fp16 model's outputs are judged at fp16's precision: ONNX Runtime
  // rounds every op's result to f16, kiln computes in f32 (both differ from
  // the exact result by a few f16 ulps).
  interp::Tolerance tol = opts.tol;
  const char* tol_why = "";
  if (!opts.tol_given && exe->Precision() == "bf16") {
    // bf16 inputs to every Conv/MatMul (8-bit mantissa) against an f32
    // reference: judged norm-wise, at most 2^-5 of the output's max |ref|.
    tol.max_rel = 1.0 / 32;
    tol_why = " (bf16 precision: the bound for bf16 compute)";
  } else if (!opts.tol_given && exe->ModelFloat() == ir::DType::kF16) {
    tol.rtol = 1.0 / 256;   // 2^-8: four f16 ulps relative
    tol.atol = 1.0 / 1024;  // 2^-10: one f16 ulp at 1.0, in units of the output's scale
    tol_why = " (fp16 model)";
  }
  std::cout << "kilnc check " << dir << "\n"
            << "model: " << exe->ModelLine() << "\n"
            << "engine: " << exe->EngineLine() << "\n"
            << "tolerance: " << interp::DescribeTolerance(tol) << tol_why << "\n";
  bool warnings_shown = false;

  int outputs_compared = 0, outputs_failed = 0, runs_failed = 0;
  // Runs (or re-compiles) that failed for want of memory; when nothing else
  // failed, check exits 3 as every command does.
  int runs_out_of_memory = 0;
  for (const std::string& ds : data_sets) {
    const std::string folder = dir + "/" + ds;
    absl::StatusOr<std::vector<ir::Tensor>> inputs = LoadNumbered(folder, "input", exe->inputs());
    if (!inputs.ok()) return BadInput("check", inputs.status().ToString());
    absl::StatusOr<std::vector<ir::Tensor>> expected = LoadNumbered(folder, "output", exe->outputs());
    if (!expected.ok()) return BadInput("check", expected.status().ToString());
    if (expected->empty()) {
      return BadInput("check", absl::StrCat("no output_0.pb in ", folder));
    }

    std::string why;
    if (!InputsFit(exe->inputs(), *inputs, &why)) {
      // Dynamic dims were bound to 1 (or by --shape): bind them to the data's.
      if (inputs->size() != exe->inputs().size()) {
        return BadInput("check", absl::StrCat(ds, ": ", why));
      }
      flags.shapes.clear();
      for (size_t k = 0; k < inputs->size(); ++k) {
        flags.shapes.emplace_back(exe->inputs()[k].name, (*inputs)[k].shape());
      }
      absl::StatusOr<Executable> again = Executable::Load(model_path, flags);
      if (!again.ok()) {
        const std::string message = absl::StrCat(ds, ": ", why, "; re-", exe->LoadVerb(),
                                                 ": ", again.status().ToString());
        if (ExitCodeFor(again.status()) == kExitBadInput) return BadInput("check", message);
        std::cout << ds << ": FAIL " << SanitizedMessage(message, /*keep_line_breaks=*/false)
                  << "\n";
        ++runs_failed;
        if (ExitCodeFor(again.status()) == kExitResourceExhausted) ++runs_out_of_memory;
        continue;
      }
      std::cout << "re-" << exe->LoadVerb() << (exe->LoadVerb()[0] == 'i' ? "ed" : "d")
                << " with the shapes of " << ds << " in " << FormatMs(again->load_ms())
                << "\n";
      exe = std::move(again);
      warnings_shown = false;
      if (!InputsFit(exe->inputs(), *inputs, &why)) {
        return BadInput("check", absl::StrCat(ds, ": ", why));
      }
    }
    if (!warnings_shown) {
      if (opts.verbose) PrintWarnings(exe->warnings());
      warnings_shown = true;
    }

    const absl::Time t0 = absl::Now();
    absl::StatusOr<std::vector<ir::Tensor>> got = exe->Run(*inputs);
    const double run_ms = MsSince(t0);
    if (!got.ok()) {
      // The model (or the data set) is at fault, as when loading finds it.
      if (ExitCodeFor(got.status()) == kExitBadInput) {
        return BadInput("check", absl::StrCat(ds, ": run: ", got.status().ToString()));
      }
      std::cout << ds << ": FAIL run error after " << FormatMs(run_ms) << ": "
                << SanitizedStatus(got.status(), /*keep_line_breaks=*/false).ToString() << "\n";
      ++runs_failed;
      if (ExitCodeFor(got.status()) == kExitResourceExhausted) ++runs_out_of_memory;
      continue;
    }
    std::cout << ds << ": run " << FormatMs(run_ms) << "\n";
    if (expected->size() > got->size()) {
      std::cout << "  FAIL  the model produced " << got->size()
                << " output(s), the data set expects " << expected->size() << "\n";
      ++outputs_failed;
    }
    const size_t n = std::min(expected->size(), got->size());
    for (size_t k = 0; k < n; ++k) {
      const ir::Tensor& ref = (*expected)[k];
      const ir::Tensor& out = (*got)[k];
      const std::string name = EscapeForMessage(exe->outputs()[k].name);
      const interp::CompareResult m = interp::CompareTensors(out, ref, tol);
      ++outputs_compared;
      if (!m.ok) ++outputs_failed;
      std::string line = absl::StrCat("  ", m.ok ? "PASS" : "FAIL", "  output ", k, " '",
                                      name, "' ", ref.TypeString());
      if (!m.dtype_match || !m.shape_match) {
        absl::StrAppend(&line, "  got ", out.TypeString(), " (",
                        !m.dtype_match ? "dtype" : "",
                        !m.dtype_match && !m.shape_match ? " and " : "",
                        !m.shape_match ? "shape" : "", " differ)");
      }
      if (m.shape_match) {
        absl::StrAppend(&line, "  max|ref| ", Sci(m.max_abs_ref), "  max_abs ",
                        Sci(m.max_abs_error), "  rel_to_max ", Sci(m.rel_to_max),
                        "  max_elem_rel ",
                        m.max_elementwise_rel ? Sci(*m.max_elementwise_rel) : "-",
                        "  mismatches ", m.mismatches, "/", m.num_elements);
        if (!m.ok && m.worst_mismatch >= 0 && !tol.max_rel.has_value()) {
          const int64_t w = m.worst_mismatch;
          const double e = ref.GetAsDouble(w);
          absl::StrAppend(&line, "\n        worst mismatch at flat index ", w, ": got ",
                          Sci(out.GetAsDouble(w)), ", expected ", Sci(e), " (allowed |error| ",
                          Sci(m.atol_used + tol.rtol * std::abs(e)), ")");
        } else if (!m.ok && m.max_abs_index >= 0) {
          absl::StrAppend(&line, "\n        worst at flat index ", m.max_abs_index,
                          ": got ", Sci(out.GetAsDouble(m.max_abs_index)),
                          ", expected ", Sci(ref.GetAsDouble(m.max_abs_index)));
        }
      }
      std::cout << line << "\n";
      if (!m.ok && m.shape_match && exe->Precision() == "bf16" && !opts.tol_given) {
        std::cout << "warning: output '" << name << "' is " << Sci(m.rel_to_max)
                  << " of its max |ref| off the f32 reference, beyond bf16's bound "
                  << "(2^-5): compile it with --precision=f32\n";
      }
      if (opts.verbose) {
        std::cout << "        got " << SummarizeTensor(name, out, 6) << "\n        ref "
                  << SummarizeTensor(name, ref, 6) << "\n";
      }
    }
  }

  const bool ok = outputs_failed == 0 && runs_failed == 0;
  std::cout << "result: " << (ok ? "PASS" : "FAIL") << " (" << data_sets.size()
            << " data set(s), " << outputs_compared << " output(s) compared, "
            << outputs_failed << " failed"
            << (runs_failed ? absl::StrCat(", ", runs_failed, " run(s) failed") : "")
            << ")\n";
  if (ok) return kExitOk;
  // A wrong output outranks memory: only a check whose every failure was
  // running out of memory exits 3.
  const bool only_memory = outputs_failed == 0 && runs_failed == runs_out_of_memory;
  return only_memory ? kExitResourceExhausted : kExitWrongResult;
}

// ---------------------------------------------------------------- run

absl::Status SaveTensor(const ir::Tensor& t, const std::string& name,
                        const std::string& path) {
  absl::StatusOr<std::string> bytes = frontend::SerializeTensor(t, name);
  if (!bytes.ok()) return bytes.status();
  return WriteFileAtomically(path, *bytes);
}

int RunRun(const Command& cmd) {
  const RunOptions& opts = cmd.run;
  const std::string wd = WorkingDir();
  const std::string model_path = ResolvePath(opts.model, wd);
  if (!IsFile(model_path)) {
    return BadInput("run", absl::StrCat("no such model file: ", model_path));
  }
  CompileFlags flags = cmd.compile;
  absl::StatusOr<GivenInputs> given = LoadGivenInputs(cmd.inputs, &flags);
  if (!given.ok()) return BadInput("run", given.status().message());

  absl::StatusOr<Executable> exe = Executable::Load(model_path, flags);
  if (!exe.ok()) return Failed("run", exe.status());
  PrintWarnings(exe->warnings());
  std::vector<std::string> sources;
  absl::StatusOr<std::vector<ir::Tensor>> inputs =
      MakeInputs(exe->inputs(), *given, cmd.inputs, flags, &sources);
  if (!inputs.ok()) return InputsFailed("run", inputs.status());

  std::cout << "kilnc run " << model_path << "\n"
            << "model: " << exe->ModelLine() << "\n"
            << "engine: " << exe->EngineLine() << "\n";
  for (size_t k = 0; k < inputs->size(); ++k) {
    std::cout << "input " << k << " "
              << SummarizeTensor(EscapeForMessage(exe->inputs()[k].name), (*inputs)[k], 0) << "  ("
              << sources[k] << ")\n";
  }

  const absl::Time t0 = absl::Now();
  absl::StatusOr<std::vector<ir::Tensor>> outputs = exe->Run(*inputs);
  const double run_ms = MsSince(t0);
  if (!outputs.ok()) return Failed("run", outputs.status());
  for (size_t k = 0; k < outputs->size(); ++k) {
    std::cout << "output " << k << " "
              << SummarizeTensor(EscapeForMessage(exe->outputs()[k].name), (*outputs)[k],
                                 opts.num_values)
              << "\n";
  }
  std::cout << "time: " << exe->LoadVerb() << " " << FormatMs(exe->load_ms()) << ", run "
            << FormatMs(run_ms) << "\n";

  if (!opts.save_outputs.empty()) {
    const std::string out_dir = ResolvePath(opts.save_outputs, wd);
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) {
      return BadInput("run", absl::StrCat("cannot create ", out_dir, ": ", ec.message()));
    }
    // Every file is checked before any is written: a refused save leaves
    // the folder as it was.
    std::vector<std::string> read = {model_path};
    for (const auto& [name, path] : given->paths) read.push_back(path);
    std::vector<std::pair<std::string, const ir::Tensor*>> files;
    std::vector<std::string> names;
    for (size_t k = 0; k < inputs->size(); ++k) {
      files.emplace_back(absl::StrCat(out_dir, "/input_", k, ".pb"), &(*inputs)[k]);
      names.push_back(exe->inputs()[k].name);
    }
    for (size_t k = 0; k < outputs->size(); ++k) {
      files.emplace_back(absl::StrCat(out_dir, "/output_", k, ".pb"), &(*outputs)[k]);
      names.push_back(exe->outputs()[k].name);
    }
    for (const auto& [path, tensor] : files) {
      absl::Status s = CheckWritable(path, read, opts.force);
      if (!s.ok()) return BadInput("run", s.message());
    }
    for (size_t k = 0; k < files.size(); ++k) {
      absl::Status s = SaveTensor(*files[k].second, names[k], files[k].first);
      if (!s.ok()) return BadInput("run", s.ToString());
    }
    std::cout << "saved " << inputs->size() << " input(s) and " << outputs->size()
              << " output(s) to " << out_dir << "\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------- compile

// Compiles `model` (as given on the command line) for the commands that
// need kiln's compiler; prints the error and sets *exit_code on failure.
std::unique_ptr<CompiledModel> CompileOrReport(absl::string_view command,
                                               const std::string& model,
                                               const CompileOptions& options,
                                               int* exit_code, double* wall_ms = nullptr) {
  const std::string path = ResolvePath(model, WorkingDir());
  if (!IsFile(path)) {
    *exit_code = BadInput(command, absl::StrCat("no such model file: ", path));
    return nullptr;
  }
  const absl::Time t0 = absl::Now();
  absl::StatusOr<std::unique_ptr<CompiledModel>> compiled = Compiler(options).CompileFile(path);
  if (wall_ms != nullptr) *wall_ms = MsSince(t0);
  if (!compiled.ok()) {
    *exit_code = Failed(command, compiled.status());
    return nullptr;
  }
  return *std::move(compiled);
}

int CountFiles(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// A loop kernel's ops without a vector form, grouped by decision and
// reason in body order: "#0 load, #1 load_indirect per-lane (data-dependent
// index in i1)"; at most 8 ops named per group ("..., and 3 more").
std::string UnvectorizedOpsText(const KernelReport& k) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const KernelReport::OpNote& n : k.unvectorized_ops) {
    std::string key = n.decision;
    if (!n.reason.empty()) absl::StrAppend(&key, " (", n.reason, ")");
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(absl::StrCat("#", n.op, " ", n.opcode));
  }
  std::vector<std::string> parts;
  for (auto& [key, ops] : groups) {
    const size_t n = ops.size();
    if (n > 8) {
      ops.resize(8);
      ops.push_back(absl::StrCat("and ", n - 8, " more"));
    }
    parts.push_back(absl::StrCat(absl::StrJoin(ops, ", "), " ", key));
  }
  return absl::StrJoin(parts, "; ");
}

std::string KernelTable(const CompileReport& r) {
  std::string s = absl::StrFormat("%4s  %-9s  %-10s  %-3s  %-28s  %s\n", "#", "backend",
                                  "status", "par", "kernel", "ops / library call");
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelReport& k = r.kernels[i];
    std::string what = absl::StrJoin(k.ops, ", ");
    if (!k.call.empty()) what = absl::StrCat(k.call, "  [", what, "]");
    absl::StrAppendFormat(&s, "%4d  %-9s  %-10s  %-3s  %-28s  %s\n", i, k.backend, k.status,
                          k.parallel ? "yes" : "", k.name, what);
    if (!k.reason.empty()) absl::StrAppend(&s, "        -- ", k.reason, "\n");
  }
  return s;
}

int RunCompile(const Command& cmd) {
  const CompileCommandOptions& opts = cmd.compile_cmd;
  CompileOptions options = ToCompileOptions(cmd.compile, WorkingDir());
  if (!opts.dump_dir.empty()) options.dump_dir = ResolvePath(opts.dump_dir, WorkingDir());
  int exit_code = kExitOk;
  double wall_ms = 0;
  std::unique_ptr<CompiledModel> model =
      CompileOrReport("compile", opts.model, options, &exit_code, &wall_ms);
  if (model == nullptr) return exit_code;
  const CompileReport& r = model->report();
  // The report's summary: its lines up to the per-kernel ones (indented).
  for (absl::string_view line : absl::StrSplit(r.ToText(), '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "  ")) break;
    std::cout << line << "\n";
  }
  std::cout << "wall time " << FormatMs(wall_ms) << "\n";
  if (opts.verbose) std::cout << KernelTable(r);
  if (!options.dump_dir.empty()) {
    const std::string& d = options.dump_dir;
    std::cout << "dumped to " << d << ": graph/ (" << CountFiles(d + "/graph")
              << " files), loop/ (" << CountFiles(d + "/loop") << " files), cpp/ ("
              << CountFiles(d + "/cpp") << " files)\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------- aot

int RunAot(const Command& cmd) {
  const AotCommandOptions& o = cmd.aot;
  const CompileOptions options = ToCompileOptions(cmd.compile, WorkingDir());
  aot::WriterOptions w;
  w.name = o.name;
  w.isas = o.isas;
  w.shards = o.shards;
  w.header_include = o.header_include;
  w.data_dir = o.data_dir;
  w.part = o.part;
  w.weights_file = o.weights_file.empty() ? "" : ResolvePath(o.weights_file, WorkingDir());
  w.reference_calls = o.reference_calls;
  absl::StatusOr<std::vector<aot::GeneratedFile>> files =
      aot::WriteAotLibrary(ResolvePath(o.model, WorkingDir()), options, w);
  if (!files.ok()) {
    std::cerr << "kilnc aot: " << files.status().message() << "\n";
    return ExitCodeFor(files.status());
  }
  const std::string dir = ResolvePath(o.out_dir, WorkingDir());
  std::vector<std::string> read = {ResolvePath(o.model, WorkingDir())};
  if (!w.weights_file.empty()) read.push_back(w.weights_file);
  for (const aot::GeneratedFile& f : *files) {
    absl::Status s = CheckWritable(dir + "/" + f.name, read);
    if (!s.ok()) {
      std::cerr << "kilnc aot: " << s.message() << "\n";
      return kExitBadInput;
    }
  }
  for (const aot::GeneratedFile& f : *files) {
    absl::Status s = WriteFileAtomically(dir + "/" + f.name, f.contents);
    if (!s.ok()) {
      std::cerr << "kilnc aot: " << s.message() << "\n";
      return kExitBadInput;
    }
  }
  std::cout << "wrote " << files->size() << " files to " << dir << "\n";
  return kExitOk;
}

// ---------------------------------------------------------------- explain

int RunExplain(const Command& cmd) {
  int exit_code = kExitOk;
  std::unique_ptr<CompiledModel> model = CompileOrReport(
      "explain", cmd.explain.model, ToCompileOptions(cmd.compile, WorkingDir()), &exit_code);
  if (model == nullptr) return exit_code;
  const CompileReport& r = model->report();
  PrintWarnings(r.warnings);
  if (cmd.explain.json) {
    std::cout << r.ToJson() << "\n";
    return kExitOk;
  }
  std::cout << "kilnc explain " << EscapeForMessage(r.model) << "\n"
            << "isa " << r.isa << ", mode " << r.mode << ", threads " << ThreadsText(r.threads)
            << "; " << KernelCounts(r) << "\n";
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelReport& k = r.kernels[i];
    std::cout << "\n[" << i << "] " << k.name << "  " << k.backend;
    if (k.backend == "loop") {
      std::cout << "  " << k.status << (k.parallel ? ", parallel" : "");
    } else {
      std::cout << "  " << k.call;
    }
    std::cout << "\n    ops: " << absl::StrJoin(k.ops, ", ") << "\n";
    if (k.backend == "loop") {
      std::cout << "    vectorized: " << (k.vectorized ? "yes" : "no");
      if (!k.reason.empty()) std::cout << " -- " << k.reason;
      std::cout << "\n";
      if (!k.storage.empty()) {
        std::cout << "    storage: " << absl::StrJoin(k.storage, ", ")
                  << " (f16 and bf16 computed in f32)\n";
      }
      if (!k.unvectorized_ops.empty()) {
        std::cout << "    not vector: " << UnvectorizedOpsText(k) << "\n";
      }
      continue;
    }
    std::cout << "    precision: " << k.precision
              << (k.precision == "bf16"   ? " (f32 accumulation)"
                  : k.precision == "int8" ? " (s32 accumulation)"
                                          : "")
              << "\n";
    std::cout << "    post-ops: "
              << (k.post_ops.empty() ? "none" : absl::StrJoin(k.post_ops, ", ")) << "\n"
              << "    weights: " << (k.weight_layout.empty() ? "-" : k.weight_layout)
              << ", prepacked " << k.prepacked_bytes << " bytes"
              << "; activation reorders per call: " << k.reorders_per_call << "\n";
    if (!k.reason.empty()) std::cout << "    note: " << k.reason << "\n";
    for (const CompileReport::TunedCall& t : r.tuned_calls) {
      if (t.kernel != k.name) continue;
      std::cout << "    tuned (" << t.why << "): " << t.choice
                << (t.cached ? " [cached]" : "") << "\n";
    }
  }
  std::cout << "\nmemory: arena " << FormatBytes(r.arena_bytes) << " (one buffer per intermediate "
            << FormatBytes(r.intermediate_bytes) << "), weights " << FormatBytes(r.constant_bytes)
            << ", prepacked " << FormatBytes(r.prepacked_bytes) << " ("
            << FormatBytes(r.released_constant_bytes) << " of weights released once prepacked)"
            << "; activation reorders per run: " << r.reorders << "\n";
  if (r.precision != "f32" || r.bf16_activation_buffers > 0) {
    std::cout << "precision: " << r.precision << "; " << r.bf16_activation_buffers
              << " activation buffers (" << FormatBytes(r.bf16_activation_bytes)
              << ") stored in bf16\n";
  }
  if (!r.qdq_patterns.empty()) {
    int integer = 0;
    for (const CompileReport::QdqPattern& q : r.qdq_patterns) integer += !q.op.empty();
    std::cout << "QDQ patterns: " << r.qdq_patterns.size() << ", " << integer
              << " as integer calls\n";
    for (const CompileReport::QdqPattern& q : r.qdq_patterns) {
      if (q.op.empty()) std::cout << "  " << q.node << " (" << q.anchor << ") stays f32: " << q.reason << "\n";
    }
  }
  return kExitOk;
}

// ---------------------------------------------------------------- bench

// A fresh temporary folder under the user's JIT cache (<cache>/tmp, where
// the JIT's build folders go), deleted with this object or by kilnc's signal
// handler; the JIT's sweep removes one a killed process left (kiln_jit_*).
class TempDir {
 public:
  static absl::StatusOr<TempDir> Make(absl::string_view prefix) {
    const std::string root = jit::DefaultCacheDir() + "/tmp";
    std::error_code ec;
    fs::create_directories(root, ec);
    std::string tmpl = absl::StrCat(root, "/kiln_jit_", prefix, "XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a temporary folder ", tmpl));
    }
    TempDir d;
    d.path_ = tmpl;
    d.on_signal_ = std::make_unique<jit::RemovedOnSignal>(tmpl, /*is_dir=*/true);
    return d;
  }
  TempDir() = default;
  TempDir(TempDir&& o) noexcept
      : path_(std::move(o.path_)), on_signal_(std::move(o.on_signal_)) {
    o.path_.clear();
  }
  TempDir& operator=(TempDir&& o) noexcept {
    std::swap(path_, o.path_);
    std::swap(on_signal_, o.on_signal_);
    return *this;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<jit::RemovedOnSignal> on_signal_;
};

int64_t PeakRssBytes() {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Timed runs of `model` on `inputs` into `outputs`, after `warmup` untimed
// ones, until both minimums are reached.
absl::StatusOr<std::vector<double>> TimedRuns(const CompiledModel& model,
                                              const std::vector<ir::Tensor>& inputs,
                                              const std::vector<ir::Tensor*>& outputs,
                                              const BenchOptions& opts) {
  for (int i = 0; i < opts.warmup; ++i) {
    KILN_RETURN_IF_ERROR(model.RunInto(inputs, outputs));
  }
  std::vector<double> times_ms;
  const double start_us = NowUs();
  while ((NowUs() - start_us) / 1e6 < opts.min_time_s ||
         static_cast<int>(times_ms.size()) < opts.min_iterations) {
    const double t0 = NowUs();
    KILN_RETURN_IF_ERROR(model.RunInto(inputs, outputs));
    times_ms.push_back((NowUs() - t0) / 1000);
  }
  return times_ms;
}

// --vs-static for one sweep point: the model compiled with every input
// bound to `want`'s shapes, timed alternately with `model` (one run each per
// round) after --warmup runs of each; fills `p`'s latency and static fields.
absl::Status VsStatic(const CompiledModel& model, const std::vector<TensorInfo>& want,
                      const std::vector<ir::Tensor>& inputs,
                      const std::vector<ir::Tensor*>& outputs, const CompileOptions& options,
                      const BenchOptions& opts, BenchResult::ShapePoint* p) {
  CompileOptions bound = options;
  for (const TensorInfo& in : want) bound.input_shapes[in.name] = in.shape;
  absl::StatusOr<std::unique_ptr<CompiledModel>> fixed =
      Compiler(bound).CompileFile(ResolvePath(opts.model, WorkingDir()));
  if (!fixed.ok()) return fixed.status();
  p->static_cache_hit = (*fixed)->report().jit_cache_hit;
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> fixed_outputs, TryNewOutputTensors(**fixed));
  std::vector<ir::Tensor*> fixed_ptrs;
  for (ir::Tensor& t : fixed_outputs) fixed_ptrs.push_back(&t);
  for (int i = 0; i < opts.warmup; ++i) {
    KILN_RETURN_IF_ERROR(model.RunInto(inputs, outputs));
    KILN_RETURN_IF_ERROR((*fixed)->RunInto(inputs, fixed_ptrs));
  }
  std::vector<double> dynamic_ms, static_ms;
  const double start_us = NowUs();
  while ((NowUs() - start_us) / 1e6 < opts.min_time_s ||
         static_cast<int>(dynamic_ms.size()) < opts.min_iterations) {
    double t0 = NowUs();
    KILN_RETURN_IF_ERROR(model.RunInto(inputs, outputs));
    dynamic_ms.push_back((NowUs() - t0) / 1000);
    t0 = NowUs();
    KILN_RETURN_IF_ERROR((*fixed)->RunInto(inputs, fixed_ptrs));
    static_ms.push_back((NowUs() - t0) / 1000);
  }
  p->latency = ComputeLatencyStats(dynamic_ms);
  p->static_median_ms = ComputeLatencyStats(static_ms).median_ms;
  return absl::OkStatus();
}

// bench times a cold compile unless --warm-only: without --cache-dir, that
// compile goes to a fresh cache in `fresh`, removed when `fresh` is.
absl::Status UseFreshCacheForColdRuns(const BenchOptions& opts, CompileOptions* options,
                                      TempDir* fresh) {
  if (!options->cache_dir.empty() || opts.warm_only) return absl::OkStatus();
  absl::StatusOr<TempDir> d = TempDir::Make("bench_cache_");
  if (!d.ok()) return d.status();
  *fresh = *std::move(d);
  options->cache_dir = fresh->path();
  // Cold means a model never built before, not a toolchain never used: the
  // precompiled header stays the user's (made there once if missing).
  if (options->precompiled_header_dir.empty()) {
    options->precompiled_header_dir = jit::DefaultCacheDir();
  }
  return absl::OkStatus();
}

// bench with several shapes (BenchOptions::sweep): one compile with the
// swept dims unbound, then per shape the first run (compiling its
// specialization) and the steady latency.
int RunBenchSweep(const Command& cmd) {
  const BenchOptions& opts = cmd.bench;
  CompileFlags flags = cmd.compile;
  absl::StatusOr<GivenInputs> given = LoadGivenInputs(cmd.inputs, &flags);
  if (!given.ok()) return BadInput("bench", given.status().message());
  for (const auto& [name, shapes] : opts.sweep) {
    if (given->tensors.count(name)) {
      return BadInput("bench", absl::StrCat("--input ", name, " has one shape; --shape sweeps it"));
    }
  }
  const std::string path = ResolvePath(opts.model, WorkingDir());
  if (!IsFile(path)) return BadInput("bench", absl::StrCat("no such model file: ", path));
  CompileOptions options = ToCompileOptions(flags, WorkingDir());
  TempDir fresh_cache;
  if (absl::Status st = UseFreshCacheForColdRuns(opts, &options, &fresh_cache); !st.ok()) {
    return Failed("bench", st);
  }
  // Every shape of the sweep must stay compiled while it is timed.
  options.max_shape_specializations =
      std::max(options.max_shape_specializations, 1);
  BenchResult res;
  res.model = path;
  res.cold_skipped = true;
  int exit_code = kExitOk;
  std::unique_ptr<CompiledModel> model =
      CompileOrReport("bench", opts.model, options, &exit_code, &res.compile_warm_ms);
  if (model == nullptr) return exit_code;
  res.warm_cache_hit = model->report().jit_cache_hit;
  PrintWarnings(model->report().warnings);
  const size_t n_points = opts.sweep[0].second.size();
  const bool progress = opts.progress || isatty(STDERR_FILENO);
  for (size_t k = 0; k < n_points; ++k) {
    std::vector<std::pair<std::string, ir::Shape>> point = flags.shapes;
    for (const auto& [name, shapes] : opts.sweep) point.emplace_back(name, shapes[k]);
    for (const auto& [name, t] : given->tensors) point.emplace_back(name, t.shape());
    absl::StatusOr<std::vector<ir::Shape>> shapes = SweepPointShapes(model->inputs(), point);
    if (!shapes.ok()) return InputsFailed("bench", shapes.status());
    std::vector<TensorInfo> want = model->inputs();
    std::vector<std::string> text;
    for (size_t i = 0; i < want.size(); ++i) {
      want[i].shape = (*shapes)[i];
      text.push_back(
          absl::StrCat(EscapeForMessage(want[i].name), ": ", ir::ShapeToString(want[i].shape)));
    }
    CompileFlags point_flags = flags;
    point_flags.shapes.clear();
    absl::StatusOr<std::vector<ir::Tensor>> inputs =
        MakeInputs(want, *given, cmd.inputs, point_flags, nullptr);
    if (!inputs.ok()) return InputsFailed("bench", inputs.status());
    absl::StatusOr<std::vector<ir::Tensor>> allocated = TryNewOutputTensors(*model);
    if (!allocated.ok()) return Failed("bench", allocated.status());
    std::vector<ir::Tensor> outputs = *std::move(allocated);
    std::vector<ir::Tensor*> output_ptrs;
    for (ir::Tensor& t : outputs) output_ptrs.push_back(&t);

    BenchResult::ShapePoint p;
    p.shapes = absl::StrJoin(text, ", ");
    if (progress) std::cerr << "shape " << p.shapes << " ..." << std::flush;
    const size_t compiled_before = model->report().specializations.size();
    const double t0 = NowUs();
    absl::Status s = model->RunInto(*inputs, output_ptrs);
    p.first_run_ms = (NowUs() - t0) / 1000;
    if (!s.ok()) {
      if (progress) std::cerr << "\n";
      return Failed("bench", s);
    }
    const std::vector<CompileReport::ShapeSpecialization>& specs =
        model->report().specializations;
    if (specs.size() > compiled_before) {
      p.compiled = true;
      p.compile_ms = specs.back().compile_ms;
      p.jit_cache_hit = specs.back().jit_cache_hit;
    }
    if (opts.vs_static) {
      absl::Status vs = VsStatic(*model, want, *inputs, output_ptrs, options, opts, &p);
      if (progress) std::cerr << "\r\033[K" << std::flush;
      if (!vs.ok()) return Failed("bench", vs);
      res.points.push_back(std::move(p));
      continue;
    }
    absl::StatusOr<std::vector<double>> times = TimedRuns(*model, *inputs, output_ptrs, opts);
    if (progress) std::cerr << "\r\033[K" << std::flush;
    if (!times.ok()) return Failed("bench", times.status());
    p.latency = ComputeLatencyStats(*times);
    res.points.push_back(std::move(p));
  }
  const CompileReport& r = model->report();
  res.peak_rss_bytes = PeakRssBytes();
  res.isa = r.isa;
  res.mode = r.mode;
  res.threads = EffectiveThreads(r.threads);
  res.warmup = opts.warmup;
  if (opts.json) {
    std::cout << BenchResultToJson(res).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace)
              << "\n";
    return kExitOk;
  }
  std::cout << "kilnc bench " << path << " (" << n_points << " shapes)\n"
            << "isa " << res.isa << ", mode " << res.mode << ", threads " << res.threads
            << "; compile " << FormatMs(res.compile_warm_ms)
            << (fresh_cache.path().empty() ? "" : " (fresh cache)") << "\n"
            << "per shape: the first run (compiling the shape's specialization), then "
            << res.warmup << " warm-up and at least " << opts.min_iterations << " timed runs / "
            << opts.min_time_s << " s\n";
  std::cout << absl::StrFormat("%-44s  %12s  %16s  %10s  %10s%s\n", "shapes", "first run",
                               "its compile", "median", "p90",
                               opts.vs_static ? "  static median (interleaved)" : "");
  for (const BenchResult::ShapePoint& p : res.points) {
    std::cout << absl::StrFormat(
        "%-44s  %12s  %16s  %10s  %10s%s\n", p.shapes, FormatMs(p.first_run_ms),
        p.compiled ? absl::StrCat(FormatMs(p.compile_ms), p.jit_cache_hit ? " (cached)" : "")
                   : std::string("-"),
        FormatMs(p.latency.median_ms), FormatMs(p.latency.p90_ms),
        opts.vs_static ? absl::StrFormat("  %s (dynamic/static %.3f)",
                                         FormatMs(p.static_median_ms),
                                         p.latency.median_ms / p.static_median_ms)
                       : std::string());
  }
  std::cout << "specializations: " << r.specializations.size() << " compiled, "
            << r.live_specializations << " live; peak RSS "
            << FormatBytes(res.peak_rss_bytes) << "\n";
  return kExitOk;
}

int RunBench(const Command& cmd) {
  const BenchOptions& opts = cmd.bench;
  if (!opts.sweep.empty()) return RunBenchSweep(cmd);
  CompileFlags flags = cmd.compile;
  absl::StatusOr<GivenInputs> given = LoadGivenInputs(cmd.inputs, &flags);
  if (!given.ok()) return BadInput("bench", given.status().message());
  const std::string path = ResolvePath(opts.model, WorkingDir());
  if (!IsFile(path)) return BadInput("bench", absl::StrCat("no such model file: ", path));

  CompileOptions options = ToCompileOptions(flags, WorkingDir());
  TempDir fresh_cache;
  if (absl::Status st = UseFreshCacheForColdRuns(opts, &options, &fresh_cache); !st.ok()) {
    return Failed("bench", st);
  }
  BenchResult res;
  res.model = path;
  int exit_code = kExitOk;
  res.cold_skipped = opts.warm_only;
  if (!opts.warm_only) {
    std::unique_ptr<CompiledModel> cold =
        CompileOrReport("bench", opts.model, options, &exit_code, &res.compile_ms);
    if (cold == nullptr) return exit_code;
    res.cold_cache_hit = cold->report().jit_cache_hit;
    res.cold_precompiled_header_ms = cold->report().jit_precompiled_header_ms;
  }
  std::unique_ptr<CompiledModel> model =
      CompileOrReport("bench", opts.model, options, &exit_code, &res.compile_warm_ms);
  if (model == nullptr) return exit_code;
  const CompileReport& r = model->report();
  res.warm_cache_hit = r.jit_cache_hit;
  PrintWarnings(r.warnings);

  absl::StatusOr<std::vector<ir::Tensor>> inputs =
      MakeInputs(model->inputs(), *given, cmd.inputs, flags, nullptr);
  if (!inputs.ok()) return InputsFailed("bench", inputs.status());
  absl::StatusOr<std::vector<ir::Tensor>> allocated = TryNewOutputTensors(*model);
  if (!allocated.ok()) return Failed("bench", allocated.status());
  std::vector<ir::Tensor> outputs = *std::move(allocated);
  std::vector<ir::Tensor*> output_ptrs;
  for (ir::Tensor& t : outputs) output_ptrs.push_back(&t);

  for (int i = 0; i < opts.warmup; ++i) {
    absl::Status s = model->RunInto(*inputs, output_ptrs);
    if (!s.ok()) return Failed("bench", s);
  }
  const bool progress = opts.progress || isatty(STDERR_FILENO);
  std::vector<double> times_ms;
  const double start_us = NowUs();
  double last_draw_us = -1e18;
  for (;;) {
    const double elapsed_s = (NowUs() - start_us) / 1e6;
    if (progress && (NowUs() - last_draw_us) > 1e5) {
      std::cerr << ProgressLine(elapsed_s, opts.min_time_s, times_ms.size(),
                                opts.min_iterations)
                << std::flush;
      last_draw_us = NowUs();
    }
    if (elapsed_s >= opts.min_time_s &&
        static_cast<int>(times_ms.size()) >= opts.min_iterations) {
      break;
    }
    const double t0 = NowUs();
    absl::Status s = model->RunInto(*inputs, output_ptrs);
    const double t1 = NowUs();
    if (!s.ok()) {
      if (progress) std::cerr << "\n";
      return Failed("bench", s);
    }
    times_ms.push_back((t1 - t0) / 1000);
  }
  res.timed_s = (NowUs() - start_us) / 1e6;
  if (progress) {
    std::cerr << ProgressLine(res.timed_s, opts.min_time_s, times_ms.size(),
                              opts.min_iterations)
              << "\n";
  }
  res.latency = ComputeLatencyStats(times_ms);
  res.peak_rss_bytes = PeakRssBytes();
  res.isa = r.isa;
  res.mode = r.mode;
  res.threads = EffectiveThreads(r.threads);
  res.warmup = opts.warmup;
  res.arena_bytes = r.arena_bytes;
  res.prepacked_bytes = r.prepacked_bytes;
  res.kernels = static_cast<int>(r.kernels.size());
  res.loop_kernels = r.loop_kernels;
  res.library_calls = r.library_calls;

  if (opts.vs_eager) {
    CompileOptions eager_options = options;
    eager_options.mode = CompileOptions::Mode::kEager;
    double eager_compile_ms = 0;
    std::unique_ptr<CompiledModel> eager = CompileOrReport(
        "bench", opts.model, eager_options, &exit_code, &eager_compile_ms);
    if (eager == nullptr) return exit_code;
    res.eager_arena_bytes = eager->report().arena_bytes;
    absl::StatusOr<std::vector<ir::Tensor>> eager_allocated = TryNewOutputTensors(*eager);
    if (!eager_allocated.ok()) return Failed("bench", eager_allocated.status());
    std::vector<ir::Tensor> eager_outputs = *std::move(eager_allocated);
    std::vector<ir::Tensor*> eager_ptrs;
    for (ir::Tensor& t : eager_outputs) eager_ptrs.push_back(&t);
    for (int i = 0; i < opts.warmup; ++i) {
      absl::Status s = eager->RunInto(*inputs, eager_ptrs);
      if (!s.ok()) return Failed("bench", s);
    }
    // One run of each per round, so drift and noise hit both alike.
    std::vector<double> compiled_ms, eager_ms;
    const double round_start_us = NowUs();
    while ((NowUs() - round_start_us) / 1e6 < opts.min_time_s ||
           static_cast<int>(compiled_ms.size()) < opts.min_iterations) {
      if (progress) {
        std::cerr << ProgressLine((NowUs() - round_start_us) / 1e6, opts.min_time_s,
                                  compiled_ms.size(), opts.min_iterations)
                  << std::flush;
      }
      double t0 = NowUs();
      absl::Status s = model->RunInto(*inputs, output_ptrs);
      double t1 = NowUs();
      if (!s.ok()) return Failed("bench", s);
      compiled_ms.push_back((t1 - t0) / 1000);
      t0 = NowUs();
      s = eager->RunInto(*inputs, eager_ptrs);
      t1 = NowUs();
      if (!s.ok()) return Failed("bench", s);
      eager_ms.push_back((t1 - t0) / 1000);
    }
    if (progress) std::cerr << "\n";
    res.vs_eager_rounds = static_cast<int>(compiled_ms.size());
    res.interleaved_compiled_median_ms = ComputeLatencyStats(compiled_ms).median_ms;
    res.interleaved_eager_median_ms = ComputeLatencyStats(eager_ms).median_ms;
    res.peak_rss_bytes = PeakRssBytes();
  }

  if (opts.json) {
    std::cout << BenchResultToJson(res).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace)
              << "\n";
    return kExitOk;
  }
  std::cout << "kilnc bench " << path << "\n"
            << "isa " << res.isa << ", mode " << res.mode << ", threads " << res.threads
            << "; " << KernelCounts(r) << "\n"
            << "compile: "
            << (res.cold_skipped
                    ? std::string("cold skipped (--warm-only)")
                    : absl::StrCat("cold ", FormatMs(res.compile_ms),
                                   fresh_cache.path().empty()
                                       ? (res.cold_cache_hit ? " (--cache-dir, cache hit)"
                                                             : " (--cache-dir, miss)")
                                       : " (fresh cache)"))
            << ", warm " << FormatMs(res.compile_warm_ms)
            << (res.warm_cache_hit ? " (cache hit)" : " (cache miss)") << "\n"
            << "runs: " << res.warmup << " warm-up, " << res.latency.iterations << " timed in "
            << absl::StrFormat("%.2f", res.timed_s) << " s\n"
            << "latency: median " << absl::StrFormat("%.3f", res.latency.median_ms)
            << " ms, p90 " << absl::StrFormat("%.3f", res.latency.p90_ms) << " ms, mean "
            << absl::StrFormat("%.3f", res.latency.mean_ms) << " ms, min "
            << absl::StrFormat("%.3f", res.latency.min_ms) << " ms\n"
            << "memory: peak RSS " << FormatBytes(res.peak_rss_bytes) << ", arena "
            << FormatBytes(res.arena_bytes) << ", prepacked weights "
            << FormatBytes(res.prepacked_bytes) << "\n";
  if (res.vs_eager_rounds > 0) {
    const double speedup =
        res.interleaved_compiled_median_ms > 0
            ? res.interleaved_eager_median_ms / res.interleaved_compiled_median_ms
            : 0.0;
    std::cout << "vs eager (" << res.vs_eager_rounds
              << " interleaved rounds): compiled median "
              << absl::StrFormat("%.3f", res.interleaved_compiled_median_ms)
              << " ms, eager median "
              << absl::StrFormat("%.3f", res.interleaved_eager_median_ms) << " ms: compiled is "
              << absl::StrFormat("%.2fx", speedup) << (speedup >= 1 ? " faster" : " (slower)")
              << "; arena " << FormatBytes(res.arena_bytes) << " vs eager "
              << FormatBytes(res.eager_arena_bytes) << "\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------- profile

int RunProfile(const Command& cmd) {
  const ProfileOptions& opts = cmd.profile;
  CompileFlags flags = cmd.compile;
  absl::StatusOr<GivenInputs> given = LoadGivenInputs(cmd.inputs, &flags);
  if (!given.ok()) return BadInput("profile", given.status().message());
  int exit_code = kExitOk;
  double compile_ms = 0;
  std::unique_ptr<CompiledModel> model = CompileOrReport(
      "profile", opts.model, ToCompileOptions(flags, WorkingDir()), &exit_code, &compile_ms);
  if (model == nullptr) return exit_code;
  const CompileReport& r = model->report();
  PrintWarnings(r.warnings);
  absl::StatusOr<std::vector<ir::Tensor>> inputs =
      MakeInputs(model->inputs(), *given, cmd.inputs, flags, nullptr);
  if (!inputs.ok()) return InputsFailed("profile", inputs.status());

  std::string trace_path;
  if (!opts.trace.empty()) {
    trace_path = ResolvePath(opts.trace, WorkingDir());
    std::vector<std::string> read = {ResolvePath(opts.model, WorkingDir())};
    for (const auto& [name, file] : cmd.inputs.inputs) {
      read.push_back(ResolvePath(file, WorkingDir()));
    }
    absl::Status writable = CheckWritable(trace_path, read);
    if (!writable.ok()) return BadInput("profile", writable.message());
    // Fail before the runs, not after them, where the trace cannot be written.
    const std::string trace_dir = fs::path(trace_path).parent_path().string();
    if (::access(trace_dir.empty() ? "." : trace_dir.c_str(), W_OK) != 0) {
      return BadInput("profile", absl::StrCat("cannot write ", trace_path));
    }
  }

  for (int i = 0; i < opts.warmup; ++i) {
    absl::StatusOr<std::vector<ir::Tensor>> out = model->Run(*inputs);
    if (!out.ok()) return Failed("profile", out.status());
  }
  std::vector<ProfiledRun> runs;
  std::vector<double> wall_ms;
  const double origin_us = NowUs();
  for (int i = 0; i < opts.iterations; ++i) {
    ProfiledRun run;
    const double t0 = NowUs();
    run.start_us = t0 - origin_us;
    absl::StatusOr<std::vector<ir::Tensor>> out = model->Profile(*inputs, &run.timings);
    wall_ms.push_back((NowUs() - t0) / 1000);
    if (!out.ok()) return Failed("profile", out.status());
    runs.push_back(std::move(run));
  }

  std::cout << "kilnc profile " << EscapeForMessage(r.model) << "\n"
            << "isa " << r.isa << ", mode " << r.mode << ", threads " << ThreadsText(r.threads)
            << "; " << KernelCounts(r) << "; compile " << CompileTimeText(r, compile_ms) << "\n"
            << "runs: " << opts.warmup << " warm-up, " << opts.iterations
            << " profiled; median wall time " << absl::StrFormat("%.3f", Quantile(wall_ms, 0.5))
            << " ms\n";
  std::cout << FormatKernelTable(r, KernelTotals(r, runs), opts.iterations, opts.top);

  if (!trace_path.empty()) {
    absl::StatusOr<nlohmann::json> trace = ChromeTrace(r, runs);
    if (!trace.ok()) return Failed("profile", trace.status());
    absl::Status written = WriteFileAtomically(
        trace_path,
        trace->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    if (!written.ok()) return BadInput("profile", written.message());
    std::cout << "trace: " << trace_path << " (" << (*trace)["traceEvents"].size() - 2
              << " kernel events; open in ui.perfetto.dev or chrome://tracing)\n";
  }
  return kExitOk;
}

// On SIGINT, SIGTERM or SIGHUP: delete the JIT's build folders and kilnc's
// temporary cache, then die of the signal as if not caught.
void RemoveTemporariesAndDie(int sig) {
  jit::RemoveBuildsInProgress();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

int MainImpl(int argc, char** argv) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, RemoveTemporariesAndDie);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "opt") return OptMain(args, WorkingDir(), std::cout, std::cerr);
  if (args.size() == 2 && args[0] == "help" && args[1] == "opt") {
    std::cout << OptUsage();
    return kExitOk;
  }
  absl::StatusOr<Command> cmd = ParseCommandLine(args);
  if (!cmd.ok()) {
    std::cerr << "kilnc: " << cmd.status().message() << "\n";
    return kExitBadInput;
  }
  switch (cmd->kind) {
    case Command::Kind::kHelp:
      std::cout << cmd->help_text;
      return kExitOk;
    case Command::Kind::kCheck:
      return RunCheck(*cmd);
    case Command::Kind::kRun:
      return RunRun(*cmd);
    case Command::Kind::kCompile:
      return RunCompile(*cmd);
    case Command::Kind::kExplain:
      return RunExplain(*cmd);
    case Command::Kind::kBench:
      return RunBench(*cmd);
    case Command::Kind::kProfile:
      return RunProfile(*cmd);
    case Command::Kind::kAot:
      return RunAot(*cmd);
  }
  return kExitBadInput;
}

// MainImpl, with the last resort for an allocation nobody checked: a
// clear message and kExitResourceExhausted instead of an abort.
int Main(int argc, char** argv) {
  try {
    return MainImpl(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "kilnc: out of memory\n";
    return kExitResourceExhausted;
  }
}

}  // namespace
}  // namespace kiln::tools

int main(int argc, char** argv) { return kiln::tools::Main(argc, argv); }
