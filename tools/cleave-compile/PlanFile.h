//===- PlanFile.h - cleave-compile --plan ----------------------*- C++ -*-===//
//
// Reads the layout of a cleave-plan plan file (docs/planner.md, format
// version 1) into the pipeline's distribution options.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_CLEAVE_COMPILE_PLANFILE_H
#define CLEAVE_TOOLS_CLEAVE_COMPILE_PLANFILE_H

#include "cleave/Transforms/Pipeline.h"

#include <string>

namespace cleave {

/// Sets --mesh, --zero, --sp and --precision from the plan file at `path`,
/// and with pp > 1 --microbatches, --schedule, --virtual-stages and
/// --pipeline-split (the planner's layer ranges).
/// Returns an error message naming the problem (a missing or malformed
/// file, another format or version, a layout this compiler cannot build,
/// a flag given on the command line as well), or "" on success.
std::string applyPlanFile(const std::string &path,
                          CleavePipelineOptions &options);

} // namespace cleave

#endif // CLEAVE_TOOLS_CLEAVE_COMPILE_PLANFILE_H
