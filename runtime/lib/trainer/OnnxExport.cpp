//===- OnnxExport.cpp - trained parameters back into the ONNX model -------===//
//
// Edits the source ModelProto in place: the graph, its opsets and every
// other field stay as they were, so the result checks and runs wherever the
// original did. A parameter the program holds in another precision than the
// initializer (e.g. bf16 for an f32 initializer) is converted back to the
// initializer's type.
//
//===----------------------------------------------------------------------===//

#include "OnnxExport.h"

#include "Mesh.h"
#include "Program.h"

#include "cleave/Runtime/Float16.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::trainer;
namespace fs = std::filesystem;

namespace {

/// Reads element `i` of a float parameter as float.
float floatAt(const cleave_tensor &t, const char *data, int64_t i) {
  switch (t.dtype) {
  case CLEAVE_F32: {
    float v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
  case CLEAVE_F16: {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    return halfToFloat(h);
  }
  default: {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    return bf16ToFloat(h);
  }
  }
}

/// Reads element `i` of an integer or i1 parameter as int64.
int64_t intAt(const cleave_tensor &t, const char *data, int64_t i) {
  switch (t.dtype) {
  case CLEAVE_I64: {
    int64_t v;
    std::memcpy(&v, data + 8 * i, 8);
    return v;
  }
  case CLEAVE_I32: {
    int32_t v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
  default:
    return data[i] != 0;
  }
}

template <typename T> void append(std::string &out, T v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof(T));
}

/// The raw_data of `param` (bytes at `data`) in ONNX type `type`.
std::string encode(const cleave_named_tensor &param, const char *data,
                   int type) {
  const cleave_tensor &t = param.tensor;
  int64_t n = numElements(t);
  std::string out;
  bool isFloat = isFloatDtype(t.dtype);
  auto mismatch = [&] {
    fail("--export-onnx: parameter '" + std::string(param.name) + "' is " +
         dtypeName(t.dtype) + " in the program but initializer type " +
         onnx::TensorProto_DataType_Name(type) + " in the source model");
  };
  switch (type) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    if (!isFloat)
      mismatch();
    for (int64_t i = 0; i < n; ++i) {
      float v = floatAt(t, data, i);
      if (type == onnx::TensorProto::FLOAT)
        append(out, v);
      else if (type == onnx::TensorProto::DOUBLE)
        append(out, double(v));
      else if (type == onnx::TensorProto::FLOAT16)
        append(out, floatToHalf(v));
      else
        append(out, floatToBf16(v));
    }
    return out;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::BOOL:
    if (isFloat || (type == onnx::TensorProto::BOOL) != (t.dtype == CLEAVE_I1))
      mismatch();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = intAt(t, data, i);
      if (type == onnx::TensorProto::INT64)
        append(out, v);
      else if (type == onnx::TensorProto::INT32)
        append(out, int32_t(v));
      else
        append(out, uint8_t(v != 0));
    }
    return out;
  default:
    mismatch();
  }
  return out;
}

/// Drops every representation of the tensor's values.
void clearData(onnx::TensorProto &t) {
  t.clear_float_data();
  t.clear_int32_data();
  t.clear_string_data();
  t.clear_int64_data();
  t.clear_double_data();
  t.clear_uint64_data();
  t.clear_raw_data();
  t.clear_external_data();
  t.clear_data_location();
}

/// Replaces external data by the bytes it refers to (relative to `baseDir`).
void inlineExternal(onnx::TensorProto &t, const fs::path &baseDir) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL)
    return;
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      length = std::atoll(kv.value().c_str());
  }
  fs::path file = fs::path(location).is_absolute() ? fs::path(location)
                                                   : baseDir / location;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    fail("--export-onnx: tensor '" + t.name() + "' reads external data from " +
         file.string() + ", which cannot be opened");
  in.seekg(0, std::ios::end);
  int64_t size = int64_t(in.tellg());
  if (length < 0)
    length = size - offset;
  if (offset < 0 || length < 0 || offset + length > size)
    fail("--export-onnx: tensor '" + t.name() + "' reads bytes [" +
         std::to_string(offset) + ", " + std::to_string(offset + length) +
         ") of " + file.string() + ", which has " + std::to_string(size));
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  if (length && !in.read(&bytes[0], length))
    fail("--export-onnx: cannot read " + file.string());
  clearData(t);
  t.set_raw_data(std::move(bytes));
}

void inlineGraph(onnx::GraphProto &g, const fs::path &baseDir);

