//===- OnnxLibrary.cpp - The ONNX library's checker, converter, inference -===//
//
// Calls into libonnx, which throws on every problem it finds (and on some
// inputs it cannot handle). This is the one file of the importer built with
// -fexceptions: every exception stops here and comes back as a
// LibraryError, with the node the message names split out.
//
//===----------------------------------------------------------------------===//

#include "OnnxLibrary.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <cctype>
#include <exception>
#include <regex>

namespace ONNX_NAMESPACE::checker {
// libonnx 1.12 defines and exports this overload (the path overload calls
// it with the model's folder) but does not declare it in checker.h.
void check_model(const ModelProto &model, CheckerContext &ctx);
} // namespace ONNX_NAMESPACE::checker

using namespace cleave::onnx_import;

namespace {

/// One line, single spaces, no trailing period.
std::string tidy(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ')
        out += ' ';
      continue;
    }
    out += c;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '.'))
    out.pop_back();
  return out;
}

/// Splits libonnx's message into the problem and the node it names: the
/// checker appends "==> Context: Bad node spec for node. Name: N OpType: T"
/// to what a node's schema rejects, and names the node inline ("of node:
/// name: N OpType: T") when its inputs are not defined before it.
LibraryError describe(const char *what) {
  std::string text = what ? what : "unknown error";
  LibraryError error;
  static const std::string contextMark = "==> Context:";
  std::string context;
  if (size_t at = text.find(contextMark); at != std::string::npos) {
    context = text.substr(at + contextMark.size());
    text.erase(at);
  }
  static const std::regex node("[Nn]ame: ?(.*?) OpType: ?([A-Za-z0-9_.]+)");
  // Shape inference's prefix: "[KindError] (op_type:T, node name: N): ".
  static const std::regex inferred(
      "^(\\[[A-Za-z]+\\] )?\\(op_type:([A-Za-z0-9_.]+)"
      "(, node name: (.*?))?\\): ");
  // Shape inference's kind of error: "[ShapeInferenceError] ".
  static const std::regex kind("^\\[[A-Za-z]+Error\\] ");
  // ONNX_ASSERTM's prefix: "file.h:12: function: Assertion `cond` failed: ".
  static const std::regex assertion("^\\S+:[0-9]+: \\S+: (Assertion `[^`]*` "
                                    "failed)(: )?");
  std::smatch match;
  std::string tidyContext = tidy(context), tidyText = tidy(text);
  if (std::regex_search(tidyText, match, assertion)) {
    std::string rest = tidy(match.suffix().str());
    tidyText = rest.empty() ? match[1].str() : rest;
  }
  if (std::regex_search(tidyText, match, inferred)) {
    error.nodeOpType = match[2].str();
    error.nodeName = match[4].str();
    tidyText = std::regex_replace(match.suffix().str(), kind, "");
  } else if (std::regex_search(tidyContext, match, node) ||
             std::regex_search(tidyText, match, node)) {
    error.nodeName = match[1].str();
    error.nodeOpType = match[2].str();
  }
  error.message = tidyText.empty() ? tidyContext : tidyText;
  return error;
}

/// Runs `body`, turning whatever it throws into a LibraryError.
template <typename Body> std::optional<LibraryError> guarded(Body body) {
  try {
    body();
  } catch (const std::exception &e) {
    return describe(e.what());
  } catch (...) {
    return describe("unknown exception");
  }
  return std::nullopt;
}

} // namespace

int64_t cleave::onnx_import::libraryMaxOpset() {
  const auto &ranges =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find(onnx::ONNX_DOMAIN);
  return it == ranges.end() ? 0 : it->second.second;
}

int64_t cleave::onnx_import::libraryIrVersion() { return onnx::IR_VERSION; }

std::optional<LibraryError>
cleave::onnx_import::checkModel(const onnx::ModelProto &model,
                                const std::string &modelDir) {
  return guarded([&] {
    onnx::checker::CheckerContext ctx;
    // As check_model(path) does: the folder with its trailing separator.
    ctx.set_model_dir(
        modelDir.empty() || modelDir.back() == '/' ? modelDir : modelDir + "/");
    onnx::checker::check_model(model, ctx);
  });
}

std::optional<LibraryError>
cleave::onnx_import::convertVersion(const onnx::ModelProto &model,
                                    int64_t targetOpset,
                                    onnx::ModelProto &converted) {
  return guarded([&] {
    converted = onnx::version_conversion::ConvertVersion(
        model, static_cast<int>(targetOpset));
  });
}

std::optional<LibraryError>
cleave::onnx_import::inferShapes(onnx::ModelProto &model) {
  return guarded([&] {
    onnx::ShapeInferenceOptions options(/*check_type_val=*/false,
                                        /*strict_mode_val=*/0,
                                        /*data_prop_val=*/false);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), options);
  });
}
