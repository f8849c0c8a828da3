//===- ReportTest.cpp - JSON and plan-file output -----------------------===//
//
// The `--json` object has exactly the keys of the schema, in order;
// the plan file carries its format name and version, the mesh and the
// layer ranges of each stage.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Report.h"

#include <gtest/gtest.h>

using namespace cleave::planner;

namespace {

Estimate sample(ModelSpec &model, TrainingConfig &training,
                ClusterSpec &cluster, Schedule schedule) {
  model = findModelPreset("llama3-8b")->spec;
  training.globalBatch = 64;
  cluster = findClusterPreset("h100")->spec;
  cluster.gpus = 16;
  Layout l;
  l.tp = 2;
  l.pp = 4;
  l.dp = 2;
  l.microbatches = 8;
  l.schedule = schedule;
  l.virtualStages = 2;
  l.zero = 1;
  l.recompute = Recompute::Selective;
  return estimate(model, training, cluster, l);
}

/// The keys of a JSON text at nesting `depth` (1: the top-level object).
std::vector<std::string> keysAtDepth(const std::string &json, int depth) {
  std::vector<std::string> keys;
  int level = 0;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '{' || c == '[')
      ++level;
    else if (c == '}' || c == ']')
      --level;
    else if (c == '"') {
      size_t end = json.find('"', i + 1);
      if (level == depth && json.compare(end + 1, 1, ":") == 0)
        keys.push_back(json.substr(i + 1, end - i - 1));
      i = end;
    }
  }
  return keys;
}

TEST(ReportTest, JsonSchema) {
  ModelSpec m;
  TrainingConfig t;
  ClusterSpec c;
  Estimate e = sample(m, t, c, Schedule::OneFOneB);
  std::string json = estimateToJson(e);
  EXPECT_EQ(keysAtDepth(json, 1),
            (std::vector<std::string>{
                "layout", "memory_gb", "comm_gb", "bubble", "stages",
                "step_time_s", "tflops_per_gpu", "hw_tflops_per_gpu", "mfu",
                "fits", "usable_gb", "over_gb", "stages_over"}));
  EXPECT_NE(json.find("\"layout\": {\n    \"dp\": 2,\n    \"tp\": 2,\n    "
                      "\"pp\": 4,\n    \"cp\": 1,\n    \"ep\": 1,\n    "
                      "\"zero\": 1,\n    \"microbatches\": 8,\n    "
                      "\"micro_batch_size\": 4,\n    \"schedule\": \"1f1b\",\n "
                      "   \"recompute\": "
                      "\"selective\"\n  }"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"memory_gb\": {\n    \"params\": "), std::string::npos);
  EXPECT_NE(json.find("\"total\": "), std::string::npos);
}

TEST(ReportTest, PlanFile) {
  ModelSpec m;
  TrainingConfig t;
  ClusterSpec c;
  Estimate e = sample(m, t, c, Schedule::Interleaved);
  std::string plan = planFileJson(m, t, c, e);
  EXPECT_EQ(keysAtDepth(plan, 1),
            (std::vector<std::string>{"format", "version", "model", "training",
                                      "cluster", "mesh", "layout", "stages",
                                      "estimate"}));
  EXPECT_NE(plan.find("\"format\": \"cleave-plan\""), std::string::npos);
  EXPECT_NE(plan.find("\"version\": 1"), std::string::npos);
  EXPECT_NE(plan.find("{\"axis\":\"pp\",\"size\":4}"), std::string::npos);
  EXPECT_NE(plan.find("{\"axis\":\"tp\",\"size\":2}"), std::string::npos);
  // 32 layers in 8 chunks balanced by FLOPs: stage 0 runs chunks 0 and 4;
  // the last chunk, with the LM head, takes 3 layers, the one before 5.
  EXPECT_NE(plan.find("{\"stage\":0,\"layers\":[[0,4],[16,20]]}"),
            std::string::npos)
      << plan;
  EXPECT_NE(plan.find("{\"stage\":2,\"layers\":[[8,12],[24,29]]}"),
            std::string::npos)
      << plan;
  EXPECT_NE(plan.find("{\"stage\":3,\"layers\":[[12,16],[29,32]]}"),
            std::string::npos);
}

} // namespace
