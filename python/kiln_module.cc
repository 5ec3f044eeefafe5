// File: python/kiln_module.cc — the Python module `kiln`: kiln's public C++
// API (kiln::Compiler, kiln::CompiledModel) behind ONNX Runtime's
// InferenceSession conventions.
//
//   import kiln, numpy as np
//   sess = kiln.InferenceSession("model.onnx", threads=1)
//   name = sess.get_inputs()[0].name
//   (probs,) = sess.run(None, {name: np.zeros((1, 3, 32, 32), np.float32)})
//
// Feeds are checked here, before the model runs, so that a wrong name, dtype,
// rank or shape, or a non-contiguous array is a TypeError / ValueError naming
// the input. A C-contiguous, aligned array of the input's dtype is handed to
// Run without a copy (ir::Tensor::Borrow); outputs are numpy arrays over the
// tensors the run wrote (no copy either): for a model of fixed shapes, the
// arrays of earlier runs once nothing else refers to them (RunPooled). Runs
// and compiles release the GIL. No C++ exception and no absl::Status crosses
// into Python unconverted.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/compiler.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_metadata.h"
#include "interp/interpreter.h"
#include "ir/graph/dtype.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "runtime/compiled_model.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// Python exception types, created in PYBIND11_MODULE.
PyObject* g_error = nullptr;          // kiln.Error(RuntimeError)
PyObject* g_compile_error = nullptr;  // kiln.CompileError(kiln.Error)

[[noreturn]] void Raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

// A failed compile or import: kiln.CompileError with the status's text
// ("INVALID_ARGUMENT: model.onnx: node 3 (Conv): ..."); out of memory is
// MemoryError.
[[noreturn]] void RaiseCompileError(const absl::Status& status) {
  if (absl::IsResourceExhausted(status)) Raise(PyExc_MemoryError, status.ToString());
  Raise(g_compile_error, status.ToString());
}

// A failed run: InvalidArgument (bad values, e.g. an out-of-range Gather
// index) is ValueError, out of memory MemoryError, anything else kiln.Error.
[[noreturn]] void RaiseRunError(const absl::Status& status) {
  if (absl::IsInvalidArgument(status)) Raise(PyExc_ValueError, status.ToString());
  if (absl::IsResourceExhausted(status)) Raise(PyExc_MemoryError, status.ToString());
  Raise(g_error, status.ToString());
}

// ONNX Runtime's type strings (NodeArg.type).
std::string OrtTypeName(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32: return "tensor(float)";
    case ir::DType::kF16: return "tensor(float16)";
    case ir::DType::kBF16: return "tensor(bfloat16)";
    case ir::DType::kF64: return "tensor(double)";
    case ir::DType::kI64: return "tensor(int64)";
    case ir::DType::kI32: return "tensor(int32)";
    case ir::DType::kI8: return "tensor(int8)";
    case ir::DType::kU8: return "tensor(uint8)";
    case ir::DType::kBool: return "tensor(bool)";
    case ir::DType::kInvalid: break;
  }
  return "tensor(unknown)";
}

// The numpy dtype that holds a kiln dtype's elements. numpy has no bfloat16:
// bf16 tensors travel as uint16 arrays of their bits (as ONNX's test data
// stores them).
py::dtype NumpyDType(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32: return py::dtype::of<float>();
    case ir::DType::kF16: return py::dtype("float16");
    case ir::DType::kBF16: return py::dtype::of<uint16_t>();
    case ir::DType::kF64: return py::dtype::of<double>();
    case ir::DType::kI64: return py::dtype::of<int64_t>();
    case ir::DType::kI32: return py::dtype::of<int32_t>();
    case ir::DType::kI8: return py::dtype::of<int8_t>();
    case ir::DType::kU8: return py::dtype::of<uint8_t>();
    case ir::DType::kBool: return py::dtype::of<bool>();
    case ir::DType::kInvalid: break;
  }
  Raise(g_error, "internal: a tensor of invalid dtype");
}

// How an array's dtype reads in an error: ORT's name where there is one.
std::string NumpyTypeName(const py::dtype& dt) {
  for (ir::DType d : {ir::DType::kF32, ir::DType::kF16, ir::DType::kF64, ir::DType::kI64,
                      ir::DType::kI32, ir::DType::kI8, ir::DType::kU8, ir::DType::kBool}) {
    if (dt.equal(NumpyDType(d))) return OrtTypeName(d);
  }
  return absl::StrCat("numpy ", py::repr(dt).cast<std::string>());
}

std::string TypeName(const py::handle& h) {
  return py::type::of(h).attr("__name__").cast<std::string>();
}

std::string ShapeText(const py::array& a) {
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  return ir::ShapeToString(dims);
}

// CLOCK_MONOTONIC in nanoseconds, the clock of Python's time.perf_counter_ns.
int64_t SteadyNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// The GIL released for the scope (PyEval_SaveThread; what
// py::gil_scoped_release does without pybind11's bookkeeping).
class GilReleased {
 public:
  GilReleased() : thread_(PyEval_SaveThread()) {}
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;
  ~GilReleased() { PyEval_RestoreThread(thread_); }

 private:
  PyThreadState* thread_;
};

// The fed arrays, a reference each, held while Run reads their bytes (another
// thread may change the feed dict meanwhile). Used with the GIL held.
class HeldArrays {
 public:
  HeldArrays() = default;
  HeldArrays(const HeldArrays&) = delete;
  HeldArrays& operator=(const HeldArrays&) = delete;
  ~HeldArrays() { Clear(); }
  void Hold(PyObject* array) {
    Py_INCREF(array);
    if (n_ < kInline) {
      inline_[n_++] = array;
    } else {
      more_.push_back(array);
    }
  }
  void Clear() {
    for (int k = 0; k < n_; ++k) Py_DECREF(inline_[k]);
    for (PyObject* a : more_) Py_DECREF(a);
    n_ = 0;
    more_.clear();
  }

