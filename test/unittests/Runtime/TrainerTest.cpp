//===- TrainerTest.cpp - the training main, end to end --------------------===//
//
// Runs the hand-written training programs of FakeTrainProgram.cpp (linked
// with cleave_rt_main) as subprocesses: losses against a float64 reference,
// the progress and JSON logs, which samples each step reads (through the
// programs' input trace), token files, checkpoints and resume, the ONNX
// export, and each user error reported as "error: ..." with exit status 1.
// Python checks (the safetensors header, onnx.checker) run with
// /usr/bin/python3 and are skipped where numpy or onnx is missing.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include "cleave/Runtime/Npy.h"

#include <cmath>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

constexpr int kBatch = 4, kFeatures = 3; // the regression program
constexpr int kLmBatch = 2, kLmSeq = 4;  // the language model
constexpr int kVocab = 8;
constexpr double kLr = 0.1, kMomentum = 0.5;

struct LogLine {
  long long step = 0;
  std::string lossText;
  double loss = 0, tokensPerS = 0, ms = 0;
};

class Trainer : public ::testing::Test {
protected:
  void SetUp() override {
    const ::testing::TestInfo *info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    dir = ::testing::TempDir() + "cleave_trainer_" + info->name() + "_" +
          std::to_string(::getpid());
    ASSERT_EQ(
        std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()),
        0);
  }
  void TearDown() override {
    if (!HasFailure())
      std::system(("rm -rf '" + dir + "'").c_str());
  }

  /// Runs `exe` with `args` in `dir` (environment assignments in `env`);
  /// returns the exit status and leaves stdout and stderr in `out`, `err`.
  int run(const std::string &exe, const std::string &args,
          const std::string &env = "") {
    std::string cmd = "cd '" + dir + "' && " + env + " " + exe + " " + args +
                      " >stdout.txt 2>stderr.txt";
    int status = std::system(cmd.c_str());
    out = slurp("stdout.txt");
    err = slurp("stderr.txt");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string slurp(const std::string &file) {
    std::ifstream in(dir + "/" + file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  bool exists(const std::string &file) {
    struct stat st;
    return ::stat((dir + "/" + file).c_str(), &st) == 0;
  }

  void writeNpyFile(const std::string &file, const std::string &descr,
                    const Shape &shape, const void *data, size_t bytes) {
    std::string error;
    ASSERT_TRUE(writeNpy(dir + "/" + file, descr, shape, data, bytes, error))
        << error;
  }

  /// Regression data: x [n, 3] and targets [n]; `identify` makes x[s] =
  /// (s, s + 0.25, s + 0.5) and targets[s] = 100 + s so that the trace shows
  /// which sample a row holds; else x is random and targets is a noise-free
  /// linear function of it.
  void writeRegressionData(int n, bool identify = false) {
    x.assign(size_t(n) * kFeatures, 0);
    t.assign(size_t(n), 0);
    std::mt19937 rng(42);
    std::normal_distribution<float> normal;
    const float wTrue[kFeatures] = {1.0f, -2.0f, 0.5f};
    for (int s = 0; s < n; ++s) {
      float y = 0.3f;
      for (int j = 0; j < kFeatures; ++j) {
        float v = identify ? float(s) + 0.25f * float(j) : normal(rng);
        x[size_t(s) * kFeatures + j] = v;
        y += v * wTrue[j];
      }
      t[size_t(s)] = identify ? 100.0f + float(s) : y;
    }
    writeNpyFile("x.npy", "<f4", {n, kFeatures}, x.data(), x.size() * 4);
    writeNpyFile("t.npy", "<f4", {n}, t.data(), t.size() * 4);
  }

  std::vector<LogLine> readLog(const std::string &file) {
    std::vector<LogLine> lines;
    std::istringstream in(slurp(file));
    std::string line;
    const std::regex pattern(
        R"(\{"step": (\d+), "loss": ([-+0-9.eE]+|NaN|-?Infinity), )"
        R"("tokens_per_s": ([0-9.]+), "ms": ([0-9.]+)\})");
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_match(line, m, pattern)) {
        ADD_FAILURE() << "malformed log line: " << line;
        continue;
      }
      LogLine l;
      l.step = std::stoll(m[1]);
      l.lossText = m[2];
      l.loss = std::strtod(l.lossText.c_str(), nullptr);
      l.tokensPerS = std::stod(m[3]);
      l.ms = std::stod(m[4]);
      lines.push_back(l);
    }
    return lines;
  }

  /// The trace of the regression program: per step, the sample each row
  /// held (recovered from targets = 100 + s), after checking that x agrees.
  std::vector<std::vector<int>> traceSamples() {
    std::string bytes = slurp("trace.bin");
    const size_t stepBytes = (kBatch * kFeatures + kBatch) * 4;
    EXPECT_EQ(bytes.size() % stepBytes, 0u);
    std::vector<std::vector<int>> steps;
    for (size_t at = 0; at + stepBytes <= bytes.size(); at += stepBytes) {
      const float *xs = reinterpret_cast<const float *>(bytes.data() + at);
      const float *ts = xs + kBatch * kFeatures;
      std::vector<int> rows;
      for (int i = 0; i < kBatch; ++i) {
        int s = int(ts[i]) - 100;
        for (int j = 0; j < kFeatures; ++j)
          EXPECT_EQ(xs[i * kFeatures + j], float(s) + 0.25f * float(j));
        rows.push_back(s);
      }
      steps.push_back(rows);
    }
    return steps;
  }

  /// The float64 reference of the regression program's losses for `steps`
  /// steps over the samples that `sample(step, row)` picks.
  template <typename SampleFn>
  std::vector<double> referenceLosses(int steps, SampleFn sample) {
    double w[kFeatures] = {0.1f, -0.2f, 0.3f}, b = 0;
    double wm[kFeatures] = {}, bm = 0;
    std::vector<double> losses;
    for (int k = 1; k <= steps; ++k) {
      double dpred[kBatch], loss = 0;
      int rows[kBatch];
      for (int i = 0; i < kBatch; ++i) {
        rows[i] = sample(k, i);
        double pred = b;
        for (int j = 0; j < kFeatures; ++j)
          pred += double(x[size_t(rows[i]) * kFeatures + j]) * w[j];
        double r = pred - double(t[size_t(rows[i])]);
        loss += r * r;
        dpred[i] = 2 * r / kBatch;
      }
      losses.push_back(loss / kBatch);
      auto update = [&](double &p, double &buf, double g) {
        buf = k == 1 ? g : kMomentum * buf + g;
        p -= kLr * buf;
      };
      double gb = 0;
      for (int i = 0; i < kBatch; ++i)
        gb += dpred[i];
      for (int j = 0; j < kFeatures; ++j) {
        double g = 0;
        for (int i = 0; i < kBatch; ++i)
          g += double(x[size_t(rows[i]) * kFeatures + j]) * dpred[i];
        update(w[j], wm[j], g);
      }
      update(b, bm, gb);
    }
    return losses;
  }

  /// Runs `script` with /usr/bin/python3 in `dir`; the exit status, with
  /// stdout in `out`.
  int python(const std::string &script, const std::string &args = "") {
    {
      std::ofstream f(dir + "/script.py");
      f << script;
    }
    return run(CLEAVE_PYTHON3, "script.py " + args);
  }

  bool pythonHas(const std::string &modules) {
    return std::system((std::string(CLEAVE_PYTHON3) + " -c 'import " + modules +
                        "' >/dev/null 2>&1")
                           .c_str()) == 0;
  }

  std::string dir, out, err;
  std::vector<float> x, t;
};

