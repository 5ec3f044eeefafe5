// File: tools/kilnc.cc — kiln's command line tool.
//   kilnc check DIR    run an ONNX test folder and compare with its outputs
//   kilnc run MODEL    run a model on given or seeded random inputs
// Models run on the reference interpreter until the compiler lands.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "frontend/onnx/importer.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "testing/reference/interpreter.h"
#include "tools/kilnc_lib.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

std::string WorkingDir() {
  const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
  return wd == nullptr ? "" : wd;
}

std::string FormatMs(absl::Duration d) {
  const double ms = absl::ToDoubleMilliseconds(d);
  if (ms >= 1000) return absl::StrFormat("%.2f s", ms / 1000);
  return absl::StrFormat("%.3g ms", ms);
}

std::string Sci(double v) { return absl::StrFormat("%.3g", v); }

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

int BadInput(absl::string_view command, absl::string_view message) {
  std::cerr << "kilnc " << command << ": " << message << "\n";
  return kExitBadInput;
}

std::string OutputName(const ir::Graph& g, size_t k) {
  return g.value(g.outputs()[k]).name;
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

// Loads prefix_0.pb, prefix_1.pb, ... until one is missing.
absl::StatusOr<std::vector<ir::Tensor>> LoadNumbered(const std::string& folder,
                                                     absl::string_view prefix) {
  std::vector<ir::Tensor> tensors;
  for (int k = 0;; ++k) {
    const std::string path = absl::StrCat(folder, "/", prefix, "_", k, ".pb");
    if (!IsFile(path)) break;
    absl::StatusOr<ir::Tensor> t = frontend::LoadTensorFile(path);
    if (!t.ok()) return t.status();
    tensors.push_back(*std::move(t));
  }
  return tensors;
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "warning: " << w << "\n";
}

std::string DescribeModel(const ir::Graph& g) {
  return absl::StrCat("opset ", g.opset(), ", ", g.nodes().size(), " nodes, ",
                      g.inputs().size(), " input(s), ", g.outputs().size(),
                      " output(s)");
}

// Whether `inputs` fit the graph's inputs (count, dtype, shape). On a
// mismatch, `why` says what differs.
bool InputsFit(const ir::Graph& g, const std::vector<ir::Tensor>& inputs,
               std::string* why) {
  if (inputs.size() != g.inputs().size()) {
    *why = absl::StrCat("the data set has ", inputs.size(),
                        " input(s), the model takes ", g.inputs().size());
    return false;
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ir::Value& v = g.value(g.inputs()[k]);
    if (v.dtype != inputs[k].dtype() || v.shape != inputs[k].shape()) {
      *why = absl::StrCat("input_", k, ".pb is ", inputs[k].TypeString(),
                          ", model input '", v.name, "' is ",
                          ir::DTypeName(v.dtype), ir::ShapeToString(v.shape));
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------- check

int RunCheck(const CheckOptions& opts) {
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

  absl::Time t0 = absl::Now();
  absl::StatusOr<frontend::ImportResult> imported =
      frontend::ImportModelFile(model_path);
  if (!imported.ok()) {
    return BadInput("check", imported.status().ToString());
  }
  std::cout << "kilnc check " << dir << "\n"
            << "model: " << DescribeModel(imported->graph) << "; import "
            << FormatMs(absl::Now() - t0) << "\n"
            << "engine: reference interpreter\n"
            << "tolerance: " << testing::DescribeTolerance(opts.tol) << "\n";
  bool warnings_shown = false;

  int outputs_compared = 0, outputs_failed = 0, runs_failed = 0;
  for (const std::string& ds : data_sets) {
    const std::string folder = dir + "/" + ds;
    absl::StatusOr<std::vector<ir::Tensor>> inputs =
        LoadNumbered(folder, "input");
    if (!inputs.ok()) return BadInput("check", inputs.status().ToString());
    absl::StatusOr<std::vector<ir::Tensor>> expected =
        LoadNumbered(folder, "output");
    if (!expected.ok()) return BadInput("check", expected.status().ToString());
    if (expected->empty()) {
      return BadInput("check", absl::StrCat("no output_0.pb in ", folder));
    }

    std::string why;
    if (!InputsFit(imported->graph, *inputs, &why)) {
      // Dynamic dims were bound to 1 at import: bind them to the data's.
      if (inputs->size() != imported->graph.inputs().size()) {
        return BadInput("check", absl::StrCat(ds, ": ", why));
      }
      frontend::ImportOptions io;
      for (size_t k = 0; k < inputs->size(); ++k) {
        io.input_shapes[imported->graph.value(imported->graph.inputs()[k]).name] =
            (*inputs)[k].shape();
      }
      t0 = absl::Now();
      absl::StatusOr<frontend::ImportResult> again =
          frontend::ImportModelFile(model_path, io);
      if (!again.ok()) {
        return BadInput("check", absl::StrCat(ds, ": ", why, "; re-import: ",
                                              again.status().ToString()));
      }
      std::cout << "re-imported with the shapes of " << ds << " in "
                << FormatMs(absl::Now() - t0) << "\n";
      imported = std::move(again);
      warnings_shown = false;
      if (!InputsFit(imported->graph, *inputs, &why)) {
        return BadInput("check", absl::StrCat(ds, ": ", why));
      }
    }
    if (!warnings_shown) {
      if (opts.verbose) PrintWarnings(imported->warnings);
      warnings_shown = true;
    }

    const ir::Graph& graph = imported->graph;
    t0 = absl::Now();
    absl::StatusOr<std::vector<ir::Tensor>> got =
        reference::Run(graph, *inputs);
    const absl::Duration run_time = absl::Now() - t0;
    if (!got.ok()) {
      std::cout << ds << ": FAIL run error after " << FormatMs(run_time)
                << ": " << got.status().ToString() << "\n";
      ++runs_failed;
      continue;
    }
    std::cout << ds << ": run " << FormatMs(run_time) << "\n";
    if (expected->size() > got->size()) {
      std::cout << "  FAIL  the model produced " << got->size()
                << " output(s), the data set expects " << expected->size()
                << "\n";
      ++outputs_failed;
    }
    const size_t n = std::min(expected->size(), got->size());
    for (size_t k = 0; k < n; ++k) {
      const ir::Tensor& ref = (*expected)[k];
      const ir::Tensor& out = (*got)[k];
      const testing::CompareResult m = testing::CompareTensors(out, ref, opts.tol);
      ++outputs_compared;
      if (!m.ok) ++outputs_failed;
      std::string line = absl::StrCat("  ", m.ok ? "PASS" : "FAIL",
                                      "  output ", k, " '",
                                      OutputName(graph, k), "' ",
                                      ref.TypeString());
      if (!m.dtype_match || !m.shape_match) {
        absl::StrAppend(&line, "  got ", out.TypeString(), " (",
                        !m.dtype_match ? "dtype" : "", 
                        !m.dtype_match && !m.shape_match ? " and " : "",
                        !m.shape_match ? "shape" : "", " differ)");
      }
      if (m.shape_match) {
        absl::StrAppend(
            &line, "  max|ref| ", Sci(m.max_abs_ref), "  max_abs ",
            Sci(m.max_abs_error), "  rel_to_max ",
            Sci(m.rel_to_max), "  max_elem_rel ",
            m.max_elementwise_rel ? Sci(*m.max_elementwise_rel) : "-",
            "  mismatches ", m.mismatches, "/", m.num_elements);
        if (!m.ok && m.max_abs_index >= 0) {
          absl::StrAppend(&line, "\n        worst at flat index ",
                          m.max_abs_index, ": got ",
                          Sci(out.GetAsDouble(m.max_abs_index)), ", expected ",
                          Sci(ref.GetAsDouble(m.max_abs_index)));
        }
      }
      std::cout << line << "\n";
      if (opts.verbose) {
        std::cout << "        got " << SummarizeTensor(OutputName(graph, k), out, 6)
                  << "\n        ref " << SummarizeTensor(OutputName(graph, k), ref, 6)
                  << "\n";
      }
    }
  }

  const bool ok = outputs_failed == 0 && runs_failed == 0;
  std::cout << "result: " << (ok ? "PASS" : "FAIL") << " ("
            << data_sets.size() << " data set(s), " << outputs_compared
            << " output(s) compared, " << outputs_failed << " failed"
            << (runs_failed ? absl::StrCat(", ", runs_failed, " run(s) failed")
                            : "")
            << ")\n";
  return ok ? kExitOk : kExitWrongResult;
}

// ---------------------------------------------------------------- run

int RunRun(const RunOptions& opts) {
  const std::string wd = WorkingDir();
  const std::string model_path = ResolvePath(opts.model, wd);
  if (!IsFile(model_path)) {
    return BadInput("run", absl::StrCat("no such model file: ", model_path));
  }

  frontend::ImportOptions io;
  for (const auto& [name, shape] : opts.shapes) io.input_shapes[name] = shape;
  absl::flat_hash_map<std::string, ir::Tensor> given;
  std::map<std::string, std::string> given_paths;
  for (const auto& [name, file] : opts.inputs) {
    const std::string path = ResolvePath(file, wd);
    absl::StatusOr<ir::Tensor> t = frontend::LoadTensorFile(path);
    if (!t.ok()) {
      return BadInput("run", absl::StrCat("--input ", name, ": ",
                                          t.status().ToString()));
    }
    auto it = io.input_shapes.find(name);
    if (it != io.input_shapes.end() && it->second != t->shape()) {
      return BadInput("run", absl::StrCat(
                                 "--shape ", name, "=",
                                 ir::ShapeToString(it->second),
                                 " contradicts --input ", name, " of shape ",
                                 ir::ShapeToString(t->shape())));
    }
    io.input_shapes[name] = t->shape();
    given_paths[name] = path;
    given.emplace(name, *std::move(t));
  }

  absl::Time t0 = absl::Now();
  absl::StatusOr<frontend::ImportResult> imported =
      frontend::ImportModelFile(model_path, io);
  const absl::Duration import_time = absl::Now() - t0;
  if (!imported.ok()) return BadInput("run", imported.status().ToString());
  PrintWarnings(imported->warnings);
  const ir::Graph& graph = imported->graph;

  std::vector<std::string> input_names;
  for (ir::ValueId id : graph.inputs()) input_names.push_back(graph.value(id).name);
  auto is_input = [&](const std::string& name) {
    return std::find(input_names.begin(), input_names.end(), name) !=
           input_names.end();
  };
  for (const auto& [name, file] : opts.inputs) {
    if (!is_input(name)) {
      return BadInput("run", absl::StrCat("--input ", name,
                                          ": the model has no input '", name,
                                          "'; its inputs: ",
                                          absl::StrJoin(input_names, ", ")));
    }
  }
  for (const auto& [name, shape] : opts.shapes) {
    if (!is_input(name)) {
      return BadInput("run", absl::StrCat("--shape ", name,
                                          ": the model has no input '", name,
                                          "'; its inputs: ",
                                          absl::StrJoin(input_names, ", ")));
    }
  }

  std::cout << "kilnc run " << model_path << "\n"
            << "model: " << DescribeModel(graph) << "; engine: reference "
            << "interpreter\n";
  std::vector<ir::Tensor> inputs;
  for (size_t k = 0; k < graph.inputs().size(); ++k) {
    const ir::Value& v = graph.value(graph.inputs()[k]);
    auto it = given.find(v.name);
    std::string source;
    if (it != given.end()) {
      if (it->second.dtype() != v.dtype) {
        return BadInput("run", absl::StrCat(
                                   "--input ", v.name, " is ",
                                   it->second.TypeString(), ", the model wants ",
                                   ir::DTypeName(v.dtype)));
      }
      inputs.push_back(it->second);
      source = absl::StrCat("from ", given_paths[v.name]);
    } else {
      if (!v.shape_known) {
        return BadInput("run", absl::StrCat("input '", v.name,
                                            "' has an unknown rank; give it "
                                            "with --shape or --input"));
      }
      // Decorrelate inputs: each gets its own stream from the seed.
      absl::StatusOr<ir::Tensor> t = RandomTensor(
          v.dtype, v.shape, opts.seed + 0x9E3779B97F4A7C15ull * k,
          opts.int_low, opts.int_high);
      if (!t.ok()) {
        return BadInput("run", absl::StrCat("input '", v.name, "': ",
                                            t.status().message()));
      }
      inputs.push_back(*std::move(t));
      source = absl::StrCat("random, seed ", opts.seed);
    }
    std::cout << "input " << k << " "
              << SummarizeTensor(v.name, inputs.back(), 0) << "  (" << source
              << ")\n";
  }

  t0 = absl::Now();
  absl::StatusOr<std::vector<ir::Tensor>> outputs =
      reference::Run(graph, inputs);
  const absl::Duration run_time = absl::Now() - t0;
  if (!outputs.ok()) {
    std::cerr << "kilnc run: " << outputs.status().ToString() << "\n";
    return kExitWrongResult;
  }
  for (size_t k = 0; k < outputs->size(); ++k) {
    std::cout << "output " << k << " "
              << SummarizeTensor(OutputName(graph, k), (*outputs)[k],
                                 opts.num_values)
              << "\n";
  }
  std::cout << "time: import " << FormatMs(import_time) << ", run "
            << FormatMs(run_time) << "\n";

  if (!opts.save_outputs.empty()) {
    const std::string out_dir = ResolvePath(opts.save_outputs, wd);
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) {
      return BadInput("run", absl::StrCat("cannot create ", out_dir, ": ",
                                          ec.message()));
    }
    auto save = [&](const ir::Tensor& t, const std::string& name,
                    const std::string& file) -> absl::Status {
      absl::StatusOr<std::string> bytes = frontend::SerializeTensor(t, name);
      if (!bytes.ok()) return bytes.status();
      const std::string path = out_dir + "/" + file;
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("cannot write ", path));
      }
      const size_t written = std::fwrite(bytes->data(), 1, bytes->size(), f);
      const bool closed = std::fclose(f) == 0;
      if (written != bytes->size() || !closed) {
        return absl::InvalidArgumentError(absl::StrCat("cannot write ", path));
      }
      return absl::OkStatus();
    };
    for (size_t k = 0; k < inputs.size(); ++k) {
      absl::Status s = save(inputs[k], graph.value(graph.inputs()[k]).name,
                            absl::StrCat("input_", k, ".pb"));
      if (!s.ok()) return BadInput("run", s.ToString());
    }
    for (size_t k = 0; k < outputs->size(); ++k) {
      absl::Status s = save((*outputs)[k], OutputName(graph, k),
                            absl::StrCat("output_", k, ".pb"));
      if (!s.ok()) return BadInput("run", s.ToString());
    }
    std::cout << "saved " << inputs.size() << " input(s) and "
              << outputs->size() << " output(s) to " << out_dir << "\n";
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
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
      return RunCheck(cmd->check);
    case Command::Kind::kRun:
      return RunRun(cmd->run);
  }
  return kExitBadInput;
}

}  // namespace
}  // namespace kiln::tools

int main(int argc, char** argv) { return kiln::tools::Main(argc, argv); }
