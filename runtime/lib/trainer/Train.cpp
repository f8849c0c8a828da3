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
#include "Timeline.h"

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

struct TrainOptions {
  std::vector<std::string> inputFiles; // per program input, the target last
  std::string tokens, tokenDtype = "uint16";
  // The evaluation data, as the training data's flags give it.
  std::vector<std::string> evalInputFiles;
  std::string evalTokens;
  int64_t evalEvery = 0, evalSteps = 0; // 0: at the end; as the data holds
  int64_t seq = 0; // 0: the model's
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t steps = -1; // -1: not given
  std::string save, resume, initFrom, exportOnnx, logJson, commStats, trace;
  int64_t saveEvery = 0, logEvery = 1, traceSteps = 20, keepLast = 0;
  bool quiet = false;
  bool overlap = true;
  bool nanCheck = false;
  HyperparameterFlags hyper;
};

std::string listTensors(const cleave_named_tensor *list, int64_t begin,
                        int64_t end) {
  std::string s;
  for (int64_t i = begin; i < end; ++i)
    s += "  " + std::string(list[i].name) + "  " + describe(list[i].tensor) +
         "\n";
  return s.empty() ? "  (none)\n" : s;
}

std::string humanBytes(int64_t bytes) {
  char buf[32];
  if (bytes < 1024)
    std::snprintf(buf, sizeof(buf), "%lld bytes", (long long)bytes);
  else if (bytes < (int64_t(1) << 20))
    std::snprintf(buf, sizeof(buf), "%.1f KiB", double(bytes) / 1024);
  else if (bytes < (int64_t(1) << 30))
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / (1 << 30));
  return buf;
}

/// The usage text; %s is the program name (twice).
const char *const kUsage =
    R"(usage: %s --inputs FILE.npy[,FILE.npy...] --targets FILE.npy --steps N [options]
       %s --tokens FILE.bin [--seq S] --steps N [options]

Trains the compiled model. Each step copies the next batch of samples
into the program's inputs, runs one training step (forward, backward
and optimizer update, all compiled into the program) and reports the
loss.

