//===- Train.cpp - the main of training programs --------------------------===//
//
// Each step copies its batch into the input descriptors, calls
// cleave_program_run (forward, backward and the optimizer update, all in
// the program) and reads the scalar loss from output 0; that read is the
// step's one wait for the backend (on a device, the kernels run behind the
// host). Everything that decides what a step computes (the parameters and
// optimizer state in the arena, the batch as a function of the step
// number) is either in the checkpoint or derived from the step, so a
// resumed run repeats an uninterrupted one bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Train.h"

#include "Checkpoint.h"
#include "Data.h"
#include "Eval.h"
#include "Hyperparameters.h"
#include "Json.h"
#include "Mesh.h"
#include "OnnxExport.h"
#include "Program.h"
#include "Profile.h"
#include "Timeline.h"
#include "TrainOptions.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

using namespace cleave::rt::trainer;
namespace fs = std::filesystem;

namespace {

volatile std::sig_atomic_t interrupted = 0;

extern "C" void onSignal(int sig) { interrupted = sig; }

void installSignalHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onSignal;
  // A second signal takes the default action and ends the process.
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

/// Seconds since the Unix epoch (the JSON log's "time": when the host
/// reported the step).
double unixTime() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

double peakRssMiB() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return double(usage.ru_maxrss) / 1024; // KiB on Linux
}

struct FileCloser {
  void operator()(FILE *f) const { std::fclose(f); }
};

/// DIR/comm-rank<R>.json: this rank's byte counters per communicator group
/// of the program and collective kind (those called), over `steps` steps.
void writeCommStats(const std::string &dir, int64_t steps) {
  const cleave_program_info &p = program();
  const Device &dev = device();
  std::string json = "{\"rank\": " + std::to_string(dev.rank) +
                     ", \"ranks\": " + std::to_string(dev.size) +
                     ", \"engine\": " + jsonQuote(dev.comm->engine_name()) +
                     ", \"steps\": " + std::to_string(steps) +
                     ", \"groups\": [";
  for (int64_t g = 0; g < p.num_groups; ++g) {
    std::string axes;
    for (int64_t j = 0; j < p.groups[g].num_axes; ++j)
      axes += std::string(j ? ", " : "") +
              jsonQuote(dev.axisNames[size_t(p.groups[g].axes[j])]);
    json +=
        std::string(g ? ", " : "") + "\n  {\"axes\": [" + axes +
        "], \"size\": " + std::to_string(dev.comm->size(dev.comms[size_t(g)])) +
        ", \"kinds\": {";
    bool firstKind = true;
    for (int32_t k = 0; k < CLEAVE_COMM_NUM_KINDS; ++k) {
      cleave_comm_counter c;
      dev.comm->get_counter(dev.comms[size_t(g)], k, &c);
      if (c.calls == 0)
        continue;
      json += std::string(firstKind ? "" : ", ") + "\"" +
              dev.comm->kind_name(k) +
              "\": {\"calls\": " + std::to_string(c.calls) +
              ", \"payload_bytes\": " + std::to_string(c.payload_bytes) +
              ", \"wire_bytes\": " + std::to_string(c.wire_bytes) + "}";
      firstKind = false;
    }
    json += "}}";
  }
  json += "]}\n";
  std::string path =
      (fs::path(dir) / ("comm-rank" + std::to_string(dev.rank) + ".json"))
          .string();
  writeFileAtomically(path, "communication statistics", [&](FILE *f) {
    return std::fwrite(json.data(), 1, json.size(), f) == json.size();
  });
}

} // namespace