 private:
  static constexpr int kInline = 8;  // no allocation for a model of a few inputs
  PyObject* inline_[kInline];
  int n_ = 0;
  std::vector<PyObject*> more_;
};

// ORT's NodeArg: one model input or output.
struct NodeArg {
  std::string name;
  std::string type;
  // Dims as ints; a dim each run chooses is its symbol (dim_param) or None,
  // as is a data-dependent dim; an output whose rank is known only at run
  // time has shape None.
  py::object shape;

  static NodeArg From(const TensorInfo& info) {
    NodeArg a;
    a.name = info.name;
    a.type = OrtTypeName(info.dtype);
    if (!info.declared_shape.empty()) {
      // An input whose dims each run chooses: ORT gives such a dim as its
      // symbol (dim_param), else None.
      py::list dims;
      for (size_t d = 0; d < info.declared_shape.size(); ++d) {
        if (info.declared_shape[d] != ir::kDynamicDim) {
          dims.append(info.declared_shape[d]);
        } else if (d < info.dim_params.size() && !info.dim_params[d].empty()) {
          dims.append(info.dim_params[d]);
        } else {
          dims.append(py::none());
        }
      }
      a.shape = dims;
    } else if (!info.shape_known) {
      a.shape = py::none();
    } else {
      py::list dims;
      for (int64_t d : info.shape) {
        if (d == ir::kDynamicDim) {
          dims.append(py::none());
        } else {
          dims.append(d);
        }
      }
      a.shape = dims;
    }
    return a;
  }

  std::string Repr() const {
    return absl::StrCat("NodeArg(name='", name, "', type='", type, "', shape=",
                        std::string(py::repr(shape)), ")");
  }
};

// CompileOptions::input_shapes from the `shapes` argument: {name: dims}.
std::map<std::string, ir::Shape> ParseShapes(const py::object& shapes) {
  std::map<std::string, ir::Shape> out;
  if (shapes.is_none()) return out;
  if (!py::isinstance<py::dict>(shapes)) {
    throw py::type_error("shapes= must be a dict {input name: sequence of ints}");
  }
  for (const auto& [key, value] : shapes.cast<py::dict>()) {
    if (!py::isinstance<py::str>(key)) {
      throw py::type_error("shapes=: input names must be str");
    }
    const std::string name = key.cast<std::string>();
    ir::Shape dims;
    try {
      dims = value.cast<std::vector<int64_t>>();
    } catch (const py::cast_error&) {
      throw py::type_error(
          absl::StrCat("shapes=: input '", name, "': expected a sequence of ints"));
    }
    for (int64_t d : dims) {
      if (d < 0) {
        throw py::value_error(absl::StrCat("shapes=: input '", name, "': dim ", d,
                                           " is negative in ", ir::ShapeToString(dims)));
      }
    }
    out[name] = std::move(dims);
  }
  return out;
}

std::string PathOf(const py::object& model) {
  return py::module_::import("os").attr("fspath")(model).cast<std::string>();
}

