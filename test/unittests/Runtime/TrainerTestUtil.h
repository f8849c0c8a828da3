//===- TrainerTestUtil.h - the training main tests' fixture -----*- C++ -*-===//
//
// What TrainerTest.cpp and TrainerCheckpointTest.cpp share: the Trainer
// fixture (a temporary folder per test, running the hand-written training
// programs of FakeTrainProgram.cpp as subprocesses, their data, logs and
// trace, the float64 reference of the regression program's losses, and
// python), the documented shuffle and the safetensors layout.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_UNITTESTS_RUNTIME_TRAINERTESTUTIL_H
#define CLEAVE_TEST_UNITTESTS_RUNTIME_TRAINERTESTUTIL_H

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

namespace cleave::rt::test {

constexpr int kBatch = 4, kFeatures = 3; // the regression program
constexpr int kLmBatch = 2, kLmSeq = 4;  // the language model
constexpr int kVocab = 8;
constexpr double kLr = 0.1, kMomentum = 0.5;

struct LogLine {
  long long step = 0;
  std::string lossText;
  double loss = 0, lr = 0, time = 0, tokensPerS = 0, ms = 0;
};

class Trainer : public ScratchDirTest {
protected:
  Trainer() : ScratchDirTest("cleave_trainer_") {}

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
        R"("lr": ([-+0-9.eE]+), "time": ([0-9]+\.[0-9]{3}), )"
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
      l.lr = std::stod(m[3]);
      l.time = std::stod(m[4]);
      l.tokensPerS = std::stod(m[5]);
      l.ms = std::stod(m[6]);
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

  std::vector<float> x, t;
};

/// The documented shuffle: Fisher-Yates driven by std::mt19937_64 seeded
/// with seed + epoch.
inline std::vector<int> permutation(int n, uint64_t seed, int epoch) {
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

inline SafetensorsFile readSafetensors(const std::string &bytes) {
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

} // namespace cleave::rt::test

#endif // CLEAVE_TEST_UNITTESTS_RUNTIME_TRAINERTESTUTIL_H
