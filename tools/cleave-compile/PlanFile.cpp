//===- PlanFile.cpp - cleave-compile --plan --------------------*- C++ -*-===//
//
// See PlanFile.h. The plan's mesh gives the axes of size > 1, major to
// minor; its layout the ZeRO stage and, with pp > 1, the microbatches, the
// schedule and the virtual stages; its stages the layers of each pipeline
// chunk; its training section sequence parallelism and the precision.
//
//===----------------------------------------------------------------------===//

#include "PlanFile.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace cleave;

namespace {

/// The pipeline of a plan with pp > 1: the microbatches, the schedule, the
/// virtual stages and the planner's layer ranges, which the compiler takes
/// as --pipeline-split so that both cut the model alike.
std::string applyPipeline(const std::string &where,
                          const llvm::json::Object &plan,
                          const llvm::json::Object &layout,
                          CleavePipelineOptions &options) {
  std::optional<int64_t> pp = layout.getInteger("pp");
  std::optional<int64_t> microbatches = layout.getInteger("microbatches");
  std::optional<llvm::StringRef> schedule = layout.getString("schedule");
  std::optional<int64_t> virtualStages = layout.getInteger("virtual_stages");
  const llvm::json::Array *stages = plan.getArray("stages");
  if (!pp || !microbatches || !schedule || !virtualStages || !stages)
    return where + " has pp > 1 but lacks the layout's \"pp\", "
                   "\"microbatches\", \"schedule\" or \"virtual_stages\", "
                   "or the \"stages\"";
  if (*schedule != "gpipe" && *schedule != "1f1b" &&
      *schedule != "interleaved")
    return where + " has an unknown schedule '" + schedule->str() +
           "' (gpipe, 1f1b or interleaved)";
  const int64_t v = *virtualStages;
  if (int64_t(stages->size()) != *pp || v < 1)
    return where + " lists " + std::to_string(stages->size()) +
           " stages for pp=" + std::to_string(*pp);
  // Chunk k = i * pp + s is stage s's i-th [first, end) range.
  std::vector<int64_t> starts(*pp * v, -1);
  for (const llvm::json::Value &entry : *stages) {
    const llvm::json::Object *stage = entry.getAsObject();
    std::optional<int64_t> s = stage ? stage->getInteger("stage") : std::nullopt;
    const llvm::json::Array *layers = stage ? stage->getArray("layers") : nullptr;
    if (!s || *s < 0 || *s >= *pp || !layers || int64_t(layers->size()) != v)
      return where + ": a \"stages\" entry is not {\"stage\": s, "
                     "\"layers\": [" + std::to_string(v) + " [first, end) "
                     "ranges]}";
    for (int64_t i = 0; i < v; ++i) {
      const llvm::json::Array *range = (*layers)[i].getAsArray();
      std::optional<int64_t> first =
          range && range->size() == 2 ? (*range)[0].getAsInteger()
                                      : std::nullopt;
      if (!first)
        return where + ": stage " + std::to_string(*s) +
               "'s layers are not [first, end) ranges";
      starts[i * *pp + *s] = *first;
    }
  }
  for (size_t k = 1; k < starts.size(); ++k)
    if (starts[k] <= starts[k - 1])
      return where + ": the stages' layer ranges are not consecutive runs "
                     "of layers in chunk order";
  if (starts.front() != 0)
    return where + ": the first chunk does not start at layer 0";
  if (starts.size() > 1)
    options.pipelineSplit =
        llvm::ArrayRef<int64_t>(starts).drop_front();
  options.microbatches = *microbatches;
  options.schedule = schedule->str();
  if (*schedule == "interleaved")
    options.virtualStages = v;
  return "";
}

} // namespace

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
      options.sp.hasValue() || options.microbatches.hasValue() ||
      options.schedule.hasValue() || options.virtualStages.hasValue() ||
      options.pipelineSplit.hasValue())
    return "--plan sets --mesh, --zero, --sp, --microbatches, --schedule, "
           "--virtual-stages and --pipeline-split: give them in the plan or "
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
    if (*name != "pp" && *name != "dp" && *name != "ep" && *name != "cp" &&
        *name != "tp")
      return where + " splits over " + name->str() + "=" +
             std::to_string(*size) +
             "; this compiler knows the axes pp, dp, ep, cp and tp";
    axes += (axes.empty() ? "" : ",") + name->str() + "=" +
            std::to_string(*size);
  }
  if (axes.empty())
    return where + " is a one-device plan: compile without --plan";
  options.mesh = axes;
  // ZeRO shards over dp; a plan without dp (cp or ep alone) has nothing
  // for it to split.
  if (std::optional<int64_t> zero = layout->getInteger("zero"))
    if (*zero > 0 && options.hasMeshAxis("dp"))
      options.zero = *zero;
  if (axes.rfind("pp=", 0) == 0)
    if (std::string err = applyPipeline(where, *plan, *layout, options);
        !err.empty())
      return err;
  // Selective recomputation is what the fused attention does anyway.
  if (layout->getString("recompute") == "full")
    options.recompute = "full";
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