// kiln.InferenceSession: a model compiled for this CPU (engine "compiled" or
// "eager"), or imported for kiln's reference interpreter ("reference", the
// oracle: slow, for checking results).
class InferenceSession {
 public:
  InferenceSession(const py::object& model, const py::object& sess_options,
                   const py::object& providers, int threads, const std::string& isa,
                   const py::object& shapes, const py::object& cache_dir,
                   const std::string& engine, const std::string& precision,
                   bool deterministic) {
    if (!sess_options.is_none()) {
      throw py::type_error(
          "kiln.InferenceSession takes no SessionOptions: use threads=, isa=, shapes=, "
          "cache_dir=");
    }
    CheckProviders(providers);
    if (threads < 0) throw py::value_error(absl::StrCat("threads=", threads, " is negative"));
    CompileOptions options;
    options.threads = threads;
    options.isa = isa;
    options.input_shapes = ParseShapes(shapes);
    if (!cache_dir.is_none()) options.cache_dir = PathOf(cache_dir);
    if (engine == "eager") {
      options.mode = CompileOptions::Mode::kEager;
    } else if (engine != "compiled" && engine != "reference") {
      throw py::value_error(absl::StrCat("engine='", engine,
                                         "': expected 'compiled', 'eager' or 'reference'"));
    }
    absl::StatusOr<CompileOptions::Precision> p = ParsePrecision(precision);
    if (!p.ok()) throw py::value_error(absl::StrCat("precision=: ", p.status().message()));
    options.precision = *p;
    options.deterministic = deterministic;

    const bool from_bytes = py::isinstance<py::bytes>(model);
    std::string bytes, path;
    if (from_bytes) {
      bytes = model.cast<std::string>();
      absl::StatusOr<frontend::ModelMetadata> meta = frontend::ReadModelMetadata(bytes);
      if (meta.ok()) metadata_ = *std::move(meta);
    } else if (py::isinstance<py::str>(model) || py::hasattr(model, "__fspath__")) {
      path = PathOf(model);
      path_ = path;
    } else {
      throw py::type_error(absl::StrCat(
          "kiln.InferenceSession: expected a path (str, os.PathLike) or the model's bytes, got ",
          TypeName(model)));
    }

    if (engine == "reference") {
      frontend::ImportOptions io;
      for (const auto& [name, shape] : options.input_shapes) io.input_shapes[name] = shape;
      absl::StatusOr<frontend::ImportResult> imported;
      {
        py::gil_scoped_release release;
        imported = from_bytes ? frontend::ImportModelBytes(bytes, io)
                              : frontend::ImportModelFile(path, io);
      }
      if (!imported.ok()) RaiseCompileError(imported.status());
      graph_ = std::make_shared<ir::Graph>(std::move(imported->graph));
      warnings_ = std::move(imported->warnings);
      for (ir::ValueId id : graph_->inputs()) inputs_.push_back(Info(id));
      for (ir::ValueId id : graph_->outputs()) outputs_.push_back(Info(id));
    } else {
      absl::StatusOr<std::unique_ptr<CompiledModel>> compiled;
      {
        py::gil_scoped_release release;
        Compiler compiler(options);
        compiled = from_bytes ? compiler.CompileBytes(bytes) : compiler.CompileFile(path);
      }
      if (!compiled.ok()) RaiseCompileError(compiled.status());
      model_ = std::move(*compiled);
      inputs_ = model_->inputs();
      outputs_ = model_->outputs();
      warnings_ = model_->report().warnings;
    }
    for (const TensorInfo& t : inputs_) {
      input_dtypes_.push_back(NumpyDType(t.dtype));
      // A name that is not UTF-8 is no str: no feed matches it (Feeds then
      // says it is missing).
      PyObject* name = PyUnicode_FromStringAndSize(t.name.data(), t.name.size());
      if (name == nullptr) {
        PyErr_Clear();
        name = Py_NewRef(Py_None);
      } else {
        PyUnicode_InternInPlace(&name);
      }
      fast_inputs_.push_back(FastInput{py::reinterpret_steal<py::object>(name), input_dtypes_.back(),
                                       t.declared_shape.empty() ? t.shape : t.declared_shape,
                                       t.dtype});
    }
    for (ir::DType d : {ir::DType::kF32, ir::DType::kF16, ir::DType::kBF16, ir::DType::kF64,
                        ir::DType::kI64, ir::DType::kI32, ir::DType::kI8, ir::DType::kU8,
                        ir::DType::kBool}) {
      const size_t k = static_cast<size_t>(d);
      if (dtype_descrs_.size() <= k) dtype_descrs_.resize(k + 1);
      dtype_descrs_[k] = NumpyDType(d);
    }
    const auto fixed = [](const TensorInfo& t) {
      return t.declared_shape.empty() && t.shape_known &&
             std::none_of(t.shape.begin(), t.shape.end(),
                          [](int64_t d) { return d == ir::kDynamicDim; });
    };
    if (model_ != nullptr && std::all_of(inputs_.begin(), inputs_.end(), fixed) &&
        std::all_of(outputs_.begin(), outputs_.end(), fixed)) {
      pool_.resize(outputs_.size());
    }
  }

  // ORT's get_modelmeta(): the model's producer, domain, version, doc
  // strings and metadata_props (read from the file on first use).
  const frontend::ModelMetadata& GetModelMeta() {
    if (!metadata_.has_value()) {
      absl::StatusOr<frontend::ModelMetadata> meta = frontend::ReadModelMetadataFile(path_);
      if (!meta.ok()) RaiseRunError(meta.status());
      metadata_ = *std::move(meta);
    }
    return *metadata_;
  }

  std::vector<NodeArg> GetInputs() const { return Args(inputs_); }
  std::vector<NodeArg> GetOutputs() const { return Args(outputs_); }

  // ORT's run(output_names, input_feed): the outputs named (all for None)
  // as a list of numpy arrays nothing else refers to. Python calls it
  // through RunMethod below, without pybind11's dispatch.
  //
  // After a big model has streamed through the caches, every line of code
  // and data this touches comes from memory (decision 0066), so the common
  // case touches little: feeds found by interned names and checked against
  // the numpy dtype descriptor of each input (BorrowFeeds), the GIL released
  // around the run, and for a model of fixed shapes the outputs written into
  // arrays of earlier runs that nothing refers to any more (RunPooled), else
  // wrapped with numpy's C API over the tensors Run made. Other feeds take
  // Feeds(), which accepts what BorrowFeeds does not (an unaligned array is
  // copied, a dtype equal to but not numpy's own descriptor) and raises the
  // errors naming the input.
  PyObject* Run(PyObject* output_names, PyObject* feeds) const {
    absl::InlinedVector<int, 4> selected;
    if (output_names != Py_None) selected = SelectOutputs(output_names);
    absl::InlinedVector<ir::Tensor, 4> inputs;
    HeldArrays keep;
    if (!BorrowFeeds(feeds, &inputs, &keep)) {
      inputs.clear();
      keep.Clear();
      Feeds(py::reinterpret_borrow<py::object>(feeds), &inputs, &keep);
    }
    if (!pool_.empty()) return RunPooled(output_names, selected, inputs);
    absl::StatusOr<std::vector<ir::Tensor>> result;
    {
      GilReleased released;
      last_run_start_ns_.store(SteadyNs(), std::memory_order_relaxed);
      result = RunTensors(inputs);
      last_run_end_ns_.store(SteadyNs(), std::memory_order_relaxed);
    }
    if (!result.ok()) RaiseRunError(result.status());
    const size_t n = output_names == Py_None ? result->size() : selected.size();
    py::list list(n);
    for (size_t k = 0; k < n; ++k) {
      PyObject* array;
      if (output_names == Py_None) {
        array = ToArray(std::move((*result)[k]));
      } else {
        // An output named twice is the same array twice.
        const auto first = std::find(selected.begin(), selected.begin() + k, selected[k]);
        array = first != selected.begin() + k
                    ? Py_NewRef(PyList_GET_ITEM(list.ptr(), first - selected.begin()))
                    : ToArray(std::move((*result)[selected[k]]));
      }
      PyList_SET_ITEM(list.ptr(), k, array);
    }
    return list.release().ptr();
  }

