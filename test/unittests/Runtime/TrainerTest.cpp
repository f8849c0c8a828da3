//===- TrainerTest.cpp - the training main, end to end --------------------===//
//
// Runs the hand-written training programs of FakeTrainProgram.cpp (linked
// with cleave_rt_main) as subprocesses: losses against a float64 reference,
// the progress and JSON logs, which samples each step reads (through the
// programs' input trace), token files, and each user error reported as
// "error: ..." with exit status 1. Checkpoints, resume, signals and the
// ONNX export are in TrainerCheckpointTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "TrainerTestUtil.h"

#include <sys/stat.h>

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

TEST_F(Trainer, Help) {
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--help"), 0) << err;
  for (const char *text :
       {"usage:", "--inputs", "--targets", "--tokens", "--shuffle",
        "--save-every", "--resume", "--export-onnx", "--log-json", "TOTAL",
        "--no-overlap", "x  f32 [4, 3]", "targets  f32 [4]", "loss  f32 []",
        "parameters: 2 of the model",
        R"({"loss":"mse","optimizer":"sgd","lr":0.1,"momentum":0.5})"})
    EXPECT_NE(out.find(text), std::string::npos) << text << "\n" << out;
}

// Losses of 20 steps (5 epochs of 16 samples) against the float64
// reference, |got - want| <= 1e-5 max(1, |want|); the loss falls; the JSON
// log has one line per step, counted from 1; the progress line's format.
TEST_F(Trainer, LossesMatchFloat64Reference) {
  writeRegressionData(16);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy "
                                   "--steps 20 --log-json log.jsonl"),
            0)
      << err;
  std::vector<LogLine> log = readLog("log.jsonl");
  std::vector<double> want = referenceLosses(
      20, [](int k, int i) { return ((k - 1) * kBatch + i) % 16; });
  ASSERT_EQ(log.size(), want.size());
  for (size_t k = 0; k < log.size(); ++k) {
    EXPECT_EQ(log[k].step, (long long)k + 1);
    EXPECT_NEAR(log[k].loss, want[k], 1e-5 * std::max(1.0, std::fabs(want[k])))
        << "step " << k + 1;
    EXPECT_GT(log[k].tokensPerS, 0);
    // The program's compiled learning rate (its training config's), with
    // no schedule.
    EXPECT_EQ(log[k].lr, 0.1);
    // Reported in order, within this run (after 2026-01-01).
    EXPECT_GT(log[k].time, 1767225600.0);
    if (k > 0)
      EXPECT_GE(log[k].time, log[k - 1].time);
    // 9 significant digits round-trip the f32 loss.
    float f = std::strtof(log[k].lossText.c_str(), nullptr);
    char again[32];
    std::snprintf(again, sizeof(again), "%.9g", double(f));
    EXPECT_EQ(log[k].lossText, again);
  }
  // Minibatch losses are noisy: compare the first and the last 4 steps.
  double head = 0, tail = 0;
  for (size_t k = 0; k < 4; ++k) {
    head += log[k].loss;
    tail += log[log.size() - 1 - k].loss;
  }
  EXPECT_LT(tail, 0.05 * head);

  const std::regex progress(R"(step (\d+)/20  loss [-+0-9.eE]+  lr 0\.1  )"
                            R"(tokens/s \d+  ms/step [0-9.]+  eta \d+s  )"
                            R"(mem \d+ MiB)");
  int lines = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("step ", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, progress)) << line;
      ++lines;
    }
  EXPECT_EQ(lines, 20) << out;
  EXPECT_NE(out.find("data: 16 samples from x.npy, t.npy; batch 4"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\ntrained steps 1..20 in "), std::string::npos) << out;
  EXPECT_EQ(out.find("no steps to run"), std::string::npos) << out;
  // The banner names the backend the arena lives on.
  const std::regex banner(R"(training steps 1\.\.20; arena [0-9.]+ )"
                          R"((bytes|KiB|MiB|GiB) on cpu)");
  bool found = false;
  std::istringstream again(out);
  for (std::string line; std::getline(again, line);)
    found = found || std::regex_match(line, banner);
  EXPECT_TRUE(found) << out;
}

TEST_F(Trainer, LogEveryAndQuiet) {
  writeRegressionData(8);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 7 --log-every 3"),
            0)
      << err;
  std::vector<std::string> printed;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("step ", 0) == 0)
      printed.push_back(line.substr(0, line.find("  ")));
  EXPECT_EQ(printed,
            (std::vector<std::string>{"step 3/7", "step 6/7", "step 7/7"}));
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs=x.npy --targets=t.npy "
                                   "--steps=3 --quiet --log-json=l.jsonl"),
            0)
      << err;
  EXPECT_EQ(out, "");
  EXPECT_EQ(readLog("l.jsonl").size(), 3u);
}

