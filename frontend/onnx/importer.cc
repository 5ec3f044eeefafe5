// The ONNX model loader: parse, validate versions and ops, inline external
// data, bind dynamic input dims, run libonnx's checker and shape inference,
// then import the graph. libonnx's exceptions stop here.
#include "frontend/onnx/importer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "frontend/onnx/dynamic_quantize_lstm.h"
#include "frontend/onnx/fold_shapes.h"
#include "ir/message.h"
#include "frontend/onnx/graph_importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "ir/status_macros.h"
#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

// After libonnx: its parser.h has enumerators that <sys/mman.h> defines as macros.
#include <sys/mman.h>

namespace kiln::frontend {
namespace {

using onnx_internal::DescribeNode;

constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 10;
constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 18;
constexpr char kMlDomain[] = "ai.onnx.ml";

bool IsDefaultDomain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

absl::Status WithSource(const absl::Status& s, absl::string_view source) {
  return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
}

// One line: libonnx appends "\n\n==> Context: ..." to its messages.
std::string OneLine(const char* what) {
  return absl::StrReplaceAll(what, {{"\n\n==> ", "; "}, {"\n", " "}});
}

// Calls `fn` on every graph of the model: the main graph and, recursively,
// every GRAPH / GRAPHS attribute.
void ForEachGraph(onnx::GraphProto* g,
                  const std::function<void(onnx::GraphProto*)>& fn) {
  fn(g);
  for (onnx::NodeProto& node : *g->mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) ForEachGraph(a.mutable_g(), fn);
      for (onnx::GraphProto& sub : *a.mutable_graphs()) ForEachGraph(&sub, fn);
    }
  }
}

absl::Status ModelParseError() {
  return absl::InvalidArgumentError(
      "not a valid ONNX model (protobuf parsing failed: truncated or not "
      "an ONNX file)");
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(
        "no such file (or not a regular file)");
  }
  if (st.st_size > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        st.st_size, " bytes; protobuf files are limited to 2 GiB (store weights as "
        "external data)"));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"),
                                          &std::fclose);
  if (f == nullptr) {
    return absl::NotFoundError("cannot open");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  if (!bytes.empty() &&
      std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    return absl::DataLossError("read failed");
  }
  return bytes;
}

// --- Reading a model file with its big weights copied once. ---
//
// The file is mapped; the ModelProto is parsed from a copy of its bytes in
// which each large floating-point raw_data of a top-level initializer is
// replaced by DetachLargeInitializers' placeholder, and each such raw_data
// is copied from the mapping straight into its tensor (whose pages of the
// mapping are then dropped). A 400 MB model is copied once, not three times
// (read, protobuf, tensor), and memory peaks near its size.

constexpr int64_t kDetachMinBytes = int64_t{64} << 10;

bool ReadVarint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    const uint8_t b = *(*p)++;
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void WriteVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// One field of a serialized message: its number and wire type, where it
// starts (tag included) and, for length-delimited fields, its payload.
struct WireField {
  uint32_t number = 0;
  int type = 0;
  const uint8_t* begin = nullptr;
  const uint8_t* payload = nullptr;
  const uint8_t* end = nullptr;
  uint64_t value = 0;  // varint fields
};

