#!/usr/bin/python3
"""Checks that compiled training matches PyTorch's own training loop, and that
a checkpoint resumes training exactly.

For each configuration recorded by training/generate.py (mlp, gpt and moe, SGD
with momentum and weight decay, Nesterov, dampening, AdamW with default and
other betas, MSE, gradient clipping, gradient accumulation), this compiles the example's model.onnx with
`cleave-compile --train` and the configuration's flags, runs the training
binary for 10 steps on the saved data with --log-json and --save, and
compares with PyTorch (float32, the same initial weights and batches):

- the loss of every step: |cleave - pytorch| <= 1e-4 |pytorch|;
- every parameter in the checkpoint, by ONNX name (and nothing else there
  but their optimizer state and "optimizer.step"; the gpt's tied weight once):
  |cleave - pytorch| <= 1e-4 max(1, |pytorch|) per element; the elements
  that noisy.json lists (a zero true gradient, whose float32 AdamW update is
  rounding noise over eps: the key part of the gpt's qkv biases) must instead
  be within the AdamW bound of about lr * steps of PyTorch's float64 value;
- the optimizer state, where recorded ("<param>.m", "<param>.v",
  "<param>.momentum"): |cleave - pytorch| <= 1e-4 max(|pytorch|, s) with s
  the largest |pytorch| of that tensor; "optimizer.step" exactly.

Mixed-precision configurations (--precision bf16 or fp16, with dynamic loss
scaling for fp16) are compared with PyTorch's float32 loop emulating 16-bit
storage (training/generate.py). Rounding points differ between the two
programs (Cleave rounds fused ops once), so the bounds are those of 16-bit
arithmetic: losses within MP_LOSS_RTOL (about 4 units of roundoff of the
type: 1.5e-2 for bf16, 2e-3 for fp16); each parameter's update over the
10 steps, p - p0, within MP_UPDATE_RTOL of PyTorch's in 2-norm (p0 the
ONNX initial value; the zero-gradient elements of noisy.json as above):
0.02 for SGD, whose update is linear in the gradient, and 0.25 for AdamW,
whose update divides by the gradient's own magnitude and so turns the
rounding noise of small gradients into steps of up to lr; and optimizer state within MP_STATE_RTOL = 0.1 in 2-norm; the
step counter and the loss scaler's state ("amp.loss_scale",
"amp.growth_tracker") exactly. Skipped fp16 steps show in the losses: a
step skipped by one program and not the other changes every later loss by
far more than the bound.

Configurations with "train_flags" (hyperparameters at launch: other values
than compiled, a learning-rate schedule, the no-decay group) pass them to
the training binary, and its logged learning rate of every step must be
PyTorch's scheduler's within LR_RTOL (the log's 9 digits).

Configurations with clipping log the global gradient norm before clipping
("grad_norm"), which must be clip_grad_norm_'s within the loss's bound
(null where PyTorch's is NaN: an fp16 step with non-finite gradients).

Configurations with "eval_flags" (--eval-inputs, --eval-targets, --eval-every,
--eval-steps on a held-out set) log validation losses, which must be at
PyTorch's steps (before the first, every K-th, the last) and within
LOSS_RTOL of its model.eval() loss; --resume of the final checkpoint with
no steps to run evaluates it, and must log the run's last validation loss
as the same text; and --init-from a safetensors file of PyTorch's final
parameters, with no steps to run, must give PyTorch's last validation loss
within LOSS_RTOL.

Then checkpoint and resume: 5 steps with --save, then --resume with
--steps 10, against the 10-step run: the losses of steps 1..5 and 6..10 as
the same JSON text, and every tensor of the final checkpoint byte for byte.
The resumed run is given no train_flags: the checkpoint's record of the
hyperparameters and schedule must carry them (mlp_adamw_warmup_cosine
resumes in the middle of its warmup).

  check_training.py --compile build/bin/cleave-compile [--only gpt] [--keep DIR]

The last line is "N passed, N failed". Exits 1 when any check fails.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "training")

LOSS_RTOL = 1e-4
LR_RTOL = 1e-8
PARAM_TOL = 1e-4
STATE_TOL = 1e-4
MP_LOSS_RTOL = {"bf16": 1.5e-2, "fp16": 2e-3}
MP_UPDATE_RTOL = {"sgd": 0.02, "adamw": 0.25}
MP_STATE_RTOL = 0.1

SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}


def read_safetensors(path):
    """{name: (dtype string, shape, raw bytes)} of a .safetensors file: an
    8-byte little-endian header length, a JSON header, then the raw data."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: {len(blob)} bytes, no header")
    size = int.from_bytes(blob[:8], "little")
    if 8 + size > len(blob):
        raise ValueError(f"{path}: header of {size} bytes past the end of the file")
    header = json.loads(blob[8:8 + size].decode("utf-8"))
    data = blob[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: {name}: data_offsets {begin}, {end} outside "
                             f"the {len(data)} data bytes")
        tensors[name] = (info["dtype"], tuple(info["shape"]), data[begin:end])
    return tensors


