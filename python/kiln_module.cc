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
// Run without a copy (ir::Tensor::Borrow); outputs are returned as numpy
// arrays over the tensors Run made (no copy either). Run and compiles release
// the GIL. No C++ exception and no absl::Status crosses into Python
// unconverted.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
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
    for (const TensorInfo& t : inputs_) input_dtypes_.push_back(NumpyDType(t.dtype));
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

  // ORT's run(output_names, input_feed, run_options=None).
  py::list Run(const py::object& output_names, const py::object& feeds,
               const py::object& run_options) const {
    if (!run_options.is_none()) {
      throw py::type_error("kiln.InferenceSession.run takes no RunOptions");
    }
    const std::vector<int> selected = SelectOutputs(output_names);
    std::vector<py::array> keep;  // holds the fed arrays while Run reads them
    std::vector<ir::Tensor> inputs = Feeds(feeds, &keep);
    absl::StatusOr<std::vector<ir::Tensor>> result;
    {
      py::gil_scoped_release release;
      const int64_t t0 = SteadyNs();
      result = RunTensors(inputs);
      const int64_t t1 = SteadyNs();
      last_run_start_ns_.store(t0, std::memory_order_relaxed);
      last_run_end_ns_.store(t1, std::memory_order_relaxed);
    }
    if (!result.ok()) RaiseRunError(result.status());
    std::vector<std::shared_ptr<ir::Tensor>> outs;
    outs.reserve(result->size());
    for (ir::Tensor& t : *result) outs.push_back(std::make_shared<ir::Tensor>(std::move(t)));
    py::list list;
    for (int o : selected) list.append(ToArray(outs[o]));
    return list;
  }

  // The C++ API's Run on the same feeds, `iterations` times with the GIL
  // released, timed around each call alone: seconds per call. For the
  // Python-overhead benchmark (benchmarks/python_overhead.py).
  std::vector<double> TimeCppRun(const py::object& feeds, int iterations) const {
    std::vector<py::array> keep;
    std::vector<ir::Tensor> inputs = Feeds(feeds, &keep);
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

  absl::StatusOr<std::vector<ir::Tensor>> RunTensors(const std::vector<ir::Tensor>& in) const {
    if (model_ != nullptr) return model_->Run(in);
    try {
      return interp::Run(*graph_, in);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory in kiln's reference interpreter");
    }
  }

  // Output indices for run's output_names (None: all, in order).
  std::vector<int> SelectOutputs(const py::object& names) const {
    std::vector<int> selected;
    if (names.is_none()) {
      for (size_t o = 0; o < outputs_.size(); ++o) selected.push_back(static_cast<int>(o));
      return selected;
    }
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

  // The feed dict as the model's positional inputs, each checked.
  std::vector<ir::Tensor> Feeds(const py::object& feeds, std::vector<py::array>* keep) const {
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
    std::vector<ir::Tensor> tensors;
    tensors.reserve(inputs_.size());
    keep->reserve(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const TensorInfo& info = inputs_[i];
      PyObject* value = PyDict_GetItemString(dict.ptr(), info.name.c_str());
      if (value == nullptr) {
        throw py::value_error(absl::StrCat("run: missing input '", info.name, "' (",
                                           ir::TypeString(info.dtype, info.shape),
                                           "); the model's inputs are ", NameList(inputs_)));
      }
      tensors.push_back(FeedTensor(info, input_dtypes_[i], py::reinterpret_borrow<py::object>(value),
                               keep));
    }
    return tensors;
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
                           const py::object& value, std::vector<py::array>* keep) {
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
    keep->push_back(a);
    return ir::Tensor::Borrow(info.dtype, shape, a.data());
  }

  // A numpy array over an output tensor, which the array keeps alive.
  static py::array ToArray(const std::shared_ptr<ir::Tensor>& t) {
    auto* holder = new std::shared_ptr<ir::Tensor>(t);
    py::capsule owner(holder, [](void* p) { delete static_cast<std::shared_ptr<ir::Tensor>*>(p); });
    std::vector<py::ssize_t> shape(t->shape().begin(), t->shape().end());
    return py::array(NumpyDType(t->dtype()), shape, t->raw_data(), owner);
  }

  std::shared_ptr<const CompiledModel> model_;
  std::shared_ptr<const ir::Graph> graph_;  // engine "reference"
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<py::dtype> input_dtypes_;
  std::string path_;  // the model file ("" for a model given as bytes)
  std::optional<frontend::ModelMetadata> metadata_;
  std::vector<std::string> warnings_;
  mutable std::atomic<int64_t> last_run_start_ns_{0}, last_run_end_ns_{0};
};

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

  py::class_<InferenceSession>(m, "InferenceSession",
                               "An ONNX model compiled by kiln for this CPU.")
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
      .def("run", &InferenceSession::Run, py::arg("output_names"), py::arg("input_feed"),
           py::arg("run_options") = py::none(),
           "Runs the model on {input name: numpy array}; returns the outputs named\n"
           "(all when output_names is None) as numpy arrays.")
      .def("report", &InferenceSession::Report, "The compile report as a JSON string.")
      .def("explain", &InferenceSession::Explain,
           "The compile report as text: one line per kernel.")
      .def_property_readonly("warnings", &InferenceSession::warnings)
      .def_property_readonly("_last_run_bounds_ns", &InferenceSession::last_run_bounds_ns,
                             "Benchmarks only: (start, end) of the latest run()'s C++ Run\n"
                             "in time.perf_counter_ns() units.")
      .def("_time_cpp_run", &InferenceSession::TimeCppRun, py::arg("input_feed"),
           py::arg("iterations"),
           "Benchmarks only: seconds per call of the C++ API's Run on these feeds.");
}