// Calls `fn` on every field of the message in [p, end); false on bytes that
// are not plain wire format (groups included: ONNX has none).
template <typename Fn>
bool ForEachField(const uint8_t* p, const uint8_t* end, Fn fn) {
  while (p < end) {
    WireField f;
    f.begin = p;
    uint64_t tag = 0;
    if (!ReadVarint(&p, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > (1u << 29)) {
      return false;
    }
    f.number = static_cast<uint32_t>(tag >> 3);
    f.type = static_cast<int>(tag & 7);
    switch (f.type) {
      case 0:
        if (!ReadVarint(&p, end, &f.value)) return false;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      case 2: {
        uint64_t len = 0;
        if (!ReadVarint(&p, end, &len) || len > static_cast<uint64_t>(end - p)) {
          return false;
        }
        f.payload = p;
        p += len;
        break;
      }
      default:
        return false;
    }
    f.end = p;
    if (f.payload == nullptr) f.payload = f.end;
    fn(f);
  }
  return true;
}

void AppendField(uint32_t number, absl::string_view payload, std::string* out) {
  WriteVarint((uint64_t{number} << 3) | 2, out);
  WriteVarint(payload.size(), out);
  out->append(payload.data(), payload.size());
}

struct DetachedRange {
  std::string name;
  const uint8_t* data;
  size_t size;
};

// A TensorProto without its large raw_data (recorded in `ranges`).
bool RewriteTensor(const uint8_t* p, const uint8_t* end, std::string* out,
                   std::vector<DetachedRange>* ranges) {
  int64_t data_type = 0;
  std::string name;
  const WireField* raw = nullptr;
  WireField raw_field;
  bool external = false;
  if (!ForEachField(p, end, [&](const WireField& f) {
        if (f.number == 2 && f.type == 0) data_type = static_cast<int64_t>(f.value);
        if (f.number == 8 && f.type == 2) name.assign(f.payload, f.end);
        if (f.number == 9 && f.type == 2) {
          raw_field = f;
          raw = &raw_field;
        }
        if (f.number == 14 && f.type == 0) external = f.value != 0;
      })) {
    return false;
  }
  const bool floating = data_type == onnx::TensorProto::FLOAT ||
                        data_type == onnx::TensorProto::FLOAT16 ||
                        data_type == onnx::TensorProto::BFLOAT16 ||
                        data_type == onnx::TensorProto::DOUBLE;
  if (!floating || external || raw == nullptr || name.empty() ||
      raw->end - raw->payload < kDetachMinBytes) {
    out->append(reinterpret_cast<const char*>(p), end - p);
    return true;
  }
  // Every raw_data field of the tensor: the last one wins in protobuf.
  ForEachField(p, end, [&](const WireField& f) {
    if (f.number == 9 && f.type == 2) {
      if (f.begin == raw->begin) AppendField(9, absl::string_view("\0", 1), out);
      return;
    }
    out->append(reinterpret_cast<const char*>(f.begin), f.end - f.begin);
  });
  ranges->push_back({std::move(name), raw->payload,
                     static_cast<size_t>(raw->end - raw->payload)});
  return true;
}

// `map` as a ModelProto and its detached weights; nullopt when the bytes do
// not have the expected shape (the caller then parses them as usual).
std::optional<std::pair<onnx::ModelProto, onnx_internal::DetachedTensors>>
ParseMappedModel(const uint8_t* map, size_t size, int64_t max_tensor_bytes) {
  std::string model_bytes;
  std::vector<DetachedRange> ranges;
  bool ok = true;
  ok = ForEachField(map, map + size, [&](const WireField& f) {
    if (!ok) return;
    if (f.number != 7 || f.type != 2) {
      model_bytes.append(reinterpret_cast<const char*>(f.begin), f.end - f.begin);
      return;
    }
    std::string graph;
    ok = ForEachField(f.payload, f.end, [&](const WireField& g) {
      if (!ok) return;
      if (g.number != 5 || g.type != 2) {
        graph.append(reinterpret_cast<const char*>(g.begin), g.end - g.begin);
        return;
      }
      std::string tensor;
      ok = RewriteTensor(g.payload, g.end, &tensor, &ranges);
      AppendField(5, tensor, &graph);
    }) && ok;
    AppendField(7, graph, &model_bytes);
  }) && ok;
  if (!ok || model_bytes.size() > static_cast<size_t>(INT_MAX)) return std::nullopt;
  std::pair<onnx::ModelProto, onnx_internal::DetachedTensors> result;
  onnx::ModelProto& model = result.first;
  if (!model.ParseFromString(model_bytes)) return std::nullopt;
  std::string().swap(model_bytes);
  // Rewritten tensors keep their order: the k-th placeholder named like the
  // k-th range is its tensor.
  std::vector<onnx::TensorProto*> owners;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (owners.size() < ranges.size() && t.name() == ranges[owners.size()].name &&
        t.raw_data() == absl::string_view("\0", 1)) {
      owners.push_back(&t);
    }
  }
  if (owners.size() != ranges.size()) return std::nullopt;
  const long page = sysconf(_SC_PAGESIZE);
  for (size_t k = 0; k < ranges.size(); ++k) {
    const DetachedRange& r = ranges[k];
    onnx::TensorProto& t = *owners[k];
    absl::StatusOr<ir::DType> dtype =
        onnx_internal::DTypeFromOnnx(t.data_type(), r.name);
    ir::Shape dims(t.dims().begin(), t.dims().end());
    absl::StatusOr<int64_t> bytes =
        dtype.ok() ? onnx_internal::CheckedByteSize(dims, *dtype, max_tensor_bytes, r.name)
                   : absl::StatusOr<int64_t>(dtype.status());
    if (!bytes.ok() || static_cast<size_t>(*bytes) != r.size || t.has_segment() ||
        result.second.contains(r.name)) {
      // Not detached: the importer reports whatever is wrong, as always.
      t.set_raw_data(r.data, r.size);
      continue;
    }
    result.second.emplace(r.name, std::make_shared<const ir::Tensor>(
                                      ir::Tensor::FromBytes(*dtype, std::move(dims), r.data)));
    const uintptr_t from = (reinterpret_cast<uintptr_t>(r.data) + page - 1) / page * page;
    const uintptr_t to = (reinterpret_cast<uintptr_t>(r.data) + r.size) / page * page;
    if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
  return result;
}

absl::StatusOr<onnx::ModelProto> ParseModelFile(const std::string& path);

// Reads and parses a model file (see above); the ordinary parse when the
// file cannot be mapped or is not plain wire format.
absl::StatusOr<std::pair<onnx::ModelProto, onnx_internal::DetachedTensors>> ReadModelFile(
    const std::string& path, int64_t max_tensor_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError("no such file (or not a regular file)");
  }
  if (st.st_size > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        st.st_size, " bytes; protobuf files are limited to 2 GiB (store weights as "
        "external data)"));
  }
  if (st.st_size > 0) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError("cannot open");
    void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map != MAP_FAILED) {
      madvise(map, static_cast<size_t>(st.st_size), MADV_SEQUENTIAL);
      auto parsed = ParseMappedModel(static_cast<const uint8_t*>(map),
                                     static_cast<size_t>(st.st_size), max_tensor_bytes);
      munmap(map, static_cast<size_t>(st.st_size));
      if (parsed.has_value()) return *std::move(parsed);
    }
  }
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModelFile(path));
  return std::make_pair(std::move(model), onnx_internal::DetachedTensors());
}