def to_array(entry):
    dtype, shape, raw = entry
    if dtype not in SAFETENSORS_DTYPES:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    array = np.frombuffer(raw, dtype=np.dtype(SAFETENSORS_DTYPES[dtype]).newbyteorder("<"))
    if dtype == "BF16":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    if array.size != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"{array.size} elements for shape {list(shape)}")
    return array.reshape(shape)


def read_eval_log(path):
    """{step: (validation loss, as written)} of a --log-json file."""
    evals = {}
    with open(path) as f:
        for line in f:
            if '"eval_loss"' in line:
                record = json.loads(line)
                text = re.search(r'"eval_loss"\s*:\s*([^,}\s]+)', line).group(1)
                evals[int(record["step"])] = (float(record["eval_loss"]), text)
    return evals


def compare_evals(checker, case, got, want, rtol=LOSS_RTOL):
    """The validation losses at exactly PyTorch's steps, within rtol."""
    steps = [k for k, _ in want]
    if sorted(got) != steps:
        checker.report(False, case, "eval losses",
                       f"evaluated after steps {sorted(got)}, expected {steps}")
        return
    errs = [abs(got[k][0] - w) / abs(w) for k, w in want]
    worst = int(np.argmax(errs))
    k = steps[worst]
    checker.report(all(e <= rtol for e in errs), case, "eval losses",
                   "%d evaluations (steps %s), max relative error %.2e at step %d "
                   "(cleave %s, pytorch %.9g), bound %g"
                   % (len(steps), steps, errs[worst], k, got[k][1], want[worst][1],
                      rtol))


def check_eval_of_checkpoint(checker, case, train, data_args, eval_flags, ckpt_dir,
                             full_evals, work):
    """--resume at the last step with nothing to run evaluates the
    checkpoint: the run's last validation loss as the same text."""
    log = os.path.join(work, "eval-only.jsonl")
    steps = str(max(full_evals))
    every = eval_flags.index("--eval-every")
    error = run([train] + data_args + eval_flags[:every] + eval_flags[every + 2:] +
                ["--resume", ckpt_dir, "--steps", steps, "--log-json", log,
                 "--quiet"], "evaluating the checkpoint")
    if error:
        checker.report(False, case, "eval of the checkpoint", error)
        return
    got = read_eval_log(log)
    last = max(full_evals)
    ok = list(got) == [last] and got[last][1] == full_evals[last][1]
    checker.report(ok, case, "eval of the checkpoint",
                   "--resume with no steps to run: eval loss %s at step %s, the run's "
                   "%s" % (got.get(last, ("none",))[-1], list(got),
                           full_evals[last][1]))


def write_safetensors(path, arrays):
    """A plain safetensors file of float32 arrays (no __metadata__), as
    safetensors.torch.save_file(model.state_dict()) writes one."""
    header, chunks, at = {}, [], 0
    for name, array in arrays.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(chunks))


def check_init_from(checker, case, train, data_args, eval_flags, final, want,
                    work):
    """--init-from a safetensors file of PyTorch's final parameters (by ONNX
    name, as its state_dict would be saved) with no steps to run: the
    validation loss of PyTorch's trained model, within LOSS_RTOL."""
    weights = os.path.join(work, "pytorch.safetensors")
    write_safetensors(weights, {n: final[n] for n in sorted(final_params(final))})
    log = os.path.join(work, "init-from.jsonl")
    every = eval_flags.index("--eval-every")
    error = run([train] + data_args + eval_flags[:every] + eval_flags[every + 2:] +
                ["--init-from", weights, "--steps", "0", "--log-json", log,
                 "--quiet"], "--init-from PyTorch's weights")
    if error:
        checker.report(False, case, "init from PyTorch's weights", error)
        return
    got = read_eval_log(log)
    ok = list(got) == [0] and abs(got[0][0] - want) <= LOSS_RTOL * abs(want)
    checker.report(ok, case, "init from PyTorch's weights",
                   "--init-from a safetensors file of PyTorch's final parameters: "
                   "eval loss %s, PyTorch's %.9g, bound %g relative"
                   % (got.get(0, ("none",))[-1], want, LOSS_RTOL))


