//===- OnnxTensors.cpp - ONNX tensors into constants and parameters -----===//
//
// The element types of ONNX tensors and the TensorReader (TensorReader.h).
//
//===----------------------------------------------------------------------===//

#include "TensorReader.h"

#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <limits>

using namespace mlir;
using namespace cleave;
using namespace cleave::onnx_import;

//===----------------------------------------------------------------------===//
// Types and tensors
//===----------------------------------------------------------------------===//

Type cleave::onnx_import::convertElementType(int32_t onnxType,
                                             MLIRContext *ctx) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::DOUBLE: // graph has no f64: imported as f32
    return Float32Type::get(ctx);
  case onnx::TensorProto::FLOAT16:
    return Float16Type::get(ctx);
  case onnx::TensorProto::BFLOAT16:
    return BFloat16Type::get(ctx);
  case onnx::TensorProto::INT64:
    return IntegerType::get(ctx, 64);
  case onnx::TensorProto::INT32:
    return IntegerType::get(ctx, 32);
  case onnx::TensorProto::BOOL:
    return IntegerType::get(ctx, 1);
  default:
    return {};
  }
}

std::string cleave::onnx_import::onnxTypeName(int32_t onnxType) {
  if (onnx::TensorProto::DataType_IsValid(onnxType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(onnxType));
  return "type " + std::to_string(onnxType);
}

static int64_t elementBytes(int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  default:
    return 1;
  }
}

FailureOr<RankedTensorType> TensorReader::typeOf(const onnx::TensorProto &t,
                                                 Location loc, StringRef what) {
  Type element = convertElementType(t.data_type(), ctx);
  if (!element)
    return emitError(loc) << what << " '" << t.name()
                          << "' has unsupported element type "
                          << onnxTypeName(t.data_type())
                          << " (supported: FLOAT, FLOAT16, BFLOAT16, DOUBLE, "
                             "INT64, INT32, BOOL)";
  SmallVector<int64_t> shape;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return emitError(loc)
             << what << " '" << t.name() << "' has negative dimension " << d;
    shape.push_back(d);
  }
  if (!elementCount(shape))
    return emitError(loc) << what << " '" << t.name() << "' has more than "
                          << kMaxElements << " elements";
  return RankedTensorType::get(shape, element);
}

FailureOr<TensorReader::ExternalRef>
TensorReader::resolveExternal(const onnx::TensorProto &t, Location loc) {
  auto fail = [&]() {
    return emitError(loc) << "initializer '" << t.name() << "' ";
  };
  auto parseCount = [&](const std::string &key, const std::string &text,
                        int64_t &out) -> LogicalResult {
    if (text.empty() || text.size() > 18 ||
        !llvm::all_of(text, [](char c) { return c >= '0' && c <= '9'; }))
      return fail() << "has external data " << key << " '" << text
                    << "', not a decimal integer from 0 to 10^18";
    out = std::stoll(text);
    return success();
  };
  ExternalRef ref;
  bool haveLocation = false;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      ref.path = kv.value();
      haveLocation = true;
    } else if (kv.key() == "offset") {
      if (failed(parseCount("offset", kv.value(), ref.offset)))
        return failure();
    } else if (kv.key() == "length") {
      if (failed(parseCount("length", kv.value(), ref.length)))
        return failure();
    }
  }
  if (!haveLocation || ref.path.empty())
    return fail() << "has external data without a location";
  if (llvm::sys::path::is_absolute(ref.path) ||
      llvm::is_contained(llvm::make_range(llvm::sys::path::begin(ref.path),
                                          llvm::sys::path::end(ref.path)),
                         ".."))
    return fail() << "has external data location '" << ref.path
                  << "' outside the model's folder (an absolute path or "
                     "'..'): external data must be inside it";
  SmallString<256> base(options.baseDir.empty() ? "." : options.baseDir);
  (void)llvm::sys::fs::make_absolute(base);
  SmallString<256> full(base);
  llvm::sys::path::append(full, ref.path);
  SmallString<256> realBase, realFull;
  if (std::error_code ec = llvm::sys::fs::real_path(full, realFull))
    return fail() << "reads external data from '" << full
                  << "', which cannot be opened: " << ec.message();
  if (llvm::sys::fs::real_path(base, realBase))
    realBase = base;
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(realFull, status))
    return fail() << "reads external data from '" << realFull
                  << "', which cannot be opened: " << ec.message();
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail() << "has external data location '" << ref.path
                  << "' that is not a regular file";
  StringRef inside(realFull);
  if (!inside.starts_with(realBase) || inside.size() == realBase.size() ||
      !llvm::sys::path::is_separator(inside[realBase.size()]))
    return fail() << "has external data location '" << ref.path
                  << "' that resolves to '" << realFull
                  << "', outside the model's folder '" << realBase << "'";
  // The IR may be written anywhere: keep a path that does not depend on it.
  ref.path = std::string(realFull);
  const int64_t size = static_cast<int64_t>(status.getSize());
  if (ref.offset > size)
    return fail() << "has external data offset " << ref.offset
                  << " past the end of '" << ref.path << "', which has " << size
                  << " bytes";
  if (ref.length < 0)
    ref.length = size - ref.offset;
  if (ref.length > size - ref.offset)
    return fail() << "reads bytes [" << ref.offset << ", "
                  << ref.offset + ref.length << ") of '" << ref.path
                  << "', which has " << size << " bytes";
  return ref;
}

