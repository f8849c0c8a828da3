//===- Train.h - the main of training programs ------------------*- C++ -*-===//
//
// The trainer behind the main of a CLEAVE_PROGRAM_TRAINING program: the
// command line (see --help), the step loop with its progress and JSON logs,
// checkpoints and the ONNX export.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_TRAIN_H
#define CLEAVE_RUNTIME_TRAINER_TRAIN_H

namespace cleave::rt::trainer {

/// Runs the training program as the command line asks; returns the exit
/// status. User errors are thrown as trainer::Error.
int runTraining(int argc, char **argv);
/// The training program's usage and what it holds (its --help).
void printTrainingUsage(const char *argv0);

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_TRAIN_H
