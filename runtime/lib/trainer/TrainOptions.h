//===- TrainOptions.h - the training binary's command line -----*- C++ -*-===//
//
// The flags of a training program's main (its --help), parsed and checked
// against the program before anything else runs.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_TRAINOPTIONS_H
#define CLEAVE_RUNTIME_TRAINER_TRAINOPTIONS_H

#include "Hyperparameters.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

struct TrainOptions {
  std::vector<std::string> inputFiles; // per program input, the target last
  std::string tokens, tokenDtype = "uint16";
  // The evaluation data, as the training data's flags give it.
  std::vector<std::string> evalInputFiles;
  std::string evalTokens;
  int64_t evalEvery = 0, evalSteps = 0; // 0: at the end; as the data holds
  int64_t seq = 0;                      // 0: the model's
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t steps = -1; // -1: not given
  std::string save, resume, initFrom, exportOnnx, logJson, commStats, trace;
  int64_t saveEvery = 0, logEvery = 1, traceSteps = 20, keepLast = 0;
  std::string profile;
  int64_t profileStart = 0, profileSteps = 3; // 0: the second step
  bool quiet = false;
  bool overlap = true;
  bool nanCheck = false;
  HyperparameterFlags hyper;
};

/// Parses the training binary's command line (see its --help) and checks
/// the flags together and against the program; fails naming the flag.
TrainOptions parseTrainOptions(int argc, char **argv);

/// "12 bytes", "1.5 KiB", "3.2 MiB", "1.25 GiB".
std::string humanBytes(int64_t bytes);

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_TRAINOPTIONS_H