/// The documented shuffle: Fisher-Yates driven by std::mt19937_64 seeded
/// with seed + epoch.
std::vector<int> permutation(int n, uint64_t seed, int epoch) {
  std::vector<int> perm(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    perm[size_t(i)] = i;
  std::mt19937_64 rng(seed + uint64_t(epoch));
  for (int i = n - 1; i > 0; --i)
    std::swap(perm[size_t(i)], perm[size_t(rng() % uint64_t(i + 1))]);
  return perm;
}

/// The layout of the regression program's checkpoint: tensors in order of
/// decreasing element size, then program order.
struct SafetensorsFile {
  uint64_t headerBytes = 0;
  std::string header, data;
};

SafetensorsFile readSafetensors(const std::string &bytes) {
  SafetensorsFile f;
  if (bytes.size() < 8)
    return f;
  for (int i = 7; i >= 0; --i)
    f.headerBytes = f.headerBytes << 8 | (unsigned char)bytes[size_t(i)];
  if (8 + f.headerBytes > bytes.size())
    return f;
  f.header = bytes.substr(8, size_t(f.headerBytes));
  f.data = bytes.substr(size_t(8 + f.headerBytes));
  return f;
}

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

  const std::regex progress(R"(step (\d+)/20  loss [-+0-9.eE]+  tokens/s \d+  )"
                            R"(ms/step [0-9.]+  eta \d+s  mem \d+ MiB)");
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

// 10 steps straight against 5 steps (saving every 2), then --resume to 10:
// the same losses as JSON text and the same checkpoint, byte for byte.
TEST_F(Trainer, ResumeRepeatsAnUninterruptedRun) {
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy --shuffle --seed 3 "
                           "--quiet ";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                data + "--steps 10 --save full --log-json full.jsonl"),
            0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data +
                                       "--steps 5 --save half "
                                       "--save-every 2 --log-json half.jsonl"),
            0)
      << err;
  EXPECT_NE(slurp("half/meta.json").find("\"step\": 5,"), std::string::npos);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 10 --resume half --save "
                                          "half --log-json half.jsonl"),
            0)
      << err;
  std::vector<LogLine> full = readLog("full.jsonl"),
                       half = readLog("half.jsonl");
  ASSERT_EQ(full.size(), 10u);
  ASSERT_EQ(half.size(), 10u) << "the resumed run appends to the log";
  for (size_t k = 0; k < 10; ++k) {
    EXPECT_EQ(half[k].step, (long long)k + 1);
    EXPECT_EQ(half[k].lossText, full[k].lossText) << "step " << k + 1;
  }
  std::string a = slurp("full/model.safetensors"),
              b = slurp("half/model.safetensors");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(readSafetensors(a).data, readSafetensors(b).data);
  EXPECT_EQ(a, b) << "the metadata has no time stamp: the files are equal";

  // Nothing but the two files is left in the directory (no .tmp).
  std::vector<std::string> files;
  if (DIR *d = ::opendir((dir + "/half").c_str())) {
    while (dirent *e = ::readdir(d))
      if (e->d_name[0] != '.')
        files.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files,
            (std::vector<std::string>{"meta.json", "model.safetensors"}));

  // Resuming at the last step runs nothing; --steps before it is an error;
  // another data order is worth a warning.
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 10 --resume half"), 0)
      << err;
  EXPECT_EQ(err, "");
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --shuffle "
                                   "--seed 3 --steps 10 --resume half"),
            0)
      << err;
  EXPECT_NE(out.find("no steps to run: the checkpoint is at step 10"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("trained steps"), std::string::npos) << out;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps "
                                   "10 --resume half"),
            0)
      << err;
  EXPECT_EQ(err, "warning: checkpoint half was written with data order "
                 "'shuffle seed 3', this run uses 'sequential'\n");
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 4 --resume half"), 1);
  EXPECT_NE(err.find("error: --steps 4 is before the checkpoint's step 10"),
            std::string::npos)
      << err;
}

