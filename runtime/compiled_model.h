// File: runtime/compiled_model.h — kiln's public model API: a compiled
// model (kiln::CompiledModel), its interface and compile report, and the
// options it was built with. kiln::Compiler (compiler/compiler.h) makes one
// with the JIT; an AOT library's generated `<name>::Create` (runtime/aot.h)
// makes one from code linked into the binary.
//
//   kiln::CompileOptions options;
//   options.threads = 1;
//   kiln::Compiler compiler(options);
//   absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> model =
//       compiler.CompileFile("resnet50.onnx");
//   if (!model.ok()) return model.status();
//   absl::StatusOr<std::vector<kiln::ir::Tensor>> outputs = (*model)->Run(std::vector<ir::Tensor>{image});
//   std::cout << (*model)->report().ToText();
//
// A compiled model runs a step list over one arena planned from buffer
// liveness: generated loop kernels, and library calls — oneDNN primitives
// for Conv/ConvTranspose/Gemm/MatMul (weights prepacked once when the model
// is created), the reference interpreter for what oneDNN cannot run and for
// nodes lowering left to it (runtime/reference_calls.h).
//
// Run is thread-safe: each call takes an execution context (its own arena)
// from a pool, creating one when all are busy. Library calls (oneDNN) are
// serialized per call site; loop kernels run concurrently.
//
// Threads: `CompileOptions::threads` (> 0) sets the OpenMP team size of the
// thread that calls Run, which both the generated kernels and oneDNN (built
// on the same GNU OpenMP) use; two models given 1 thread each and run from
// two threads use two cores, never more.
#ifndef KILN_RUNTIME_COMPILED_MODEL_H_
#define KILN_RUNTIME_COMPILED_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/tensor.h"