def read_log(path):
    """{step: (loss as a number, loss as written)} of a --log-json file."""
    steps = {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            if "step" not in record or "loss" not in record:
                continue
            text = re.search(r'"loss"\s*:\s*([^,}\s]+)', line).group(1)
            steps[int(record["step"])] = (float(record["loss"]), text)
    return steps


class Checker:
    def __init__(self):
        self.passed = self.failed = 0

    def report(self, ok, case, what, detail):
        print("%s %s %s: %s" % ("PASS" if ok else "FAIL", case, what, detail))
        self.passed += bool(ok)
        self.failed += not ok


def run(args, what):
    """Runs a command; returns None, or a one-line message when it fails."""
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    return "%s exited %d: %s" % (what, proc.returncode,
                                 lines[-1] if lines else "no output")


def compare_losses(checker, case, got, want, rtol=LOSS_RTOL):
    """Per-step losses within rtol of PyTorch's."""
    missing = [k for k in range(1, len(want) + 1) if k not in got]
    if missing:
        checker.report(False, case, "losses", f"no loss logged for steps {missing}")
        return
    errs = [abs(got[k][0] - w) / abs(w) for k, w in enumerate(want, 1)]
    worst = int(np.argmax(errs))
    ok = all(e <= rtol for e in errs)  # also false for NaN
    checker.report(ok, case, "losses", "max relative error %.2e at step %d "
                   "(cleave %s, pytorch %.9g), bound %g"
                   % (errs[worst], worst + 1, got[worst + 1][1], want[worst], rtol))


def compare_lrs(checker, case, log_path, want):
    """The learning rate of every step, from --log-json, against PyTorch's."""
    got = {}
    with open(log_path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                if "lr" in record:  # not an evaluation's line
                    got[record["step"]] = record["lr"]
    errs = [abs(got[k] - w) / w if got.get(k) is not None else float("inf")
            for k, w in enumerate(want, 1)]
    worst = int(np.argmax(errs))
    checker.report(all(e <= LR_RTOL for e in errs), case, "learning rates",
                   "max relative error %.1e at step %d (cleave %s, pytorch %.9g), "
                   "bound %g" % (errs[worst], worst + 1, got.get(worst + 1),
                                 want[worst], LR_RTOL))


def compare_grad_norms(checker, case, log_path, want, rtol):
    """The global gradient norm before clipping of every step, from
    --log-json, against clip_grad_norm_'s return value within rtol; a step
    whose gradients were not finite (fp16, skipped) logs null where PyTorch
    has NaN."""
    got = {}
    with open(log_path) as f:
        for line in f:
            if '"grad_norm"' in line:
                record = json.loads(line)
                got[record["step"]] = record["grad_norm"]
    errs = []
    for k, w in enumerate(want, 1):
        g = got.get(k, "missing")
        if not np.isfinite(w):
            errs.append(0.0 if g is None else float("inf"))
        elif g is None or g == "missing":
            errs.append(float("inf"))
        else:
            errs.append(abs(g - w) / abs(w))
    worst = int(np.argmax(errs))
    checker.report(all(e <= rtol for e in errs), case, "grad norms",
                   "%d steps, max relative error %.2e at step %d (cleave %s, "
                   "pytorch %.9g), bound %g" % (len(want), errs[worst], worst + 1,
                                               got.get(worst + 1), want[worst], rtol))


def compare_loss_scales(checker, case, log_path, want):
    """The loss scale after every step, from --log-json, exactly PyTorch's
    (the same steps skipped, halved and doubled), and "skipped" exactly on
    the steps that lowered it."""
    got = {}
    with open(log_path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                got[record["step"]] = (record.get("loss_scale"), record.get("skipped"))
    problems = []
    previous = float("inf")
    for k, scale in enumerate(want, 1):
        have, skipped = got.get(k, (None, None))
        if have != scale or skipped != (scale < previous):
            problems.append(f"step {k}: scale {have}, skipped {skipped}; expected "
                            f"{scale}, {scale < previous}")
        previous = scale
    detail = "scales %s, skipped steps %s" % (
        [got.get(k, (None,))[0] for k in range(1, len(want) + 1)],
        [k for k, (_, skip) in sorted(got.items()) if skip])
    if problems:
        detail += "; " + "; ".join(problems[:3])
    checker.report(not problems, case, "loss scale", detail)


def is_counter(name):
    """Integer state compared exactly: the step and the loss scaler's."""
    return name == "optimizer.step" or name.startswith("amp.")


def unexpected_tensors(ckpt, params):
    """Checkpoint tensors that are neither a parameter of the PyTorch model (a
    tied weight once), its optimizer state, nor a counter."""
    problems = []
    for name in ckpt:
        base = next((name[:-len(s)] for s in (".m", ".v", ".momentum")
                     if name.endswith(s)), name)
        if not is_counter(name) and base not in params:
            problems.append(f"unexpected tensor {name} in the checkpoint")
    return problems


def initial_values(model):
    """The float initializers of an example's model.onnx, by name."""
    import onnx
    from onnx import numpy_helper
    graph = onnx.load(os.path.join(ROOT, "examples", model, "model.onnx")).graph
    return {t.name: numpy_helper.to_array(t) for t in graph.initializer
            if t.data_type == onnx.TensorProto.FLOAT}


def compare_params_mixed(checker, case, ckpt, final, noisy, initial, update_rtol):
    """Mixed precision: updates and state within 16-bit bounds in 2-norm,
    counters exactly."""
    params = final_params(final)
    worst = {"update": (0.0, ""), "state": (0.0, ""), "noisy": (0.0, "")}
    problems = []
    for name in final.files:
        want = final[name].astype(np.float64).reshape(-1)
        if name not in ckpt:
            problems.append(f"{name} missing from the checkpoint")
            continue
        try:
            got = to_array(ckpt[name]).astype(np.float64).reshape(-1)
        except ValueError as e:
            problems.append(f"{name}: {e}")
            continue
        if got.shape != want.shape:
            problems.append(f"{name}: {got.size} elements, expected {want.size}")
        elif is_counter(name):
            if got.tolist() != want.tolist():
                problems.append(f"{name} is {got.tolist()}, expected {want.tolist()}")
        elif name in params:
            update = want - initial[name].astype(np.float64).reshape(-1)
            diff = got - want
            if name in noisy:
                index = np.array(noisy[name]["index"], dtype=np.int64)
                far = np.abs(got[index] - np.array(noisy[name]["float64"]))
                j = int(np.argmax(far))
                worst["noisy"] = max(worst["noisy"], (float(far[j]), name))
                if not far[j] <= noisy[name]["bound"]:
                    problems.append(f"{name}[{index[j]}] is {far[j]:.3g} from float64, "
                                    f"bound {noisy[name]['bound']:.3g}")
                update[index] = diff[index] = 0.0
            err = np.linalg.norm(diff) / max(np.linalg.norm(update), 1e-30)
            worst["update"] = max(worst["update"], (float(err), name))
            if not err <= update_rtol:
                problems.append(f"{name}: update off by {err:.3g} of PyTorch's")
        else:
            err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
            worst["state"] = max(worst["state"], (float(err), name))
            if not err <= MP_STATE_RTOL:
                problems.append(f"{name}: off by {err:.3g} of PyTorch's")
    problems += unexpected_tensors(ckpt, params)
    detail = "updates: max 2-norm error %.3g (%s), bound %g" % (
        worst["update"][0], worst["update"][1], update_rtol)
    if worst["state"][1]:
        detail += "; optimizer state: %.3g (%s), bound %g" % (
            worst["state"][0], worst["state"][1], MP_STATE_RTOL)
    if worst["noisy"][1]:
        detail += "; zero-gradient elements: max |diff| from float64 %.3g (%s)" % (
            worst["noisy"][0], worst["noisy"][1])
    counters = sorted(n for n in final.files if is_counter(n))
    if counters:
        detail += "; %s exact" % ", ".join(counters)
    if problems:
        detail += "; " + "; ".join(problems[:5])
    checker.report(not problems, case, "parameters", detail)


def compare_params(checker, case, ckpt, final, noisy):
    """Parameters and optimizer state in the checkpoint against PyTorch's."""
    worst = (0.0, "")
    worst_noisy = (0.0, "")
    state_worst = (0.0, "")
    problems = []
    params = final_params(final)
    for name in final.files:
        want = final[name].astype(np.float64)
        if name not in ckpt:
            problems.append(f"{name} missing from the checkpoint")
            continue
        try:
            got = to_array(ckpt[name]).astype(np.float64)
        except ValueError as e:
            problems.append(f"{name}: {e}")
            continue
        if is_counter(name):  # a scalar or a one-element tensor
            if got.size != 1 or float(got.reshape(-1)[0]) != float(want):
                problems.append(f"{name} is {got.tolist()}, expected {float(want)}")
            continue
        if got.shape != want.shape:
            problems.append(f"{name}: shape {list(got.shape)}, expected {list(want.shape)}")
            continue
        err = np.abs(got - want).reshape(-1)
        if name in noisy:  # a parameter
            scaled = err / np.maximum(1.0, np.abs(want.reshape(-1)))
            index = np.array(noisy[name]["index"], dtype=np.int64)
            ref64 = np.array(noisy[name]["float64"])
            far = np.abs(got.reshape(-1)[index] - ref64)
            bound = noisy[name]["bound"]
            j = int(np.argmax(far))
            if far[j] > bound or not np.all(np.isfinite(far)):
                problems.append(f"{name}[{index[j]}]: {got.reshape(-1)[index[j]]:.6g} is "
                                f"{far[j]:.3g} from the float64 value {ref64[j]:.6g}, "
                                f"bound {bound:.3g}")
            worst_noisy = max(worst_noisy, (float(far[j]), f"{name}[{index[j]}]"))
            scaled[index] = 0.0
        elif name in params:
            scaled = err / np.maximum(1.0, np.abs(want.reshape(-1)))
        else:  # optimizer state
            scale = max(float(np.abs(want).max()), 1e-30)
            scaled = err / np.maximum(np.abs(want.reshape(-1)), scale) / STATE_TOL
            i = int(np.argmax(scaled))
            state_worst = max(state_worst, (float(scaled[i] * STATE_TOL), f"{name}[{i}]"))
            if not np.all(scaled <= 1.0):
                problems.append(f"{name}[{i}]: {got.reshape(-1)[i]:.6g}, expected "
                                f"{want.reshape(-1)[i]:.6g}")
            continue
        i = int(np.argmax(scaled))
        worst = max(worst, (float(scaled[i]), f"{name}[{i}]"))
        if not np.all(scaled <= PARAM_TOL):
            problems.append(f"{name}[{i}]: {got.reshape(-1)[i]:.6g}, expected "
                            f"{want.reshape(-1)[i]:.6g}")
    problems += unexpected_tensors(ckpt, params)
    detail = "max |diff|/max(1,|pytorch|) %.2e at %s, bound %g" % (worst[0], worst[1],
                                                                     PARAM_TOL)
    if worst_noisy[1]:
        detail += "; zero-gradient elements: max |diff| from float64 %.2e at %s, " \
                  "bound %.3g" % (worst_noisy[0], worst_noisy[1],
                                  next(iter(noisy.values()))["bound"])
    if state_worst[1]:
        detail += "; optimizer state: max relative error %.2e at %s, bound %g" % (
            state_worst[0], state_worst[1], STATE_TOL)
    if problems:
        detail += "; " + "; ".join(problems[:5])
        if len(problems) > 5:
            detail += f"; and {len(problems) - 5} more"
    checker.report(not problems, case, "parameters", detail)


def final_params(final):
    """The parameter names of a final.npz (the others are optimizer state)."""
    names = set(final.files)
    return {n for n in names if not is_counter(n) and not any(
        n.endswith(s) and n[:-len(s)] in names for s in (".m", ".v", ".momentum"))}


def check_resume(checker, case, train, data_args, full_log, full_ckpt, work,
                 train_flags=()):
    """5 steps, --save; --resume to 10 (without the train flags, which the
    checkpoint records): the same losses and tensors as 10 straight."""
    half = os.path.join(work, "half")
    resumed = os.path.join(work, "resumed")
    error = run([train] + data_args + list(train_flags) +
                ["--steps", "5", "--save", half, "--log-json",
                                       os.path.join(work, "half.jsonl"), "--quiet"],
                "5 steps with --save")
    if not error:
        error = run([train] + data_args + ["--steps", "10", "--resume", half, "--save",
                                           resumed, "--log-json",
                                           os.path.join(work, "resumed.jsonl"), "--quiet"],
                    "--resume")
    if error:
        checker.report(False, case, "resume", error)
        return
    first = read_log(os.path.join(work, "half.jsonl"))
    second = read_log(os.path.join(work, "resumed.jsonl"))
    problems = []
    for k in range(1, 11):
        run_log = first if k <= 5 else second
        if k not in run_log:
            problems.append(f"step {k} not logged")
        elif k in full_log and run_log[k][1] != full_log[k][1]:
            problems.append(f"step {k}: loss {run_log[k][1]}, straight {full_log[k][1]}")
    extra = sorted(k for k in second if k <= 5)
    if extra:
        problems.append(f"the resumed run logged steps {extra} again")
    try:
        a = read_safetensors(os.path.join(resumed, "model.safetensors"))
    except (OSError, ValueError) as e:
        a = {}
        problems.append(str(e))
    differ = [n for n in full_ckpt if n not in a or a[n] != full_ckpt[n]]
    differ += [n for n in a if n not in full_ckpt]
    if differ:
        problems.append(f"{len(differ)} of {len(full_ckpt)} tensors differ: "
                        + ", ".join(differ[:5]))
    detail = ("losses of steps 1..10 identical as text, %d tensors identical byte "
              "for byte" % len(full_ckpt))
    checker.report(not problems, case, "resume",
                   "; ".join(problems[:5]) if problems else detail)


def check_config(checker, compiler, folder, work):
    case = os.path.basename(folder)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(folder, "expected.json")) as f:
        expected = json.load(f)
    with open(os.path.join(folder, "noisy.json")) as f:
        noisy = json.load(f)
    final = np.load(os.path.join(folder, "final.npz"))
    model = os.path.join(ROOT, "examples", config["model"], "model.onnx")
    train = os.path.join(work, "train")
    error = run([compiler, model] + config["flags"] + ["-o", train], "cleave-compile")
    if error:
        checker.report(False, case, "compile", error)
        return
    data_args = ["--inputs", ",".join(os.path.join(folder, p) for p in config["inputs"]),
                 "--targets", os.path.join(folder, config["targets"])]
    log = os.path.join(work, "full.jsonl")
    ckpt_dir = os.path.join(work, "full")
    train_flags = config.get("train_flags", [])
    eval_flags = [f if f.startswith("--") or f.isdigit() else
                  ",".join(os.path.join(folder, p) for p in f.split(","))
                  for f in config.get("eval_flags", [])]
    error = run([train] + data_args + train_flags + eval_flags +
                ["--steps", str(config["steps"]), "--log-json", log, "--save",
                 ckpt_dir, "--quiet"], "training")
    if error:
        checker.report(False, case, "train", error)
        return
    full_log = read_log(log)
    precision = config.get("precision")
    compare_losses(checker, case, full_log, expected["loss"],
                   MP_LOSS_RTOL[precision] if precision else LOSS_RTOL)
    try:
        ckpt = read_safetensors(os.path.join(ckpt_dir, "model.safetensors"))
    except (OSError, ValueError) as e:
        checker.report(False, case, "parameters", f"checkpoint: {e}")
        return
    if "loss_scale" in expected:
        compare_loss_scales(checker, case, log, expected["loss_scale"])
    if "lr" in expected:
        compare_lrs(checker, case, log, expected["lr"])
    if "grad_norm" in expected:
        compare_grad_norms(checker, case, log, expected["grad_norm"],
                           MP_LOSS_RTOL[precision] if precision else LOSS_RTOL)
    if "eval_loss" in expected:
        evals = read_eval_log(log)
        compare_evals(checker, case, evals, expected["eval_loss"])
        if evals:
            check_eval_of_checkpoint(checker, case, train, data_args, eval_flags,
                                     ckpt_dir, evals, work)
        check_init_from(checker, case, train, data_args, eval_flags, final,
                        expected["eval_loss"][-1][1], work)
    if precision:
        flags = config["flags"]
        optimizer = flags[flags.index("--optimizer") + 1]
        compare_params_mixed(checker, case, ckpt, final, noisy,
                             initial_values(config["model"]),
                             MP_UPDATE_RTOL[optimizer])
    else:
        compare_params(checker, case, ckpt, final, noisy)
    check_resume(checker, case, train, data_args, full_log, ckpt, work, train_flags)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", default=os.path.join(ROOT, "build/bin/cleave-compile"))
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--only", default="")
    parser.add_argument("--keep", default="", help="keep the work files in this folder")
    args = parser.parse_args()
    if not os.path.exists(args.compile):
        print(f"error: no compiler at {args.compile}", file=sys.stderr)
        return 2
    folders = sorted(os.path.join(args.data, d) for d in os.listdir(args.data)
                     if os.path.exists(os.path.join(args.data, d, "config.json"))
                     and args.only in d)
    checker = Checker()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for folder in folders:
            work = os.path.join(root, os.path.basename(folder))
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            check_config(checker, args.compile, folder, work)
    print("%d passed, %d failed" % (checker.passed, checker.failed))
    return 0 if checker.failed == 0 and checker.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
