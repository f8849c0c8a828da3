//===- Data.h - training data and the batch schedule ------------*- C++ -*-===//
//
// The samples a training program consumes: either one .npy array per
// program input (samples along the first dimension), or a flat token file
// cut into non-overlapping windows for a language model. The batch schedule
// maps (step, row) to a sample, so that where the data stands is a function
// of the step alone and a resumed run reads what an uninterrupted one would.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_DATA_H
#define CLEAVE_RUNTIME_TRAINER_DATA_H

#include "cleave/Runtime/cleave_rt.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

/// Which sample each row of each step's batch reads. Step k (1-based) reads
/// positions (k-1)*B .. k*B-1 of the endless sample sequence; position p is
/// in epoch e = p / N at index j = p % N and reads sample perm_e[j]. Without
/// shuffling perm_e is the identity; with it, perm_e is the Fisher-Yates
/// shuffle of 0..N-1 driven by std::mt19937_64 seeded with seed + e:
///   for i = N-1 down to 1: swap(perm[i], perm[r % (i + 1)]), r = rng().
class BatchSchedule {
public:
  BatchSchedule(int64_t numSamples, int64_t batchSize, bool shuffle,
                uint64_t seed);

  /// The sample read by row `row` of the batch of step `step` (from 1).
  int64_t sample(int64_t step, int64_t row);

  /// The permutation of epoch `epoch` (from 0) as defined above.
  static std::vector<int64_t> permutation(int64_t numSamples, uint64_t seed,
                                          int64_t epoch);

private:
  int64_t numSamples, batchSize;
  bool shuffle;
  uint64_t seed;
  std::map<int64_t, std::vector<int64_t>> cache; // epoch -> permutation
};

/// Samples that can be copied into batches of the program's inputs.
class Dataset {
public:
  virtual ~Dataset();
  int64_t numSamples() const { return samples; }
  /// Copies sample `sample` into row `row` of every program input's batch:
  /// `batch[i]` is host memory holding input i as its descriptor lays it
  /// out.
  virtual void copySample(int64_t sample, int64_t row,
                          char *const *batch) const = 0;
  /// One line for the start-up banner, e.g. "6 samples from x.npy, t.npy".
  virtual std::string summary() const = 0;

protected:
  int64_t samples = 0;
};

/// The number of leading dimensions of every input that count samples: 1
/// for inputs [B, ...], 2 for a step that accumulates K microbatches, whose
/// inputs are [K, B, ...] (its training configuration's "accumulate").
int64_t programBatchDims();

/// The samples of one training step: the product of the batch dimensions
/// of every input (B, or K * B), which must agree.
int64_t programBatchSize();

/// Reads one .npy file per program input (`files[i]` for input i, the
/// target last). Each array is [N, d1, ...] where the input is [B, d1, ...];
/// data is converted to the input's dtype where that is exact enough: float
/// inputs accept '<f4', '<f8' and '<f2', integer inputs '<i8' and '<i4'
/// (narrowing checked), i1 inputs '|b1'.
std::unique_ptr<Dataset> loadNpyDataset(const std::vector<std::string> &files);

/// Maps a flat file of uint16 or uint32 (`tokenDtype`) tokens for a program
/// whose inputs are an integer [B, S] and integer labels [B, S]: sample i
/// is tokens [i*S, i*S+S) with labels [i*S+1, i*S+S+1), so N = (T-1) / S
/// for T tokens. `seq` (0: take the model's) must equal S.
std::unique_ptr<Dataset> openTokenDataset(const std::string &path,
                                          const std::string &tokenDtype,
                                          int64_t seq);

class Arena;
class HostBuffer;

/// Moves each step's batch into the program's inputs: the rows are gathered
/// into host buffers (HostBuffer: page-locked on CUDA), and each input then
/// goes to the arena in one asynchronous copy, after the kernels already
/// called, so that the host prepares step s + 1 while the device runs step
/// s. Two sets of buffers take turns: the set of step s is filled again at
/// step s + 2, by which time the caller must have waited for a marker
/// recorded after step s.
class BatchStaging {
public:
  /// For the inputs of `target`: the training program, or its evaluation
  /// program, whose inputs are the training program's at other offsets.
  explicit BatchStaging(const cleave_program_info &target);
  ~BatchStaging();
  /// Copies the batch of `step` into the target's inputs in `arena`.
  void fill(const Dataset &data, BatchSchedule &schedule, int64_t step,
            Arena &arena);

private:
  const cleave_program_info &target;
  int64_t batchSize;
  std::unique_ptr<HostBuffer> buffer; // the two sets
  /// Input i's global batch in set 0 and set 1 (64-byte aligned within
  /// `buffer`), and this device's block of it (the same memory when the
  /// input is not sharded).
  std::vector<char *> inputs[2], blocks[2];
  /// Whether this device reads row r of the global batch.
  std::vector<bool> rowNeeded;
};

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_DATA_H