namespace kiln {

struct CompileOptions {
  // VecISA module name ("scalar", "avx2", "avx512"); empty: the best one this
  // CPU runs. An ISA the CPU lacks is refused (never a SIGILL); "neon" on an
  // x86 host is refused too (its code runs only under an emulator).
  std::string isa;
  // OpenMP team size for Run (generated kernels and oneDNN); 0 leaves the
  // calling thread's setting (OMP_NUM_THREADS, else all cores).
  int threads = 0;
  // Reorder constant weights once into oneDNN's preferred layout.
  bool prepack_weights = true;
  // Binds the model's dynamic input dims: input name -> full shape. An input
  // bound here takes only that shape at Run.
  std::map<std::string, ir::Shape> input_shapes;
  // Inputs with dynamic dims left unbound accept any size of those dims at
  // Run: each new combination of input shapes compiles a shape-specialized
  // program (the static pipeline with the dims bound; its C++ build cached
  // on disk like any other), kept in memory in a least-recently-used cache
  // of this many specializations per model. The model is first compiled
  // with those dims bound to 1 (CompileReport::warnings says so), which is
  // the first specialization. Each specialization holds its own constants
  // and prepacked weights, so the default, 4, bounds memory at a few copies
  // of the model while serving a handful of alternating sizes without
  // recompiling; an evicted shape seen again re-runs the pipeline but hits
  // the disk cache for its build. 0: unbound dims are fixed to 1 and Run
  // accepts only that shape. Only CompileFile specializes (it re-reads the
  // model file for each new shape); CompileGraph takes static graphs.
  int max_shape_specializations = 4;
  // JIT cache; empty: $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
  std::string cache_dir;
  // Where the JIT's precompiled headers live (made once per compiler, flags,
  // ISA and header contents, shared by caches); empty: cache_dir.
  std::string precompiled_header_dir;
  // Non-empty: the graph after every graph pass (graph/NN-<pass>.txt), the
  // loop IR after lowering and every loop pass (loop/NN-<pass>.txt) and the
  // generated C++ (cpp/<unit>.cc) are written here.
  std::string dump_dir;
  // kCompiled: everything above. kEager: kiln's own baseline, one kernel per
  // op as PyTorch eager runs them — graph folding/fusion passes, loop
  // fusion, weight prepacking and arena sharing off.
  enum class Mode { kCompiled, kEager };
  Mode mode = Mode::kCompiled;
  // Graph or loop pass names to skip (ablations).
  std::vector<std::string> disabled_passes;
  // Run conv/gemm externs on oneDNN; false runs them on the reference
  // interpreter (for debugging only: slow).
  bool use_onednn = true;
  // A node lowering cannot compile (no lowering for its op, a form its
  // lowering refuses, a value of data-dependent shape among its inputs or
  // outputs: NonZero, Unique, If/Loop/Scan, ...) runs on kiln's reference
  // interpreter as a library call (backend "reference" in the report, the
  // refusal as the reason) instead of failing the compile. Values of
  // data-dependent shape are allocated per run outside the arena and
  // returned by Run with their run-time shapes. False: such models are
  // refused with the lowering's error.
  bool reference_fallback = true;
  // The precision Conv, ConvTranspose, MatMul and Gemm compute in (oneDNN
  // calls with constant weights). kF32: as the model says. kBF16: bf16 with
  // f32 accumulation, weights prepacked in bf16 (a call oneDNN has no
  // optimized bf16 kernel for runs in f32; the report says why). kAuto: bf16
  // where oneDNN's bf16 kernels are faster than its f32 ones, i.e. the CPU
  // has AMX-BF16 (as oneDNN sees it, capped by DNNL_MAX_CPU_ISA), else f32:
  // with AVX512-BF16 alone they are slower (docs/decisions/0059). Loop kernels, softmax and
  // normalization statistics compute in f32 either way.
  enum class Precision { kF32, kBF16, kAuto };
  Precision precision = Precision::kF32;
  // The model's memory budget in bytes: the arena of one Run, the constant
  // weights and oneDNN's prepacked copies together (CompileReport's
  // arena_bytes + constant_bytes + prepacked_bytes, the arena also holding
  // outputs copied out). A model over it is refused at compile time with
  // ResourceExhausted stating the planned bytes and the budget. 0: none.
  // Values of data-dependent shape (allocated per run) are not planned and
  // do not count.
  int64_t memory_limit_bytes = 0;
  // A compiled Loop runs at most this many iterations per execution; a run
  // that would start one more fails with InvalidArgument naming the Loop
  // and this limit (before the first iteration when the trip count alone
  // decides: the body passes its condition through). It bounds the time and
  // the memory of scan outputs a run-time trip count can ask for (decision
  // 0043). Must be positive.
  int64_t max_loop_iterations = int64_t{1} << 20;
  // Tests only: let oneDNN run its reference kernels (slow, correct), e.g.
  // bf16 calls on a CPU without bf16 kernels.
  bool allow_onednn_reference_impl = false;
  // Layouts of library convs chosen by measurement (JIT only;
  // compiler/call_tuning.h): the doubtful ones (C_in or C_out <= 4, channels
  // not a multiple of the vector width, ConvTranspose) have their candidate
  // activation layouts timed once for their shapes and `threads`, and the
  // fastest choice is cached under cache_dir/tuning. kOff: the library's rule
  // (the module is the untuned one). kOn: a cached choice, else time and
  // cache. kCached: deterministic; a cached choice, else the rule (never
  // times).
  enum class CallTuning { kOff, kOn, kCached };
  CallTuning call_tuning = CallTuning::kOff;
  // Bit-identical results across runs and thread counts on one ISA
  // (decision 0050). Loop kernels always are: they parallelize only over
  // output dims and sum in a fixed order. oneDNN calls whose implementation
  // was not measured to give the same bits at every thread count (the
  // gemm-based matmul and inner product split their reduction by thread
  // count; RNNs, deconvolution, reference kernels) are built and run on
  // one thread, the others (direct jit convolutions) on `threads`; the
  // report names each one-thread call. Needs call_tuning kOff (a timed or
  // cached layout choice depends on timings and the thread count).
  // Different ISAs still give different bits (vector widths change the
  // order of sums).
  bool deterministic = false;
  // Subnormal floats during a run (backends/onednn/threads.h): kFlush
  // treats them as 0 and flushes results below 2^-126 to 0 on the threads
  // that run the model (FTZ + DAZ; restored when the run ends), which
  // keeps a conv or matmul that meets them from running ~100x slower
  // (decision 0067); kKeep computes them as IEEE 754 says.
  enum class Denormals { kFlush, kKeep };
  Denormals denormals = Denormals::kFlush;
};

// "compiled" / "eager"; and back (InvalidArgument for anything else).
const char* ModeName(CompileOptions::Mode mode);
absl::StatusOr<CompileOptions::Mode> ParseMode(absl::string_view name);
// "off" / "on" / "cached"; and back (InvalidArgument for anything else).
const char* CallTuningName(CompileOptions::CallTuning tuning);
absl::StatusOr<CompileOptions::CallTuning> ParseCallTuning(absl::string_view name);
// "flush" / "keep"; and back (InvalidArgument for anything else).
const char* DenormalsName(CompileOptions::Denormals denormals);
absl::StatusOr<CompileOptions::Denormals> ParseDenormals(absl::string_view name);
// "f32" / "bf16" / "auto"; and back (InvalidArgument for anything else).
const char* PrecisionName(CompileOptions::Precision precision);
absl::StatusOr<CompileOptions::Precision> ParsePrecision(absl::string_view name);

// One kernel of a compiled model, as the compile report shows it.
struct KernelReport {
  std::string name;
  // "loop" (generated code), "onednn" (a oneDNN primitive) or "reference"
  // (executed by kiln's reference interpreter — correct but slow; `reason`
  // says why): a library op oneDNN cannot run, or a reference fallback
  // call (`call` "kiln.Reference(<op>)", `reason` the lowering's refusal).
  std::string backend;
  std::vector<std::string> ops;  // the ONNX nodes it computes
  // Loop kernels: "vectorized", "tiled" or "scalar". Library calls: "library".
  std::string status;
  bool vectorized = false;  // loop kernels fully vectorized (or tiled)
  std::string reason;       // why not vectorized / why not on oneDNN / notes
  bool parallel = false;    // an OpenMP loop
  // Loop kernels: the ops of the body the vectorization checker
  // (backends/cpp/vec_checker.h) did not give a vector form, in body order;
  // empty when every op is vector or broadcast.
  struct OpNote {
    int op = -1;           // index in the kernel body ("op #N" in `reason`)
    std::string opcode;    // "load_indirect"
    std::string decision;  // "per-lane" (lane by lane in a vector step) or "scalar"
    std::string reason;
  };
  std::vector<OpNote> unvectorized_ops;
  // Library calls.
  std::string call;  // "conv[3x3 s1 g1 p1]+bias+relu"
  std::vector<std::string> post_ops;
  std::string weight_layout;
  int64_t prepacked_bytes = 0;
  int reorders_per_call = 0;
  // The precision the kernel computes in: "f32", "bf16" for a library call
  // run in bf16 (CompileOptions::precision, f32 accumulation) or "int8" for
  // an integer library call (u8/s8 operands, s32 accumulation). Loop
  // kernels compute in their ops' dtypes (f16 and bf16 values in f32).
  std::string precision = "f32";
  // Loop kernels: the dtypes of the buffers they load and store, sorted
  // ("bf16", "f32"): where activations are stored narrower than computed.
  std::vector<std::string> storage;
};

struct CompileReport {
  std::string model;  // as given (path or graph name)
  std::string isa;
  std::string mode;
  // CompileOptions::precision resolved for this CPU: "f32" or "bf16".
  std::string precision = "f32";
  int threads = 0;
  // Wall time per phase, milliseconds.
  double import_ms = 0, graph_passes_ms = 0, lowering_ms = 0, loop_passes_ms = 0,
         emit_ms = 0, jit_ms = 0, library_ms = 0, total_ms = 0;
  bool jit_cache_hit = false;
  int translation_units = 0;
  // Spent in the JIT build on making its precompiled header (0 when it was
  // there) and on listing the headers generated code includes (0 when their
  // recorded list was current): one-off costs per toolchain, whole (not
  // shared out over a batch's models as jit_ms is).
  double jit_precompiled_header_ms = 0, jit_header_scan_ms = 0;
  std::vector<KernelReport> kernels;  // execution order
  int loop_kernels = 0;
  int vectorized_kernels = 0;  // loop kernels vectorized or tiled
  int library_calls = 0;       // onednn + reference
  // Library calls on the reference interpreter: library ops oneDNN cannot
  // run plus the reference fallback calls.
  int reference_calls = 0;
  // Reference fallback calls: nodes lowering could not compile.
  int fallback_calls = 0;
  int64_t arena_bytes = 0;         // peak activation memory of one context
  int64_t intermediate_bytes = 0;  // what one buffer per intermediate costs
  int64_t constant_bytes = 0;      // weights as the model holds them
  // Weights released after their library calls prepacked them (nothing
  // reads them at run time); not counted in constant_bytes.
  int64_t released_constant_bytes = 0;
  int64_t prepacked_bytes = 0;     // oneDNN's packed weight copies
  int reorders = 0;                // activation reorders per run
  // Intermediate buffers stored in bf16 (bf16 mode's
  // store-activations-in-bf16, or a bf16 model's own) and their bytes.
  int bf16_activation_buffers = 0;
  int64_t bf16_activation_bytes = 0;
  // Element-wise nodes right after a library call that stayed out of its
  // post-op chain (they run as loop kernels), each with why.
  struct UnfusedElementwise {
    std::string node;    // the element-wise node (its name or result's)
    std::string op;      // its ONNX op type
    std::string after;   // the Conv/Gemm/MatMul it follows
    std::string reason;  // why oneDNN did not take it
  };
  std::vector<UnfusedElementwise> unfused_elementwise;
  // The QDQ patterns of a statically quantized model (DequantizeLinear ->
  // Conv/Gemm/MatMul -> QuantizeLinear, passes/graph/fuse_qdq.h): each
  // became an integer op (`op`, run as an int8 library call) or stayed f32
  // (`op` empty, `reason` why).
  struct QdqPattern {
    std::string node;    // the Conv / Gemm / MatMul
    std::string anchor;  // its op
    std::string op;      // "QLinearConv" / "QLinearMatMul" / "MatMulInteger", or empty
    std::string reason;
  };
  std::vector<QdqPattern> qdq_patterns;
  // Library calls whose layouts were tuned (CompileOptions::call_tuning).
  struct TunedCall {
    std::string kernel;  // the extern kernel's name
    std::string why;     // why its rule was doubtful: "C_out 1 <= 4"
    // The form chosen and every candidate's median time:
    // "nhwc (rule 179 ms, caller 2.10 ms, ...)"; "rule (no cached choice)"
    // under kCached without one.
    std::string choice;
    bool cached = false;  // read from the tuning cache, not timed now
  };
  std::vector<TunedCall> tuned_calls;
  // The narrowest floating-point type the model's own graph holds values in:
  // f16 for an fp16 model (kiln computes it in f32, f16 only at its
  // interface: passes/graph/compute_f16_in_f32.h), else f32. kilnc check
  // judges such a model's outputs by an fp16 tolerance.
  ir::DType model_float = ir::DType::kF32;
  std::vector<std::string> warnings;
  // Models whose inputs take several shapes (CompileOptions::
  // max_shape_specializations): one entry per shape-specialized program
  // compiled so far, in order, the first being the compile-time one whose
  // kernels and times the fields above describe.
  struct ShapeSpecialization {
    std::string shapes;  // "input_ids: [1,16], attention_mask: [1,16]"
    double compile_ms = 0;  // import through load, wall time
    bool jit_cache_hit = false;
    bool live = true;  // still in the in-memory cache (false: evicted)
  };
  std::vector<ShapeSpecialization> specializations;
  int live_specializations = 0;

