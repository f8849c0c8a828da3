//===- Checkpoint.h - training checkpoints as safetensors -------*- C++ -*-===//
//
// A checkpoint is DIR/model.safetensors: every parameter of the program
// (the model's and the optimizer state, "optimizer.step" included) in the
// safetensors format, i.e. an 8-byte little-endian header length, a JSON
// header
//   {"__metadata__": {"format": "cleave", "format_version": "1",
//                     "step": "5", "fingerprint": "<16 hex digits>",
//                     "num_model_params": "2", "source_model": "...",
//                     "training_config": "{...}",
//                     "data_order": "sequential" | "shuffle seed S",
//                     "hyperparameters": "{...}"},
//    "<name>": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
//    ...}
// padded with spaces to a multiple of 8 bytes, then the tensors' bytes
// (little-endian, row-major, in order of decreasing element size so that
// each is naturally aligned). dtypes are F32, F16, BF16, I64, I32 and BOOL.
// The single file carries everything needed to resume, so replacing it with
// one rename is atomic. DIR/meta.json repeats the metadata for people; it is
// never read back.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_CHECKPOINT_H
#define CLEAVE_RUNTIME_TRAINER_CHECKPOINT_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

class Arena;

/// 16 hex digits of the 64-bit FNV-1a hash of the lines
/// "<name>\t<dtype>\t<d0>,<d1>,...\n" of every parameter, sorted by name
/// (dtype as in the safetensors header).
std::string paramFingerprint();

/// Creates `dir` if needed and checks that a file can be written in it.
void prepareCheckpointDir(const std::string &dir);

/// Whether `dir` holds a checkpoint: its commit file (model.safetensors, or
/// a sharded checkpoint's index), renamed into place last, exists.
bool holdsCheckpoint(const std::string &dir);

/// A checkpoint history (the trainer's --keep-last, CheckpointHistory.cpp):
/// the checkpoint of step
/// N in DIR/step_N, DIR itself holding no checkpoint.
std::string historyEntry(const std::string &dir, int64_t step);
/// The checkpoint to resume from in `dir`: `dir` itself when it holds one,
/// else the latest complete entry of its history (one whose commit file,
/// model.safetensors or the sharded index, exists: both are renamed into
/// place last); `dir` when there is none, for loadCheckpoint's error.
std::string latestCheckpoint(const std::string &dir);
/// Removes all but the `keep` latest entries of the history in `dir`.
void pruneHistory(const std::string &dir, int64_t keep);

/// What a run records beside the parameters: how the batches were drawn
/// ("sequential", "shuffle seed S") and its run-time hyperparameters (a
/// JSON object, Hyperparameters.h; empty: none).
struct RunRecord {
  std::string dataOrder;
  std::string hyperparameters;
};

/// Writes the checkpoint of the program's parameters in `arena` after
/// `step` completed steps (`loss`: the last step's, for meta.json; none
/// when no step ran in this process), with the run's record.
void saveCheckpoint(const std::string &dir, const Arena &arena, int64_t step,
                    std::optional<float> loss, const RunRecord &run);

/// Loads every parameter from the checkpoint in `dir` into `arena` after
/// checking that the checkpoint holds exactly the program's parameters with
/// their dtypes and shapes; returns its step, and its recorded
/// hyperparameters in `*hyperparameters` (left unchanged when it has
/// none). Warns on stderr when the checkpoint was written with another
/// training config or data order (the run then continues, but not as the
/// original one would have).
int64_t loadCheckpoint(const std::string &dir, Arena &arena,
                       const std::string &dataOrder,
                       std::string *hyperparameters = nullptr);

/// Writes the model's parameters into `arena` from `path` (the trainer's
/// --init-from, to fine-tune saved weights): a checkpoint folder (either
/// layout, of any mesh and optimizer, or the latest of a history) or a
/// .safetensors file (PyTorch's state_dict saved by safetensors, say). Each
/// model parameter is found by name and must have its dtype and global
/// shape; other tensors (optimizer state, buffers) are not read, and the
/// optimizer state and step counter keep their initial values. Returns a
/// line for the banner.
std::string initModelParams(const std::string &path, Arena &arena);

/// The global value of every model parameter of the checkpoint in `dir`
/// (either layout, checked against the program as loadCheckpoint checks
/// it), by parameter name: what a partitioned program exports to ONNX.
std::map<std::string, std::vector<char>>
readGlobalModelParams(const std::string &dir);

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_CHECKPOINT_H