// Parses the model straight from the file (no second copy of its bytes in
// memory: a 400 MB model peaks at its parsed size, not twice that).
absl::StatusOr<onnx::ModelProto> ParseModelFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(
        "no such file (or not a regular file)");
  }
  if (st.st_size > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        st.st_size, " bytes; protobuf files are limited to 2 GiB (store weights as "
        "external data)"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError("cannot open");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  google::protobuf::io::FileInputStream stream(fd, /*block_size=*/1 << 20);
  onnx::ModelProto model;
  const bool parsed = model.ParseFromZeroCopyStream(&stream);
  if (stream.GetErrno() != 0) return absl::DataLossError("read failed");
  if (!parsed) return ModelParseError();
  return model;
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Domain -> version, with "ai.onnx" folded into "" (in the model too).
absl::StatusOr<std::map<std::string, int64_t>> NormalizeOpsets(
    onnx::ModelProto* model) {
  std::map<std::string, int64_t> opsets;
  for (const onnx::OperatorSetIdProto& op : model->opset_import()) {
    const std::string domain = IsDefaultDomain(op.domain()) ? "" : op.domain();
    auto [it, inserted] = opsets.emplace(domain, op.version());
    if (!inserted && it->second != op.version()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "opset imports for domain '", domain, "' disagree (versions ",
          it->second, " and ", op.version(), ")"));
    }
  }
  model->clear_opset_import();
  for (const auto& [domain, version] : opsets) {
    onnx::OperatorSetIdProto* op = model->add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  auto it = opsets.find("");
  if (it == opsets.end()) {
    // Valid only when no node uses the default domain (e.g. ONNX's training
    // models, all ai.onnx.preview.training ops): those are then reported as
    // unknown ops, the same as any other domain kiln lacks.
    bool uses_default = false;
    ForEachGraph(model->mutable_graph(), [&](onnx::GraphProto* g) {
      for (const onnx::NodeProto& n : g->node()) {
        uses_default |= IsDefaultDomain(n.domain());
      }
    });
    if (uses_default) {
      return absl::InvalidArgumentError(
          "the model uses default-domain ops but has no opset import for the "
          "default ONNX domain");
    }
    opsets[""] = kMaxOpset;
    return opsets;
  }
  if (it->second < 1 || it->second > kMaxOpset) {
    return absl::UnimplementedError(absl::StrCat(
        "default-domain opset ", it->second, " is not supported (kiln reads "
        "opsets ", kMinOpset, " to ", kMaxOpset, ")"));
  }
  ForEachGraph(model->mutable_graph(), [](onnx::GraphProto* g) {
    for (onnx::NodeProto& node : *g->mutable_node()) {
      if (node.domain() == "ai.onnx") node.clear_domain();
    }
  });
  return opsets;
}

// Ops that libonnx's schema registry does not know for the model's opsets,
// in every graph; custom domains count as unknown.
void CollectUnknownOps(const onnx::GraphProto& g,
                       const std::map<std::string, int64_t>& opsets,
                       const std::string& where,
                       std::vector<std::string>* unknown,
                       std::set<std::string>* used_domains) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    const std::string desc = absl::StrCat(DescribeNode(node, i), where);
    used_domains->insert(node.domain());
    const onnx::OpSchema* schema = nullptr;
    if (node.domain().empty() || node.domain() == kMlDomain) {
      auto it = opsets.find(node.domain());
      if (it != opsets.end() && it->second <= INT_MAX && it->second >= 0) {
        schema = onnx::OpSchemaRegistry::Schema(
            node.op_type(), static_cast<int>(it->second), node.domain());
      }
    }
    if (schema == nullptr) unknown->push_back(desc);
    for (const onnx::AttributeProto& a : node.attribute()) {
      const std::string sub_where =
          absl::StrCat(" in subgraph '", a.name(), "' of ", desc);
      if (a.has_g()) {
        CollectUnknownOps(a.g(), opsets, sub_where, unknown, used_domains);
      }
      for (const onnx::GraphProto& sub : a.graphs()) {
        CollectUnknownOps(sub, opsets, sub_where, unknown, used_domains);
      }
    }
  }
}