  // Run for a model whose output shapes are fixed: RunInto arrays from the
  // pool (Claim), so that a run in a loop makes no array and frees none.
  PyObject* RunPooled(PyObject* output_names, absl::Span<const int> selected,
                      absl::Span<const ir::Tensor> inputs) const {
    absl::InlinedVector<PoolEntry*, 4> claimed;
    absl::InlinedVector<std::unique_ptr<PoolEntry>, 1> unpooled;
    // Whatever happens, this run's arrays stop being busy when it returns.
    struct Unclaim {
      absl::InlinedVector<PoolEntry*, 4>* entries;
      ~Unclaim() {
        for (PoolEntry* e : *entries) e->busy = false;
      }
    } unclaim{&claimed};
    absl::InlinedVector<ir::Tensor*, 4> tensors;
    for (size_t o = 0; o < pool_.size(); ++o) {
      claimed.push_back(Claim(static_cast<int>(o), &unpooled));
      tensors.push_back(&claimed.back()->tensor);
    }
    absl::Status status;
    {
      GilReleased released;
      last_run_start_ns_.store(SteadyNs(), std::memory_order_relaxed);
      status = model_->RunInto(inputs, tensors);
      last_run_end_ns_.store(SteadyNs(), std::memory_order_relaxed);
    }
    if (!status.ok()) RaiseRunError(status);
    const size_t n = output_names == Py_None ? claimed.size() : selected.size();
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
    if (list == nullptr) throw py::error_already_set();
    for (size_t k = 0; k < n; ++k) {
      const int o = output_names == Py_None ? static_cast<int>(k) : selected[k];
      PyList_SET_ITEM(list, k, Py_NewRef(claimed[o]->array.ptr()));
    }
    return list;
  }

  // The C++ API's Run on the same feeds, `iterations` times with the GIL
  // released, timed around each call alone: seconds per call. For the
  // Python-overhead benchmark (benchmarks/python_overhead.py).
  std::vector<double> TimeCppRun(const py::object& feeds, int iterations) const {
    absl::InlinedVector<ir::Tensor, 4> inputs;
    HeldArrays keep;
    Feeds(feeds, &inputs, &keep);
    std::vector<double> seconds;
    seconds.reserve(std::max(iterations, 0));
    absl::Status status;
    {
      py::gil_scoped_release release;
      for (int i = 0; i < iterations && status.ok(); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        absl::StatusOr<std::vector<ir::Tensor>> r = RunTensors(inputs);
        const auto t1 = std::chrono::steady_clock::now();
        status = r.status();
        seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
      }
    }
    if (!status.ok()) RaiseRunError(status);
    return seconds;
  }

  // The compile report as one JSON object (what `kilnc explain --json`
  // prints).
  std::string Report() const {
    if (model_ == nullptr) return "{\"engine\":\"reference\"}";
    return model_->report().ToJson();
  }
  // The compile report as text: a summary and one line per kernel (fused
  // ONNX ops, backend, vectorized or why not).
  std::string Explain() const {
    if (model_ == nullptr) {
      return absl::StrCat("engine: reference interpreter (", graph_->nodes().size(),
                          " nodes, nothing compiled)\n");
    }
    return model_->report().ToText();
  }
  const std::vector<std::string>& warnings() const { return warnings_; }
  // When the C++ Run of the latest run() call (of any thread) started and
  // ended, in nanoseconds of CLOCK_MONOTONIC (Python's time.perf_counter_ns):
  // what run() spends before and after it is the module's own cost.
  std::pair<int64_t, int64_t> last_run_bounds_ns() const {
    return {last_run_start_ns_.load(std::memory_order_relaxed),
            last_run_end_ns_.load(std::memory_order_relaxed)};
  }
  // When the latest run() call entered and left the module's code (same
  // clock): what run() spends outside them is the interpreter's.
  std::pair<int64_t, int64_t> last_call_bounds_ns() const {
    return {last_call_start_ns_.load(std::memory_order_relaxed),
            last_call_end_ns_.load(std::memory_order_relaxed)};
  }
  void set_last_call_bounds_ns(int64_t start, int64_t end) const {
    last_call_start_ns_.store(start, std::memory_order_relaxed);
    last_call_end_ns_.store(end, std::memory_order_relaxed);
  }

 private:
  static void CheckProviders(const py::object& providers) {
    if (providers.is_none()) return;
    if (!py::isinstance<py::sequence>(providers) || py::isinstance<py::str>(providers)) {
      throw py::type_error("providers= must be a list of provider names");
    }
    for (const py::handle p : providers) {
      py::object name = py::reinterpret_borrow<py::object>(p);
      if (py::isinstance<py::tuple>(name) && py::len(name) > 0) name = name.cast<py::tuple>()[0];
      if (!py::isinstance<py::str>(name) ||
          name.cast<std::string>() != "CPUExecutionProvider") {
        throw py::value_error(absl::StrCat(
            "providers=: kiln runs on the CPU only (\"CPUExecutionProvider\"), got ",
            std::string(py::repr(p))));
      }
    }
  }

  TensorInfo Info(ir::ValueId id) const {
    const ir::Value& v = graph_->value(id);
    return TensorInfo{v.name, v.dtype, v.shape, v.shape_known};
  }

  static std::vector<NodeArg> Args(const std::vector<TensorInfo>& infos) {
    std::vector<NodeArg> args;
    for (const TensorInfo& t : infos) args.push_back(NodeArg::From(t));
    return args;
  }