  // A human summary with one line per kernel.
  std::string ToText() const;
  // One JSON object: the fields above, `kernels` (name, ops, vectorized,
  // reason, status, backend, parallel; loop kernels also unvectorized_ops:
  // [{op, opcode, decision, reason}]) and `extern_calls` (op, call,
  // post_ops, weight_layout, prepacked_bytes, reorders_per_call).
  std::string ToJson(int indent = -1) const;
};

// The model's interface: one entry per graph input/output, in order.
struct TensorInfo {
  std::string name;
  ir::DType dtype = ir::DType::kF32;
  // Outputs of data-dependent shape (see CompileOptions::reference_fallback)
  // have ir::kDynamicDim dims, or shape_known false when even the rank is
  // known only at run time.
  ir::Shape shape;
  bool shape_known = true;
  // Inputs whose dims each Run may choose (CompileOptions::
  // max_shape_specializations): the model's declared shape, ir::kDynamicDim
  // where a Run chooses, and per dim its symbol (ONNX dim_param; "" if
  // none; dims of one symbol must agree across inputs). `shape` is then the
  // compile-time specialization's. Empty for an input of one shape.
  ir::Shape declared_shape = {};
  std::vector<std::string> dim_params = {};
};

class CompiledModel;

// One tensor per output of `model`, for RunInto: static outputs allocated
// (zero-filled) with their shapes, outputs of data-dependent shape empty
// (their dynamic dims 0, or shape [0] when even the rank is unknown).
std::vector<ir::Tensor> NewOutputTensors(const CompiledModel& model);
// NewOutputTensors with the allocations checked: ResourceExhausted naming
// the output that does not fit in memory (ir::Tensor::Create).
absl::StatusOr<std::vector<ir::Tensor>> TryNewOutputTensors(const CompiledModel& model);

class CompiledModel {
 public:
  virtual ~CompiledModel() = default;

