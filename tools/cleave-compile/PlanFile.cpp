//===- PlanFile.cpp - cleave-compile --plan --------------------*- C++ -*-===//
//
// See PlanFile.h. The plan's mesh gives the axes of size > 1, major to
// minor; its layout the ZeRO stage; its training section sequence
// parallelism and the precision.
//
//===----------------------------------------------------------------------===//

#include "PlanFile.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace cleave;

std::string cleave::applyPlanFile(const std::string &path,
                                  CleavePipelineOptions &options) {
  std::string where = "plan file '" + path + "'";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return "cannot read " + where + ": " + buffer.getError().message();
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return where + " is not JSON: " + llvm::toString(parsed.takeError());
  const llvm::json::Object *plan = parsed->getAsObject();
  if (!plan)
    return where + " is not a JSON object";
  if (plan->getString("format") != "cleave-plan")
    return where + " is not a cleave-plan plan (\"format\" is not "
                   "\"cleave-plan\")";
  if (plan->getInteger("version") != 1)
    return where + " has version " +
           std::to_string(plan->getInteger("version").value_or(-1)) +
           "; this compiler reads version 1";
  if (options.mesh.hasValue() || options.zero.hasValue() ||
      options.sp.hasValue())
    return "--plan sets --mesh, --zero and --sp: give them in the plan or "
           "on the command line, not both";

  const llvm::json::Array *mesh = plan->getArray("mesh");
  const llvm::json::Object *layout = plan->getObject("layout");
  const llvm::json::Object *training = plan->getObject("training");
  if (!mesh || !layout || !training)
    return where + " lacks its \"mesh\", \"layout\" or \"training\"";
  std::string axes;
  for (const llvm::json::Value &entry : *mesh) {
    const llvm::json::Object *axis = entry.getAsObject();
    std::optional<llvm::StringRef> name =
        axis ? axis->getString("axis") : std::nullopt;
    std::optional<int64_t> size = axis ? axis->getInteger("size") : std::nullopt;
    if (!name || !size || *size < 1)
      return where + ": a \"mesh\" entry is not {\"axis\": name, \"size\": n}";
    if (*size == 1)
      continue;
    if (*name != "dp" && *name != "tp")
      return where + " splits over " + name->str() + "=" +
             std::to_string(*size) +
             "; this compiler builds data and tensor parallelism (dp, tp), "
             "not yet pipeline, context or expert parallelism";
    axes += (axes.empty() ? "" : ",") + name->str() + "=" +
            std::to_string(*size);
  }
  if (axes.empty())
    return where + " is a one-device plan: compile without --plan";
  options.mesh = axes;
  if (std::optional<int64_t> zero = layout->getInteger("zero"))
    if (*zero > 0)
      options.zero = *zero;
  if (std::optional<bool> sp = training->getBoolean("sequence_parallel"))
    if (*sp && axes.find("tp=") != std::string::npos)
      options.sp = true;
  if (std::optional<llvm::StringRef> precision =
          training->getString("precision")) {
    std::optional<Precision> p = *precision == "fp32"   ? Precision::F32
                                 : *precision == "bf16" ? Precision::BF16
                                 : *precision == "fp16"
                                     ? std::optional(Precision::F16)
                                     : std::nullopt;
    if (!p)
      return where + " has an unknown precision '" + precision->str() + "'";
    if (options.precision.hasValue() && options.precision != *p)
      return "--precision disagrees with the precision of " + where + " (" +
             precision->str() + ")";
    options.precision = *p;
  }
  return "";
}
