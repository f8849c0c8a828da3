//===- Model.h - the model the planner reasons about ------------*- C++ -*-===//
//
// A decoder-only transformer described by its shapes (layers, hidden size,
// heads, FFN, vocabulary, sequence, experts), with parameter counts either
// derived from those shapes or measured exactly from a model file. Presets
// for well-known models carry the published shapes and their sources.
//
// This part of the planner is plain C++17: no MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_MODEL_H
#define CLEAVE_PLANNER_MODEL_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::planner {

/// Architecture families. They set the defaults of the finer switches below
/// (MLP form, biases, tied embeddings, position embeddings, dropout).
enum class Arch { GPT, Llama, MoE };

const char *archName(Arch arch);
std::optional<Arch> parseArch(std::string_view name);

/// Where a parameter lives in a pipeline and whether it is trained.
enum class ParamRole {
  Embedding,      ///< token or position embedding: first stage
  TokenEmbedding, ///< the token embedding (also the LM head when tied)
  Head,           ///< an untied LM head: last stage
  Layer,          ///< dense parameter of a transformer layer
  Expert,         ///< expert MLP parameter of a transformer layer
  Final,          ///< final norm and the like: last stage
  Frozen,         ///< not trained: no gradient, no optimizer state
};

/// One parameter tensor of a model file.
struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t elementBytes = 4;
  ParamRole role = ParamRole::Layer;

  int64_t numElements() const;
  int64_t bytes() const { return numElements() * elementBytes; }
};

/// Parameter counts grouped by where a pipeline places them.
struct ParamCounts {
  int64_t embedding = 0;      ///< token + position embeddings (first stage)
  int64_t tokenEmbedding = 0; ///< the part of `embedding` that a tied LM
                              ///< head reuses (copied to the last stage)
  int64_t head = 0;           ///< untied LM head (last stage); 0 when tied
  int64_t layers = 0;         ///< dense parameters of all layers
  int64_t experts = 0;        ///< expert parameters of all layers
  int64_t final = 0;          ///< final norm (last stage)
  int64_t frozen = 0;         ///< untrained parameters (first stage)

  int64_t total() const {
    return embedding + head + layers + experts + final + frozen;
  }
  int64_t trainable() const { return total() - frozen; }
};

/// Counts `tensors` by role.
ParamCounts countTensors(const std::vector<ParamTensor> &tensors);

/// Bytes of the parameter region that `-cleave-plan-memory` lays out for
/// `tensors`: each tensor in declaration order at an offset aligned to
/// `alignment` bytes (64 by default), so each takes its size rounded up.
int64_t alignedParamBytes(const std::vector<ParamTensor> &tensors,
                          int64_t alignment = 64);

/// A decoder-only transformer.
struct ModelSpec {
  std::string name;
  Arch arch = Arch::GPT;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0; ///< key/value heads (grouped-query attention)
  int64_t ffn = 0;     ///< FFN inner size (per expert for MoE)
  int64_t vocab = 0;
  int64_t seq = 0;     ///< training sequence length
  int64_t experts = 0; ///< 0 for a dense model
  int64_t topK = 0;    ///< experts per token

  bool gatedMlp = false;        ///< SwiGLU: three FFN matrices, else two
  bool biases = true;           ///< linear layers and norms have biases
  bool tiedEmbeddings = true;   ///< the LM head is the token embedding
  bool learnedPositions = true; ///< a learned position embedding table
  bool dropout = true;          ///< dropout masks are kept for backward

  /// Exact counts measured from a model file; when unset, `params()` derives
  /// them from the shapes.
  std::optional<ParamCounts> measured;

  /// Sets the switches above to the defaults of `arch`.
  void applyArchDefaults(Arch arch);

  int64_t headDim() const { return heads ? hidden / heads : 0; }
  bool isMoE() const { return experts > 0; }

  /// The measured counts, or those of the formula.
  ParamCounts params() const;
  /// Parameters used per token: experts scaled by topK / experts.
  double activeParams() const;
};

/// Parameter counts from the shapes alone. Per layer: attention
/// `h (h + 2 kv d) + h^2` (plus biases), MLP `2 h F` or `3 h F` (gated),
/// two norms; embeddings `V h` (+ `S h` learned positions); an untied head
/// `V h`. For GPT (F = 4h) this is Megatron-LM's
/// `12 L h^2 (1 + 13 / 12h + (V + S) / 12 L h)` plus the final norm.
ParamCounts countParams(const ModelSpec &model);

/// The missing or inconsistent shapes of `model`, as messages naming the
/// flag that sets each; empty when the model is complete.
std::vector<std::string> checkModel(const ModelSpec &model);

/// A published model.
struct ModelPreset {
  const char *name;
  const char *description;
  ModelSpec spec;
  int64_t globalBatch; ///< sequences per step used in training, if published
};

const std::vector<ModelPreset> &modelPresets();
const ModelPreset *findModelPreset(std::string_view name);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_MODEL_H
