//===- DistExplain.cpp - why each collective of a partitioned program -----===//
//
// -dist-explain: one line per collective (place, kind, bytes per rank,
// cause) and the totals per axis and kind (see Passes.td). The cause is
// the name -dist-partition gave the collective's location.
//
//===----------------------------------------------------------------------===//

#include "ShardingLayout.h"
#include "TrainingStep.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace cleave {
#define GEN_PASS_DEF_DISTEXPLAINPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

namespace {

int64_t bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

/// Where in the step an op is: `forward mb 0 layer 1`.
std::string placeOf(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (std::optional<graph::Phase> phase = phaseOf(op))
    os << graph::stringifyPhase(*phase);
  else
    os << "-";
  if (std::optional<int64_t> mb = microbatchOf(op))
    os << " mb " << *mb;
  if (std::optional<int64_t> layer = layerOf(op))
    os << " layer " << *layer;
  return s;
}

struct Collective {
  StringRef kind;
  ArrayRef<Attribute> axes;
  int64_t bytesPerRank;
};

/// The kind, the axes and the bytes each rank sends, or none for an op
/// that is not a collective.
std::optional<Collective> describe(Operation *op, MeshOp mesh) {
  auto group = [&](ArrayAttr axes) {
    int64_t n = 1;
    for (Attribute a : axes)
      n *= mesh.getAxisSize(cast<StringAttr>(a).getValue()).value_or(1);
    return n;
  };
  return llvm::TypeSwitch<Operation *, std::optional<Collective>>(op)
      .Case([&](AllReduceOp c) -> std::optional<Collective> {
        int64_t n = group(c.getAxes());
        return Collective{"all_reduce", c.getAxes().getValue(),
                          2 * (n - 1) * bytesOf(c.getInput()) / n};
      })
      .Case([&](AllGatherOp c) -> std::optional<Collective> {
        int64_t n = group(c.getAxes());
        return Collective{"all_gather", c.getAxes().getValue(),
                          (n - 1) * bytesOf(c.getResult()) / n};
      })
      .Case([&](ReduceScatterOp c) -> std::optional<Collective> {
        int64_t n = group(c.getAxes());
        return Collective{"reduce_scatter", c.getAxes().getValue(),
                          (n - 1) * bytesOf(c.getInput()) / n};
      })
      .Case([&](AllToAllOp c) -> std::optional<Collective> {
        int64_t n = group(c.getAxes());
        return Collective{"all_to_all", c.getAxes().getValue(),
                          (n - 1) * bytesOf(c.getInput()) / n};
      })
      .Case([&](CollectivePermuteOp c) -> std::optional<Collective> {
        // Every source sends its whole block (a ring: every member).
        return Collective{"collective_permute", c.getAxes().getValue(),
                          c.getPairs().empty() ? 0 : bytesOf(c.getInput())};
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::string axesText(ArrayRef<Attribute> axes) {
  std::string s = "[";
  llvm::interleave(
      axes, [&](Attribute a) { s += "\"" + cast<StringAttr>(a).str() + "\""; },
      [&] { s += ", "; });
  return s + "]";
}

struct DistExplainPass
    : public cleave::impl::DistExplainPassBase<DistExplainPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.size() != 1)
      return;
    MeshOp mesh = meshes.front();
    llvm::raw_ostream &os = llvm::outs();
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!fn->hasAttr(DistDialect::getPartitionedAttrName()))
        continue;
      std::map<std::pair<std::string, std::string>, int64_t> totals;
      std::vector<std::string> lines;
      fn.walk([&](Operation *op) {
        std::optional<Collective> c = describe(op, mesh);
        if (!c)
          return;
        std::string axes = axesText(c->axes);
        totals[{axes, c->kind.str()}] += c->bytesPerRank;
        std::string cause = "(inserted by hand)";
        std::string where;
        if (auto name = dyn_cast<NameLoc>(op->getLoc())) {
          cause = name.getName().str();
          llvm::raw_string_ostream ws(where);
          ws << name.getChildLoc();
        } else {
          llvm::raw_string_ostream ws(where);
          ws << op->getLoc();
        }
        std::string type;
        llvm::raw_string_ostream ts(type);
        ts << op->getOperand(0).getType();
        lines.push_back(llvm::formatv("  {0,3}  {1,-24} {2} {3} {4}  {5} B/rank"
                                      "\n       {6}\n       at {7}",
                                      lines.size() + 1, placeOf(op), c->kind,
                                      axes, type, c->bytesPerRank, cause, where)
                            .str());
      });
      os << "dist-explain: @" << fn.getSymName() << " on " << mesh.getSymName()
         << " (" << mesh.getNumDevices() << " devices): " << lines.size()
         << " collectives; per rank and step:";
      if (totals.empty())
        os << " nothing";
      bool first = true;
      for (auto &[key, bytes] : totals) {
        os << (first ? " " : ", ") << key.second << " over " << key.first
           << " " << bytes << " B";
        first = false;
      }
      os << "\n";
      for (const std::string &line : lines)
        os << line << "\n";
    }
  }
};

} // namespace
