// Emitter test helpers: random tensors, batch JIT runs per ISA (see
// test_util.h).
#include "backends/cpp/test_util.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "interp/loop_module.h"
#include "lowering/ops_fallback.h"
#include "compiler/jit/jit_compiler.h"

namespace kiln::backends::cpp {
namespace {

using ir::DType;
using ir::Tensor;
using ir::loop::Buffer;

// Storage offsets of a buffer's elements in row-major element order.
std::vector<int64_t> Offsets(const Buffer& b) {
  const int64_t n = ir::NumElements(b.shape);
  std::vector<int64_t> out;
  out.reserve(n);
  std::vector<int64_t> coord(b.shape.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t offset = 0;
    for (size_t d = 0; d < coord.size(); ++d) offset += coord[d] * b.strides[d];
    out.push_back(offset);
    for (size_t d = coord.size(); d-- > 0;) {
      if (++coord[d] < b.shape[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

std::vector<uint8_t> Layout(const Buffer& b, const Tensor* t) {
  const size_t es = ir::DTypeSize(b.dtype);
  std::vector<uint8_t> storage(static_cast<size_t>(*b.StorageSize()) * es + 64, 0);
  if (t == nullptr) return storage;
  const std::vector<int64_t> offsets = Offsets(b);
  const uint8_t* src = static_cast<const uint8_t*>(t->raw_data());
  for (size_t e = 0; e < offsets.size(); ++e) {
    std::memcpy(&storage[offsets[e] * es], src + e * es, es);
  }
  return storage;
}

Tensor Unlayout(const Buffer& b, const uint8_t* storage) {
  Tensor t(b.dtype, b.shape);
  const size_t es = ir::DTypeSize(b.dtype);
  const std::vector<int64_t> offsets = Offsets(b);
  uint8_t* dst = static_cast<uint8_t*>(t.raw_data());
  for (size_t e = 0; e < offsets.size(); ++e) {
    std::memcpy(dst + e * es, storage + offsets[e] * es, es);
  }
  return t;
}

std::string TestTmp(absl::string_view leaf) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", leaf);
}

// One entry call of a case: a symbol and the case's buffers it takes, in
// argument order.
struct Call {
  std::string symbol;
  std::vector<int32_t> args;
};

// How one case runs: its calls in order, its buffers' storage sizes, and
// the buffers gathered afterwards. `active` is false once the case failed.
struct CasePlan {
  bool active = true;
  std::vector<Call> calls;
  std::vector<int64_t> bytes;   // per buffer: storage bytes (+64 slack)
  std::vector<int32_t> dumped;  // ascending buffer indices
};

int64_t StorageBytes(const Buffer& b) {
  return *b.StorageSize() * static_cast<int64_t>(ir::DTypeSize(b.dtype)) + 64;
}

const Tensor* DataOf(const ProgramCase& c, const Buffer& b) {
  auto it = c.inputs.find(b.name);
  return it == c.inputs.end() ? nullptr : &it->second;
}

// Empty when the case's data fits its program; else what does not.
std::string CheckCase(const ProgramCase& c, std::vector<int32_t>* dumped) {
  const ir::loop::LoopProgram& p = c.program;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer& buf = p.buffers[b];
    if (!buf.StorageSize().has_value()) {
      return absl::StrCat("buffer '", buf.name, "' has no valid storage size");
    }
    const Tensor* t = DataOf(c, buf);
    if (t != nullptr && (t->dtype() != buf.dtype || t->shape() != buf.shape)) {
      return absl::StrCat("data for buffer '", buf.name, "' is ", ir::DTypeName(t->dtype()),
                          ir::ShapeToString(t->shape()), ", the buffer is ",
                          ir::DTypeName(buf.dtype), ir::ShapeToString(buf.shape));
    }
    const bool read_back = std::find(c.read_back.begin(), c.read_back.end(), buf.name) !=
                           c.read_back.end();
    if (buf.kind == ir::loop::BufferKind::kOutput || read_back) {
      dumped->push_back(static_cast<int32_t>(b));
    }
  }
  for (const std::string& name : c.read_back) {
    if (std::none_of(p.buffers.begin(), p.buffers.end(),
                     [&](const Buffer& b) { return b.name == name; })) {
      return absl::StrCat("no buffer '", name, "' to read back");
    }
  }
  return "";
}

// Every program in one: buffers and kernels renamed c<k>_, buffer indices
// shifted by buffer_base[k]; program k's kernels start at kernel_base[k].
ir::loop::LoopProgram MergePrograms(const std::vector<ProgramCase>& cases,
                                    const std::vector<CasePlan>& plans,
                                    std::vector<int32_t>* buffer_base,
                                    std::vector<int>* kernel_base) {
  ir::loop::LoopProgram merged;
  for (size_t c = 0; c < cases.size(); ++c) {
    buffer_base->push_back(static_cast<int32_t>(merged.buffers.size()));
    kernel_base->push_back(static_cast<int>(merged.kernels.size()));
    if (!plans[c].active) continue;
    const int32_t base = buffer_base->back();
    for (Buffer b : cases[c].program.buffers) {
      b.name = absl::StrCat("c", c, "_", b.name);
      merged.buffers.push_back(std::move(b));
    }
    for (ir::loop::Kernel k : cases[c].program.kernels) {
      k.name = absl::StrCat("c", c, "_", k.name);
      for (ir::loop::Op& op : k.body) {
        if (op.buffer >= 0) op.buffer += base;
      }
      for (int32_t& b : k.call.inputs) b += base;
      for (int32_t& b : k.call.outputs) b += base;
      merged.kernels.push_back(std::move(k));
    }
  }
  return merged;
}

// A main(argc = 4: data file, output file, first case) that runs the cases
// from `first` on: each case's buffers are allocated (64-byte aligned), the
// ones with data read from the data file at `offsets` (-1: zero-filled), its
// calls made in order up to the first nonzero return, its dumped buffers
// appended to the output file, then "R <case> <rc>" printed. Output is
// flushed per case, so a crash is attributed to the case after the last R.
// OpenMP runs one thread: under qemu-user, libgomp's thread team hangs here
// (a minimal aarch64 `omp parallel for` reduction never finishes with two
// threads), so parallel kernels are checked single-threaded.
std::string DriverSource(const std::vector<CasePlan>& plans,
                         const std::vector<std::vector<int64_t>>& offsets) {
  std::string s =
      "// Generated test driver (backends/cpp/test_util.cc).\n"
      "#include <stdio.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n";
  std::set<std::string> declared;
  for (const CasePlan& p : plans) {
    for (const Call& call : p.calls) {
      if (declared.insert(call.symbol).second) {
        absl::StrAppend(&s, "extern \"C\" int ", call.symbol, "(void* const*);\n");
      }
    }
  }
  absl::StrAppend(&s, "extern \"C\" void omp_set_num_threads(int);\n");
  absl::StrAppend(&s, "\nstruct Case {\n  int n;\n  const int64_t* bytes;\n  const int64_t* offset;\n",
                  "  int n_dumped;\n  const int* dumped;\n  int (*run)(void* const*);\n};\n\n");
  std::vector<std::string> table;
  for (size_t c = 0; c < plans.size(); ++c) {
    const CasePlan& p = plans[c];
    if (!p.active) {
      table.push_back("{0, nullptr, nullptr, 0, nullptr, nullptr}");
      continue;
    }
    absl::StrAppend(&s, "static const int64_t kBytes", c, "[] = {0, ", absl::StrJoin(p.bytes, ", "),
                    "};\nstatic const int64_t kOffset", c, "[] = {0, ",
                    absl::StrJoin(offsets[c], ", "), "};\nstatic const int kDumped", c,
                    "[] = {0, ", absl::StrJoin(p.dumped, ", "), "};\nstatic int Run", c,
                    "(void* const* b) {\n  int rc = 0;\n");
    for (const Call& call : p.calls) {
      std::vector<std::string> args;
      for (int32_t a : call.args) args.push_back(absl::StrCat("b[", a, "]"));
      absl::StrAppend(&s, "  {\n    void* const a[] = {",
                      args.empty() ? "nullptr" : absl::StrJoin(args, ", "), "};\n    rc = ",
                      call.symbol, "(a);\n    if (rc != 0) return rc;\n  }\n");
    }
    absl::StrAppend(&s, "  return rc;\n}\n");
    table.push_back(absl::StrCat("{", p.bytes.size(), ", kBytes", c, " + 1, kOffset", c, " + 1, ",
                                 p.dumped.size(), ", kDumped", c, " + 1, Run", c, "}"));
  }
  absl::StrAppend(&s, "\nstatic const Case kCases[] = {\n  ", absl::StrJoin(table, ",\n  "),
                  "};\nstatic const int kNumCases = ", plans.size(), ";\n\n");
  absl::StrAppend(&s, R"(int main(int argc, char** argv) {
  if (argc != 4) return 2;
  omp_set_num_threads(1);
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
  if (in == nullptr || out == nullptr) return 3;
  for (int c = atoi(argv[3]); c < kNumCases; ++c) {
    const Case& k = kCases[c];
    if (k.run == nullptr) continue;
    void** bufs = (void**)calloc(k.n + 1, sizeof(void*));
    for (int b = 0; b < k.n; ++b) {
      bufs[b] = aligned_alloc(64, (size_t)((k.bytes[b] + 63) / 64 * 64));
      if (bufs[b] == nullptr) return 4;
      memset(bufs[b], 0, (size_t)k.bytes[b]);
      if (k.offset[b] >= 0 &&
          (fseek(in, (long)k.offset[b], SEEK_SET) != 0 ||
           fread(bufs[b], 1, (size_t)k.bytes[b], in) != (size_t)k.bytes[b])) {
        return 5;
      }
    }
    const int rc = k.run(bufs);
    for (int d = 0; d < k.n_dumped; ++d) {
      fwrite(bufs[k.dumped[d]], 1, (size_t)k.bytes[k.dumped[d]], out);
    }
    fflush(out);
    for (int b = 0; b < k.n; ++b) free(bufs[b]);
    free(bufs);
    printf("R %d %d\n", c, rc);
    fflush(stdout);
  }
  fclose(out);
  return 0;
}
)");
  return s;
}

// Writes the active cases' data to <stem>.in and builds the driver with
// `sources` for the ISA's emulator; `offsets` per case and buffer.
absl::StatusOr<std::string> BuildDriver(jit::JitCompiler& jit,
                                        std::vector<ir::loop::SourceFile> sources,
                                        const std::vector<ProgramCase>& cases,
                                        const std::vector<CasePlan>& plans,
                                        const std::string& stem) {
  std::vector<std::vector<int64_t>> offsets(cases.size());
  {
    std::ofstream data(stem + ".in", std::ios::binary | std::ios::trunc);
    int64_t at = 0;
    for (size_t c = 0; c < cases.size(); ++c) {
      if (!plans[c].active) continue;
      for (const Buffer& b : cases[c].program.buffers) {
        const Tensor* t = DataOf(cases[c], b);
        if (t == nullptr) {
          offsets[c].push_back(-1);
          continue;
        }
        const std::vector<uint8_t> storage = Layout(b, t);
        data.write(reinterpret_cast<const char*>(storage.data()),
                   static_cast<std::streamsize>(storage.size()));
        offsets[c].push_back(at);
        at += static_cast<int64_t>(storage.size());
      }
    }
    if (!data) return absl::InternalError(absl::StrCat("cannot write ", stem, ".in"));
  }
  sources.push_back({"kiln_test_driver", DriverSource(plans, offsets)});
  if (const char* dump = std::getenv("KILN_EMITTER_DUMP_DIR"); dump != nullptr) {
    std::ofstream(absl::StrCat(dump, "/kiln_test_driver.cc")) << sources.back().text;
  }
  return jit.CompileExecutable(sources);
}

// Runs the driver under the ISA's emulator, outputs back through a file;
// restarts after a case the driver dies in.
absl::Status RunDriver(jit::JitCompiler& jit, const std::string& exe, const std::string& stem,
                       const std::vector<ProgramCase>& cases, std::vector<CasePlan>& plans,
                       std::vector<CaseResult>& results) {
  int first = 0;
  for (int attempt = 0; first < static_cast<int>(cases.size()); ++attempt) {
    const std::string out_path = absl::StrCat(stem, ".out", attempt);
    KILN_ASSIGN_OR_RETURN(jit::RunResult run,
                          jit.RunExecutable(exe, {stem + ".in", out_path, absl::StrCat(first)}));
    std::ifstream out(out_path, std::ios::binary);
    int next = first;  // the first case without an R line
    for (absl::string_view line : absl::StrSplit(run.stdout_text, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
      int c = 0, rc = 0;
      if (f.size() != 3 || f[0] != "R" || !absl::SimpleAtoi(f[1], &c) ||
          !absl::SimpleAtoi(f[2], &rc) || c < next || c >= static_cast<int>(cases.size()) ||
          !plans[c].active) {
        return absl::InternalError(absl::StrCat("bad driver output line: ", line.substr(0, 80)));
      }
      results[c].rc = rc;
      for (int32_t b : plans[c].dumped) {
        std::vector<uint8_t> bytes(static_cast<size_t>(plans[c].bytes[b]));
        if (!out.read(reinterpret_cast<char*>(bytes.data()),
                      static_cast<std::streamsize>(bytes.size()))) {
          return absl::InternalError(absl::StrCat("short driver output for case ", c));
        }
        const Buffer& buf = cases[c].program.buffers[b];
        results[c].outputs.emplace(buf.name, Unlayout(buf, bytes.data()));
      }
      next = c + 1;
    }
    out.close();
    std::remove(out_path.c_str());
    if (run.exit_code == 0) break;
    while (next < static_cast<int>(cases.size()) && !plans[next].active) ++next;
    if (next >= static_cast<int>(cases.size())) {
      return absl::InternalError(absl::StrCat("driver exited with ", run.exit_code,
                                              " after the last case: ", run.stderr_text));
    }
    results[next].error = absl::StrCat("the driver died running this case (exit code ",
                                       run.exit_code, "): ", run.stderr_text.substr(0, 2000));
    plans[next].active = false;
    first = next + 1;
  }
  std::remove((stem + ".in").c_str());
  return absl::OkStatus();
}

// Cases whose generated code a failed build's message names (merged
// kernels are k<n>_c<case>_...), with the message lines about each.
std::map<int, std::string> CasesNamedIn(absl::string_view message, size_t num_cases) {
  std::map<int, std::string> named;
  std::vector<absl::string_view> lines = absl::StrSplit(message, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    for (size_t at = lines[i].find("_c"); at != absl::string_view::npos;
         at = lines[i].find("_c", at + 2)) {
      size_t end = at + 2;
      while (end < lines[i].size() && absl::ascii_isdigit(lines[i][end])) ++end;
      int c = 0;
      if (end == at + 2 || end >= lines[i].size() || lines[i][end] != '_' ||
          !absl::SimpleAtoi(lines[i].substr(at + 2, end - at - 2), &c) || c < 0 ||
          static_cast<size_t>(c) >= num_cases) {
        continue;
      }
      std::string& text = named[c];
      for (size_t j = i; j < lines.size() && j < i + 3 && text.size() < 2000; ++j) {
        absl::StrAppend(&text, lines[j], "\n");
      }
      break;
    }
  }
  return named;
}

// A step of a lowered program: loop kernels [begin, end), or the extern
// kernel `begin`.
struct Step {
  bool loop = false;
  size_t begin = 0;
  size_t end = 0;
};

std::vector<Step> StepsOf(const ir::loop::LoopProgram& p) {
  std::vector<Step> steps;
  for (size_t k = 0; k < p.kernels.size();) {
    if (p.kernels[k].kind != ir::loop::Kernel::Kind::kLoop) {
      steps.push_back({false, k, k + 1});
      ++k;
      continue;
    }
    size_t end = k;
    while (end < p.kernels.size() && p.kernels[end].kind == ir::loop::Kernel::Kind::kLoop) ++end;
    steps.push_back({true, k, end});
    k = end;
  }
  return steps;
}

// The loop kernels of `step` as a program of their own over all of `p`'s
// buffers: the ones they write become outputs (read back; bound too when
// they already hold data), the ones they only read are bound from `env`
// (zero-filled when nothing wrote them, as on the loop interpreter).
ProgramCase SegmentCase(const ir::loop::LoopProgram& p, const Step& step,
                        const std::map<int32_t, Tensor>& env, const std::string& name) {
  ProgramCase pc;
  pc.name = name;
  pc.program.buffers = p.buffers;
  std::vector<bool> used(p.buffers.size(), false), written(p.buffers.size(), false);
  for (size_t k = step.begin; k < step.end; ++k) {
    for (const ir::loop::Op& op : p.kernels[k].body) {
      if (op.buffer < 0) continue;
      used[op.buffer] = true;
      if (op.code == ir::loop::OpCode::kStore) written[op.buffer] = true;
    }
    pc.program.kernels.push_back(p.kernels[k]);
  }
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    Buffer& buf = pc.program.buffers[b];
    buf.kind = written[b] ? ir::loop::BufferKind::kOutput
                          : (used[b] && env.count(b) ? ir::loop::BufferKind::kInput
                                                     : ir::loop::BufferKind::kIntermediate);
    if (used[b] && env.count(b)) pc.inputs.emplace(buf.name, env.at(b));
  }
  return pc;
}

}  // namespace

Tensor RandomTensor(DType dtype, const ir::Shape& shape, uint32_t seed, double lo, double hi,
                    bool specials) {
  Tensor t(dtype, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    double v = dist(rng);
    switch (dtype) {
      case DType::kF32: t.data<float>()[i] = static_cast<float>(v); break;
      case DType::kF64: t.data<double>()[i] = v; break;
      case DType::kF16: t.data<ir::Float16>()[i] = ir::FloatToHalf(static_cast<float>(v)); break;
      case DType::kBF16: t.data<ir::BFloat16>()[i] = ir::FloatToBFloat16(static_cast<float>(v)); break;
      case DType::kI64: t.data<int64_t>()[i] = static_cast<int64_t>(std::llround(v)); break;
      case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(std::llround(v)); break;
      case DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(std::llround(v)); break;
      case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(std::llround(v)); break;
      case DType::kBool: t.data<bool>()[i] = (rng() & 1) != 0; break;
      case DType::kInvalid: break;
    }
  }
  if (specials && dtype == DType::kF32 && n > 0) {
    const float sp[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), -0.0f, 0.0f};
    for (int k = 0; k < 5; ++k) t.data<float>()[(static_cast<int64_t>(k) * 7919 + 3) % n] = sp[k];
  }
  return t;
}

absl::StatusOr<std::vector<CaseResult>> RunCases(const jit::TestIsa& isa,
                                                 std::vector<ProgramCase>& cases) {
  KILN_ASSIGN_OR_RETURN(std::vector<CaseResult> results, RunCases(isa, cases, RunOptions{}));
  for (size_t c = 0; c < cases.size(); ++c) {
    if (!results[c].error.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(cases[c].name, ": ", results[c].error));
    }
  }
  return results;
}

absl::StatusOr<std::vector<CaseResult>> RunCases(const jit::TestIsa& isa,
                                                 std::vector<ProgramCase>& cases,
                                                 const RunOptions& options) {
  std::vector<CaseResult> results(cases.size());
  std::vector<CasePlan> plans(cases.size());
  auto fail = [&](size_t c, std::string error) {
    results[c].error = std::move(error);
    plans[c].active = false;
  };
  auto with_isa_grain = [&](EmitOptions o) {
    if (o.parallel_grain == EmitOptions().parallel_grain) o.parallel_grain = isa.isa->parallel_grain;
    return o;
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const std::string problem = CheckCase(cases[c], &plans[c].dumped);
    if (!problem.empty()) {
      fail(c, problem);
      continue;
    }
    for (const Buffer& b : cases[c].program.buffers) plans[c].bytes.push_back(StorageBytes(b));
    // Emitted alone either way, so one case that does not emit cannot fail
    // a merged batch.
    EmitOptions o = with_isa_grain(options.merge ? options.emit : cases[c].options);
    o.symbol_prefix = absl::StrCat("kiln_c", c, "_");
    o.unit_prefix = absl::StrCat("c", c);
    absl::StatusOr<EmittedProgram> alone = EmitCpp(cases[c].program, o);
    if (!alone.ok()) {
      fail(c, absl::StrCat("emit: ", alone.status().ToString()));
      continue;
    }
    if (!alone->skipped_extern_kernels.empty() || alone->run_symbol.empty()) {
      fail(c, "no run entry (the program has extern kernels)");
      continue;
    }
    if (options.merge) continue;
    results[c].emitted = *std::move(alone);
    Call call{results[c].emitted.run_symbol, {}};
    for (size_t b = 0; b < cases[c].program.buffers.size(); ++b) {
      call.args.push_back(static_cast<int32_t>(b));
    }
    plans[c].calls.push_back(std::move(call));
  }
  jit::JitOptions jo;
  jo.isa = isa.isa;
  jo.cache_dir = TestTmp("jit_cache");
  jo.temp_dir = TestTmp("");
  jo.run_timeout = options.run_timeout;
  jit::JitCompiler jit(jo);
  static int run_counter = 0;
  const std::string stem = TestTmp(absl::StrCat("kiln_driver_", getpid(), "_", run_counter++));
  std::string exe;
  std::shared_ptr<jit::LoadedLibrary> lib;
  // A build that fails on some cases' code drops them (each gets the
  // compiler's lines about it) and builds the rest again.
  for (int round = 0;; ++round) {
    if (std::none_of(plans.begin(), plans.end(), [](const CasePlan& p) { return p.active; })) {
      return results;
    }
    std::vector<ir::loop::SourceFile> sources;
    if (options.merge) {
      std::vector<int32_t> buffer_base;
      std::vector<int> kernel_base;
      const ir::loop::LoopProgram merged = MergePrograms(cases, plans, &buffer_base, &kernel_base);
      EmitOptions o = with_isa_grain(options.emit);
      o.symbol_prefix = "kiln_m_";
      o.unit_prefix = "kiln_batch";
      KILN_ASSIGN_OR_RETURN(EmittedProgram all, EmitCpp(merged, o));
      sources = std::move(all.sources);
      for (size_t c = 0; c < cases.size(); ++c) {
        plans[c].calls.clear();
        results[c].emitted.kernels.clear();
      }
      size_t c = 0;
      for (EmittedKernel& k : all.kernels) {
        while (c + 1 < cases.size() && k.kernel_index >= kernel_base[c + 1]) ++c;
        Call call{k.symbol, {}};
        k.kernel_index -= kernel_base[c];
        for (int32_t& b : k.buffer_args) {
          b -= buffer_base[c];
          call.args.push_back(b);
        }
        plans[c].calls.push_back(std::move(call));
        results[c].emitted.kernels.push_back(std::move(k));
      }
    } else {
      for (size_t c = 0; c < cases.size(); ++c) {
        if (!plans[c].active) continue;
        for (const ir::loop::SourceFile& f : results[c].emitted.sources) sources.push_back(f);
      }
    }
    if (const char* dump = std::getenv("KILN_EMITTER_DUMP_DIR"); dump != nullptr) {
      for (const ir::loop::SourceFile& f : sources) {
        std::ofstream(absl::StrCat(dump, "/", f.name, ".cc")) << f.text;
      }
    }
    absl::Status built;
    if (isa.emulated) {
      absl::StatusOr<std::string> path = BuildDriver(jit, std::move(sources), cases, plans, stem);
      if (path.ok()) exe = *std::move(path);
      built = path.status();
    } else {
      absl::StatusOr<std::shared_ptr<jit::LoadedLibrary>> loaded = jit.Compile(sources);
      if (loaded.ok()) lib = *std::move(loaded);
      built = loaded.status();
    }
    if (built.ok()) break;
    std::map<int, std::string> named = CasesNamedIn(built.message(), cases.size());
    bool dropped = false;
    for (const auto& [c, lines] : named) {
      if (!plans[c].active) continue;
      fail(c, absl::StrCat("build: the generated C++ does not compile:\n", lines));
      dropped = true;
    }
    if (!dropped || round >= 4) return built;
  }
  if (isa.emulated) {
    KILN_RETURN_IF_ERROR(RunDriver(jit, exe, stem, cases, plans, results));
    return results;
  }
  // Never dlclose: OpenMP's worker threads (libgomp, loaded with the
  // library) outlive the call and crash when their code is unmapped.
  static auto* const kKeepLoaded = new std::vector<std::shared_ptr<jit::LoadedLibrary>>;
  kKeepLoaded->push_back(lib);
  for (size_t c = 0; c < cases.size(); ++c) {
    if (!plans[c].active) continue;
    std::vector<std::vector<uint8_t>> storage;
    for (const Buffer& b : cases[c].program.buffers) storage.push_back(Layout(b, DataOf(cases[c], b)));
    results[c].rc = 0;
    for (const Call& call : plans[c].calls) {
      KILN_ASSIGN_OR_RETURN(void* sym, lib->Symbol(call.symbol));
      std::vector<void*> ptrs;
      for (int32_t a : call.args) ptrs.push_back(storage[a].data());
      results[c].rc = reinterpret_cast<ir::loop::KernelFn>(sym)(ptrs.data());
      if (results[c].rc != 0) break;
    }
    for (int32_t b : plans[c].dumped) {
      const Buffer& buf = cases[c].program.buffers[b];
      results[c].outputs.emplace(buf.name, Unlayout(buf, storage[b].data()));
    }
  }
  return results;
}

absl::StatusOr<std::vector<LoweredResult>> RunLoweredCases(const jit::TestIsa& isa,
                                                          const std::vector<LoweredCase>& cases,
                                                          const RunOptions& options,
                                                          size_t cases_per_batch) {
  if (cases_per_batch == 0) return absl::InvalidArgumentError("cases_per_batch is 0");
  const size_t n = cases.size();
  std::vector<LoweredResult> results(n);
  std::vector<std::map<int32_t, Tensor>> env(n);  // per case: buffer -> data
  std::vector<std::vector<Step>> steps(n);
  std::vector<size_t> next(n, 0);
  std::vector<bool> live(n, true);
  auto fail = [&](size_t c, std::string error) {
    results[c].error = std::move(error);
    live[c] = false;
  };
  for (size_t c = 0; c < n; ++c) {
    const ir::loop::LoopModule* lp = cases[c].lowered;
    if (lp == nullptr) return absl::InvalidArgumentError(absl::StrCat(cases[c].name, ": no program"));
    if (cases[c].inputs.size() != lp->inputs.size()) {
      fail(c, absl::StrCat(cases[c].inputs.size(), " inputs for a program of ", lp->inputs.size()));
      continue;
    }
    const std::vector<bool> dynamic = ir::loop::DynamicBuffers(lp->program);
    if (std::find(dynamic.begin(), dynamic.end(), true) != dynamic.end()) {
      fail(c, "values of data-dependent shape (reference calls) are not run here");
      continue;
    }
    for (size_t i = 0; i < lp->inputs.size(); ++i) env[c].emplace(lp->inputs[i], cases[c].inputs[i]);
    for (const auto& [b, data] : lp->constants) env[c].emplace(b, *data);
    steps[c] = StepsOf(lp->program);
  }
  RunOptions run_options = options;
  run_options.merge = true;
  for (;;) {
    // On the host: each live case's extern kernels up to its next loop
    // segment.
    std::vector<size_t> at_loop;
    for (size_t c = 0; c < n; ++c) {
      const ir::loop::LoopProgram& p = cases[c].lowered->program;
      while (live[c] && next[c] < steps[c].size() && !steps[c][next[c]].loop) {
        const ir::loop::Kernel& ext = p.kernels[steps[c][next[c]].begin];
        std::vector<Tensor> args;
        for (int32_t b : ext.call.inputs) {
          auto it = env[c].find(b);
          if (it == env[c].end()) {
            fail(c, absl::StrCat("extern kernel '", ext.name, "' reads buffer '", p.buffers[b].name,
                                 "' before it is written"));
            break;
          }
          args.push_back(it->second);
        }
        if (!live[c]) break;
        absl::StatusOr<std::vector<Tensor>> outs = interp::RunExternKernel(p, ext, args);
        if (!outs.ok()) {
          fail(c, absl::StrCat("extern kernel '", ext.name, "' on the reference: ",
                               outs.status().ToString()));
          break;
        }
        for (size_t j = 0; j < ext.call.outputs.size(); ++j) {
          env[c].insert_or_assign(ext.call.outputs[j], std::move((*outs)[j]));
        }
        ++results[c].extern_calls;
        ++next[c];
      }
      if (live[c] && next[c] < steps[c].size()) at_loop.push_back(c);
    }
    if (at_loop.empty()) break;
    // On the ISA: one loop segment of each case that reached one.
    for (size_t begin = 0; begin < at_loop.size(); begin += cases_per_batch) {
      const size_t end = std::min(at_loop.size(), begin + cases_per_batch);
      std::vector<ProgramCase> batch;
      for (size_t i = begin; i < end; ++i) {
        const size_t c = at_loop[i];
        batch.push_back(SegmentCase(cases[c].lowered->program, steps[c][next[c]], env[c],
                                    absl::StrCat(cases[c].name, " segment ", results[c].loop_segments)));
      }
      absl::StatusOr<std::vector<CaseResult>> run = RunCases(isa, batch, run_options);
      for (size_t i = begin; i < end; ++i) {
        const size_t c = at_loop[i];
        const std::string where = absl::StrCat("loop segment ", results[c].loop_segments, " (kernels ",
                                               steps[c][next[c]].begin, "..",
                                               steps[c][next[c]].end - 1, ")");
        if (!run.ok()) {
          fail(c, absl::StrCat(where, ": ", run.status().ToString().substr(0, 4000)));
          continue;
        }
        CaseResult& r = (*run)[i - begin];
        if (!r.error.empty()) {
          fail(c, absl::StrCat(where, ": ", r.error));
          continue;
        }
        ++results[c].loop_segments;
        ++next[c];
        if (r.rc != 0) {
          results[c].rc = r.rc;
          live[c] = false;
          continue;
        }
        const ir::loop::LoopProgram& seg = batch[i - begin].program;
        for (size_t b = 0; b < seg.buffers.size(); ++b) {
          if (seg.buffers[b].kind != ir::loop::BufferKind::kOutput) continue;
          auto it = r.outputs.find(seg.buffers[b].name);
          if (it == r.outputs.end()) {
            fail(c, absl::StrCat(where, ": buffer '", seg.buffers[b].name, "' not read back"));
            break;
          }
          env[c].insert_or_assign(static_cast<int32_t>(b), std::move(it->second));
        }
      }
    }
  }
  for (size_t c = 0; c < n; ++c) {
    if (!results[c].error.empty() || results[c].rc != 0) continue;
    for (int32_t b : cases[c].lowered->outputs) {
      auto it = env[c].find(b);
      if (it == env[c].end()) {
        results[c].outputs.clear();
        results[c].error = absl::StrCat("output buffer '", cases[c].lowered->program.buffers[b].name,
                                        "' is never written");
        break;
      }
      results[c].outputs.push_back(it->second);
    }
  }
  return results;
}

void ExpectMatchesInterpreter(const ProgramCase& c, const CaseResult& r) {
  absl::StatusOr<std::map<std::string, Tensor>> ref = ir::loop::RunLoopProgram(c.program, c.inputs);
  ASSERT_TRUE(ref.ok()) << c.name << ": " << ref.status();
  EXPECT_EQ(r.rc, 0) << c.name;
  for (const auto& [name, expected] : *ref) {
    auto it = r.outputs.find(name);
    if (it == r.outputs.end()) {
      ADD_FAILURE() << c.name << ": no output '" << name << "'";
      continue;
    }
    interp::CompareResult cmp = interp::CompareTensors(it->second, expected, c.tol);
    EXPECT_TRUE(cmp.ok) << c.name << " output '" << name << "': " << cmp.message;
  }
}

}  // namespace kiln::backends::cpp
