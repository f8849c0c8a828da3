//===- Validate.h - layout checks against model and cluster -----*- C++ -*-===//
//
// The rules a layout must follow (GPU product, head and layer divisibility,
// batch and microbatch divisibility, schedule constraints) and the ones it
// should (TP inside a node, even pipeline stages), as diagnostics with the
// offending values. Memory is checked separately, on an estimate.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_VALIDATE_H
#define CLEAVE_PLANNER_VALIDATE_H

#include "cleave/Planner/Estimate.h"

#include <string>
#include <vector>

namespace cleave::planner {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  std::string message; ///< lowercase, no trailing period
};

const char *severityName(Severity severity);
bool hasErrors(const std::vector<Diagnostic> &diags);

/// Checks the mesh: the degrees against the GPU count, the model and the
/// global batch. Does not look at microbatches, schedule, ZeRO or recompute.
std::vector<Diagnostic> validateMesh(const ModelSpec &model,
                                     const TrainingConfig &training,
                                     const ClusterSpec &cluster,
                                     const Layout &layout);

/// Checks a given split (Layout::split): pp x v - 1 first layers, each
/// after the one before and before the last layer.
std::vector<Diagnostic> validateSplit(const ModelSpec &model,
                                      const Layout &layout);

/// Checks the microbatch count, schedule, ZeRO stage and split of a valid
/// mesh.
std::vector<Diagnostic> validateSchedule(const ModelSpec &model,
                                         const TrainingConfig &training,
                                         const Layout &layout);

/// Everything: validateMesh(), validateSchedule(), and when both pass, the
/// warnings that need an estimate (TP across nodes with its cost, uneven
/// pipeline stages with their slowdown).
std::vector<Diagnostic> validateLayout(const ModelSpec &model,
                                       const TrainingConfig &training,
                                       const ClusterSpec &cluster,
                                       const Layout &layout);

/// An error when `est` does not fit in the usable memory of a GPU, with the
/// breakdown; empty otherwise.
std::vector<Diagnostic> checkMemory(const Estimate &est,
                                    const ClusterSpec &cluster);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_VALIDATE_H