// Reads every tensor's external data into it, then checks that each tensor
// (initializers and tensor attributes, in every graph) holds exactly the data
// its dims promise: libonnx's inference reads shape inputs by their dims.
// The top-level initializers already in `detached` (checked when they were
// read) keep their placeholder.
absl::Status InlineAndCheckTensorData(onnx::ModelProto* model,
                                      const onnx_internal::DetachedTensors& detached,
                                      const ImportOptions& options) {
  absl::Status status;
  ForEachGraph(model->mutable_graph(), [&](onnx::GraphProto* g) {
    if (!status.ok()) return;
    for (onnx::TensorProto& t : *g->mutable_initializer()) {
      if (g == model->mutable_graph() && detached.contains(t.name()) &&
          t.raw_data() == absl::string_view("\0", 1)) {
        continue;
      }
      const std::string what = absl::StrCat("initializer '", t.name(), "'");
      status = onnx_internal::InlineExternalData(
          &t, options.base_dir, options.max_tensor_bytes, what);
      if (status.ok()) status = onnx_internal::CheckTensorDataSize(t, what);
      if (!status.ok()) return;
    }
    for (int i = 0; i < g->node_size(); ++i) {
      onnx::NodeProto* node = g->mutable_node(i);
      for (onnx::AttributeProto& a : *node->mutable_attribute()) {
        const std::string what = absl::StrCat("attribute '", a.name(),
                                              "' of ", DescribeNode(*node, i));
        if (a.has_t()) {
          status = onnx_internal::InlineExternalData(
              a.mutable_t(), options.base_dir, options.max_tensor_bytes, what);
          if (status.ok()) status = onnx_internal::CheckTensorDataSize(a.t(), what);
          if (!status.ok()) return;
        }
        for (onnx::TensorProto& t : *a.mutable_tensors()) {
          status = onnx_internal::InlineExternalData(
              &t, options.base_dir, options.max_tensor_bytes, what);
          if (status.ok()) status = onnx_internal::CheckTensorDataSize(t, what);
          if (!status.ok()) return;
        }
      }
    }
  });
  return status;
}

std::string DimName(const std::string& input, int i,
                    const onnx::TensorShapeProto::Dimension& d) {
  return d.has_dim_param() && !d.dim_param().empty()
             ? absl::StrCat("input '", input, "' dim ", i, " ('",
                            d.dim_param(), "')")
             : absl::StrCat("input '", input, "' dim ", i);
}

