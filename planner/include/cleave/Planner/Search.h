//===- Search.h - the fastest layout that fits ------------------*- C++ -*-===//
//
// Enumerates the meshes (tp, pp, dp, cp, ep) whose product is the GPU count,
// and for each the microbatch count, schedule, ZeRO stage and recomputation;
// keeps those that are valid and fit in memory; ranks them by step time
// (then memory) and says why each one loses to the best.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_SEARCH_H
#define CLEAVE_PLANNER_SEARCH_H

#include "cleave/Planner/Estimate.h"
#include "cleave/Planner/Validate.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave::planner {

/// Fixed choices; the rest is searched.
struct SearchConstraints {
  std::optional<int64_t> tp, pp, dp, cp, ep;
  std::optional<int64_t> microbatches;
  std::optional<int64_t> virtualStages;
  std::optional<Schedule> schedule;
  std::optional<int> zero;
  std::optional<Recompute> recompute;
  bool foldEp = true;
  std::vector<int64_t> split; ///< Layout::split of every layout
};

struct RankedLayout {
  Estimate estimate;
  std::string reason; ///< why it loses to the first; "best" for the first
};

struct SearchResult {
  /// The best configuration of each mesh, best first.
  std::vector<RankedLayout> ranked;
  int64_t meshes = 0;        ///< meshes whose product is the GPU count
  int64_t invalidMeshes = 0; ///< of those, rejected by validateMesh()
  int64_t evaluated = 0;     ///< configurations estimated
  int64_t tooBig = 0;        ///< of those, not fitting in memory
  /// The configuration that needs the least memory, when none fits.
  std::optional<Estimate> smallest;
  /// Why each invalid mesh was rejected (the first error of each).
  std::vector<std::string> meshErrors;
};

SearchResult search(const ModelSpec &model, const TrainingConfig &training,
                    const ClusterSpec &cluster,
                    const SearchConstraints &constraints);

/// Why `candidate` is worse than `best`: the step-time component that grew
/// the most, with both values; or, at equal time, the extra memory.
std::string explainLoss(const Estimate &candidate, const Estimate &best);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_SEARCH_H