// 6 samples, batches of 4: step k reads samples (k-1)*4 + i mod 6.
TEST_F(Trainer, BatchesWrapAround) {
  writeRegressionData(6, /*identify=*/true);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x=x.npy --targets t.npy --steps 4 --quiet",
                "CLEAVE_FAKE_TRACE=trace.bin"),
            0)
      << err;
  EXPECT_EQ(traceSamples(),
            (std::vector<std::vector<int>>{
                {0, 1, 2, 3}, {4, 5, 0, 1}, {2, 3, 4, 5}, {0, 1, 2, 3}}));
}

// --shuffle: the documented permutation per epoch, the same for the same
// seed, another for another seed.
TEST_F(Trainer, ShuffleIsDeterministic) {
  writeRegressionData(6, /*identify=*/true);
  const int steps = 6; // 24 positions: 4 epochs
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 6 --quiet --shuffle "
                "--seed 7",
                "CLEAVE_FAKE_TRACE=trace.bin"),
            0)
      << err;
  std::vector<std::vector<int>> got = traceSamples();
  std::vector<std::vector<int>> want;
  for (int k = 1; k <= steps; ++k) {
    std::vector<int> rows;
    for (int i = 0; i < kBatch; ++i) {
      int p = (k - 1) * kBatch + i;
      rows.push_back(permutation(6, 7, p / 6)[size_t(p % 6)]);
    }
    want.push_back(rows);
  }
  EXPECT_EQ(got, want);
  EXPECT_NE(want[0], (std::vector<int>{0, 1, 2, 3})) << "seed 7 shuffles";

  ASSERT_EQ(::unlink((dir + "/trace.bin").c_str()), 0);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 6 --quiet --shuffle "
                "--seed 7",
                "CLEAVE_FAKE_TRACE=trace.bin"),
            0);
  EXPECT_EQ(traceSamples(), got);
  ASSERT_EQ(::unlink((dir + "/trace.bin").c_str()), 0);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 6 --quiet --shuffle "
                "--seed 8",
                "CLEAVE_FAKE_TRACE=trace.bin"),
            0);
  EXPECT_NE(traceSamples(), got);
}