  absl::StatusOr<std::vector<ir::Tensor>> RunTensors(absl::Span<const ir::Tensor> in) const {
    if (model_ != nullptr) return model_->Run(in);
    try {
      return interp::Run(*graph_, std::vector<ir::Tensor>(in.begin(), in.end()));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory in kiln's reference interpreter");
    }
  }

  // Output indices for run's output_names (not None).
  absl::InlinedVector<int, 4> SelectOutputs(PyObject* names_ptr) const {
    const py::handle names(names_ptr);
    absl::InlinedVector<int, 4> selected;
    if (!py::isinstance<py::sequence>(names) || py::isinstance<py::str>(names)) {
      throw py::type_error("run: output_names must be a list of output names or None");
    }
    for (const py::handle n : names) {
      if (!py::isinstance<py::str>(n)) {
        throw py::type_error("run: output_names must be a list of str");
      }
      const std::string name = n.cast<std::string>();
      auto it = std::find_if(outputs_.begin(), outputs_.end(),
                             [&](const TensorInfo& t) { return t.name == name; });
      if (it == outputs_.end()) {
        throw py::value_error(absl::StrCat("run: unknown output '", name,
                                           "'; the model's outputs are ", NameList(outputs_)));
      }
      selected.push_back(static_cast<int>(it - outputs_.begin()));
    }
    return selected;
  }

  static std::string NameList(const std::vector<TensorInfo>& infos) {
    return absl::StrCat(
        "'",
        absl::StrJoin(infos, "', '",
                      [](std::string* out, const TensorInfo& t) { out->append(t.name); }),
        "'");
  }