data:
  --inputs LIST       the .npy files of the model's inputs, comma-
                      separated in the model's input order, or
                      NAME=FILE items; may be repeated. Each array holds
                      samples along its first dimension; the others
                      must equal the input's dimensions after its batch
                      dimension.
  --targets FILE      the .npy file of the loss target (the program's
                      last input), same layout. Integer data may be
                      int64 or int32, float data float32, float64 or
                      float16: it is converted to the input's dtype.
  --tokens FILE       a flat file of tokens (as nanoGPT's train.bin),
                      for a model with one integer input [B, S] and
                      labels [B, S]: sample i is tokens [i*S, i*S+S)
                      with labels [i*S+1, i*S+S+1), N = (T-1)/S samples
                      of a file of T tokens
  --token-dtype T     uint16 (default) or uint32
  --seq S             the sequence length; must equal the model's
                      (default: the model's)
  --shuffle           visit the samples in a new random order every
                      epoch
  --seed S            the shuffling seed (default 0)

All inputs must have the same number of samples N. Step k (counted
from 1) reads positions (k-1)*B .. k*B-1 of the sample sequence, B the
batch size; position p reads sample perm_e[p %% N] of epoch e = p / N,
so the data wraps around. perm_e is 0..N-1, or with --shuffle the
Fisher-Yates shuffle driven by std::mt19937_64 seeded with S + e
(for i = N-1 down to 1: swap(perm[i], perm[r %% (i+1)]), r = rng()).
The batch is thus a function of the step number alone.

training:
  --steps N           the TOTAL number of steps: with --resume from a
                      checkpoint at step s, steps s+1..N run (default
                      with --resume: s, i.e. none)
  --save DIR          write a checkpoint to DIR at the end
  --save-every K      also after every K-th step (needs --save)
  --keep-last K       keep a history: each checkpoint goes to
                      DIR/step_N, and only the K latest are kept
  --nan-check         stop the run at the first step whose loss is not
                      finite (a step that dynamic loss scaling skipped
                      does not count): exit 1, saving no checkpoint of
                      the diverged parameters, so that the last one
                      (--save-every) is of a finite step
  --no-overlap        wait for each step before preparing the next; by
                      default the host stages the batch of step k+1 and
                      calls its kernels while the device (GPU) still
                      runs step k. For measuring what the overlap gains
  --resume DIR        load the checkpoint in DIR (parameters and
                      optimizer state), or the latest complete one of
                      its history (DIR/step_N), and continue after its
                      step; the losses are those of an uninterrupted run
  --init-from PATH    start from saved weights (fine-tuning): the
                      model's parameters, by name, from a checkpoint
                      folder (any mesh or optimizer; the latest of a
                      history) or a .safetensors file such as
                      safetensors.torch.save_file(model.state_dict());
                      the optimizer state and the step start afresh.
                      Exclusive with --resume
  --export-onnx FILE  at the end, write the source ONNX model with the
                      trained parameter values (inline, so the file
                      stands alone; directories are created)

evaluation (the validation loss: the step's forward pass and loss,
compiled into the binary beside it, no update):
  --eval-inputs LIST  the evaluation data, as --inputs and --targets
  --eval-targets FILE (the same model inputs, batch and dtypes)
  --eval-tokens FILE  or as --tokens (the same --token-dtype and --seq)
  --eval-every K      evaluate before the first step and after every
                      K-th (default: only after the last step; also
                      with no steps to run, which evaluates a
                      checkpoint given to --resume)
  --eval-steps N      batches per evaluation (default: as many whole
                      batches as the data holds, at least one); each
                      evaluation reads samples 0 .. N*B-1 in order,
                      wrapping around, so that evaluations compare
The evaluation loss is the mean of the N batches' losses (each the
mean over its batch, as a step's loss; an auxiliary load-balancing
loss is not part of it). It is printed as `eval step k  loss X`,
logged as {"step": k, "eval_loss": x, "eval_batches": N, "time": t,
"ms": z} and given in the summary. The evaluation program has an
arena of its own (see --help's arena lines) into which the model's
parameters are copied before each evaluation.

output:
  --log-every K       print every K-th progress line (default 1; the
                      last step is always printed)
  --quiet             no banner, progress or summary
  --log-json FILE     one JSON object per step and line:
                      {"step": k, "loss": x, "lr": l, "time": t,
                       "tokens_per_s": y, "ms": z} (l the step's
                      learning rate, t seconds since the Unix epoch when
                      the step was reported); programs compiled with
                      --grad-clip or --grad-norm add "grad_norm", the
                      global gradient 2-norm before clipping (G above),
                      and "tflops" (F above), this device's matrix-
                      product FLOPs of the step (cleave_rt.h's
                      cleave_program_info.flops) over its time
                      (loss with 9 significant digits, which round-trip
                      an f32; null with "loss_nonfinite": "nan", "inf"
                      or "-inf" when it is not finite, as JSON has no
                      NaN; appended to with --resume); programs with
                      dynamic loss scaling (--precision fp16) add
                      "loss_scale" (after the step) and "skipped"
  --comm-stats DIR    a partitioned program: at the end, each rank
                      writes DIR/comm-rank<R>.json, the calls, payload
                      bytes and bytes sent (a ring's, see cleave_comm.h)
                      of each collective kind on each of the program's
                      communicators over the steps of this run
  --trace FILE        a pipelined program (--mesh pp=...): record the
                      first --trace-steps steps of every rank (each
                      schedule step its stage runs, each transfer and
                      the time it waits) and write them to FILE as one
                      Chrome trace, one row per rank, the format of
                      cleave-compile --trace's planned schedule (open
                      both in Perfetto or chrome://tracing); rank 0
                      prints the measured idle share of the step
                      against the schedule's bubble
  --trace-steps N     the steps --trace records (default 20); the first
                      is left out of the idle figures when N > 1
  --help              this message
  --version           Cleave's version and commit, the ABI, the backend

progress line:
  step k/N  loss X  lr L  tokens/s Y  ms/step Z  eta Ts  mem M MiB
  [TFLOP/s F]  [grad norm G]  [scale S  skipped K]
tokens are the elements of the target per step; tokens/s and ms/step
average the steps since the previous line (a step's time runs from the
end of the step before it to its own end on the device, which on the
CPU includes copying the batch in; a line is printed once the next
step has been started, or at the end); eta
extrapolates the mean step time of this run; mem is the process's
peak resident memory (the data, the runtime and, on the CPU, the
arena). With dynamic loss scaling, S is the loss scale after the step
and K the steps skipped so far (their gradients held an inf or NaN:
the parameters were not updated and the scale halved).

checkpoints: DIR/model.safetensors holds every parameter (the model's
and the optimizer state, "optimizer.step" included) with __metadata__
format, format_version, step, fingerprint (of the parameter names,
dtypes and shapes), num_model_params, source_model, training_config
and data_order; it is replaced atomically (written to .tmp, synced,
renamed). DIR/meta.json repeats the metadata for people. Resuming
needs exactly this program's parameters, and warns when the training
config or the data order differ. Ctrl-C (or SIGTERM) ends the run
after the current step, saving a checkpoint with --save.
)";

/// Assigns `spec` (NAME=FILE or FILE) to an input; unnamed files are kept
/// in `positional`. The longest input name before an '=' wins.
void assignInput(const std::string &spec, std::vector<std::string> &files,
                 std::vector<std::string> &positional,
                 const std::string &targetsFlag) {
  const cleave_program_info &p = program();
  int64_t match = -1;
  size_t matchLen = 0;
  for (int64_t in = 0; in < p.num_inputs; ++in) {
    std::string name = p.inputs[in].name;
    if (spec.size() > name.size() && spec.compare(0, name.size(), name) == 0 &&
        spec[name.size()] == '=' && name.size() >= matchLen) {
      match = in;
      matchLen = name.size();
    }
  }
  if (match < 0) {
    positional.push_back(spec);
    return;
  }
  if (match == p.num_inputs - 1)
    fail("'" + std::string(p.inputs[match].name) +
         "' is the loss target: give it with " + targetsFlag + " FILE");
  std::string &slot = files[size_t(match)];
  if (!slot.empty())
    fail(std::string("input '") + p.inputs[match].name + "' is given twice");
  slot = spec.substr(matchLen + 1);
}

/// .npy data as --inputs and --targets (or --eval-inputs and
/// --eval-targets) give it.
struct NpyFlags {
  std::string inputsFlag, targetsFlag; // "--inputs", "--targets"
  std::vector<std::string> files, positional;
  bool haveInputs = false;
  std::string targets;

  NpyFlags(std::string inputsFlag, std::string targetsFlag)
      : inputsFlag(std::move(inputsFlag)), targetsFlag(std::move(targetsFlag)),
        files(size_t(program().num_inputs)) {}

  bool given() const { return haveInputs || !targets.empty(); }

  /// One --inputs LIST.
  void addInputs(const std::string &list) {
    haveInputs = true;
    size_t start = 0;
    while (true) {
      size_t comma = list.find(',', start);
      std::string item = list.substr(start, comma - start);
      if (item.empty())
        fail(inputsFlag + " has an empty item in '" + list + "'");
      assignInput(item, files, positional, targetsFlag);
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
  }

  void setTargets(const std::string &file) {
    if (!targets.empty())
      fail(targetsFlag + " is given twice");
    if (file.empty())
      fail(targetsFlag + " expects a file");
    targets = file;
  }

  /// The file of each program input, the target last: the unnamed files
  /// fill the inputs without a named one, in order.
  std::vector<std::string> resolve() {
    const cleave_program_info &p = program();
    size_t nextSlot = 0;
    size_t modelInputs = size_t(p.num_inputs) - 1;
    for (const std::string &file : positional) {
      while (nextSlot < modelInputs && !files[nextSlot].empty())
        ++nextSlot;
      if (nextSlot == modelInputs)
        fail("too many " + inputsFlag + ": the model has " +
             std::to_string(modelInputs) + ", and '" + file +
             "' is one more (the target goes to " + targetsFlag + ")");
      files[nextSlot++] = file;
    }
    for (size_t in = 0; in < modelInputs; ++in)
      if (files[in].empty())
        fail(std::string("missing data for input '") + p.inputs[in].name +
             "' (give " + inputsFlag + " " + p.inputs[in].name +
             "=FILE.npy)");
    if (targets.empty())
      fail("missing " + targetsFlag + " FILE.npy (the data of '" +
           p.inputs[p.num_inputs - 1].name + "')");
    files[modelInputs] = targets;
    return files;
  }
};

/// The training program's own contract (cleave_rt.h): inputs, then the
/// target, and the f32 scalar loss as output 0.
void checkTrainingProgram() {
  const cleave_program_info &p = program();
  if (p.num_inputs < 1)
    fail("program metadata: a training program needs at least the loss "
         "target as an input");
  if (p.num_outputs < 1 || p.outputs[0].tensor.dtype != CLEAVE_F32 ||
      numElements(p.outputs[0].tensor) != 1)
    fail("program metadata: output 0 of a training program must be the f32 "
         "scalar loss" +
         (p.num_outputs ? ", got '" + std::string(p.outputs[0].name) + "' " +
                              describe(p.outputs[0].tensor)
                        : std::string()));
  programBatchSize();
}

TrainOptions parseArgs(int argc, char **argv) {
  TrainOptions o;
  NpyFlags npy("--inputs", "--targets"), evalNpy("--eval-inputs",
                                                  "--eval-targets");
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // --flag VALUE or --flag=VALUE (--help is main's).
    std::string flag = arg, value;
    bool inlineValue = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    auto next = [&]() -> std::string {
      if (inlineValue)
        return value;
      if (i + 1 >= argc)
        fail("missing value after " + flag);
      return argv[++i];
    };
    auto noValue = [&] {
      if (inlineValue)
        fail(flag + " takes no value");
    };
    if (flag == "--inputs") {
      npy.addInputs(next());
    } else if (flag == "--targets") {
      npy.setTargets(next());
    } else if (flag == "--eval-inputs") {
      evalNpy.addInputs(next());
    } else if (flag == "--eval-targets") {
      evalNpy.setTargets(next());
    } else if (flag == "--tokens") {
      o.tokens = next();
    } else if (flag == "--eval-tokens") {
      o.evalTokens = next();
      if (o.evalTokens.empty())
        fail("--eval-tokens expects a file");
    } else if (flag == "--eval-every") {
      o.evalEvery = parseCount(flag, next(), 1);
    } else if (flag == "--eval-steps") {
      o.evalSteps = parseCount(flag, next(), 1);
    } else if (flag == "--token-dtype") {
      o.tokenDtype = next();
      if (o.tokenDtype != "uint16" && o.tokenDtype != "uint32")
        fail("--token-dtype expects uint16 or uint32, got '" + o.tokenDtype +
             "'");
    } else if (flag == "--seq") {
      o.seq = parseCount(flag, next(), 1);
    } else if (flag == "--shuffle") {
      noValue();
      o.shuffle = true;
    } else if (flag == "--seed") {
      o.seed = uint64_t(parseCount(flag, next(), 0));
    } else if (flag == "--steps") {
      o.steps = parseCount(flag, next(), 0);
      if (o.steps > kMaxSteps)
        fail("--steps " + std::to_string(o.steps) +
             " is past the most this "
             "trainer counts, 2^40 (a step's first sample index would "
             "overflow)");
    } else if (flag == "--save") {
      o.save = next();
    } else if (flag == "--save-every") {
      o.saveEvery = parseCount(flag, next(), 1);
    } else if (flag == "--keep-last") {
      o.keepLast = parseCount(flag, next(), 1);
    } else if (flag == "--resume") {
      o.resume = next();
    } else if (flag == "--init-from") {
      o.initFrom = next();
      if (o.initFrom.empty())
        fail("--init-from expects a checkpoint folder or a .safetensors "
             "file");
    } else if (flag == "--export-onnx") {
      o.exportOnnx = next();
    } else if (flag == "--log-every") {
      o.logEvery = parseCount(flag, next(), 1);
    } else if (flag == "--quiet") {
      noValue();
      o.quiet = true;
    } else if (flag == "--nan-check") {
      noValue();
      o.nanCheck = true;
    } else if (flag == "--no-overlap") {
      noValue();
      o.overlap = false;
    } else if (flag == "--log-json") {
      o.logJson = next();
    } else if (flag == "--comm-stats") {
      o.commStats = next();
    } else if (flag == "--trace") {
      o.trace = next();
      if (o.trace.empty())
        fail("--trace expects a file");
    } else if (flag == "--trace-steps") {
      o.traceSteps = parseCount(flag, next(), 1);
    } else if (flag == "--no-decay-1d") {
      noValue();
      o.hyper.noDecay1d = true;
    } else if (o.hyper.parse(flag, next)) {
      // a hyperparameter (Hyperparameters.h)
    } else {
      fail("unknown argument '" + arg + "' (see --help)");
    }
    if (inlineValue && value.empty() && flag != "--inputs" &&
        flag != "--eval-inputs")
      fail(flag + " expects a value");
  }

  checkTrainingProgram();
  if (o.steps < 0 && o.resume.empty())
    fail("missing --steps N (the total number of training steps)");
  if (!o.initFrom.empty() && !o.resume.empty())
    fail("--init-from and --resume are exclusive: --resume continues a run "
         "(its optimizer state and step), --init-from starts a new one from "
         "saved weights");
  if (o.saveEvery && o.save.empty())
    fail("--save-every needs --save DIR");
  if (o.keepLast && o.save.empty())
    fail("--keep-last needs --save DIR");
  if (!o.tokens.empty() && npy.given())
    fail("--tokens and --inputs/--targets are exclusive");
  if (!o.evalTokens.empty() && evalNpy.given())
    fail("--eval-tokens and --eval-inputs/--eval-targets are exclusive");
  if (o.tokens.empty() && o.evalTokens.empty() &&
      (o.seq || o.tokenDtype != "uint16"))
    fail("--seq and --token-dtype need --tokens or --eval-tokens");
  bool evaluates = !o.evalTokens.empty() || evalNpy.given();
  if (!evaluates && (o.evalEvery || o.evalSteps))
    fail(std::string(o.evalEvery ? "--eval-every" : "--eval-steps") +
         " needs evaluation data (--eval-tokens FILE, or --eval-inputs and "
         "--eval-targets)");
  if (evaluates)
    evalProgram(); // fails, saying why, when the binary has none
  if (o.evalEvery && o.steps >= 0 && o.evalEvery > o.steps)
    fail("--eval-every " + std::to_string(o.evalEvery) + " is past the run's " +
         std::to_string(o.steps) + " steps");
  if (npy.given())
    o.inputFiles = npy.resolve();
  if (evalNpy.given())
    o.evalInputFiles = evalNpy.resolve();
  return o;
}

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

void cleave::rt::trainer::printTrainingUsage(const char *argv0) {
  const cleave_program_info &p = program();
  std::printf(kUsage, argv0, argv0);
  std::printf("\n%s", kHyperparameterUsage);
  int64_t modelBytes = 0, stateBytes = 0;
  for (int64_t i = 0; i < p.num_params; ++i)
    (i < p.num_model_params ? modelBytes : stateBytes) +=
        tensorBytes(p.params[i].tensor);
  std::printf("\nprogram: training\ninputs (the last is the loss target):\n%s"
              "outputs (output 0 is the loss):\n%s"
              "parameters: %lld of the model (%s = %lld B), %lld of "
              "optimizer state (%s = %lld B)\n"
              "arena: %s\nmatrix-product FLOPs per step: %.6g\n"
              "source model: %s\ntraining config: %s\n",
              listTensors(p.inputs, 0, p.num_inputs).c_str(),
              listTensors(p.outputs, 0, p.num_outputs).c_str(),
              (long long)p.num_model_params, humanBytes(modelBytes).c_str(),
              (long long)modelBytes,
              (long long)(p.num_params - p.num_model_params),
              humanBytes(stateBytes).c_str(), (long long)stateBytes,
              humanBytes(p.arena_bytes).c_str(), p.flops,
              p.source_model ? p.source_model : "(none)",
              p.training_config ? p.training_config : "(none)");
  if (const cleave_program_info *e = cleave_program.eval)
    std::printf("evaluation program (--eval-*): arena %s, matrix-product "
                "FLOPs per batch %.6g\n",
                humanBytes(e->arena_bytes).c_str(), e->flops);
  else
    std::printf("evaluation program: none (%s)\n",
                cleave_program.num_stages > 0
                    ? "pipelined programs have none yet"
                    : "compiled with --no-eval");
  if (p.mesh_rank > 0) {
    // A partitioned program: the sizes above are one device's.
    std::string mesh;
    int64_t devices = 1;
    for (int32_t a = 0; a < p.mesh_rank; ++a) {
      mesh += std::string(a ? ", " : "") + p.mesh_axis_names[a] + "=" +
              std::to_string(p.mesh_shape[a]);
      devices *= p.mesh_shape[a];
    }
    std::printf("mesh: %s, %lld devices (one device's program: the inputs, "
                "parameters and arena above are one device's; launch with "
                "mpirun -np %lld, see docs/distributed.md)\n",
                mesh.c_str(), (long long)devices, (long long)devices);
  }
}

int cleave::rt::trainer::runTraining(int argc, char **argv) {
  const cleave_program_info &p = program();
  TrainOptions o = parseArgs(argc, argv);
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
    // The step's hyperparameters go by value into the calls it makes.
    cleave_program_context context = *programContext();
    context.hyperparameters = hyper.forStep(step);
    cleave_program_run(arena.base(), &context);
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