  // Positional inputs in the model's order. A model compiled with dynamic
  // input dims left unbound takes any size of them, compiling a program for
  // each new shape on first use (CompileOptions::max_shape_specializations).
  // InvalidArgument naming the input for a wrong count, dtype or shape (one
  // that breaks the declared rank, static dims or dim symbols); InvalidArgument naming the
  // kernel for a runtime error (integer division by zero, an out-of-range
  // gather index). Outputs of data-dependent shape come with their run-time
  // shapes.
  virtual absl::StatusOr<std::vector<ir::Tensor>> Run(
      absl::Span<const ir::Tensor> inputs) const = 0;
  // Inputs by name (every input exactly once; an unknown name is an error).
  virtual absl::StatusOr<std::vector<ir::Tensor>> RunNamed(
      const std::map<std::string, ir::Tensor>& inputs) const = 0;
  // Writes into caller-owned tensors (one per output, dtype and shape as
  // outputs() says; NewOutputTensors makes them) without a copy where the
  // output is computed in place. An output of data-dependent shape is copied
  // in after the run when the caller's tensor already has its run-time
  // shape; otherwise that tensor is replaced by one of the run-time shape
  // (so repeated runs of one shape allocate only on the first). Its dtype
  // must be the output's either way.
  virtual absl::Status RunInto(absl::Span<const ir::Tensor> inputs,
                               absl::Span<ir::Tensor* const> outputs) const = 0;

  // Run that also times every kernel (one entry per KernelReport, in
  // execution order; microseconds since the run started).
  struct KernelTiming {
    int kernel = -1;  // index into report().kernels
    double start_us = 0;
    double duration_us = 0;
  };
  virtual absl::StatusOr<std::vector<ir::Tensor>> Profile(
      absl::Span<const ir::Tensor> inputs, std::vector<KernelTiming>* timings) const = 0;

  virtual const std::vector<TensorInfo>& inputs() const = 0;
  virtual const std::vector<TensorInfo>& outputs() const = 0;
  virtual const CompileReport& report() const = 0;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_COMPILED_MODEL_H_