  // The feed dict as the model's positional inputs, each checked: appends
  // them to `tensors`, and to `keep` the arrays they borrow.
  void Feeds(const py::object& feeds, absl::InlinedVector<ir::Tensor, 4>* tensors,
             HeldArrays* keep) const {
    if (!py::isinstance<py::dict>(feeds)) {
      throw py::type_error(absl::StrCat(
          "run: input_feed must be a dict {input name: numpy.ndarray}, got ",
          TypeName(feeds)));
    }
    const py::dict dict = feeds.cast<py::dict>();
    for (const auto& [key, value] : dict) {
      if (!py::isinstance<py::str>(key)) {
        throw py::type_error(absl::StrCat("run: input names must be str, got ",
                                          std::string(py::repr(key))));
      }
    }
    if (dict.size() > inputs_.size() || !AllNamesKnown(dict)) {
      for (const auto& [key, value] : dict) {
        const std::string name = key.cast<std::string>();
        if (std::none_of(inputs_.begin(), inputs_.end(),
                         [&](const TensorInfo& t) { return t.name == name; })) {
          throw py::value_error(absl::StrCat("run: unknown input '", name,
                                             "'; the model's inputs are ", NameList(inputs_)));
        }
      }
    }
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const TensorInfo& info = inputs_[i];
      PyObject* value = PyDict_GetItemString(dict.ptr(), info.name.c_str());
      if (value == nullptr) {
        throw py::value_error(absl::StrCat("run: missing input '", info.name, "' (",
                                           ir::TypeString(info.dtype, info.shape),
                                           "); the model's inputs are ", NameList(inputs_)));
      }
      tensors->push_back(FeedTensor(info, input_dtypes_[i],
                                    py::reinterpret_borrow<py::object>(value), keep));
    }
  }

  bool AllNamesKnown(const py::dict& dict) const {
    size_t known = 0;
    for (const TensorInfo& t : inputs_) {
      if (PyDict_GetItemString(dict.ptr(), t.name.c_str()) != nullptr) ++known;
    }
    return known == dict.size();
  }

  // One fed array as a tensor: borrowed when it is C-contiguous and aligned,
  // copied when only unaligned; everything else is an error naming the input.
  static ir::Tensor FeedTensor(const TensorInfo& info, const py::dtype& want,
                           const py::object& value, HeldArrays* keep) {
    if (!py::isinstance<py::array>(value)) {
      throw py::type_error(absl::StrCat(
          "run: input '", info.name, "': expected a numpy.ndarray of ", OrtTypeName(info.dtype),
          ", got ", TypeName(value)));
    }
    py::array a = py::reinterpret_borrow<py::array>(value);
    if (!a.dtype().equal(want)) {
      throw py::type_error(absl::StrCat("run: input '", info.name, "': expected ",
                                        OrtTypeName(info.dtype), ", got ",
                                        NumpyTypeName(a.dtype())));
    }
    // An input with dims each run may choose (declared_shape) takes any size
    // there; the model compiles a specialization for a new size.
    const ir::Shape& expect = info.declared_shape.empty() ? info.shape : info.declared_shape;
    if (a.ndim() != static_cast<py::ssize_t>(expect.size())) {
      throw py::value_error(absl::StrCat("run: input '", info.name, "': expected rank ",
                                         expect.size(), " ", ir::ShapeToString(expect),
                                         ", got rank ", a.ndim(), " ", ShapeText(a)));
    }
    ir::Shape shape(expect.size());
    for (size_t d = 0; d < expect.size(); ++d) {
      shape[d] = a.shape(d);
      if (expect[d] != ir::kDynamicDim && a.shape(d) != expect[d]) {
        throw py::value_error(absl::StrCat("run: input '", info.name, "': expected shape ",
                                           ir::ShapeToString(expect), ", got ",
                                           ShapeText(a), " (dim ", d, ")"));
      }
    }
    const int flags = a.flags();
    if ((flags & py::array::c_style) == 0) {
      throw py::value_error(absl::StrCat(
          "run: input '", info.name,
          "' is not C-contiguous; pass numpy.ascontiguousarray(...) of it"));
    }
    if ((flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) == 0) {
      return ir::Tensor::FromBytes(info.dtype, shape, a.data());
    }
    keep->Hold(a.ptr());
    return ir::Tensor::Borrow(info.dtype, shape, a.data());
  }

  // The common case of Feeds, touching as little as it can: true when every
  // input is in `feeds` under its name and is a C-contiguous, aligned
  // ndarray with the numpy dtype descriptor of the input (numpy's own) and
  // its shape, and no other key is; appends the tensors borrowing them and
  // the arrays. False for anything else, with no Python exception set (the
  // caller discards what was appended).
  bool BorrowFeeds(PyObject* feeds, absl::InlinedVector<ir::Tensor, 4>* tensors,
                   HeldArrays* keep) const {
    if (!PyDict_CheckExact(feeds) ||
        PyDict_GET_SIZE(feeds) != static_cast<Py_ssize_t>(fast_inputs_.size())) {
      return false;
    }
    const py::detail::npy_api& numpy = *numpy_;
    for (const FastInput& in : fast_inputs_) {
      // The name's hash is cached in the interned key: one probe.
      PyObject* value = PyDict_GetItemWithError(feeds, in.name.ptr());
      if (value == nullptr || !numpy.PyArray_Check_(value)) {
        PyErr_Clear();
        return false;
      }
      const auto* a = reinterpret_cast<const py::detail::PyArray_Proxy*>(value);
      constexpr int kWant = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                            py::detail::npy_api::NPY_ARRAY_ALIGNED_;
      if (a->descr != in.descr.ptr() || (a->flags & kWant) != kWant ||
          a->nd != static_cast<int>(in.dims.size())) {
        return false;
      }
      for (int d = 0; d < a->nd; ++d) {
        if (a->dimensions[d] != in.dims[d] && in.dims[d] != ir::kDynamicDim) return false;
      }
      tensors->push_back(
          ir::Tensor::Borrow(in.dtype, ir::Shape(a->dimensions, a->dimensions + a->nd), a->data));
      keep->Hold(value);
    }
    return true;
  }

  // A new numpy array (a new reference) over an output tensor, which the
  // array owns (nothing copied).
  PyObject* ToArray(ir::Tensor&& t) const {
    static_assert(sizeof(int64_t) == sizeof(Py_intptr_t), "dims pass to numpy as they are");
    const py::detail::npy_api& numpy = *numpy_;
    auto* owned = new ir::Tensor(std::move(t));
    PyObject* capsule = PyCapsule_New(owned, nullptr, [](PyObject* c) {
      delete static_cast<ir::Tensor*>(PyCapsule_GetPointer(c, nullptr));
    });
    if (capsule == nullptr) {
      delete owned;
      throw py::error_already_set();
    }
    PyObject* descr = DTypeDescr(owned->dtype());
    Py_INCREF(descr);  // PyArray_NewFromDescr steals it
    PyObject* array = numpy.PyArray_NewFromDescr_(
        numpy.PyArray_Type_, descr, static_cast<int>(owned->rank()),
        reinterpret_cast<const Py_intptr_t*>(owned->shape().data()), nullptr, owned->raw_data(),
        py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
            py::detail::npy_api::NPY_ARRAY_WRITEABLE_,
        nullptr);
    if (array == nullptr) {
      Py_DECREF(capsule);
      throw py::error_already_set();
    }
    // Steals the capsule, also when it fails.
    if (numpy.PyArray_SetBaseObject_(array, capsule) != 0) {
      Py_DECREF(array);
      throw py::error_already_set();
    }
    return array;
  }

  // numpy's descriptor for a kiln dtype (NumpyDType), made once.
  PyObject* DTypeDescr(ir::DType dtype) const {
    const size_t k = static_cast<size_t>(dtype);
    if (k < dtype_descrs_.size() && dtype_descrs_[k]) return dtype_descrs_[k].ptr();
    Raise(g_error, "internal: an output tensor of invalid dtype");
  }

  // Output arrays a run writes into (RunInto) and returns, kept by the
  // session for a later run once nothing else holds them. ONNX Runtime's
  // run returns new arrays; a pooled array is as good as new: no object or
  // view refers to it when a run takes it (its reference count is the
  // pool's one, it has no weak references), and its fields are as made.
  struct PoolEntry {
    py::object array;   // an ndarray over `tensor`'s bytes, which it owns
    ir::Tensor tensor;  // shares the bytes, for RunInto
    int flags = 0;      // the array's flags when made
    bool busy = false;  // a run (of any thread) is writing it
  };
  static constexpr int kPoolDepth = 2;  // a loop's previous outputs are still bound

  // Output `o`'s array for this run, marked busy: a pooled one nobody else
  // holds; else a new one, pooled in place of one no run is writing, or
  // appended to `unpooled` when every pooled one is busy.
  PoolEntry* Claim(int o, absl::InlinedVector<std::unique_ptr<PoolEntry>, 1>* unpooled) const {
    std::array<PoolEntry, kPoolDepth>& entries = pool_[o];
    for (PoolEntry& e : entries) {
      if (Reusable(e, o)) {
        e.busy = true;
        return &e;
      }
    }
    PoolEntry* slot = nullptr;
    for (PoolEntry& e : entries) {
      if (!e.busy) {
        slot = &e;
        break;
      }
    }
    if (slot == nullptr) {
      unpooled->push_back(std::make_unique<PoolEntry>());
      slot = unpooled->back().get();
    }
    // Busy first: dropping the array replaced may run Python code (a weak
    // reference's callback, the garbage collector), even a run of this
    // session, which must not take this entry.
    slot->busy = true;
    const TensorInfo& info = outputs_[o];
    PyObject* made = nullptr;
    ir::Tensor view;
    try {
      absl::StatusOr<ir::Tensor> t = ir::Tensor::Create(
          info.dtype, info.shape, absl::StrCat("output '", info.name, "'"));
      if (!t.ok()) RaiseRunError(t.status());
      view = t->Share();
      made = ToArray(*std::move(t));
    } catch (...) {
      slot->busy = false;
      throw;
    }
    slot->flags = reinterpret_cast<const py::detail::PyArray_Proxy*>(made)->flags;
    slot->tensor = std::move(view);
    slot->array = py::reinterpret_steal<py::object>(made);  // drops the array replaced
    return slot;
  }

  bool Reusable(const PoolEntry& e, int o) const {
    PyObject* object = e.array.ptr();
    if (object == nullptr || e.busy || Py_REFCNT(object) != 1) return false;
    const auto* a = reinterpret_cast<const py::detail::PyArray_Proxy*>(object);
    const ir::Shape& shape = outputs_[o].shape;
    if (a->data != e.tensor.raw_data() || a->flags != e.flags ||
        a->descr != DTypeDescr(outputs_[o].dtype) || a->nd != static_cast<int>(shape.size())) {
      return false;
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (a->dimensions[d] != shape[d]) return false;
    }
    const Py_ssize_t weaklist = Py_TYPE(object)->tp_weaklistoffset;
    return weaklist <= 0 ||
           *reinterpret_cast<PyObject* const*>(reinterpret_cast<const char*>(object) + weaklist) ==
               nullptr;
  }

  // What BorrowFeeds checks an input against.
  struct FastInput {
    py::object name;   // interned str
    py::object descr;  // the numpy dtype descriptor of the input
    ir::Shape dims;    // ir::kDynamicDim: any size
    ir::DType dtype;
  };

  std::shared_ptr<const CompiledModel> model_;
  std::shared_ptr<const ir::Graph> graph_;  // engine "reference"
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<py::dtype> input_dtypes_;
  std::vector<FastInput> fast_inputs_;
  std::vector<py::object> dtype_descrs_;  // by ir::DType's value
  // Per output, when every output's shape is fixed (no dims an input
  // chooses, none data-dependent): RunPooled. Empty: Run's outputs wrapped.
  mutable std::vector<std::array<PoolEntry, kPoolDepth>> pool_;
  const py::detail::npy_api* numpy_ = &py::detail::npy_api::get();
  std::string path_;  // the model file ("" for a model given as bytes)
  std::optional<frontend::ModelMetadata> metadata_;
  std::vector<std::string> warnings_;
  mutable std::atomic<int64_t> last_run_start_ns_{0}, last_run_end_ns_{0};
  mutable std::atomic<int64_t> last_call_start_ns_{0}, last_call_end_ns_{0};
};

