//===- Model.cpp - model shapes, parameter counts and presets -----------===//
//
// Parameter counting from shapes (the formula) or from tensors (a model
// file), and the published shapes of the preset models.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Model.h"

namespace cleave::planner {

const char *archName(Arch arch) {
  switch (arch) {
  case Arch::GPT:
    return "gpt";
  case Arch::Llama:
    return "llama";
  case Arch::MoE:
    return "moe";
  }
  return "?";
}

std::optional<Arch> parseArch(std::string_view name) {
  if (name == "gpt")
    return Arch::GPT;
  if (name == "llama")
    return Arch::Llama;
  if (name == "moe")
    return Arch::MoE;
  return std::nullopt;
}

int64_t ParamTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

ParamCounts countTensors(const std::vector<ParamTensor> &tensors) {
  ParamCounts c;
  for (const ParamTensor &t : tensors) {
    int64_t n = t.numElements();
    switch (t.role) {
    case ParamRole::TokenEmbedding:
      c.tokenEmbedding += n;
      c.embedding += n;
      break;
    case ParamRole::Embedding:
      c.embedding += n;
      break;
    case ParamRole::Head:
      c.head += n;
      break;
    case ParamRole::Layer:
      c.layers += n;
      break;
    case ParamRole::Expert:
      c.experts += n;
      break;
    case ParamRole::Final:
      c.final += n;
      break;
    case ParamRole::Frozen:
      c.frozen += n;
      break;
    }
  }
  return c;
}

int64_t alignedParamBytes(const std::vector<ParamTensor> &tensors,
                          int64_t alignment) {
  int64_t bytes = 0;
  for (const ParamTensor &t : tensors)
    bytes += (t.bytes() + alignment - 1) / alignment * alignment;
  return bytes;
}

void ModelSpec::applyArchDefaults(Arch a) {
  arch = a;
  // GPT-2/3: LayerNorm and linear biases, GELU MLP, tied LM head, learned
  // positions, dropout. Llama and Mixtral: RMSNorm, no biases, SwiGLU, untied
  // head, rotary positions, no dropout.
  bool gpt = a == Arch::GPT;
  gatedMlp = !gpt;
  biases = gpt;
  tiedEmbeddings = gpt;
  learnedPositions = gpt;
  dropout = gpt;
}

ParamCounts countParams(const ModelSpec &m) {
  const int64_t h = m.hidden, kv = m.kvHeads ? m.kvHeads : m.heads;
  const int64_t qkvOut = h + 2 * kv * m.headDim();
  int64_t attention = h * qkvOut + h * h;
  if (m.biases)
    attention += qkvOut + h;
  int64_t mlp = (m.gatedMlp ? 3 : 2) * h * m.ffn;
  if (m.biases)
    mlp += (m.gatedMlp ? 2 * m.ffn : m.ffn) + h;
  // LayerNorm has a bias; RMSNorm (the bias-free models) does not.
  const int64_t norm = m.biases ? 2 * h : h;

  ParamCounts c;
  c.tokenEmbedding = m.vocab * h;
  c.embedding = c.tokenEmbedding + (m.learnedPositions ? m.seq * h : 0);
  c.head = m.tiedEmbeddings ? 0 : m.vocab * h;
  int64_t dense = attention + 2 * norm;
  if (m.isMoE()) {
    dense += h * m.experts; // router
    c.experts = m.layers * m.experts * mlp;
  } else {
    dense += mlp;
  }
  c.layers = m.layers * dense;
  c.final = norm;
  return c;
}

ParamCounts ModelSpec::params() const {
  return measured ? *measured : countParams(*this);
}

double ModelSpec::activeParams() const {
  ParamCounts c = params();
  double active = double(c.total() - c.experts);
  if (isMoE() && topK > 0)
    active += double(c.experts) * double(topK) / double(experts);
  return active;
}

std::vector<std::string> checkModel(const ModelSpec &m) {
  std::vector<std::string> errors;
  auto need = [&](int64_t value, const char *what, const char *flag) {
    if (value <= 0)
      errors.push_back(std::string("the ") + what + " is unknown: give " +
                       flag);
  };
  need(m.layers, "number of layers", "--layers");
  need(m.hidden, "hidden size", "--hidden");
  need(m.heads, "number of attention heads", "--heads");
  need(m.ffn, "FFN size", "--ffn");
  need(m.vocab, "vocabulary size", "--vocab");
  need(m.seq, "sequence length", "--seq");
  if (!errors.empty())
    return errors;
  if (m.hidden % m.heads != 0)
    errors.push_back("the hidden size " + std::to_string(m.hidden) +
                     " is not a multiple of the " + std::to_string(m.heads) +
                     " heads");
  if (m.kvHeads < 0 || m.kvHeads > m.heads ||
      (m.kvHeads && m.heads % m.kvHeads))
    errors.push_back("the " + std::to_string(m.kvHeads) +
                     " key/value heads must divide the " +
                     std::to_string(m.heads) + " attention heads");
  if (m.arch == Arch::MoE && m.experts <= 0)
    errors.push_back("a mixture-of-experts model needs --experts");
  if (m.experts > 0 && (m.topK <= 0 || m.topK > m.experts))
    errors.push_back("top-k must be between 1 and the " +
                     std::to_string(m.experts) + " experts: give --top-k");
  return errors;
}

namespace {

ModelSpec makeSpec(const char *name, Arch arch, int64_t layers, int64_t hidden,
                   int64_t heads, int64_t kvHeads, int64_t ffn, int64_t vocab,
                   int64_t seq, int64_t experts = 0, int64_t topK = 0) {
  ModelSpec s;
  s.name = name;
  s.applyArchDefaults(arch);
  s.layers = layers;
  s.hidden = hidden;
  s.heads = heads;
  s.kvHeads = kvHeads;
  s.ffn = ffn;
  s.vocab = vocab;
  s.seq = seq;
  s.experts = experts;
  s.topK = topK;
  return s;
}

} // namespace

const std::vector<ModelPreset> &modelPresets() {
  static const std::vector<ModelPreset> presets = {
      // Brown et al. 2020, "Language Models are Few-Shot Learners", table
      // 2.1: 96 layers, d_model 12288, 96 heads of 128, context 2048; the
      // GPT-2 BPE vocabulary of 50257 tokens (Radford et al. 2019); FFN
      // 4 d_model. Batch: 1536 sequences, as Narayanan et al. 2021 (table 1)
      // train it. 174.6 B parameters by this count (the paper rounds to 175).
      {"gpt3-175b", "GPT-3 175B (Brown et al. 2020)",
       makeSpec("gpt3-175b", Arch::GPT, 96, 12288, 96, 96, 4 * 12288, 50257,
                2048),
       1536},
      // Llama Team 2024, "The Llama 3 Herd of Models", table 3 (layers,
      // model dim, FFN dim, heads, 8 key/value heads); vocabulary 128256 as
      // in the released config.json (128K tokens + 256 special); 8K-token
      // pre-training sequences and 8M-token batches (section 3.4.1): 1024
      // sequences. 8.03 B, 70.6 B and 405.9 B parameters by this count.
      {"llama3-8b", "Llama 3 8B (Llama Team 2024)",
       makeSpec("llama3-8b", Arch::Llama, 32, 4096, 32, 8, 14336, 128256, 8192),
       1024},
      {"llama3-70b", "Llama 3 70B (Llama Team 2024)",
       makeSpec("llama3-70b", Arch::Llama, 80, 8192, 64, 8, 28672, 128256,
                8192),
       1024},
      {"llama3-405b", "Llama 3 405B (Llama Team 2024)",
       makeSpec("llama3-405b", Arch::Llama, 126, 16384, 128, 8, 53248, 128256,
                8192),
       1024},
      // Jiang et al. 2024, "Mixtral of Experts", table 1: dim 4096, 32
      // layers, 32 heads of 128, 8 key/value heads, hidden_dim 14336, 8
      // experts, top-2, vocabulary 32000, context 32768. Training batch not
      // published: 512 sequences assumed. 46.7 B parameters, 12.9 B active.
      {"mixtral-8x7b", "Mixtral 8x7B (Jiang et al. 2024)",
       makeSpec("mixtral-8x7b", Arch::MoE, 32, 4096, 32, 8, 14336, 32000, 32768,
                8, 2),
       512},
  };
  return presets;
}

const ModelPreset *findModelPreset(std::string_view name) {
  for (const ModelPreset &p : modelPresets())
    if (name == p.name)
      return &p;
  return nullptr;
}

} // namespace cleave::planner