TEST_F(Trainer, DataErrors) {
  writeRegressionData(6);
  {
    std::ofstream bad(dir + "/bad.npy", std::ios::binary);
    bad << "not numpy at all";
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs bad.npy --targets t.npy "
                                   "--steps 1"),
            1);
  EXPECT_ERR_HAS("error: input 'x': bad.npy: not a .npy file (bad "
                 "magic)");
  ASSERT_EQ(::mkfifo((dir + "/fifo.npy").c_str(), 0600), 0);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs fifo.npy --targets t.npy "
                                   "--steps 1"),
            1);
  EXPECT_ERR_HAS("error: input 'x': fifo.npy: not a regular file");
  // A step count whose sample indices would overflow.
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy "
                                   "--steps 1125899906842624"),
            1);
  EXPECT_ERR_HAS("error: --steps 1125899906842624 is past the most this "
                 "trainer counts, 2^40");

  float wide[12] = {};
  writeNpyFile("x2.npy", "<f4", {3, 4}, wide, sizeof(wide));
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x2.npy --targets t.npy "
                                   "--steps 1"),
            1);
  EXPECT_ERR_HAS("error: input 'x': x2.npy: expected shape [N, 3] "
                 "(samples of the input's [4, 3] batches), got [3, 4]");

  writeNpyFile("t5.npy", "<f4", {5}, wide, 20);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t5.npy "
                                   "--steps 1"),
            1);
  EXPECT_ERR_HAS("error: the inputs have different sample counts: 'x' "
                 "(x.npy) has 6, 'targets' (t5.npy) has 5");

  int64_t ints[6] = {};
  writeNpyFile("ti.npy", "<i8", {6}, ints, sizeof(ints));
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets ti.npy "
                                   "--steps 1"),
            1);
  EXPECT_ERR_HAS("error: input 'targets': ti.npy: expected dtype f32 "
                 "('<f4'; '<f8' and '<f2' are converted), got '<i8'");

  // float64 data is converted.
  std::vector<double> t64(t.begin(), t.end());
  writeNpyFile("t64.npy", "<f8", {6}, t64.data(), t64.size() * 8);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t64.npy "
                                   "--steps 1 --quiet"),
            0)
      << err;

  struct Case {
    const char *args, *error;
  } cases[] = {
      {"--inputs x.npy --targets t.npy",
       "error: missing --steps N (the total number of training steps)"},
      {"--inputs x.npy --steps 1",
       "error: missing --targets FILE.npy (the data of 'targets')"},
      {"--targets t.npy --steps 1",
       "error: missing data for input 'x' (give --inputs x=FILE.npy)"},
      {"--inputs x.npy,t.npy --targets t.npy --steps 1",
       "error: too many --inputs: the model has 1, and 't.npy' is one more"},
      {"--inputs targets=t.npy --steps 1",
       "error: 'targets' is the loss target: give it with --targets FILE"},
      {"--steps 1", "error: missing training data: give --inputs and "
                    "--targets, or --tokens"},
      {"--inputs x.npy --targets t.npy --steps -1",
       "error: --steps expects an integer >= 0, got '-1'"},
      {"--inputs x.npy --targets t.npy --steps 1 --save-every 2",
       "error: --save-every needs --save DIR"},
      {"--inputs x.npy --targets t.npy --steps 1 --frobnicate",
       "error: unknown argument '--frobnicate'"},
      {"--tokens x.npy --steps 1",
       "error: --tokens needs a model with one integer input [B, S] and "
       "integer labels [B, S]; this program's inputs are 'x' f32 [4, 3], "
       "'targets' f32 [4]"},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, c.args), 1) << c.args;
    EXPECT_NE(err.find(c.error), std::string::npos) << c.args << "\n" << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
}

// An unwritable checkpoint directory or log is reported before training.
TEST_F(Trainer, UnwritableOutputs) {
  writeRegressionData(6);
  { std::ofstream file(dir + "/afile"); }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy "
                                   "--steps 3 --save afile/ck"),
            1);
  EXPECT_ERR_HAS("error: cannot create the checkpoint directory "
                 "afile/ck: ");
  EXPECT_EQ(out.find("step "), std::string::npos) << out;
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy "
                                   "--steps 3 --log-json afile/log.jsonl"),
            1);
  EXPECT_ERR_HAS("error: cannot write the log afile/log.jsonl: ");
}

/// A uint16 token file of `n` tokens 0, 1, ..., 7, 0, 1, ... shifted so
/// that windows are distinguishable: token i is (i * 3 + i / 8) % 8.
std::vector<uint16_t> tokenFile(int n) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < n; ++i)
    tokens.push_back(uint16_t((i * 3 + i / 8) % kVocab));
  return tokens;
}

