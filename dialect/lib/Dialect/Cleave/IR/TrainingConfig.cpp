//===- TrainingConfig.cpp - the cleave.training_config schema -----------===//
//
// One table of the keys of a training configuration (the dictionary that
// -cleave-add-optimizer or -cleave-autodiff puts on the training function)
// drives its verification, that of the loss keys alone (`cleave.loss`, which
// the passes before the optimizer's hand on) and the conversion to the JSON
// object of the program metadata, which the runtime reads; the table's order
// is the JSON's.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>
#include <cmath>

using namespace mlir;
using namespace cleave;

namespace {

enum class ValueKind { String, Float, Integer, Bool };

struct ConfigKey {
  llvm::StringLiteral name;
  ValueKind kind;
  /// Present in every configuration (of its optimizer, when `optimizer` is
  /// set).
  bool required;
  /// The optimizer the key belongs to; empty: any.
  llvm::StringLiteral optimizer;
  /// Decided with the loss, before any optimizer (`cleave.loss`).
  bool lossKey = false;
};

constexpr ConfigKey kKeys[] = {
    {"loss", ValueKind::String, true, "", /*lossKey=*/true},
    {"optimizer", ValueKind::String, true, ""},
    {"lr", ValueKind::Float, true, ""},
    {"momentum", ValueKind::Float, true, "sgd"},
    {"dampening", ValueKind::Float, true, "sgd"},
    {"nesterov", ValueKind::Bool, true, "sgd"},
    {"beta1", ValueKind::Float, true, "adamw"},
    {"beta2", ValueKind::Float, true, "adamw"},
    {"eps", ValueKind::Float, true, "adamw"},
    {"ignore_index", ValueKind::Integer, false, "", /*lossKey=*/true},
    {"weight_decay", ValueKind::Float, true, ""},
    {"grad_clip", ValueKind::Float, true, ""},
    {"accumulate", ValueKind::Integer, true, "", /*lossKey=*/true},
    {"moe_aux_loss", ValueKind::Float, false, "", /*lossKey=*/true},
    {"precision", ValueKind::String, false, ""},
    {"loss_scale", ValueKind::Float, false, "", /*lossKey=*/true},
    {"loss_scale_growth_interval", ValueKind::Integer, false, ""},
    {"run_time_hyperparameters", ValueKind::Bool, false, ""},
};

const ConfigKey *findKey(StringRef name) {
  for (const ConfigKey &key : kKeys)
    if (key.name == name)
      return &key;
  return nullptr;
}

bool hasKind(Attribute value, ValueKind kind) {
  switch (kind) {
  case ValueKind::String:
    return isa<StringAttr>(value);
  case ValueKind::Float: {
    auto f = dyn_cast<FloatAttr>(value);
    return f && f.getType().isF64();
  }
  case ValueKind::Integer: {
    auto i = dyn_cast<IntegerAttr>(value);
    return i && i.getType().isInteger(64);
  }
  case ValueKind::Bool:
    return isa<BoolAttr>(value);
  }
  llvm_unreachable("unknown value kind");
}

const char *kindName(ValueKind kind) {
  switch (kind) {
  case ValueKind::String:
    return "a string";
  case ValueKind::Float:
    return "an f64 float";
  case ValueKind::Integer:
    return "an i64 integer";
  case ValueKind::Bool:
    return "a bool";
  }
  llvm_unreachable("unknown value kind");
}

/// The shortest text that reads back as `v`. (llvm::json writes doubles
/// with 17 significant digits, 0.1 as 0.10000000000000001: the same value,
/// but not what the user wrote.)
std::string shortest(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

/// Each entry a known key (a loss key when `lossKeys`) with a value of its
/// kind, and finite.
LogicalResult checkEntries(DictionaryAttr config, bool lossKeys,
                           function_ref<InFlightDiagnostic()> emitError) {
  for (NamedAttribute entry : config) {
    const ConfigKey *key = findKey(entry.getName().getValue());
    if (!key || (lossKeys && !key->lossKey))
      return emitError() << "unknown key '" << entry.getName().getValue()
                         << "'";
    if (!hasKind(entry.getValue(), key->kind))
      return emitError() << "expects '" << key->name << "' to be "
                         << kindName(key->kind) << ", got "
                         << entry.getValue();
    if (auto f = dyn_cast<FloatAttr>(entry.getValue()))
      if (!std::isfinite(f.getValueAsDouble()))
        return emitError() << "expects '" << key->name
                           << "' to be finite (JSON has no inf or NaN), got "
                           << f;
  }
  return success();
}

} // namespace

LogicalResult
cleave::verifyLossConfig(DictionaryAttr config,
                         function_ref<InFlightDiagnostic()> emitError) {
  if (failed(checkEntries(config, /*lossKeys=*/true, emitError)))
    return failure();
  for (StringRef name : {"loss", "accumulate"})
    if (!config.get(name))
      return emitError() << "misses the key '" << name << "'";
  StringRef loss = config.getAs<StringAttr>("loss").getValue();
  if (loss != "cross-entropy" && loss != "mse")
    return emitError() << "expects 'loss' to be \"cross-entropy\" or "
                          "\"mse\", got \""
                       << loss << "\"";
  if (config.get("ignore_index") && loss != "cross-entropy")
    return emitError() << "'ignore_index' applies to the cross-entropy loss";
  if (config.getAs<IntegerAttr>("accumulate").getInt() < 1)
    return emitError() << "expects 'accumulate' to be >= 1, got "
                       << config.getAs<IntegerAttr>("accumulate").getInt();
  if (auto scale = config.getAs<FloatAttr>("loss_scale");
      scale && !(scale.getValueAsDouble() > 0))
    return emitError() << "expects 'loss_scale' to be > 0, got "
                       << scale.getValueAsDouble();
  return success();
}

LogicalResult
cleave::verifyTrainingConfig(DictionaryAttr config,
                             function_ref<InFlightDiagnostic()> emitError) {
  if (failed(checkEntries(config, /*lossKeys=*/false, emitError)))
    return failure();
  auto string = [&](StringRef name) {
    auto s = config.getAs<StringAttr>(name);
    return s ? s.getValue() : StringRef();
  };
  // The loss and the optimizer first: the other keys depend on them.
  for (StringRef name : {"loss", "optimizer"})
    if (!config.get(name))
      return emitError() << "misses the key '" << name << "'";
  StringRef loss = string("loss"), optimizer = string("optimizer");
  if (loss != "cross-entropy" && loss != "mse")
    return emitError() << "expects 'loss' to be \"cross-entropy\" or "
                          "\"mse\", got \""
                       << loss << "\"";
  if (optimizer != "sgd" && optimizer != "adamw")
    return emitError() << "expects 'optimizer' to be \"sgd\" or \"adamw\", "
                          "got \""
                       << optimizer << "\"";
  for (const ConfigKey &key : kKeys) {
    bool present = static_cast<bool>(config.get(key.name));
    bool applies = key.optimizer.empty() || key.optimizer == optimizer;
    if (key.required && applies && !present)
      return emitError() << "misses the key '" << key.name << "'";
    if (present && !applies)
      return emitError() << "'" << key.name << "' applies to the "
                         << key.optimizer << " optimizer, not to "
                         << optimizer;
  }
  if (config.get("ignore_index") && loss != "cross-entropy")
    return emitError() << "'ignore_index' applies to the cross-entropy loss";
  for (StringRef name : {"lr", "weight_decay", "grad_clip"})
    if (config.getAs<FloatAttr>(name).getValueAsDouble() < 0)
      return emitError() << "expects '" << name << "' to be >= 0, got "
                         << config.getAs<FloatAttr>(name).getValueAsDouble();
  if (config.getAs<IntegerAttr>("accumulate").getInt() < 1)
    return emitError() << "expects 'accumulate' to be >= 1, got "
                       << config.getAs<IntegerAttr>("accumulate").getInt();
  if (config.get("precision") && string("precision") != "bf16" &&
      string("precision") != "f16")
    return emitError() << "expects 'precision' to be \"bf16\" or \"f16\", "
                          "got \""
                       << string("precision") << "\"";
  auto scale = config.getAs<FloatAttr>("loss_scale");
  auto interval = config.getAs<IntegerAttr>("loss_scale_growth_interval");
  if (static_cast<bool>(scale) != static_cast<bool>(interval))
    return emitError() << "expects 'loss_scale' and "
                          "'loss_scale_growth_interval' together";
  if (scale && !(scale.getValueAsDouble() > 0))
    return emitError() << "expects 'loss_scale' to be > 0, got "
                       << scale.getValueAsDouble();
  if (interval && interval.getInt() < 1)
    return emitError() << "expects 'loss_scale_growth_interval' to be >= 1, "
                          "got "
                       << interval.getInt();
  return success();
}

std::string cleave::getTrainingConfigJson(DictionaryAttr config) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os);
  json.object([&] {
    for (const ConfigKey &key : kKeys) {
      Attribute value = config.get(key.name);
      if (!value)
        continue;
      json.attributeBegin(key.name);
      switch (key.kind) {
      case ValueKind::String:
        json.value(cast<StringAttr>(value).getValue());
        break;
      case ValueKind::Float:
        json.rawValue(shortest(cast<FloatAttr>(value).getValueAsDouble()));
        break;
      case ValueKind::Integer:
        json.value(cast<IntegerAttr>(value).getInt());
        break;
      case ValueKind::Bool:
        json.value(cast<BoolAttr>(value).getValue());
        break;
      }
      json.attributeEnd();
    }
  });
  return text;
}