// Gives every graph input a static shape (ImportOptions::input_shapes, else
// 1 per dynamic dim) before shape inference, and substitutes the bound
// symbols in the graph's declared output and value_info shapes.
absl::Status BindInputShapes(onnx::GraphProto* g, const ImportOptions& options,
                             std::vector<DeclaredInput>* declared_inputs,
                             std::vector<std::string>* warnings) {
  absl::flat_hash_set<std::string> initializers;
  for (const onnx::TensorProto& t : g->initializer()) {
    initializers.insert(t.name());
  }
  std::vector<std::string> input_names;
  for (const onnx::ValueInfoProto& in : g->input()) {
    if (!initializers.contains(in.name())) input_names.push_back(in.name());
  }
  for (const auto& [name, shape] : options.input_shapes) {
    if (std::find(input_names.begin(), input_names.end(), name) ==
        input_names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ImportOptions::input_shapes names '", name,
          "', which is not a graph input (inputs: ",
          absl::StrJoin(input_names, ", "), ")"));
    }
    for (int64_t d : shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("ImportOptions::input_shapes['", name, "'] = ",
                         ir::ShapeToString(shape), " has a negative dim"));
      }
    }
  }
  // The same exporters write -1 in outputs and value_info: unknown there too.
  for (auto* infos : {g->mutable_output(), g->mutable_value_info()}) {
    for (onnx::ValueInfoProto& v : *infos) {
      if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
      for (onnx::TensorShapeProto::Dimension& d :
           *v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
        if (d.has_dim_value() && d.dim_value() == -1) d.clear_dim_value();
      }
    }
  }
  std::vector<std::string> bound_to_one;
  std::vector<std::string> minus_one_dims;
  std::map<std::string, int64_t> symbols;
  std::set<std::string> conflicting;
  for (onnx::ValueInfoProto& in : *g->mutable_input()) {
    if (initializers.contains(in.name())) continue;
    if (!in.type().has_tensor_type()) continue;  // rejected by the importer
    onnx::TypeProto::Tensor* tt = in.mutable_type()->mutable_tensor_type();
    auto given_it = options.input_shapes.find(in.name());
    const ir::Shape* given =
        given_it == options.input_shapes.end() ? nullptr : &given_it->second;
    // Paddle's and some TF exporters write an unknown dim as dim_value -1
    // (ONNX wants dim_param or nothing); ONNX Runtime reads it as unknown,
    // and so does kiln. Any other negative value is refused below.
    for (int i = 0; tt->has_shape() && i < tt->shape().dim_size(); ++i) {
      onnx::TensorShapeProto::Dimension* d = tt->mutable_shape()->mutable_dim(i);
      if (d->has_dim_value() && d->dim_value() == -1) {
        d->clear_dim_value();
        minus_one_dims.push_back(DimName(in.name(), i, *d));
      }
    }
    DeclaredInput& record = declared_inputs->emplace_back();
    record.name = in.name();
    record.ranked = tt->has_shape();
    for (int i = 0; tt->has_shape() && i < tt->shape().dim_size(); ++i) {
      const onnx::TensorShapeProto::Dimension& d = tt->shape().dim(i);
      record.shape.push_back(d.has_dim_value() ? d.dim_value() : ir::kDynamicDim);
      record.dim_params.push_back(d.has_dim_param() ? d.dim_param() : "");
    }
    if (!tt->has_shape()) {
      if (given == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "graph input '", in.name(), "' has no shape (not even a rank); "
            "give one in ImportOptions::input_shapes"));
      }
      onnx::TensorShapeProto* s = tt->mutable_shape();
      for (int64_t d : *given) s->add_dim()->set_dim_value(d);
      continue;
    }
    onnx::TensorShapeProto* shape = tt->mutable_shape();
    ir::Shape declared;
    for (const auto& d : shape->dim()) {
      declared.push_back(d.has_dim_value() ? d.dim_value() : ir::kDynamicDim);
    }
    if (given != nullptr && given->size() != declared.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ImportOptions::input_shapes['", in.name(), "'] = ",
          ir::ShapeToString(*given), " has rank ", given->size(),
          " but the model declares ", ir::ShapeToString(declared)));
    }
    for (int i = 0; i < shape->dim_size(); ++i) {
      onnx::TensorShapeProto::Dimension* d = shape->mutable_dim(i);
      if (d->has_dim_value()) {
        if (d->dim_value() < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("graph input '", in.name(), "' dim ", i,
                           " is negative (", d->dim_value(), ")"));
        }
        if (given != nullptr && (*given)[i] != d->dim_value()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ImportOptions::input_shapes['", in.name(), "'] = ",
              ir::ShapeToString(*given), " does not match the model's ",
              ir::ShapeToString(declared), " at dim ", i));
        }
        continue;
      }
      const int64_t v = given != nullptr ? (*given)[i] : 1;
      if (given == nullptr) {
        bound_to_one.push_back(absl::StrCat(DimName(in.name(), i, *d), " -> 1"));
      }
      if (d->has_dim_param() && !d->dim_param().empty()) {
        auto [it, inserted] = symbols.emplace(d->dim_param(), v);
        if (!inserted && it->second != v) conflicting.insert(d->dim_param());
      }
      d->set_dim_value(v);
    }
  }
  if (!minus_one_dims.empty()) {
    warnings->push_back(absl::StrCat(
        "input dims declared as -1 read as dynamic: ", absl::StrJoin(minus_one_dims, ", ")));
  }
  if (!bound_to_one.empty()) {
    warnings->push_back(absl::StrCat(
        "dynamic input dims bound to 1 (set ImportOptions::input_shapes to "
        "choose): ",
        absl::StrJoin(bound_to_one, ", ")));
  }
  for (const std::string& sym : conflicting) {
    warnings->push_back(absl::StrCat(
        "dim '", sym, "' is bound to different sizes in different inputs; "
        "it stays dynamic elsewhere"));
    symbols.erase(sym);
  }
  auto substitute = [&](onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) {
      return;
    }
    for (auto& d :
         *v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      if (!d.has_dim_param()) continue;
      auto it = symbols.find(d.dim_param());
      if (it != symbols.end()) d.set_dim_value(it->second);
    }
  };
  for (onnx::ValueInfoProto& v : *g->mutable_output()) substitute(v);
  for (onnx::ValueInfoProto& v : *g->mutable_value_info()) substitute(v);
  return absl::OkStatus();
}