// --tokens: sample i is tokens [4i, 4i+4) with labels [4i+1, 4i+5); 21
// tokens make 5 samples; batches of 2 wrap around.
TEST_F(Trainer, TokenFile) {
  std::vector<uint16_t> tokens = tokenFile(21);
  {
    std::ofstream f(dir + "/train.bin", std::ios::binary);
    f.write(reinterpret_cast<const char *>(tokens.data()),
            std::streamsize(tokens.size() * 2));
  }
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN_LM,
                "--tokens train.bin --seq 4 --steps 4 --log-json log.jsonl",
                "CLEAVE_FAKE_TRACE=trace.bin"),
            0)
      << err;
  EXPECT_NE(out.find("data: 5 samples of 4 tokens from train.bin (21 "
                     "tokens); batch 2"),
            std::string::npos)
      << out;
  std::string trace = slurp("trace.bin");
  const size_t stepBytes = 2 * kLmBatch * kLmSeq * 8;
  ASSERT_EQ(trace.size(), 4 * stepBytes);
  const int samples[4][2] = {{0, 1}, {2, 3}, {4, 0}, {1, 2}};
  for (int k = 0; k < 4; ++k) {
    const int64_t *idx =
        reinterpret_cast<const int64_t *>(trace.data() + k * stepBytes);
    const int64_t *labels = idx + kLmBatch * kLmSeq;
    for (int row = 0; row < kLmBatch; ++row)
      for (int j = 0; j < kLmSeq; ++j) {
        int s = samples[k][row];
        EXPECT_EQ(idx[row * kLmSeq + j], tokens[size_t(s * kLmSeq + j)])
            << "step " << k + 1 << " row " << row;
        EXPECT_EQ(labels[row * kLmSeq + j], tokens[size_t(s * kLmSeq + j + 1)])
            << "step " << k + 1 << " row " << row;
      }
  }
  // The zero table predicts uniformly: the first loss is ln 8.
  std::vector<LogLine> log = readLog("log.jsonl");
  ASSERT_EQ(log.size(), 4u);
  EXPECT_NEAR(log[0].loss, std::log(8.0), 1e-6);
  EXPECT_LT(log[3].loss, log[0].loss);

  // uint32 tokens give the same batches.
  std::vector<uint32_t> wide(tokens.begin(), tokens.end());
  {
    std::ofstream f(dir + "/train32.bin", std::ios::binary);
    f.write(reinterpret_cast<const char *>(wide.data()),
            std::streamsize(wide.size() * 4));
  }
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN_LM,
                "--tokens train32.bin --token-dtype "
                "uint32 --steps 4 --quiet",
                "CLEAVE_FAKE_TRACE=trace32.bin"),
            0)
      << err;
  EXPECT_EQ(slurp("trace32.bin"), trace);

  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--tokens train.bin --seq 5 --steps 1"),
            1);
  EXPECT_ERR_HAS("error: --seq 5 does not match the model's sequence "
                 "length 4 (input 'idx' is i64 [2, 4])");
  {
    std::ofstream f(dir + "/short.bin", std::ios::binary);
    f.write(reinterpret_cast<const char *>(tokens.data()), 8);
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--tokens short.bin --steps 1"), 1);
  EXPECT_ERR_HAS("error: short.bin: one sample of sequence length 4 "
                 "needs 5 tokens, the file has 4");
  {
    std::ofstream f(dir + "/odd.bin", std::ios::binary);
    f.write(reinterpret_cast<const char *>(tokens.data()), 11);
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--tokens odd.bin --steps 1"), 1);
  EXPECT_ERR_HAS("error: odd.bin: its size of 11 bytes is not a whole "
                 "number of uint16 tokens");
  // A FIFO with no writer is refused, not opened (the open would block).
  ASSERT_EQ(::mkfifo((dir + "/fifo.bin").c_str(), 0600), 0);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--tokens fifo.bin --steps 1"), 1);
  EXPECT_ERR_HAS("error: fifo.bin: not a regular file (--tokens reads a file "
                 "of tokens)");
}

// Integer labels in an int32 .npy are converted to the input's i64.
TEST_F(Trainer, Int32LabelsAreConverted) {
  int64_t idx[3 * kLmSeq];
  int32_t labels[3 * kLmSeq];
  for (int i = 0; i < 3 * kLmSeq; ++i) {
    idx[i] = i % kVocab;
    labels[i] = (i * 5 + 1) % kVocab;
  }
  writeNpyFile("idx.npy", "<i8", {3, kLmSeq}, idx, sizeof(idx));
  writeNpyFile("labels.npy", "<i4", {3, kLmSeq}, labels, sizeof(labels));
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN_LM,
                "--inputs idx.npy --targets labels.npy --steps 1 --quiet",
                "CLEAVE_FAKE_TRACE=trace.bin"),
            0)
      << err;
  std::string trace = slurp("trace.bin");
  ASSERT_EQ(trace.size(), size_t(2 * kLmBatch * kLmSeq * 8));
  const int64_t *got =
      reinterpret_cast<const int64_t *>(trace.data()) + kLmBatch * kLmSeq;
  for (int i = 0; i < kLmBatch * kLmSeq; ++i)
    EXPECT_EQ(got[i], labels[i]) << i;

  // The kernel (here: the fake program) reports labels out of range.
  labels[5] = 9;
  writeNpyFile("labels.npy", "<i4", {3, kLmSeq}, labels, sizeof(labels));
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM,
                "--inputs idx.npy --targets labels.npy --steps 1 --quiet"),
            1);
  EXPECT_ERR_HAS("error: fake program: token 5 or label 9 out of range");
}

