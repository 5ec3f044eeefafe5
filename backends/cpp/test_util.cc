// Emitter test helpers: random tensors, batch JIT runs per ISA (see
// test_util.h).
#include "backends/cpp/test_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/loop/interpreter.h"
#include "ir/status_macros.h"
#include "runtime/jit/jit_compiler.h"

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

std::string HexBytes(const std::vector<uint8_t>& bytes) {
  std::string out;
  out.reserve(bytes.size() * 5);
  for (size_t i = 0; i < bytes.size(); ++i) {
    absl::StrAppend(&out, static_cast<int>(bytes[i]), (i + 1) % 32 == 0 ? ",\n" : ",");
  }
  return out;
}

// A main() that runs every case's run entry on embedded inputs and prints
// "R <case> <rc>" and "O <case> <buffer> <hex bytes>" for outputs.
std::string DriverSource(const std::vector<ProgramCase>& cases,
                         const std::vector<CaseResult>& results,
                         const std::vector<std::vector<std::vector<uint8_t>>>& storage) {
  std::string s = "#include <stdio.h>\n#include <stdint.h>\n\n";
  for (size_t c = 0; c < cases.size(); ++c) {
    absl::StrAppend(&s, "extern \"C\" int ", results[c].emitted.run_symbol, "(void* const*);\n");
    for (size_t b = 0; b < storage[c].size(); ++b) {
      absl::StrAppend(&s, "alignas(64) static unsigned char c", c, "_b", b, "[", storage[c][b].size(),
                      "] = {", HexBytes(storage[c][b]), "};\n");
    }
  }
  absl::StrAppend(&s, "\nstatic void Dump(int c, int b, const unsigned char* p, int n) {\n",
                  "  printf(\"O %d %d \", c, b);\n",
                  "  for (int i = 0; i < n; ++i) printf(\"%02x\", p[i]);\n", "  printf(\"\\n\");\n}\n\n",
                  "int main() {\n");
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<std::string> ptrs;
    for (size_t b = 0; b < storage[c].size(); ++b) ptrs.push_back(absl::StrCat("c", c, "_b", b));
    absl::StrAppend(&s, "  {\n    void* const bufs[] = {", ptrs.empty() ? "nullptr" : absl::StrJoin(ptrs, ", "),
                    "};\n    printf(\"R ", c, " %d\\n\", ", results[c].emitted.run_symbol, "(bufs));\n");
    for (size_t b = 0; b < storage[c].size(); ++b) {
      if (cases[c].program.buffers[b].kind != ir::loop::BufferKind::kOutput) continue;
      absl::StrAppend(&s, "    Dump(", c, ", ", b, ", c", c, "_b", b, ", ", storage[c][b].size(), ");\n");
    }
    absl::StrAppend(&s, "  }\n");
  }
  absl::StrAppend(&s, "  return 0;\n}\n");
  return s;
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

absl::StatusOr<std::vector<CaseResult>> RunCases(const runtime::TestIsa& isa,
                                                 std::vector<ProgramCase>& cases) {
  std::vector<CaseResult> results(cases.size());
  std::vector<runtime::SourceFile> sources;
  std::vector<std::vector<std::vector<uint8_t>>> storage(cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    EmitOptions o = cases[c].options;
    o.symbol_prefix = absl::StrCat("kiln_c", c, "_");
    o.unit_prefix = absl::StrCat("c", c);
    if (o.parallel_grain == EmitOptions().parallel_grain) o.parallel_grain = isa.isa->parallel_grain;
    KILN_ASSIGN_OR_RETURN(results[c].emitted, EmitCpp(cases[c].program, o));
    if (results[c].emitted.run_symbol.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(cases[c].name, ": no run entry"));
    }
    for (runtime::SourceFile& f : results[c].emitted.sources) sources.push_back(f);
    for (const Buffer& b : cases[c].program.buffers) {
      auto it = cases[c].inputs.find(b.name);
      storage[c].push_back(Layout(b, it == cases[c].inputs.end() ? nullptr : &it->second));
    }
  }
  if (const char* dump = std::getenv("KILN_EMITTER_DUMP_DIR"); dump != nullptr) {
    for (const runtime::SourceFile& f : sources) {
      std::ofstream(absl::StrCat(dump, "/", f.name, ".cc")) << f.text;
    }
  }
  runtime::JitOptions jo;
  jo.isa = isa.isa;
  jo.cache_dir = TestTmp("jit_cache");
  jo.temp_dir = TestTmp("");
  runtime::JitCompiler jit(jo);
  if (!isa.emulated) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::LoadedLibrary> lib, jit.Compile(sources));
    // Never dlclose: OpenMP's worker threads (libgomp, loaded with the
    // library) outlive the call and crash when their code is unmapped.
    static auto* const kKeepLoaded = new std::vector<std::shared_ptr<runtime::LoadedLibrary>>;
    kKeepLoaded->push_back(lib);
    for (size_t c = 0; c < cases.size(); ++c) {
      KILN_ASSIGN_OR_RETURN(void* sym, lib->Symbol(results[c].emitted.run_symbol));
      std::vector<void*> ptrs;
      for (auto& s : storage[c]) ptrs.push_back(s.data());
      results[c].rc = reinterpret_cast<KernelFn>(sym)(ptrs.data());
      for (size_t b = 0; b < storage[c].size(); ++b) {
        const Buffer& buf = cases[c].program.buffers[b];
        if (buf.kind != ir::loop::BufferKind::kOutput) continue;
        results[c].outputs.emplace(buf.name, Unlayout(buf, storage[c][b].data()));
      }
    }
    return results;
  }
  sources.push_back({"kiln_test_driver", DriverSource(cases, results, storage)});
  KILN_ASSIGN_OR_RETURN(std::string exe, jit.CompileExecutable(sources));
  KILN_ASSIGN_OR_RETURN(runtime::RunResult run, jit.RunExecutable(exe, {}));
  if (run.exit_code != 0) {
    return absl::InternalError(absl::StrCat("driver exited with ", run.exit_code, ": ",
                                            run.stderr_text));
  }
  for (absl::string_view line : absl::StrSplit(run.stdout_text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    int c = 0, b = 0;
    if (f.size() == 3 && f[0] == "R" && absl::SimpleAtoi(f[1], &c) && c >= 0 &&
        c < static_cast<int>(cases.size())) {
      if (!absl::SimpleAtoi(f[2], &results[c].rc)) return absl::InternalError("bad rc line");
      continue;
    }
    if (f.size() != 4 || f[0] != "O" || !absl::SimpleAtoi(f[1], &c) || !absl::SimpleAtoi(f[2], &b) ||
        c < 0 || c >= static_cast<int>(cases.size()) || b < 0 ||
        b >= static_cast<int>(storage[c].size()) || f[3].size() != storage[c][b].size() * 2) {
      return absl::InternalError(absl::StrCat("bad driver output line: ", line.substr(0, 80)));
    }
    std::vector<uint8_t> bytes(storage[c][b].size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      int v = 0;
      if (!absl::SimpleHexAtoi(f[3].substr(2 * i, 2), &v)) return absl::InternalError("bad hex");
      bytes[i] = static_cast<uint8_t>(v);
    }
    const Buffer& buf = cases[c].program.buffers[b];
    results[c].outputs.emplace(buf.name, Unlayout(buf, bytes.data()));
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
    testing::CompareResult cmp = testing::CompareTensors(it->second, expected, c.tol);
    EXPECT_TRUE(cmp.ok) << c.name << " output '" << name << "': " << cmp.message;
  }
}

}  // namespace kiln::backends::cpp
