//===- Eval.h - the validation loss of a training run -----------*- C++ -*-===//
//
// A training program carries an evaluation program (cleave_rt.h, ABI 7):
// the same step's forward pass and loss, with no backward and no update,
// compiled into the same binary with an arena of its own. The evaluator
// copies the model's parameters from the training arena into it and runs
// it over a fixed set of batches of the evaluation data, so that two
// evaluations of one run read the same samples and compare.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_EVAL_H
#define CLEAVE_RUNTIME_TRAINER_EVAL_H

#include "Data.h"
#include "Mesh.h"
#include "Program.h"

#include <memory>
#include <utility>
#include <vector>

namespace cleave::rt::trainer {

/// The training program's evaluation program, checked against it: its ABI
/// and kind, its tensors inside its arena, the training program's mesh,
/// inputs (names, dtypes, shapes and shardings) and model parameters, and
/// an f32 scalar loss as output 0. Fails saying why when the binary has
/// none.
const cleave_program_info &evalProgram();

class Evaluator {
public:
  /// Each evaluation reads `batches` batches of `data` (0: as many whole
  /// batches as it holds, at least one): positions 0 .. batches * B - 1 of
  /// its samples in order, wrapping around. Allocates the evaluation
  /// program's arena and, on a mesh, its communicators (collective: every
  /// rank constructs it at the same point).
  Evaluator(std::unique_ptr<Dataset> data, int64_t batches);

  /// Copies the model's parameters from the training arena `train`, runs
  /// the batches and returns the mean of their losses (each the mean over
  /// its batch, as the training step reports it).
  double evaluate(const Arena &train);

  int64_t batches() const { return numBatches; }
  const Dataset &dataset() const { return *data; }
  int64_t arenaBytes() const { return program.arena_bytes; }

private:
  const cleave_program_info &program;
  std::unique_ptr<Dataset> data;
  int64_t numBatches;
  Arena arena;
  BatchSchedule schedule;
  BatchStaging staging;
  OtherProgramContext context;
  /// Each of the evaluation program's parameters and the training
  /// program's of the same name.
  std::vector<
      std::pair<const cleave_named_tensor *, const cleave_named_tensor *>>
      params;
};

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_EVAL_H