// Dynamic loss scaling as the trainer sees it: the scale and the step
// counter are found by role (the scaler's state has names of its own), and
// a step after which the step counter has not moved is reported skipped.
// Samples 4..7 hold a NaN target, so steps 2 and 4 are not finite: the
// scale halves; the first finite step after a skip keeps it.
TEST_F(Trainer, LossScaleAndStepCounterByRole) {
  writeRegressionData(8);
  t[5] = std::nanf("");
  writeNpyFile("t.npy", "<f4", {8}, t.data(), t.size() * 4);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN_SCALED, "--inputs x.npy --targets t.npy "
                                          "--steps 4 --log-json log.jsonl"),
            0)
      << err;
  std::vector<std::string> lines;
  std::istringstream in(slurp("log.jsonl"));
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << slurp("log.jsonl");
  const char *want[] = {R"("loss_scale": 1024, "skipped": false})",
                        R"("loss_scale": 512, "skipped": true})",
                        R"("loss_scale": 512, "skipped": false})",
                        R"("loss_scale": 256, "skipped": true})"};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NE(lines[i].find(want[i]), std::string::npos) << lines[i];
  // JSON has no NaN: the skipped steps' losses are null, and say so.
  for (size_t i : {1, 3})
    EXPECT_NE(lines[i].find(R"("loss": null, "loss_nonfinite": "nan")"),
              std::string::npos)
        << lines[i];
  EXPECT_EQ(lines[0].find("loss_nonfinite"), std::string::npos) << lines[0];
  EXPECT_NE(out.find("loss scaling: 2 of 4 steps skipped (non-finite "
                     "gradients), scale now 256"),
            std::string::npos)
      << out;
}

// The roles the trainer relies on are checked before anything runs.
TEST_F(Trainer, ParameterRoleErrors) {
  struct Case {
    const char *defect, *message;
  } cases[] = {
      {"unknown", "program metadata: parameter 'counter' has unknown role 7"},
      {"model-in-state", "program metadata: parameter 'w.momentum' has role "
                         "model but is after the 2 model parameters"},
      {"state-in-model", "program metadata: parameter 'b' has role "
                         "optimizer_state but is among the 2 model "
                         "parameters"},
      {"two-counters", "program metadata: parameters 'counter' and "
                       "'scaler/tracker' both have role step_counter"},
      {"scale-as-tracker", "program metadata: parameter 'scaler/scale' of "
                           "role growth_tracker is f32 [], not an i64 scalar"},
      {"no-counter", "program metadata: the training program has no "
                     "parameter of role step_counter"},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_SCALED, "--help",
                  std::string("CLEAVE_FAKE_ROLE_DEFECT=") + c.defect),
              1)
        << c.defect;
    EXPECT_ERR_HAS(std::string("error: ") + c.message);
  }
  // Unspoiled, the same program is fine.
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_SCALED, "--help"), 0) << err;
}

} // namespace
