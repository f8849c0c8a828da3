//===- ModelTest.cpp - parameter counts of the presets -----------------===//
//
// The parameter counts the formula gives for the preset shapes against the
// sizes their authors publish.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include <gtest/gtest.h>

using namespace cleave::planner;

namespace {

double billions(const char *preset) {
  return double(findModelPreset(preset)->spec.params().total()) / 1e9;
}

// Brown et al. 2020 (table 2.1): 175.0B, which Narayanan et al. 2021
// (section 3.1) reproduce as 12 L h^2 (1 + 13 / 12h + (V + s) / 12 L h).
TEST(ModelTest, Gpt3) {
  const ModelSpec &m = findModelPreset("gpt3-175b")->spec;
  const double L = 96, h = 12288, V = 50257, s = 2048;
  double megatron =
      12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h));
  // The formula also counts the final LayerNorm (2h).
  EXPECT_DOUBLE_EQ(double(m.params().total()), megatron + 2 * h);
  EXPECT_NEAR(billions("gpt3-175b"), 175.0, 0.5);
}

// Llama Team 2024 (table 3 and the model cards): 8.03B, 70.6B, 405.9B.
TEST(ModelTest, Llama3) {
  EXPECT_EQ(findModelPreset("llama3-8b")->spec.params().total(), 8'030'261'248);
  EXPECT_NEAR(billions("llama3-70b"), 70.55, 0.01);
  EXPECT_NEAR(billions("llama3-405b"), 405.85, 0.01);
}

// Jiang et al. 2024: 46.7B parameters, 12.9B active per token.
TEST(ModelTest, Mixtral) {
  const ModelSpec &m = findModelPreset("mixtral-8x7b")->spec;
  EXPECT_NEAR(double(m.params().total()) / 1e9, 46.7, 0.05);
  EXPECT_NEAR(m.activeParams() / 1e9, 12.9, 0.05);
}

// Narayanan et al. 2021, section 5.1 (appendix): 72 B s L h^2 (1 + s / 6h +
// V / 12 L h) FLOPs per step of B sequences, without recomputation.
TEST(ModelTest, ModelFlops) {
  const ModelSpec &m = findModelPreset("gpt3-175b")->spec;
  const double L = 96, h = 12288, V = 50257, s = 2048;
  double perToken = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  // The formula counts matmul weights only; ours also counts the biases and
  // norms of each layer: within 0.5%.
  EXPECT_NEAR(modelFlopsPerToken(m) / perToken, 1.0, 5e-3);
}

TEST(ModelTest, CheckModelNamesTheMissingFlags) {
  ModelSpec m;
  std::vector<std::string> errors = checkModel(m);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.front().find("--layers"), std::string::npos);

  m = findModelPreset("llama3-8b")->spec;
  EXPECT_TRUE(checkModel(m).empty());
  m.kvHeads = 5;
  ASSERT_EQ(checkModel(m).size(), 1u);
  EXPECT_EQ(checkModel(m).front(),
            "the 5 key/value heads must divide the 32 attention heads");
}

} // namespace