// InferenceSession.run(output_names, input_feed, run_options=None) as a
// CPython method of the vectorcall convention: the interpreter calls it
// directly, with no argument tuple or keyword dict built and no pybind11
// dispatch (what the method costs right after a big model run is mostly the
// code it touches; decision 0066).
PyObject* RunMethod(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                    PyObject* kwnames) {
  const int64_t entered = SteadyNs();
  static const char* const kNames[] = {"output_names", "input_feed", "run_options"};
  PyObject* arg[3] = {nullptr, nullptr, Py_None};
  if (nargs > 3) {
    PyErr_Format(PyExc_TypeError, "run() takes at most 3 arguments (%zd given)", nargs);
    return nullptr;
  }
  for (Py_ssize_t k = 0; k < nargs; ++k) arg[k] = args[k];
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int slot = 0;
    while (slot < 3 && PyUnicode_CompareWithASCIIString(key, kNames[slot]) != 0) ++slot;
    if (slot == 3) {
      PyErr_Format(PyExc_TypeError, "run() got an unexpected keyword argument '%U'", key);
      return nullptr;
    }
    if (slot < nargs) {
      PyErr_Format(PyExc_TypeError, "run() got multiple values for argument '%s'",
                   kNames[slot]);
      return nullptr;
    }
    arg[slot] = args[nargs + k];
  }
  for (int slot = 0; slot < 2; ++slot) {
    if (arg[slot] == nullptr) {
      PyErr_Format(PyExc_TypeError, "run() missing required argument '%s'", kNames[slot]);
      return nullptr;
    }
  }
  if (arg[2] != Py_None) {
    PyErr_SetString(PyExc_TypeError, "kiln.InferenceSession.run takes no RunOptions");
    return nullptr;
  }
  // The method descriptor has checked that self is an InferenceSession.
  py::detail::value_and_holder v =
      reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder();
  if (!v.holder_constructed()) {
    PyErr_SetString(PyExc_TypeError, "run() on an InferenceSession that __init__ did not make");
    return nullptr;
  }
  try {
    const InferenceSession& session = *v.value_ptr<InferenceSession>();
    PyObject* outputs = session.Run(arg[0], arg[1]);
    session.set_last_call_bounds_ns(entered, SteadyNs());
    return outputs;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(g_error, e.what());
  }
  return nullptr;
}