// libonnx 1.12's checker knows IR <= 8 and opsets <= 17: newer models are
// checked as IR 8, and for opset 18 its objections (which may come from
// opset-18 changes it has never heard of) become warnings.
absl::Status RunChecker(onnx::ModelProto* model, int64_t opset,
                        std::vector<std::string>* warnings) {
  const int64_t known_ir = onnx::Version::IR_VERSION;
  const auto& ranges =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range = ranges.find("");
  const int64_t known_opset = range == ranges.end() ? 17 : range->second.second;
  const int64_t ir = model->ir_version();
  if (ir > known_ir) {
    warnings->push_back(absl::StrCat(
        "IR version ", ir, " is newer than libonnx's checker knows (",
        known_ir, "); checked as IR ", known_ir));
    model->set_ir_version(known_ir);
  }
  std::string failure;
  try {
    onnx::checker::check_model(*model);
  } catch (const std::exception& e) {
    failure = OneLine(e.what());
  }
  model->set_ir_version(ir);
  if (failure.empty()) return absl::OkStatus();
  if (opset > known_opset) {
    warnings->push_back(absl::StrCat(
        "ONNX checker (which knows opsets up to ", known_opset,
        ") objects to this opset-", opset, " model: ", failure,
        "; continuing"));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("ONNX checker rejects the model: ", failure));
}

// "[2,12]", "[2,?]" for a tensor type's shape.
std::string DimsText(const onnx::TensorShapeProto& shape) {
  std::vector<std::string> dims;
  for (const auto& d : shape.dim()) {
    dims.push_back(d.has_dim_value() ? absl::StrCat(d.dim_value()) : std::string("?"));
  }
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

bool StaticShape(const onnx::TypeProto& t) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return false;
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return false;
  }
  return true;
}

// The declared types of the outputs of every graph (the main graph, If
// branches, Loop and Scan bodies), taken out of the model so that shape
// inference types each output from what computes it. A declared type that
// contradicts inference made libonnx drop the inference of the node that
// produces it (or, in a subgraph, of the If / Loop / Scan that holds it),
// and kiln then lowered the node into a buffer of the declared shape or
// element type. Keyed by value name (values are named once across a model
// and its subgraphs; a model that names one twice is refused by the graph
// verifier).
struct DeclaredOutput {
  std::optional<onnx::TensorShapeProto> shape;
  int32_t elem_type = 0;  // 0: not declared
};
using DeclaredOutputs = absl::flat_hash_map<std::string, DeclaredOutput>;

DeclaredOutputs TakeDeclaredOutputTypes(onnx::GraphProto* main) {
  DeclaredOutputs declared;
  ForEachGraph(main, [&](onnx::GraphProto* g) {
    for (onnx::ValueInfoProto& out : *g->mutable_output()) {
      onnx::TypeProto* t = out.mutable_type();
      if (!t->has_tensor_type()) continue;
      onnx::TypeProto::Tensor* tt = t->mutable_tensor_type();
      DeclaredOutput d;
      if (tt->has_shape()) d.shape = tt->shape();
      d.elem_type = tt->elem_type();
      if (!d.shape.has_value() && d.elem_type == 0) continue;
      declared.emplace(out.name(), std::move(d));
      tt->clear_shape();
      tt->clear_elem_type();
    }
  });
  return declared;
}

// Puts the declared types back where inference gave an output none. A
// static shape that inference contradicts gives way to the computed one,
// with a warning (ONNX Runtime, too, keeps the inferred shape and warns);
// an element type that inference contradicts is an error (ONNX Runtime
// refuses the model at load).
absl::Status RestoreDeclaredOutputTypes(const DeclaredOutputs& declared,
                                        onnx::GraphProto* main,
                                        std::vector<std::string>* warnings) {
  absl::Status status;
  ForEachGraph(main, [&](onnx::GraphProto* g) {
    const char* kind = g == main ? "graph output" : "subgraph output";
    for (onnx::ValueInfoProto& out : *g->mutable_output()) {
      auto it = declared.find(out.name());
      if (it == declared.end()) continue;
      const DeclaredOutput& d = it->second;
      onnx::TypeProto::Tensor* tt = out.mutable_type()->mutable_tensor_type();
      if (d.elem_type != 0) {
        if (tt->elem_type() == 0) {
          tt->set_elem_type(d.elem_type);
        } else if (tt->elem_type() != d.elem_type && status.ok()) {
          status = absl::InvalidArgumentError(absl::StrCat(
              kind, " '", EscapeForMessage(out.name()), "' is declared ",
              onnx_internal::OnnxElemTypeName(d.elem_type), " but computes ",
              onnx_internal::OnnxElemTypeName(tt->elem_type())));
        }
      }
      if (!d.shape.has_value()) continue;
      if (!StaticShape(*out.mutable_type())) {
        *tt->mutable_shape() = *d.shape;
        continue;
      }
      onnx::TypeProto was;
      *was.mutable_tensor_type()->mutable_shape() = *d.shape;
      if (StaticShape(was) && DimsText(*d.shape) != DimsText(tt->shape())) {
        warnings->push_back(absl::StrCat(
            kind, " '", EscapeForMessage(out.name()), "' is declared ",
            DimsText(*d.shape), " but computes ", DimsText(tt->shape()),
            "; kiln uses the computed shape"));
      }
    }
  });
  return status;
}

