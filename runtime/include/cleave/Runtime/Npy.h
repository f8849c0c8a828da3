//===- Npy.h - NumPy .npy files of runtime tensors --------------*- C++ -*-===//
//
// Reading and writing NumPy's .npy format (versions 1.0, 2.0 and 3.0,
// little-endian, C order) for program inputs and outputs. bf16 has no .npy
// type: bf16 tensors are read from and written as float32 ('<f4'). Errors
// are returned as messages that name the file, never thrown.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_NPY_H
#define CLEAVE_RUNTIME_NPY_H

#include "cleave/Runtime/cleave_rt.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt {

/// An array as stored in a .npy file.
struct NpyArray {
  std::string descr; ///< NumPy type string, e.g. "<f4"
  std::vector<int64_t> shape;
  std::vector<char> data; ///< row-major element bytes
};

/// Reads any simple-typed C-order array from `path`. On failure returns
/// false and sets `error` to "<path>: <reason>".
bool readNpy(const std::string &path, NpyArray &array, std::string &error);

/// Writes `bytes` of data with the given type string and shape to `path`
/// (format 1.0, or 2.0 when the header needs it).
bool writeNpy(const std::string &path, const std::string &descr,
              const std::vector<int64_t> &shape, const void *data, size_t bytes,
              std::string &error);

/// The .npy type string that stores `dtype` ("<f4" for f32 and bf16, "<f2",
/// "<i8", "<i4", "|b1"); nullptr for an unknown dtype.
const char *npyDescr(int32_t dtype);

/// Reads `path` into `dst`, the bytes of a tensor described by `t`, after
/// checking that the file's type and shape match it (bf16 converts from
/// "<f4").
bool loadTensorNpy(const std::string &path, const cleave_tensor &t, void *dst,
                   std::string &error);

/// Writes the tensor described by `t` whose bytes are at `src` (bf16 as
/// "<f4").
bool saveTensorNpy(const std::string &path, const cleave_tensor &t,
                   const void *src, std::string &error);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_NPY_H