// Waiting for each step before preparing the next (--no-overlap) trains
// the same: the same losses and the same checkpoint, with checkpoints at
// steps 3 and 6 in between (a checkpoint waits for its step first).
TEST_F(Trainer, NoOverlapTrainsTheSame) {
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy --shuffle --seed 5 "
                           "--quiet --steps 8 --save-every 3 ";
  ASSERT_EQ(
      run(CLEAVE_FAKE_TRAIN, data + "--save overlap --log-json overlap.jsonl"),
      0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                data + "--no-overlap --save sync --log-json sync.jsonl"),
            0)
      << err;
  std::vector<LogLine> a = readLog("overlap.jsonl"), b = readLog("sync.jsonl");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(a[k].step, (long long)k + 1);
    EXPECT_EQ(b[k].step, (long long)k + 1);
    EXPECT_EQ(a[k].lossText, b[k].lossText) << "step " << k + 1;
  }
  EXPECT_EQ(slurp("overlap/model.safetensors"),
            slurp("sync/model.safetensors"));
}

// SIGTERM (as Ctrl-C) ends the run after the step in flight, saves the
// checkpoint of that step and exits with 128 + 15; resuming from it gives
// the checkpoint of a run that was never interrupted.
TEST_F(Trainer, SignalSavesTheLastStepAndResumes) {
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy --shuffle --seed 4 "
                           "--quiet ";
  // Far more steps than run in the second before the signal.
  int status = run("(" CLEAVE_FAKE_TRAIN,
                   data + "--steps 100000000 --save cut & p=$!; sleep 1; "
                          "kill -TERM $p; wait $p)");
  ASSERT_EQ(status, 128 + 15) << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      err, m,
      std::regex(
          R"(interrupted after step (\d+) \(checkpoint saved to cut\))")))
      << err;
  long long step = std::stoll(m[1].str());
  ASSERT_GT(step, 0);
  EXPECT_NE(
      slurp("cut/meta.json").find("\"step\": " + std::to_string(step) + ","),
      std::string::npos);
  std::string steps = "--steps " + std::to_string(step + 3) + " ";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + steps + "--resume cut --save cut"), 0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + steps + "--save full"), 0) << err;
  EXPECT_EQ(slurp("cut/model.safetensors"), slurp("full/model.safetensors"));
}