FailureOr<std::string> TensorReader::bytesOf(const onnx::TensorProto &t,
                                             RankedTensorType type,
                                             Location loc) {
  int64_t width = elementBytes(t.data_type());
  int64_t n = type.getNumElements();
  std::string bytes;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    FailureOr<ExternalRef> ref = resolveExternal(t, loc);
    if (failed(ref))
      return failure();
    auto buffer =
        llvm::MemoryBuffer::getFileSlice(ref->path, ref->length, ref->offset);
    if (!buffer)
      return emitError(loc) << "cannot read '" << ref->path
                            << "': " << buffer.getError().message();
    bytes = (*buffer)->getBuffer().str();
  } else if (t.has_raw_data()) {
    bytes = t.raw_data();
  } else {
    auto append = [&](const void *p, size_t size) {
      bytes.append(static_cast<const char *>(p), size);
    };
    switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      for (float v : t.float_data())
        append(&v, 4);
      break;
    case onnx::TensorProto::DOUBLE:
      for (double v : t.double_data())
        append(&v, 8);
      break;
    case onnx::TensorProto::INT64:
      for (int64_t v : t.int64_data())
        append(&v, 8);
      break;
    case onnx::TensorProto::INT32:
      for (int32_t v : t.int32_data())
        append(&v, 4);
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      for (int32_t v : t.int32_data()) {
        uint16_t bits = static_cast<uint16_t>(v);
        append(&bits, 2);
      }
      break;
    case onnx::TensorProto::BOOL:
      for (int32_t v : t.int32_data()) {
        uint8_t byte = v != 0;
        append(&byte, 1);
      }
      break;
    default:
      break;
    }
  }
  if (static_cast<int64_t>(bytes.size()) != n * width)
    return emitError(loc) << "tensor '" << t.name() << "' has " << bytes.size()
                          << " bytes of data but " << type << " needs "
                          << n * width;
  return bytes;
}

FailureOr<ConstTensor> TensorReader::readConstant(const onnx::TensorProto &t,
                                                  Location loc) {
  auto type = typeOf(t, loc, "tensor");
  if (failed(type))
    return failure();
  auto bytes = bytesOf(t, *type, loc);
  if (failed(bytes))
    return failure();
  ConstTensor c{type->getElementType(), llvm::to_vector(type->getShape()), {}};
  int64_t n = type->getNumElements();
  c.values.resize(n);
  const char *p = bytes->data();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      c.values[i] = v;
      break;
    }
    case onnx::TensorProto::DOUBLE: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      c.values[i] = v;
      break;
    }
    case onnx::TensorProto::INT64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      c.values[i] = static_cast<double>(v);
      break;
    }
    case onnx::TensorProto::INT32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      c.values[i] = v;
      break;
    }
    case onnx::TensorProto::BOOL:
      c.values[i] = p[i] != 0;
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: {
      uint16_t bits;
      std::memcpy(&bits, p + 2 * i, 2);
      const llvm::fltSemantics &sem =
          t.data_type() == onnx::TensorProto::FLOAT16
              ? llvm::APFloat::IEEEhalf()
              : llvm::APFloat::BFloat();
      c.values[i] = APFloat(sem, APInt(16, bits)).convertToDouble();
      break;
    }
    default:
      break;
    }
  }
  return c;
}

FailureOr<Attribute> TensorReader::readParameter(const onnx::TensorProto &t,
                                                 RankedTensorType type,
                                                 Location loc) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL &&
      t.data_type() != onnx::TensorProto::DOUBLE) {
    // Large weights stay where they are: the IR points at the file.
    FailureOr<ExternalRef> ref = resolveExternal(t, loc);
    if (failed(ref))
      return failure();
    int64_t expected = type.getNumElements() * elementBytes(t.data_type());
    if (ref->length != expected)
      return emitError(loc)
             << "initializer '" << t.name() << "' has " << ref->length
             << " bytes of external data but " << type << " needs " << expected;
    return Attribute(graph::ExternalWeightsAttr::get(ctx, ref->path,
                                                     ref->offset, ref->length));
  }
  if (t.data_type() == onnx::TensorProto::DOUBLE) {
    auto c = readConstant(t, loc);
    if (failed(c))
      return failure();
    SmallVector<float> floats(c->values.begin(), c->values.end());
    return Attribute(DenseElementsAttr::get(type, ArrayRef<float>(floats)));
  }
  auto bytes = bytesOf(t, type, loc);
  if (failed(bytes))
    return failure();
  return Attribute(DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(bytes->data(), bytes->size())));
}