int cleave::rt::trainer::runTraining(int argc, char **argv) {
  const cleave_program_info &p = program();
  TrainOptions o = parseTrainOptions(argc, argv);
  int64_t batch = programBatchSize();
  const cleave_named_tensor &target = p.inputs[p.num_inputs - 1];
  // Of the whole mesh: the global batch's.
  int64_t tokensPerStep = numElements(globalTensor(target));
  // One voice for the job: rank 0 prints and logs (and reports the global
  // loss, which the program computes on every rank).
  if (!isRankZero()) {
    o.quiet = true;
    o.logJson.clear();
  }

  // Everything that can fail before training does.
  if (!o.save.empty())
    prepareCheckpointDir(o.save);
  RunTimeline timeline(o.trace, o.traceSteps);
  timeline.check();
  if (!o.commStats.empty() && !device().distributed)
    fail("--comm-stats: the program runs on one device and communicates "
         "with no one");
  if (!o.commStats.empty()) {
    std::error_code ec;
    fs::create_directories(o.commStats, ec);
    if (ec)
      fail("--comm-stats: cannot create " + o.commStats + ": " + ec.message());
  }
  if (!o.exportOnnx.empty()) {
    onnxSourceModel();
    std::error_code ec;
    fs::path parent = fs::path(o.exportOnnx).parent_path();
    if (!parent.empty())
      fs::create_directories(parent, ec);
    if (ec)
      fail("--export-onnx: cannot create the directory " + parent.string() +
           ": " + ec.message());
  }
  std::string dataOrder =
      o.shuffle ? "shuffle seed " + std::to_string(o.seed) : "sequential";
  Arena arena(p.arena_bytes);
  initParams(arena);
  std::string initialized;
  if (!o.initFrom.empty())
    onEveryRank([&] { initialized = initModelParams(o.initFrom, arena); });
  int64_t first = 1;
  std::string savedHyperparameters;
  if (!o.resume.empty()) {
    o.resume = latestCheckpoint(o.resume);
    onEveryRank([&] {
      first =
          loadCheckpoint(o.resume, arena, dataOrder, &savedHyperparameters) + 1;
    });
  }
  int64_t last = o.steps >= 0 ? o.steps : first - 1;
  if (last < first - 1)
    fail("--steps " + std::to_string(last) +
         " is before the checkpoint's step " + std::to_string(first - 1) +
         " (--steps counts all steps, not the remaining ones)");
  Profiler profiler(o.profile, o.profileStart, o.profileSteps);
  profiler.check(first, last);
  Hyperparameters hyper =
      Hyperparameters::resolve(o.hyper, savedHyperparameters, last);
  RunRecord record{dataOrder, hyper.runTime() ? hyper.toJson() : ""};

  std::unique_ptr<Dataset> data;
  if (!o.tokens.empty())
    data = openTokenDataset(o.tokens, o.tokenDtype, o.seq);
  else if (!o.inputFiles.empty())
    data = loadNpyDataset(o.inputFiles);
  else if (first <= last)
    fail("missing training data: give --inputs and --targets, or --tokens");
  std::optional<BatchSchedule> schedule;
  std::optional<BatchStaging> staging;
  if (data) {
    schedule.emplace(data->numSamples(), batch, o.shuffle, o.seed);
    staging.emplace(p);
  }

  // The evaluation: its data checked, its arena allocated, before training.
  std::optional<Evaluator> evaluator;
  if (!o.evalTokens.empty())
    evaluator.emplace(openTokenDataset(o.evalTokens, o.tokenDtype, o.seq),
                      o.evalSteps);
  else if (!o.evalInputFiles.empty())
    evaluator.emplace(loadNpyDataset(o.evalInputFiles), o.evalSteps);

  std::unique_ptr<FILE, FileCloser> logJson;
  if (!o.logJson.empty()) {
    logJson.reset(std::fopen(o.logJson.c_str(), o.resume.empty() ? "w" : "a"));
    if (!logJson)
      fail("cannot write the log " + o.logJson + ": " + std::strerror(errno));
  }

  if (!o.quiet) {
    if (data)
      std::printf("data: %s; batch %lld\n", data->summary().c_str(),
                  (long long)batch);
    if (!o.resume.empty())
      std::printf("resumed from %s at step %lld\n", o.resume.c_str(),
                  (long long)(first - 1));
    if (!initialized.empty())
      std::printf("initialized %s\n", initialized.c_str());
    std::printf("training steps %lld..%lld; arena %s on %s\n", (long long)first,
                (long long)last, humanBytes(p.arena_bytes).c_str(),
                cleave_rt_backend_name());
    if (hyper.runTime())
      std::printf("hyperparameters: %s\n", hyper.describe().c_str());
    if (evaluator)
      std::printf("evaluation: %s; %lld batches %s; arena %s\n",
                  evaluator->dataset().summary().c_str(),
                  (long long)evaluator->batches(),
                  o.evalEvery ? ("before the first step, every " +
                                 std::to_string(o.evalEvery) +
                                 " steps and after the last")
                                    .c_str()
                              : "after the last step",
                  humanBytes(evaluator->arenaBytes()).c_str());
    std::fflush(stdout);
  }

  installSignalHandlers();
  const cleave_named_tensor &lossOut = p.outputs[0];
  // Dynamic loss scaling, found by role (checkProgram made sure of one f32
  // scale and one i64 step counter): a step after which the step counter
  // has not moved was skipped (its gradients were not finite).
  const cleave_named_tensor *lossScale = findParam(CLEAVE_PARAM_LOSS_SCALE);
  const cleave_named_tensor *stepCounter = findParam(CLEAVE_PARAM_STEP_COUNTER);
  // The global gradient norm before clipping, which programs compiled with
  // --grad-clip or --grad-norm return.
  const cleave_named_tensor *gradNormOut = nullptr;
  for (int64_t i = 1; i < p.num_outputs; ++i)
    if (std::strcmp(p.outputs[i].name, "grad_norm") == 0 &&
        p.outputs[i].tensor.dtype == CLEAVE_F32 &&
        numElements(p.outputs[i].tensor) == 1)
      gradNormOut = &p.outputs[i];
  float scale = 0;
  int64_t skipped = 0, updates = 0;
  if (lossScale) {
    arena.read(lossScale->tensor, &scale);
    arena.read(stepCounter->tensor, &updates);
  }
  std::optional<float> loss;
  int64_t done = first - 1, savedAt = -1;
  // --nan-check: the first step whose loss was not finite, or -1.
  int64_t nonFinite = -1;
  float nonFiniteLoss = 0;
  double totalMs = 0, windowMs = 0;
  int64_t windowSteps = 0;
  // The directory of the last checkpoint this run wrote.
  std::string savedDir = o.save;
  auto save = [&] {
    if (o.keepLast) {
      savedDir = historyEntry(o.save, done);
      prepareCheckpointDir(savedDir);
    }
    saveCheckpoint(savedDir, arena, done, loss, record);
    savedAt = done;
    if (o.keepLast && isRankZero())
      pruneHistory(o.save, o.keepLast);
  };

  // The host runs one step ahead of the device: it stages the batch of
  // step s and calls its kernels, and only then waits for step s - 1 and
  // reports it, so that the device never idles while the host prepares a
  // step. The loss (and the loss scale) of each step are copied into
  // page-locked slots, two steps' worth, before the step's marker.
  struct Readback {
    int64_t updates;
    float loss, scale, gradNorm;
  };
  HostBuffer readback(2 * sizeof(Readback));
  auto slotOf = [&](int64_t step) {
    return reinterpret_cast<Readback *>(readback.get()) + (step & 1);
  };
  struct InFlight {
    int64_t step, marker;
  };
  std::optional<InFlight> pending;
  // A log that cannot be written (a full disk) stops the run after the
  // step in flight, as a signal does, with its checkpoint saved.
  std::string logError;
  // A step's time runs from the previous step's marker to its own: the
  // device's time per step once steps overlap.
  int64_t since = cleave_rt_marker_record();
  auto finish = [&] {
    int64_t step = pending->step;
    cleave_rt_marker_wait(pending->marker);
    double ms = cleave_rt_marker_elapsed_ms(since, pending->marker);
    cleave_rt_marker_free(since);
    since = pending->marker;
    pending.reset();
    float value = slotOf(step)->loss;
    loss = value;
    done = step;
    bool skippedStep = false;
    if (lossScale) {
      int64_t next = slotOf(step)->updates;
      skippedStep = next == updates;
      skipped += skippedStep;
      updates = next;
      scale = slotOf(step)->scale;
    }
    totalMs += ms;
    windowMs += ms;
    ++windowSteps;
    if (o.nanCheck && nonFinite < 0 && !std::isfinite(value) && !skippedStep) {
      nonFinite = step;
      nonFiniteLoss = value;
    }

    if (logJson) {
      std::string scaling;
      if (p.flops > 0 && ms > 0)
        scaling += ", \"tflops\": " + jsonFloat(float(p.flops / ms * 1e-9));
      if (gradNormOut)
        scaling += ", \"grad_norm\": " + jsonFloat(slotOf(step)->gradNorm);
      if (lossScale)
        scaling += ", \"loss_scale\": " + jsonFloat(scale) +
                   ", \"skipped\": " + (skippedStep ? "true" : "false");
      // JSON has no NaN: a loss that is not finite is null, and says what
      // it was.
      std::string lossJson = jsonFloat(value);
      if (!std::isfinite(value))
        lossJson += ", \"loss_nonfinite\": \"" + floatText(value) + "\"";
      std::fprintf(logJson.get(),
                   "{\"step\": %lld, \"loss\": %s, \"lr\": %.9g, "
                   "\"time\": %.3f, \"tokens_per_s\": %.1f, \"ms\": %.3f%s}\n",
                   (long long)step, lossJson.c_str(), hyper.lrAt(step),
                   unixTime(), ms > 0 ? double(tokensPerStep) * 1000 / ms : 0.0,
                   ms, scaling.c_str());
      if (std::fflush(logJson.get()) != 0) {
        logError =
            "cannot write the log " + o.logJson + ": " + std::strerror(errno);
        logJson.reset();
      }
    }
    if (!o.quiet && (step % o.logEvery == 0 || step == last)) {
      double avg = windowMs / double(windowSteps);
      double eta = totalMs / double(step - first + 1) * double(last - step);
      std::printf("step %lld/%lld  loss %.6g  lr %.3g  tokens/s %.0f  "
                  "ms/step %.2f  eta %.0fs  mem %.0f MiB",
                  (long long)step, (long long)last, double(value),
                  hyper.lrAt(step),
                  avg > 0 ? double(tokensPerStep) * 1000 / avg : 0.0, avg,
                  eta / 1000, peakRssMiB());
      if (p.flops > 0 && avg > 0)
        std::printf("  TFLOP/s %.3g", p.flops / avg * 1e-9);
      if (gradNormOut)
        std::printf("  grad norm %.4g", double(slotOf(step)->gradNorm));
      if (lossScale)
        std::printf("  scale %g  skipped %lld", double(scale),
                    (long long)skipped);
      std::printf("\n");
      std::fflush(stdout);
      windowMs = 0;
      windowSteps = 0;
    }
  };
  // The validation loss after step `step`, reported by rank 0.
  std::optional<double> evalLoss;
  int64_t evalAt = -1;
  auto evaluate = [&](int64_t step) {
    int64_t begin = cleave_rt_marker_record();
    double value = evaluator->evaluate(arena);
    int64_t end = cleave_rt_marker_record();
    cleave_rt_marker_wait(end);
    double ms = cleave_rt_marker_elapsed_ms(begin, end);
    cleave_rt_marker_free(begin);
    cleave_rt_marker_free(end);
    evalLoss = value;
    evalAt = step;
    if (logJson) {
      std::string lossJson = jsonFloat(float(value));
      if (!std::isfinite(value))
        lossJson += ", \"eval_loss_nonfinite\": \"" + floatText(float(value)) +
                    "\"";
      std::fprintf(logJson.get(),
                   "{\"step\": %lld, \"eval_loss\": %s, \"eval_batches\": "
                   "%lld, \"time\": %.3f, \"ms\": %.3f}\n",
                   (long long)step, lossJson.c_str(),
                   (long long)evaluator->batches(), unixTime(), ms);
      if (std::fflush(logJson.get()) != 0) {
        logError =
            "cannot write the log " + o.logJson + ": " + std::strerror(errno);
        logJson.reset();
      }
    }
    if (!o.quiet) {
      std::printf("eval step %lld  loss %.6g  (%lld batches, %.2f s)\n",
                  (long long)step, value, (long long)evaluator->batches(),
                  ms / 1000);
      std::fflush(stdout);
    }
  };
  // The ranks agree once per step whether to stop, so that a signal to
  // one of them stops all after the same step.
  const Device &dev = device();
  bool stop = false;
  // What the ranks agreed on: a signal's number, kLogFailed or
  // kNonFinite.
  constexpr int64_t kLogFailed = 1 << 20, kNonFinite = 1 << 21;
  int64_t reason = 0;
  auto stopRequested = [&] {
    int64_t mine = interrupted         ? int64_t(interrupted)
                   : nonFinite >= 0    ? kNonFinite
                   : !logError.empty() ? kLogFailed
                                       : 0;
    reason =
        dev.distributed ? dev.comm->host_max(CLEAVE_COMM_WORLD, mine) : mine;
    stop = reason != 0;
    return stop;
  };
  // With --eval-every, the parameters the run starts from are evaluated
  // first (as nanoGPT does): each evaluation reads the same samples, so a
  // problem with them shows before any training.
  if (evaluator && o.evalEvery && first <= last)
    evaluate(first - 1);
  timeline.start();
  for (int64_t step = first; step <= last && !stopRequested(); ++step) {
    staging->fill(*data, *schedule, step, arena);
    timeline.beforeStep(step);
    profiler.beforeStep(step);
    // The step's hyperparameters go by value into the calls it makes.
    cleave_program_context context = *programContext();
    context.hyperparameters = hyper.forStep(step);
    cleave_program_run(arena.base(), &context);
    profiler.afterStep(step);
    timeline.afterStep(step);
    arena.readAsync(lossOut.tensor, &slotOf(step)->loss);
    if (gradNormOut)
      arena.readAsync(gradNormOut->tensor, &slotOf(step)->gradNorm);
    if (lossScale) {
      arena.readAsync(lossScale->tensor, &slotOf(step)->scale);
      arena.readAsync(stepCounter->tensor, &slotOf(step)->updates);
    }
    int64_t marker = cleave_rt_marker_record();
    if (pending)
      finish();
    pending = InFlight{step, marker};
    if (!o.overlap)
      finish();
    bool evalNow = evaluator && o.evalEvery && step % o.evalEvery == 0;
    bool saveNow = o.saveEvery && step % o.saveEvery == 0;
    if (evalNow || saveNow) {
      if (pending)
        finish();
      // A diverged step's parameters are neither evaluated nor saved
      // (--nan-check).
      if (evalNow && nonFinite < 0)
        evaluate(step);
      if (saveNow && nonFinite < 0)
        save();
      // The evaluation's and the checkpoint's time is not the next step's.
      cleave_rt_marker_free(since);
      since = cleave_rt_marker_record();
    }
  }
  if (pending)
    finish();
  cleave_rt_marker_free(since);

  if (nonFinite >= 0) {
    // Every rank computed the same loss, so every rank stops here.
    if (isRankZero())
      std::fprintf(stderr,
                   "error: the loss of step %lld is %s (--nan-check): the run "
                   "stopped after step %lld%s\n",
                   (long long)nonFinite,
                   floatText(nonFiniteLoss).c_str(), (long long)done,
                   savedAt >= 0
                       ? (", keeping the checkpoint of step " +
                          std::to_string(savedAt) + " in " + savedDir)
                             .c_str()
                       : ", with no checkpoint of a finite step saved "
                         "(--save-every keeps one)");
    stopDevice();
    return 1;
  }
  if (!o.save.empty() && savedAt != done)
    save();
  // After the last step (or of the resumed checkpoint, with none to run),
  // unless the run was stopped; after the checkpoint, which a failure here
  // does not lose.
  if (evaluator && !stop && evalAt != done)
    evaluate(done);
  if (!stop) {
    // The last step's log line: every rank agrees on it too.
    int64_t mine = logError.empty() ? 0 : kLogFailed;
    reason =
        dev.distributed ? dev.comm->host_max(CLEAVE_COMM_WORLD, mine) : mine;
    stop = reason != 0;
  }
  if (stop && reason == kLogFailed) {
    std::string saved =
        o.save.empty() ? "" : " (checkpoint saved to " + savedDir + ")";
    std::fprintf(
        stderr, "error: %s%s; the run stopped after step %lld%s\n",
        dev.distributed ? ("rank " + std::to_string(dev.rank) + ": ").c_str()
                        : "",
        logError.empty() ? "rank 0 could not write its log" : logError.c_str(),
        (long long)done, saved.c_str());
    stopDevice();
    return 1;
  }
  if (stop) {
    int sig = interrupted ? int(interrupted) : SIGTERM;
    if (isRankZero() || interrupted)
      std::fprintf(
          stderr, "%sinterrupted after step %lld%s\n",
          dev.distributed ? ("rank " + std::to_string(dev.rank) + ": ").c_str()
                          : "",
          (long long)done,
          o.save.empty() ? ""
                         : (" (checkpoint saved to " + savedDir + ")").c_str());
    stopDevice();
    return 128 + sig;
  }
  if (!o.exportOnnx.empty() && !dev.distributed)
    exportOnnx(o.exportOnnx, arena);
  if (!o.exportOnnx.empty() && dev.distributed) {
    // The global weights: the blocks go through a sharded checkpoint (the
    // one just saved, or one beside the model), which rank 0 reads back.
    std::string dir = savedDir;
    if (dir.empty()) {
      dir = o.exportOnnx + ".blocks";
      if (isRankZero())
        prepareCheckpointDir(dir);
      dev.comm->barrier(CLEAVE_COMM_WORLD);
      saveCheckpoint(dir, arena, done, loss, record);
    }
    if (isRankZero()) {
      auto values = readGlobalModelParams(dir);
      exportOnnx(o.exportOnnx, [&](const cleave_named_tensor &param,
                                   std::vector<char> &host) {
        host = std::move(values.at(param.name));
      });
      if (o.save.empty()) {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    }
    dev.comm->barrier(CLEAVE_COMM_WORLD);
  }
  if (!o.commStats.empty())
    writeCommStats(o.commStats, done - first + 1);
  timeline.finish(o.quiet);
  profiler.finish(o.quiet);
  if (!o.quiet) {
    if (done >= first) {
      std::printf("trained steps %lld..%lld in %.1f s, final loss %s\n",
                  (long long)first, (long long)done, totalMs / 1000,
                  floatText(*loss).c_str());
      if (lossScale)
        std::printf("loss scaling: %lld of %lld steps skipped (non-finite "
                    "gradients), scale now %g\n",
                    (long long)skipped, (long long)(done - first + 1),
                    double(scale));
    } else
      std::printf("no steps to run: the checkpoint is at step %lld\n",
                  (long long)done);
    if (evalLoss)
      std::printf("eval loss %s at step %lld (%lld batches)\n",
                  floatText(float(*evalLoss)).c_str(), (long long)evalAt,
                  (long long)evaluator->batches());
    if (!o.save.empty())
      std::printf("saved checkpoint %s at step %lld\n", savedDir.c_str(),
                  (long long)done);
    if (!o.exportOnnx.empty())
      std::printf("exported %s\n", o.exportOnnx.c_str());
  }
  return 0;
}