// The safetensors layout: header length, the JSON header with the metadata
// and the tensors in order of decreasing element size, padded to 8 bytes;
// also read by Python (json + numpy) where available.
TEST_F(Trainer, CheckpointFormat) {
  writeRegressionData(8);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 3 --quiet --save ck"),
            0)
      << err;
  std::string bytes = slurp("ck/model.safetensors");
  SafetensorsFile f = readSafetensors(bytes);
  ASSERT_FALSE(f.header.empty());
  EXPECT_EQ((8 + f.headerBytes) % 8, 0u);
  EXPECT_EQ(f.data.size(), 40u); // 8 + 4 * (3 + 1 + 3 + 1)
  EXPECT_EQ(f.header.rfind("{\"__metadata__\":{\"format\":\"cleave\","
                           "\"format_version\":\"1\",\"step\":\"3\",",
                           0),
            0u)
      << f.header;
  for (const char *entry :
       {R"("optimizer.step":{"dtype":"I64","shape":[],"data_offsets":[0,8]})",
        R"("w":{"dtype":"F32","shape":[3],"data_offsets":[8,20]})",
        R"("b":{"dtype":"F32","shape":[],"data_offsets":[20,24]})",
        R"("w.momentum":{"dtype":"F32","shape":[3],"data_offsets":[24,36]})",
        R"("b.momentum":{"dtype":"F32","shape":[],"data_offsets":[36,40]})",
        R"("source_model":"fake_train_model.onnx")",
        R"("data_order":"sequential"})",
        R"("training_config":"{\"loss\":\"mse\",)"})
    EXPECT_NE(f.header.find(entry), std::string::npos) << entry << "\n"
                                                       << f.header;
  int64_t step;
  std::memcpy(&step, f.data.data(), 8);
  EXPECT_EQ(step, 3);

  if (!pythonHas("json, numpy"))
    GTEST_SKIP() << "/usr/bin/python3 has no numpy: the Python reading of "
                    "the checkpoint is not checked";
  const char *script = R"(import json, struct, sys
import numpy as np
blob = open("ck/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
meta = header.pop("__metadata__")
json.loads(meta["training_config"])
print("step", meta["step"], json.load(open("ck/meta.json"))["step"])
for name, info in sorted(header.items()):
    b, e = info["data_offsets"]
    dtype = {"F32": np.float32, "I64": np.int64}[info["dtype"]]
    a = np.frombuffer(data[b:e], dtype).reshape(info["shape"])
    print(name, " ".join(repr(float(v)) for v in a.ravel()))
)";
  ASSERT_EQ(python(script), 0) << err;
  float w[3];
  std::memcpy(w, f.data.data() + 8, 12);
  EXPECT_NE(out.find("step 3 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("optimizer.step 3.0\n"), std::string::npos) << out;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("w ", 0) == 0) {
      std::istringstream values(line.substr(2));
      for (float v : w) {
        double got;
        values >> got;
        EXPECT_EQ(float(got), v);
      }
    }
}

TEST_F(Trainer, ResumeFromAnotherModel) {
  writeRegressionData(8);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 2 --quiet --save ck"),
            0)
      << err;
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_OTHER,
                "--inputs x.npy --targets t.npy --steps 4 --resume ck"),
            1);
  EXPECT_NE(err.find("error: checkpoint ck is from another model: parameter "
                     "'b' is f32 [] in the checkpoint but f32 [1] in this "
                     "program"),
            std::string::npos)
      << err;
  EXPECT_EQ(out.find("step "), std::string::npos) << "no step ran";

  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--steps 4 --resume ck"), 1);
  EXPECT_NE(err.find("error: checkpoint ck is from another model: parameter "
                     "'table' (f32 [8, 8]) is not in the checkpoint"),
            std::string::npos)
      << err;

  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume nowhere"), 1);
  EXPECT_NE(err.find("error: cannot open the checkpoint nowhere/"
                     "model.safetensors"),
            std::string::npos)
      << err;

  // A truncated checkpoint is an error, not a crash.
  std::string bytes = slurp("ck/model.safetensors");
  {
    std::ofstream cut(dir + "/ck/model.safetensors", std::ios::binary);
    cut.write(bytes.data(), std::streamsize(bytes.size() - 4));
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume ck"), 1);
  EXPECT_NE(err.find("is not a valid safetensors file: tensor 'b.momentum' "
                     "has data_offsets outside the file"),
            std::string::npos)
      << err;
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
  EXPECT_NE(err.find("error: input 'x': bad.npy: not a .npy file (bad "
                     "magic)"),
            std::string::npos)
      << err;

  float wide[12] = {};
  writeNpyFile("x2.npy", "<f4", {3, 4}, wide, sizeof(wide));
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x2.npy --targets t.npy "
                                   "--steps 1"),
            1);
  EXPECT_NE(err.find("error: input 'x': x2.npy: expected shape [N, 3] "
                     "(samples of the input's [4, 3] batches), got [3, 4]"),
            std::string::npos)
      << err;

  writeNpyFile("t5.npy", "<f4", {5}, wide, 20);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t5.npy "
                                   "--steps 1"),
            1);
  EXPECT_NE(err.find("error: the inputs have different sample counts: 'x' "
                     "(x.npy) has 6, 'targets' (t5.npy) has 5"),
            std::string::npos)
      << err;

  int64_t ints[6] = {};
  writeNpyFile("ti.npy", "<i8", {6}, ints, sizeof(ints));
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets ti.npy "
                                   "--steps 1"),
            1);
  EXPECT_NE(err.find("error: input 'targets': ti.npy: expected dtype f32 "
                     "('<f4'; '<f8' and '<f2' are converted), got '<i8'"),
            std::string::npos)
      << err;

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
  EXPECT_NE(err.find("error: cannot create the checkpoint directory "
                     "afile/ck: "),
            std::string::npos)
      << err;
  EXPECT_EQ(out.find("step "), std::string::npos) << out;
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy "
                                   "--steps 3 --log-json afile/log.jsonl"),
            1);
  EXPECT_NE(err.find("error: cannot write the log afile/log.jsonl: "),
            std::string::npos)
      << err;
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
  EXPECT_NE(err.find("error: --seq 5 does not match the model's sequence "
                     "length 4 (input 'idx' is i64 [2, 4])"),
            std::string::npos)
      << err;
  {
    std::ofstream f(dir + "/short.bin", std::ios::binary);
    f.write(reinterpret_cast<const char *>(tokens.data()), 8);
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--tokens short.bin --steps 1"), 1);
  EXPECT_NE(err.find("error: short.bin: one sample of sequence length 4 "
                     "needs 5 tokens, the file has 4"),
            std::string::npos)
      << err;
  {
    std::ofstream f(dir + "/odd.bin", std::ios::binary);
    f.write(reinterpret_cast<const char *>(tokens.data()), 11);
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--tokens odd.bin --steps 1"), 1);
  EXPECT_NE(err.find("error: odd.bin: its size of 11 bytes is not a whole "
                     "number of uint16 tokens"),
            std::string::npos)
      << err;
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
  EXPECT_NE(err.find("error: fake program: token 5 or label 9 out of range"),
            std::string::npos)
      << err;
}

// --export-onnx writes the source model with the trained w and b inline
// (the source keeps all its initializers as external data), and it passes
// onnx.checker.
TEST_F(Trainer, ExportOnnx) {
  writeRegressionData(8);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps 3 "
                                   "--export-onnx out.onnx"),
            1);
  EXPECT_NE(err.find("error: --export-onnx: the source model "
                     "fake_train_model.onnx does not exist"),
            std::string::npos)
      << err;
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--steps 3 --export-onnx out.onnx"), 1);
  EXPECT_NE(err.find("error: --export-onnx: the program has no source ONNX "
                     "model"),
            std::string::npos)
      << err;

  if (!pythonHas("onnx, numpy"))
    GTEST_SKIP() << "/usr/bin/python3 has no onnx or numpy: the ONNX export "
                    "is not checked";
  const char *make = R"(import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
