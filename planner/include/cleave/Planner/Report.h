//===- Report.h - text, JSON and plan-file output ---------------*- C++ -*-===//
//
// The planner's three outputs: a human-readable report with the ranked
// table, the `--json` object of the chosen layout, and the versioned plan
// file that `cleave-compile` will read (format: docs/planner.md).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_REPORT_H
#define CLEAVE_PLANNER_REPORT_H

#include "cleave/Planner/Search.h"

#include <string>

namespace cleave::planner {

/// Version of the plan file format; bumped on any incompatible change.
constexpr int kPlanFormatVersion = 1;

/// One-paragraph description of the model, cluster and training setup.
std::string formatSetup(const ModelSpec &model, const TrainingConfig &training,
                        const ClusterSpec &cluster);

/// The ranked table of a search, at most `rows` rows.
std::string formatTable(const SearchResult &result, size_t rows);

/// Memory, communication and time of one layout, with its diagnostics.
std::string formatEstimate(const Estimate &est, const ClusterSpec &cluster);

/// `{"layout": {...}, "memory_gb": {...}, "comm_gb": {...}, "bubble": ...,
/// "step_time_s": ..., "tflops_per_gpu": ..., "mfu": ...}`
std::string estimateToJson(const Estimate &est);

/// The plan file (version kPlanFormatVersion) of `est`.
std::string planFileJson(const ModelSpec &model, const TrainingConfig &training,
                         const ClusterSpec &cluster, const Estimate &est);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_REPORT_H