void inlineAttributes(onnx::NodeProto &node, const fs::path &baseDir) {
  for (onnx::AttributeProto &a : *node.mutable_attribute()) {
    if (a.has_t())
      inlineExternal(*a.mutable_t(), baseDir);
    for (onnx::TensorProto &t : *a.mutable_tensors())
      inlineExternal(t, baseDir);
    if (a.has_g())
      inlineGraph(*a.mutable_g(), baseDir);
    for (onnx::GraphProto &sub : *a.mutable_graphs())
      inlineGraph(sub, baseDir);
  }
}

void inlineGraph(onnx::GraphProto &g, const fs::path &baseDir) {
  for (onnx::TensorProto &t : *g.mutable_initializer())
    inlineExternal(t, baseDir);
  for (onnx::NodeProto &node : *g.mutable_node())
    inlineAttributes(node, baseDir);
}

} // namespace

std::string cleave::rt::trainer::onnxSourceModel() {
  const char *source = program().source_model;
  if (!source || !*source)
    fail("--export-onnx: the program has no source ONNX model (it was "
         "compiled from MLIR)");
  std::string path = resolveBesideExecutable(source);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    fail("--export-onnx: the source model " + std::string(source) +
         " does not exist");
  return path;
}

void cleave::rt::trainer::exportOnnx(const std::string &out,
                                     const Arena &arena) {
  exportOnnx(out, [&](const cleave_named_tensor &param,
                      std::vector<char> &host) {
    host.resize(size_t(tensorBytes(param.tensor)));
    arena.read(param.tensor, host.data());
  });
}

void cleave::rt::trainer::exportOnnx(
    const std::string &out,
    const std::function<void(const cleave_named_tensor &,
                             std::vector<char> &)> &globalValue) {
  const cleave_program_info &p = program();
  std::string source = onnxSourceModel();
  std::ifstream in(source, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  if (!in || bytes.size() > size_t(std::numeric_limits<int>::max()))
    fail("--export-onnx: cannot read the source model " + source);
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), int(bytes.size()));
  google::protobuf::io::CodedInputStream stream(&raw);
  stream.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage() ||
      !model.has_graph())
    fail("--export-onnx: the source model " + source +
         " is not a valid ONNX model");
  bytes.clear();
  bytes.shrink_to_fit();

  // The global view of each parameter (a partitioned program's are
  // blocks).
  // (Of every stage of a pipelined program.)
  int64_t numModel = 0;
  const std::vector<const cleave_named_tensor *> &whole =
      wholeProgramParams(&numModel);
  std::vector<cleave_named_tensor> global;
  for (int64_t i = 0; i < numModel; ++i)
    global.push_back(*whole[size_t(i)]);
  for (cleave_named_tensor &g : global) {
    g.tensor = globalTensor(g);
    g.sharding = nullptr;
  }
  std::map<std::string, const cleave_named_tensor *> params;
  for (int64_t i = 0; i < numModel; ++i)
    params[global[size_t(i)].name] = &global[size_t(i)];
  std::set<std::string> done;
  std::vector<char> host; // one parameter at a time, reused
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    auto it = params.find(init.name());
    if (it == params.end())
      continue;
    const cleave_named_tensor &param = *it->second;
    int64_t count = 1;
    for (int64_t d : init.dims())
      count *= d;
    if (count != numElements(param.tensor))
      fail("--export-onnx: parameter '" + init.name() + "' (" +
           describe(param.tensor) + ") has " +
           std::to_string(numElements(param.tensor)) +
           " elements, its initializer " + std::to_string(count));
    globalValue(*whole[size_t(&param - global.data())], host);
    std::string data = encode(param, host.data(), init.data_type());
    clearData(init);
    init.set_raw_data(std::move(data));
    done.insert(init.name());
  }
  for (const auto &[name, param] : params)
    if (!done.count(name))
      fail("--export-onnx: parameter '" + name +
           "' is not an initializer of the source model " + source);
  inlineGraph(*model.mutable_graph(), fs::path(source).parent_path());

  size_t size = model.ByteSizeLong();
  if (size > size_t(std::numeric_limits<int>::max()))
    fail("--export-onnx: the model would be " + std::to_string(size) +
         " bytes, beyond protobuf's 2 GiB limit");
  // Nothing goes through the FILE's buffer: protobuf writes the
  // descriptor directly.
  writeFileAtomically(out, "ONNX model", [&](FILE *f) {
    return model.SerializeToFileDescriptor(::fileno(f));
  });
}