inits = [numpy_helper.from_array(np.array([0.1, -0.2, 0.3], np.float32), "w"),
         numpy_helper.from_array(np.array(0.0, np.float32), "b"),
         numpy_helper.from_array(np.array([1.5], np.float32), "scale")]
nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["y0"]),
         helper.make_node("Mul", ["y0", "scale"], ["y"])]
graph = helper.make_graph(
    nodes, "fake", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.save_model(model, "fake_train_model.onnx", save_as_external_data=True,
                all_tensors_to_one_file=True, location="fake_train_model.data",
                size_threshold=0)
)";
  ASSERT_EQ(python(make), 0) << err;
  { std::ofstream file(dir + "/afile"); }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps 3 "
                                   "--export-onnx afile/out.onnx"),
            1);
  EXPECT_NE(err.find("error: --export-onnx: cannot create the directory "
                     "afile: "),
            std::string::npos)
      << err;
  EXPECT_EQ(out.find("step "), std::string::npos) << "no step ran";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps 3 "
                                   "--quiet --save ck --export-onnx "
                                   "exported/out.onnx"),
            0)
      << err;
  EXPECT_FALSE(exists("exported/out.onnx.tmp"));

  const char *check = R"(import onnx
from onnx import numpy_helper
m = onnx.load("exported/out.onnx", load_external_data=False)
onnx.checker.check_model(m)
for t in m.graph.initializer:
    assert t.data_location == onnx.TensorProto.DEFAULT and not t.external_data, t.name
    print(t.name, " ".join(repr(float(v)) for v in numpy_helper.to_array(t).ravel()))
)";
  ASSERT_EQ(python(check), 0) << err;
  SafetensorsFile ck = readSafetensors(slurp("ck/model.safetensors"));
  ASSERT_EQ(ck.data.size(), 40u);
  float trained[4]; // w then b
  std::memcpy(trained, ck.data.data() + 8, 16);
  std::map<std::string, std::vector<float>> exported;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    for (double v; fields >> v;)
      exported[name].push_back(float(v));
  }
  EXPECT_EQ(exported["w"],
            (std::vector<float>{trained[0], trained[1], trained[2]}))
      << out;
  EXPECT_EQ(exported["b"], (std::vector<float>{trained[3]})) << out;
  EXPECT_EQ(exported["scale"], (std::vector<float>{1.5f})) << out;
  EXPECT_NE(trained[0], 0.1f) << "w was trained";
}

} // namespace