absl::StatusOr<ImportResult> Import(onnx::ModelProto model,
                                    onnx_internal::DetachedTensors detached,
                                    const ImportOptions& options) {
  ImportResult result;
  std::vector<std::string>& warnings = result.warnings;
  if (!model.has_graph()) {
    return absl::InvalidArgumentError(
        "not a valid ONNX model (it has no graph: truncated or not an ONNX "
        "file)");
  }
  KILN_RETURN_IF_ERROR(CheckModelLimits(model, options.limits));
  if (model.ir_version() < kMinIrVersion ||
      model.ir_version() > kMaxIrVersion) {
    return absl::UnimplementedError(absl::StrCat(
        "IR version ", model.ir_version(), " is not supported (kiln reads IR ",
        kMinIrVersion, " to ", kMaxIrVersion, ")"));
  }
  KILN_ASSIGN_OR_RETURN(auto opsets, NormalizeOpsets(&model));
  const int64_t opset = opsets.at("");
  if (opset < kMinOpset) {
    warnings.push_back(absl::StrCat(
        "default-domain opset ", opset, " is older than kiln supports (",
        kMinOpset, " to ", kMaxOpset, "); nodes are imported as written, "
        "legacy attributes (e.g. 'broadcast', 'consumed_inputs') included"));
  }

  // ONNX Runtime's DynamicQuantizeLSTM becomes an ONNX LSTM (0071); every
  // other op of a custom domain stays unknown.
  KILN_RETURN_IF_ERROR(onnx_internal::RewriteDynamicQuantizeLstm(
      &model, detached, options.base_dir, options.max_tensor_bytes));
  std::vector<std::string> unknown;
  std::set<std::string> used_domains;
  CollectUnknownOps(model.graph(), opsets, "", &unknown, &used_domains);
  if (!unknown.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        unknown.size(), " unknown op(s) (not in libonnx's operator schemas "
        "for the model's opsets; custom domains are not supported): ",
        absl::StrJoin(unknown, ", ")));
  }
  {
    std::vector<std::string> unused;
    auto* imports = model.mutable_opset_import();
    for (int i = imports->size() - 1; i >= 0; --i) {
      const std::string& domain = imports->Get(i).domain();
      if (!domain.empty() && !used_domains.count(domain)) {
        unused.push_back(absl::StrCat("'", domain, "'"));
        imports->DeleteSubrange(i, 1);
      }
    }
    if (!unused.empty()) {
      warnings.push_back(absl::StrCat("opset imports no node uses: ",
                                      absl::StrJoin(unused, ", ")));
    }
  }

  KILN_RETURN_IF_ERROR(InlineAndCheckTensorData(&model, detached, options));
  onnx_internal::NodeIndexMap file_index;
  KILN_RETURN_IF_ERROR(onnx_internal::SortGraphsTopologically(
      model.mutable_graph(), &file_index));
  // Before constant Ifs fold away the branch they do not take.
  KILN_RETURN_IF_ERROR(
      onnx_internal::VerifyIfBranches(model.graph(), &file_index));
  KILN_RETURN_IF_ERROR(onnx_internal::CheckTopLevelInputTypes(model.graph()));
  KILN_RETURN_IF_ERROR(
      BindInputShapes(model.mutable_graph(), options, &result.declared_inputs, &warnings));
  // Big weights leave the proto before libonnx walks it.
  for (auto& [name, t] :
       onnx_internal::DetachLargeInitializers(model.mutable_graph(),
                                              options.max_tensor_bytes, kDetachMinBytes)) {
    detached.emplace(name, std::move(t));
  }
  KILN_RETURN_IF_ERROR(RunChecker(&model, opset, &warnings));

  onnx_internal::FoldShapesOptions fold_options;
  fold_options.opset = opset;
  fold_options.max_tensor_bytes = options.max_tensor_bytes;
  fold_options.file_index = &file_index;
  fold_options.detached = &detached;
  if (!options.fold_shapes) fold_options.max_rounds = 1;
  const DeclaredOutputs declared_outputs = TakeDeclaredOutputTypes(model.mutable_graph());
  KILN_RETURN_IF_ERROR(
      onnx_internal::InferShapesToFixpoint(&model, fold_options, &warnings)
          .status());
  KILN_RETURN_IF_ERROR(
      RestoreDeclaredOutputTypes(declared_outputs, model.mutable_graph(), &warnings));
  // Again with the types shape inference gave the branches' values.
  KILN_RETURN_IF_ERROR(
      onnx_internal::VerifyIfBranches(model.graph(), &file_index));

  onnx_internal::GraphImportOptions graph_options;
  graph_options.opset = opset;
  graph_options.max_tensor_bytes = options.max_tensor_bytes;
  graph_options.file_index = &file_index;
  graph_options.detached = &detached;
  KILN_ASSIGN_OR_RETURN(result.graph,
                        onnx_internal::ImportGraph(model.graph(), graph_options));
  return result;
}

