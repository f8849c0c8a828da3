//===- TrainOptions.cpp - the training binary's command line -------------===//
//
// The training main's flags and its --help (TrainOptions.h, Train.h).
//
//===----------------------------------------------------------------------===//

#include "TrainOptions.h"

#include "Data.h"
#include "Eval.h"
#include "Program.h"
#include "Train.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace cleave::rt::trainer;

std::string cleave::rt::trainer::humanBytes(int64_t bytes) {
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

namespace {

std::string listTensors(const cleave_named_tensor *list, int64_t begin,
                        int64_t end) {
  std::string s;
  for (int64_t i = begin; i < end; ++i)
    s += "  " + std::string(list[i].name) + "  " + describe(list[i].tensor) +
         "\n";
  return s.empty() ? "  (none)\n" : s;
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
  --profile FILE      time every op of the steps --profile-start and
                      --profile-steps choose (the host's clock on the
                      CPU, the device's on the GPU) and write them to
                      FILE as a Chrome trace (Perfetto or
                      chrome://tracing): one process per rank, rows for
                      the ops, the collectives and the steps, each op
                      with its location, types, bytes, FLOPs and
                      GFLOP/s; rank 0 prints its ops that took the most
                      time, their share of the step and GFLOP/s. Off,
                      it costs nothing measurable
  --profile-start S   the first step --profile records (default: the
                      run's second, as the first pays for warm-up)
  --profile-steps N   the steps --profile records (default 3)
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

} // namespace

TrainOptions cleave::rt::trainer::parseTrainOptions(int argc, char **argv) {
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
    // A value that names something (a file): not empty.
    auto named = [&](const char *what) {
      std::string v = next();
      if (v.empty())
        fail(flag + " expects " + what);
      return v;
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
      o.evalTokens = named("a file");
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
      o.initFrom = named("a checkpoint folder or a .safetensors file");
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
      o.trace = named("a file");
    } else if (flag == "--trace-steps") {
      o.traceSteps = parseCount(flag, next(), 1);
    } else if (flag == "--profile") {
      o.profile = named("a file");
    } else if (flag == "--profile-start") {
      o.profileStart = parseCount(flag, next(), 1);
    } else if (flag == "--profile-steps") {
      o.profileSteps = parseCount(flag, next(), 1);
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
