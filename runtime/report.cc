// The compiled-model API's plain functions (runtime/compiled_model.h): mode
// names, output tensors for RunInto, and the text and JSON forms of the
// compile report.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/message.h"
#include "nlohmann/json.hpp"
#include "runtime/compiled_model.h"

namespace kiln {

namespace {

// A reason without its "(here ...)" parts (the value that broke a rule in one
// instance), so the summary counts instances of one rule together; the
// per-pattern list keeps them.
std::string WithoutInstanceDetail(absl::string_view reason) {
  std::string out;
  for (;;) {
    const size_t at = reason.find(" (here ");
    if (at == absl::string_view::npos) break;
    const size_t end = reason.find(')', at);
    if (end == absl::string_view::npos) break;
    absl::StrAppend(&out, reason.substr(0, at));
    reason.remove_prefix(end + 1);
  }
  absl::StrAppend(&out, reason);
  return out;
}

std::string Mb(int64_t bytes) { return absl::StrFormat("%.2f MB", bytes / 1e6); }

// A loop kernel that loads or stores bf16 or f16 (computing in f32).
bool StoresNarrowFloats(const KernelReport& k) {
  return std::any_of(k.storage.begin(), k.storage.end(),
                     [](const std::string& d) { return d == "bf16" || d == "f16"; });
}

}  // namespace

std::vector<ir::Tensor> NewOutputTensors(const CompiledModel& model) {
  std::vector<ir::Tensor> outs;
  outs.reserve(model.outputs().size());
  for (const TensorInfo& o : model.outputs()) {
    ir::Shape shape = o.shape_known ? o.shape : ir::Shape{0};
    for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
    outs.emplace_back(o.dtype, std::move(shape));
  }
  return outs;
}

absl::StatusOr<std::vector<ir::Tensor>> TryNewOutputTensors(const CompiledModel& model) {
  std::vector<ir::Tensor> outs;
  outs.reserve(model.outputs().size());
  for (const TensorInfo& o : model.outputs()) {
    ir::Shape shape = o.shape_known ? o.shape : ir::Shape{0};
    for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
    absl::StatusOr<ir::Tensor> t = ir::Tensor::Create(
        o.dtype, std::move(shape), absl::StrCat("output '", EscapeForMessage(o.name), "'"));
    if (!t.ok()) return t.status();
    outs.push_back(*std::move(t));
  }
  return outs;
}

const char* ModeName(CompileOptions::Mode mode) {
  return mode == CompileOptions::Mode::kEager ? "eager" : "compiled";
}

absl::StatusOr<CompileOptions::Mode> ParseMode(absl::string_view name) {
  if (name == "compiled") return CompileOptions::Mode::kCompiled;
  if (name == "eager") return CompileOptions::Mode::kEager;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", EscapeForMessage(name), "' (expected compiled or eager)"));
}

const char* PrecisionName(CompileOptions::Precision precision) {
  switch (precision) {
    case CompileOptions::Precision::kF32: return "f32";
    case CompileOptions::Precision::kBF16: return "bf16";
    case CompileOptions::Precision::kAuto: return "auto";
  }
  return "f32";
}

absl::StatusOr<CompileOptions::Precision> ParsePrecision(absl::string_view name) {
  if (name == "f32") return CompileOptions::Precision::kF32;
  if (name == "bf16") return CompileOptions::Precision::kBF16;
  if (name == "auto") return CompileOptions::Precision::kAuto;
  return absl::InvalidArgumentError(absl::StrCat("unknown precision '", EscapeForMessage(name),
                                                 "' (expected f32, bf16 or auto)"));
}

const char* DenormalsName(CompileOptions::Denormals denormals) {
  switch (denormals) {
    case CompileOptions::Denormals::kFlush: return "flush";
    case CompileOptions::Denormals::kKeep: return "keep";
  }
  return "?";
}

absl::StatusOr<CompileOptions::Denormals> ParseDenormals(absl::string_view name) {
  if (name == "flush") return CompileOptions::Denormals::kFlush;
  if (name == "keep") return CompileOptions::Denormals::kKeep;
  return absl::InvalidArgumentError(absl::StrCat("unknown denormals mode '", EscapeForMessage(name),
                                                 "' (expected flush or keep)"));
}

const char* CallTuningName(CompileOptions::CallTuning tuning) {
  switch (tuning) {
    case CompileOptions::CallTuning::kOff: return "off";
    case CompileOptions::CallTuning::kOn: return "on";
    case CompileOptions::CallTuning::kCached: return "cached";
  }
  return "?";
}

absl::StatusOr<CompileOptions::CallTuning> ParseCallTuning(absl::string_view name) {
  if (name == "off") return CompileOptions::CallTuning::kOff;
  if (name == "on") return CompileOptions::CallTuning::kOn;
  if (name == "cached") return CompileOptions::CallTuning::kCached;
  return absl::InvalidArgumentError(absl::StrCat("unknown call tuning '", EscapeForMessage(name),
                                                 "' (expected off, on or cached)"));
}

std::string CompileReport::ToText() const {
  std::string s = absl::StrFormat(
      "model %s  isa %s  mode %s  threads %s\n"
      "compile %.0f ms (import %.0f, graph passes %.0f, lowering %.0f, loop passes %.0f, "
      "emit %.0f, jit %.0f%s, library calls %.0f)\n",
      model, isa, mode, threads > 0 ? absl::StrCat(threads) : std::string("default"), total_ms, import_ms, graph_passes_ms, lowering_ms,
      loop_passes_ms, emit_ms, jit_ms, jit_cache_hit ? " cached" : "", library_ms);
  absl::StrAppendFormat(&s, "loop kernels %d, vectorized %d (%.1f%%); library calls %d (%d on the reference interpreter",
                        loop_kernels, vectorized_kernels,
                        loop_kernels ? 100.0 * vectorized_kernels / loop_kernels : 100.0,
                        library_calls, reference_calls);
  if (fallback_calls > 0) {
    absl::StrAppendFormat(&s, ", %d of them nodes lowering could not compile", fallback_calls);
  }
  absl::StrAppend(&s, ")\n");
  absl::StrAppendFormat(&s,
                        "arena %s (one buffer per intermediate: %s); weights %s, prepacked %s "
                        "(%s of weights released once prepacked); activation reorders per "
                        "run %d\n",
                        Mb(arena_bytes), Mb(intermediate_bytes), Mb(constant_bytes),
                        Mb(prepacked_bytes), Mb(released_constant_bytes), reorders);
  for (const TunedCall& t : tuned_calls) {
    absl::StrAppend(&s, "tuned call ", t.kernel, " (", t.why, "): ", t.choice,
                    t.cached ? " [cached]" : "", "\n");
  }
  if (!unfused_elementwise.empty()) {
    std::map<std::string, int> by_reason;
    for (const UnfusedElementwise& u : unfused_elementwise) ++by_reason[u.reason];
    absl::StrAppendFormat(&s, "element-wise ops left after library calls: %d (",
                          static_cast<int>(unfused_elementwise.size()));
    absl::StrAppend(&s, absl::StrJoin(by_reason, "; ", [](std::string* out, const auto& e) {
                      absl::StrAppend(out, e.second, "x ", e.first);
                    }),
                    ")\n");
  }
  if (!qdq_patterns.empty()) {
    int integer = 0;
    std::map<std::string, int> by_reason;
    for (const QdqPattern& q : qdq_patterns) {
      if (q.op.empty()) {
        ++by_reason[absl::StrCat(q.anchor, ": ", WithoutInstanceDetail(q.reason))];
      } else {
        ++integer;
      }
    }
    absl::StrAppendFormat(&s, "QDQ patterns: %d, %d as integer calls",
                          static_cast<int>(qdq_patterns.size()), integer);
    if (!by_reason.empty()) {
      absl::StrAppend(&s, "; in f32: ",
                      absl::StrJoin(by_reason, "; ", [](std::string* out, const auto& e) {
                        absl::StrAppend(out, e.second, "x ", e.first);
                      }));
    }
    absl::StrAppend(&s, "\n");
  }
  if (model_float != ir::DType::kF32) {
    absl::StrAppend(&s, "precision: the model holds ", ir::DTypeName(model_float),
                    " values; kiln computes them in f32 (", ir::DTypeName(model_float),
                    " only at the model's inputs, outputs and explicit casts)\n");
  }
  if (precision != "f32" || bf16_activation_buffers > 0) {
    int in_bf16 = 0;
    for (const KernelReport& k : kernels) in_bf16 += k.precision == "bf16";
    absl::StrAppendFormat(&s,
                          "precision: %s (%d library calls compute in bf16 with f32 "
                          "accumulation; %d activation buffers, %s, stored in bf16; loop "
                          "kernels compute in f32)\n",
                          precision, in_bf16, bf16_activation_buffers,
                          Mb(bf16_activation_bytes));
  }
  for (const std::string& w : warnings) absl::StrAppend(&s, "warning: ", w, "\n");
  if (!specializations.empty()) {
    double total = 0;
    for (const ShapeSpecialization& sp : specializations) total += sp.compile_ms;
    absl::StrAppendFormat(&s, "shape specializations: %d compiled in %.1f ms, %d live\n",
                          specializations.size(), total, live_specializations);
    for (const ShapeSpecialization& sp : specializations) {
      absl::StrAppendFormat(&s, "  %s  %.1f ms%s%s\n", sp.shapes, sp.compile_ms,
                            sp.jit_cache_hit ? " (build cached)" : "",
                            sp.live ? "" : " (evicted)");
    }
  }
  for (const KernelReport& k : kernels) {
    std::string detail;
    if (k.backend == "loop") {
      detail = absl::StrCat(k.status, k.parallel ? " parallel" : "");
      if (StoresNarrowFloats(k)) absl::StrAppend(&detail, " storage ", absl::StrJoin(k.storage, "/"));
    } else {
      detail = absl::StrCat(k.backend, " ", k.call);
      if (k.precision != "f32") absl::StrAppend(&detail, " ", k.precision);
      if (!k.weight_layout.empty()) absl::StrAppend(&detail, " weights ", k.weight_layout);
      if (k.prepacked_bytes > 0) absl::StrAppend(&detail, " prepacked ", Mb(k.prepacked_bytes));
    }
    absl::StrAppend(&s, "  ", k.name, "  ", detail, "  [", absl::StrJoin(k.ops, ", "), "]");
    if (!k.reason.empty()) absl::StrAppend(&s, "  -- ", k.reason);
    absl::StrAppend(&s, "\n");
  }
  return s;
}

std::string CompileReport::ToJson(int indent) const {
  using nlohmann::json;
  json j;
  j["model"] = model;
  j["isa"] = isa;
  j["mode"] = mode;
  j["model_precision"] = std::string(ir::DTypeName(model_float));
  j["precision"] = precision;
  j["threads"] = threads;
  j["compile_ms"] = {{"total", total_ms},       {"import", import_ms},
                     {"graph_passes", graph_passes_ms}, {"lowering", lowering_ms},
                     {"loop_passes", loop_passes_ms},   {"emit", emit_ms},
                     {"jit", jit_ms},                   {"library_calls", library_ms},
                     {"jit_precompiled_header", jit_precompiled_header_ms},
                     {"jit_header_scan", jit_header_scan_ms}};
  j["jit_cache_hit"] = jit_cache_hit;
  j["translation_units"] = translation_units;
  j["loop_kernels"] = loop_kernels;
  j["vectorized_kernels"] = vectorized_kernels;
  j["library_calls"] = library_calls;
  j["reference_calls"] = reference_calls;
  j["fallback_calls"] = fallback_calls;
  j["arena_bytes"] = arena_bytes;
  j["intermediate_bytes"] = intermediate_bytes;
  j["constant_bytes"] = constant_bytes;
  j["released_constant_bytes"] = released_constant_bytes;
  j["prepacked_bytes"] = prepacked_bytes;
  j["reorders"] = reorders;
  j["bf16_activation_buffers"] = bf16_activation_buffers;
  j["bf16_activation_bytes"] = bf16_activation_bytes;
  if (!tuned_calls.empty()) {
    json tuned = json::array();
    for (const TunedCall& t : tuned_calls) {
      tuned.push_back(
          {{"kernel", t.kernel}, {"why", t.why}, {"choice", t.choice}, {"cached", t.cached}});
    }
    j["tuned_calls"] = tuned;
  }
  json unfused = json::array();
  for (const UnfusedElementwise& u : unfused_elementwise) {
    unfused.push_back(
        {{"node", u.node}, {"op", u.op}, {"after", u.after}, {"reason", u.reason}});
  }
  j["unfused_elementwise"] = unfused;
  json qdq = json::array();
  for (const QdqPattern& q : qdq_patterns) {
    qdq.push_back({{"node", q.node}, {"anchor", q.anchor}, {"op", q.op}, {"reason", q.reason}});
  }
  j["qdq_patterns"] = qdq;
  j["warnings"] = warnings;
  if (!specializations.empty()) {
    json sps = json::array();
    for (const ShapeSpecialization& sp : specializations) {
      sps.push_back({{"shapes", sp.shapes},
                     {"compile_ms", sp.compile_ms},
                     {"jit_cache_hit", sp.jit_cache_hit},
                     {"live", sp.live}});
    }
    j["shape_specializations"] = sps;
    j["live_specializations"] = live_specializations;
  }
  json ks = json::array();
  json xs = json::array();
  for (const KernelReport& k : kernels) {
    json e = {{"name", k.name},   {"backend", k.backend},       {"ops", k.ops},
              {"status", k.status}, {"vectorized", k.vectorized}, {"reason", k.reason},
              {"parallel", k.parallel}, {"precision", k.precision},
              {"storage", k.storage}};
    if (k.backend == "loop") {
      json un = json::array();
      for (const KernelReport::OpNote& n : k.unvectorized_ops) {
        un.push_back({{"op", n.op},
                      {"opcode", n.opcode},
                      {"decision", n.decision},
                      {"reason", n.reason}});
      }
      e["unvectorized_ops"] = std::move(un);
    }
    if (k.backend != "loop") {
      e["call"] = k.call;
      json x = {{"name", k.name},
                {"op", k.call},
                {"backend", k.backend},
                {"ops", k.ops},
                {"post_ops", k.post_ops},
                {"weight_layout", k.weight_layout},
                {"prepacked_bytes", k.prepacked_bytes},
                {"reorders_per_call", k.reorders_per_call},
                {"reason", k.reason}};
      xs.push_back(std::move(x));
    }
    ks.push_back(std::move(e));
  }
  j["kernels"] = std::move(ks);
  j["extern_calls"] = std::move(xs);
  // Model strings may hold invalid UTF-8: replace, never throw.
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace kiln
