//===- Program.h - the linked program as the main sees it -------*- C++ -*-===//
//
// What the inference and training mains share: the error type every user
// error is thrown as (main turns it into "error: ..." and exit status 1),
// dtype and shape helpers, the checks of the program's metadata, the arena
// and the parameters' initial values.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_PROGRAM_H
#define CLEAVE_RUNTIME_TRAINER_PROGRAM_H

#include "cleave/Runtime/cleave_rt.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

/// A user error (bad file, bad argument, bad metadata). The message is one
/// line without the "error: " prefix.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string &message) {
  throw Error(message);
}

/// The integer value of command-line flag `flag`, at least `min`; fails
/// naming the flag otherwise.
int64_t parseCount(const std::string &flag, const std::string &text,
                   int64_t min);

/// Fails naming `flag` unless a file can be written at `path` (its folder
/// is made); the probe leaves no file behind.
void checkWritable(const std::string &flag, const std::string &path);

/// The most steps a run counts: 2^40 keeps a step's first sample index,
/// (step - 1) x batch, within int64 for batches up to 2^23 samples.
constexpr int64_t kMaxSteps = int64_t(1) << 40;

/// Bytes per element of `dtype` (i1 is one byte); 0 for an unknown dtype.
size_t dtypeSize(int32_t dtype);
/// "f32", "f16", "bf16", "i64", "i32", "i1" (or "dtype N").
std::string dtypeName(int32_t dtype);
inline bool isIntegerDtype(int32_t dtype) {
  return dtype == CLEAVE_I64 || dtype == CLEAVE_I32;
}
inline bool isFloatDtype(int32_t dtype) {
  return dtype == CLEAVE_F32 || dtype == CLEAVE_F16 || dtype == CLEAVE_BF16;
}

std::vector<int64_t> shapeOf(const cleave_tensor &t);
int64_t numElements(const cleave_tensor &t);
int64_t tensorBytes(const cleave_tensor &t);
/// "[2, 3]"; "[]" for a scalar.
std::string shapeString(const std::vector<int64_t> &shape);
/// "f32 [2, 3]".
std::string describe(const cleave_tensor &t);

/// The program this process runs: `cleave_program`, or for a pipelined
/// program (ABI 5) the stage of this device, stage 0 until startDevice
/// has chosen it. Every stage has the same mesh and groups.
const cleave_program_info &program();
/// Pipelined programs: the number of stages (0 for any other program),
/// stage `s`'s own program, and the choice of this device's.
int64_t numStages();
const cleave_program_info &stageProgram(int64_t s);
void selectStage(int64_t s);
/// The parameters of the whole program: of every stage, each name once
/// (from the first stage that holds it), the model's parameters first;
/// program()'s own for any other program. `numModel` gets how many are
/// the model's.
const std::vector<const cleave_named_tensor *> &
wholeProgramParams(int64_t *numModel = nullptr);
/// The first stage whose program holds parameter `name`: the one that
/// writes it to a checkpoint (0 when not pipelined).
int64_t firstStageOf(const char *name);

/// Checks the ABI version first (the rest of the struct is only meaningful
/// when it matches), then the kind, the counts, that every tensor is well
/// formed and inside the arena, and the parameters' roles: the model's
/// parameters first, known roles, one step counter in a training program
/// and at most one loss scale and growth tracker, each of its fixed type.
/// A pipelined program: every stage, and that they share one mesh.
void checkProgram();

/// Checks that each of `count` named tensors of `list` (`kind`:
/// "parameter", "input", "output") is well formed and lies inside an arena
/// of `arenaBytes`.
void checkTensors(const char *kind, const cleave_named_tensor *list,
                  int64_t count, int64_t arenaBytes);

/// The parameter of `role` (one of the roles a program has at most once:
/// step counter, loss scale, growth tracker), or null.
const cleave_named_tensor *findParam(cleave_param_role role);

/// The program's arena, 64-byte aligned and zeroed, from the backend
/// (cleave_rt.h): host memory on the CPU, device memory on CUDA. The main
/// never dereferences it: bytes go in and out through write() and read().
class Arena {
public:
  /// Initializes the backend (which fails when it has no device), then
  /// allocates `bytes`.
  explicit Arena(int64_t bytes);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
  /// The base that cleave_program_run takes; not host memory in general.
  char *base() { return arena; }
  /// Copies the bytes of tensor `t` from host memory at `src` into the
  /// arena; waits for the kernels already called.
  void write(const cleave_tensor &t, const void *src) {
    cleave_rt_arena_write(arena, t.offset, src, tensorBytes(t));
  }
  /// Copies the bytes of tensor `t` out of the arena into host memory at
  /// `dst`; waits for the kernels already called, so it sees their results.
  void read(const cleave_tensor &t, void *dst) const {
    cleave_rt_arena_read(arena, t.offset, dst, tensorBytes(t));
  }
  /// The same without waiting (cleave_rt_arena_write_async): `src` is
  /// HostBuffer memory, left unchanged until a marker recorded after this
  /// call has been waited for.
  void writeAsync(const cleave_tensor &t, const void *src) {
    cleave_rt_arena_write_async(arena, t.offset, src, tensorBytes(t));
  }
  /// The same without waiting: `dst` (HostBuffer memory) holds the bytes
  /// once a marker recorded after this call has been waited for.
  void readAsync(const cleave_tensor &t, void *dst) const {
    cleave_rt_arena_read_async(arena, t.offset, dst, tensorBytes(t));
  }

private:
  char *arena = nullptr;
};

/// Host memory for the asynchronous copies (cleave_rt_host_alloc:
/// page-locked on CUDA).
class HostBuffer {
public:
  explicit HostBuffer(size_t bytes)
      : data(static_cast<char *>(cleave_rt_host_alloc(int64_t(bytes)))) {}
  ~HostBuffer() { cleave_rt_host_free(data); }
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;
  char *get() const { return data; }

private:
  char *data;
};

/// Writes each parameter's initial value (init_data or init_file) into the
/// arena.
void initParams(Arena &arena);

/// A relative path names a file in the working directory if there is one,
/// else next to the executable (so that a program and its files can move
/// together); returned unchanged when neither exists.
std::string resolveBesideExecutable(const std::string &file);

/// Replaces `path` atomically: `write` fills PATH.tmp (returning false, or
/// leaving the stream in error, on failure), which is then flushed, synced
/// to disk and renamed over `path`, and the directory is synced, so that a
/// crash leaves either the old or the new file. `what` names the file in
/// errors ("checkpoint", "ONNX model").
void writeFileAtomically(const std::string &path, const std::string &what,
                         const std::function<bool(FILE *)> &write);

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_PROGRAM_H