// Runs `fn`, turning any exception that escapes libonnx or an allocation
// into a Status naming `source`.
template <typename T>
absl::StatusOr<T> Guarded(absl::string_view source,
                          const std::function<absl::StatusOr<T>()>& fn) {
  try {
    absl::StatusOr<T> r = fn();
    if (!r.ok()) return WithSource(SanitizedStatus(r.status(), /*keep_line_breaks=*/false), source);
    if constexpr (std::is_same_v<T, ImportResult>) {
      for (std::string& w : r->warnings) w = EscapeForMessage(w, kMaxMessageLineBytes);
    }
    return r;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(source, ": out of memory"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": libonnx: ", OneLine(e.what())));
  } catch (...) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unknown exception while loading"));
  }
}

absl::StatusOr<ir::Tensor> ParseTensor(absl::string_view bytes,
                                       absl::string_view source,
                                       const std::string& base_dir,
                                       std::optional<ir::DType> declared = std::nullopt) {
  return Guarded<ir::Tensor>(source, [&]() -> absl::StatusOr<ir::Tensor> {
    if (bytes.size() > static_cast<size_t>(INT_MAX)) {
      return absl::InvalidArgumentError("more than 2 GiB of protobuf");
    }
    onnx::TensorProto proto;
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return absl::InvalidArgumentError(
          "not a valid serialized onnx.TensorProto (truncated or another "
          "format)");
    }
    const std::string what = absl::StrCat("tensor '", proto.name(), "'");
    if (declared == ir::DType::kBF16 && proto.data_type() == onnx::TensorProto::UINT16) {
      // UINT16 and BFLOAT16 share their storage (raw 2-byte values, or one
      // per int32_data entry), so only the type changes.
      proto.set_data_type(onnx::TensorProto::BFLOAT16);
    }
    const int64_t max_bytes = ImportOptions().max_tensor_bytes;
    if (!base_dir.empty()) {
      KILN_RETURN_IF_ERROR(onnx_internal::InlineExternalData(
          &proto, base_dir, max_bytes, what));
    }
    return onnx_internal::TensorFromProto(proto, max_bytes, what);
  });
}

}  // namespace

absl::StatusOr<ImportResult> ImportModelFile(const std::string& path,
                                             const ImportOptions& options) {
  return Guarded<ImportResult>(path, [&]() -> absl::StatusOr<ImportResult> {
    auto parsed = ReadModelFile(path, options.max_tensor_bytes);
    if (!parsed.ok()) return parsed.status();
    ImportOptions opts = options;
    if (opts.base_dir.empty()) opts.base_dir = DirName(path);
    return Import(std::move(parsed->first), std::move(parsed->second), opts);
  });
}

absl::StatusOr<ImportResult> ImportModelBytes(absl::string_view bytes,
                                              const ImportOptions& options,
                                              absl::string_view source_name) {
  return Guarded<ImportResult>(source_name, [&]() -> absl::StatusOr<ImportResult> {
    if (bytes.size() > static_cast<size_t>(INT_MAX)) {
      return absl::InvalidArgumentError(
          "more than 2 GiB of protobuf; store weights as external data");
    }
    onnx::ModelProto model;
    if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return ModelParseError();
    }
    return Import(std::move(model), {}, options);
  });
}

absl::StatusOr<ir::Tensor> LoadTensorFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return WithSource(bytes.status(), path);
  return ParseTensor(*bytes, path, DirName(path));
}

absl::StatusOr<ir::Tensor> LoadTensorFile(const std::string& path, ir::DType declared) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return WithSource(bytes.status(), path);
  return ParseTensor(*bytes, path, DirName(path), declared);
}

absl::StatusOr<ir::Tensor> ParseTensorBytes(absl::string_view bytes,
                                            absl::string_view source_name) {
  return ParseTensor(bytes, source_name, "");
}

absl::StatusOr<std::string> SerializeTensor(const ir::Tensor& tensor,
                                            absl::string_view name) {
  if (tensor.byte_size() > static_cast<size_t>(INT_MAX) - 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' (", tensor.TypeString(),
        ") is too large for a protobuf file"));
  }
  KILN_ASSIGN_OR_RETURN(onnx::TensorProto proto,
                        onnx_internal::TensorToProto(tensor, name));
  return proto.SerializeAsString();
}

}  // namespace kiln::frontend