PyMethodDef g_run_method = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(RunMethod)),
    METH_FASTCALL | METH_KEYWORDS,
    "run(output_names, input_feed, run_options=None)\n"
    "Runs the model on {input name: numpy array}; returns the outputs named\n"
    "(all when output_names is None) as a list of new numpy arrays."};

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(kiln, m) {
  using namespace kiln::python;  // NOLINT: the module's one entry point
  m.doc() =
      "kiln: compile an ONNX model for this CPU and run it, with ONNX Runtime's\n"
      "InferenceSession conventions:\n\n"
      "    sess = kiln.InferenceSession('model.onnx', threads=1)\n"
      "    outputs = sess.run(None, {sess.get_inputs()[0].name: x})\n";
  g_error = PyErr_NewExceptionWithDoc("kiln.Error", "A kiln error (the absl::Status text).",
                                      PyExc_RuntimeError, nullptr);
  g_compile_error = PyErr_NewExceptionWithDoc(
      "kiln.CompileError", "The model could not be read or compiled (the absl::Status text).",
      g_error, nullptr);
  m.add_object("Error", py::handle(g_error));
  m.add_object("CompileError", py::handle(g_compile_error));

  py::class_<NodeArg>(m, "NodeArg", "A model input or output, as ONNX Runtime's NodeArg.")
      .def_readonly("name", &NodeArg::name)
      .def_readonly("type", &NodeArg::type, "ONNX Runtime's type string, e.g. 'tensor(float)'")
      .def_readonly("shape", &NodeArg::shape, "dims as ints; None for a data-dependent dim")
      .def("__repr__", &NodeArg::Repr);

  py::class_<kiln::frontend::ModelMetadata>(m, "ModelMetadata",
                                      "A model's descriptive fields, as ONNX Runtime's "
                                      "ModelMetadata.")
      .def_readonly("producer_name", &kiln::frontend::ModelMetadata::producer_name)
      .def_readonly("producer_version", &kiln::frontend::ModelMetadata::producer_version)
      .def_readonly("domain", &kiln::frontend::ModelMetadata::domain)
      .def_readonly("description", &kiln::frontend::ModelMetadata::description,
                    "the model's doc_string")
      .def_readonly("version", &kiln::frontend::ModelMetadata::version, "the model_version")
      .def_readonly("graph_name", &kiln::frontend::ModelMetadata::graph_name)
      .def_readonly("graph_description", &kiln::frontend::ModelMetadata::graph_description,
                    "the graph's doc_string")
      .def_property_readonly(
          "custom_metadata_map",
          [](const kiln::frontend::ModelMetadata& meta) {
            // metadata_props as a dict; a repeated key keeps its last value.
            py::dict d;
            for (const auto& [key, value] : meta.custom_metadata) d[py::str(key)] = value;
            return d;
          },
          "metadata_props as {key: value}");

  py::class_<InferenceSession> session(m, "InferenceSession",
                                      "An ONNX model compiled by kiln for this CPU.");
  session
      .def(py::init<const py::object&, const py::object&, const py::object&, int,
                    const std::string&, const py::object&, const py::object&,
                    const std::string&, const std::string&, bool>(),
           py::arg("path_or_bytes"), py::arg("sess_options") = py::none(),
           py::arg("providers") = py::none(), py::kw_only(), py::arg("threads") = 0,
           py::arg("isa") = "", py::arg("shapes") = py::none(),
           py::arg("cache_dir") = py::none(), py::arg("engine") = "compiled",
           py::arg("precision") = "f32", py::arg("deterministic") = false,
           "Compiles a model (a path or its bytes).\n"
           "threads: OpenMP team size for run (0: OMP_NUM_THREADS, else all cores).\n"
           "isa: 'scalar', 'avx2', 'avx512' ('' : the best this CPU runs).\n"
           "shapes: {input name: dims} binding dynamic dims.\n"
           "cache_dir: the JIT cache (default $XDG_CACHE_HOME/kiln or ~/.cache/kiln).\n"
           "engine: 'compiled', 'eager' (one kernel per op) or 'reference' (kiln's\n"
           "reference interpreter, the oracle).\n"
           "precision: 'f32', 'bf16' or 'auto' for Conv/MatMul/Gemm.\n"
           "deterministic: bit-identical results across runs and thread counts on\n"
           "one ISA (library calls whose threads may split a reduction run on one).")
      .def("get_inputs", &InferenceSession::GetInputs)
      .def("get_outputs", &InferenceSession::GetOutputs)
      .def("get_modelmeta", &InferenceSession::GetModelMeta, py::return_value_policy::copy,
           "The model's producer, domain, version, doc strings and metadata_props.")
      .def(
          "get_providers",
          [](const InferenceSession&) { return std::vector<std::string>{"CPUExecutionProvider"}; },
          "['CPUExecutionProvider']: kiln runs on this CPU, as ORT's CPU provider.")
      .def(
          "get_provider_options",
          [](const InferenceSession&) {
            py::dict d;
            d["CPUExecutionProvider"] = py::dict();
            return d;
          },
          "{'CPUExecutionProvider': {}}")
      .def("report", &InferenceSession::Report, "The compile report as a JSON string.")
      .def("explain", &InferenceSession::Explain,
           "The compile report as text: one line per kernel.")
      .def_property_readonly("warnings", &InferenceSession::warnings)
      .def_property_readonly("_last_run_bounds_ns", &InferenceSession::last_run_bounds_ns,
                             "Benchmarks only: (start, end) of the latest run()'s C++ Run\n"
                             "in time.perf_counter_ns() units.")
      .def_property_readonly("_last_call_bounds_ns", &InferenceSession::last_call_bounds_ns,
                             "Benchmarks only: when the latest run() entered and left the\n"
                             "module's code, in time.perf_counter_ns() units.")
      .def("_time_cpp_run", &InferenceSession::TimeCppRun, py::arg("input_feed"),
           py::arg("iterations"),
           "Benchmarks only: seconds per call of the C++ API's Run on these feeds.");
  PyObject* run = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(session.ptr()), &g_run_method);
  if (run == nullptr) throw py::error_already_set();
  session.attr("run") = py::reinterpret_steal<py::object>(run);
}
