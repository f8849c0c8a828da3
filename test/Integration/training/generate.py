#!/usr/bin/python3
"""PyTorch's own training loop on the mlp, gpt and moe examples, recorded as the
reference for check_training.py.

For each configuration in CONFIGS this builds the example's PyTorch module
(the classes of examples/<model>/generate.py), loads its initial weights from
the example's model.onnx initializers, trains for STEPS steps on a saved
random dataset and writes test/Integration/training/<config>/:

  config.json      the model, the cleave-compile flags, the batch, the data
                   files in the order the trainer takes them, PyTorch's version;
                   with "run" the training binary's flags (train_flags), whose
                   values PyTorch's loop trains with, its learning rate from a
                   LambdaLR of lr_factor (the trainer's schedules, checked
                   against CosineAnnealingLR and LinearLR) stepped after each
                   update
  x.npy / idx.npy  the inputs, sample dimension first
  targets.npy      integer class labels (cross-entropy) or float targets (mse)
  expected.json    per-step losses (loss.item() of the float32 run), and the
                   total gradient norm before clipping where clipping is on;
                   with "eval", the validation losses as [step, loss]
                   (model.eval() under torch.no_grad() on the held-out set
                   eval_*.npy, see evaluate) and config.json's eval_flags
  final.npz        the parameters after the last step, by ONNX initializer
                   name; with the optimizer state ("<param>.m", "<param>.v",
                   "<param>.momentum", "optimizer.step") where the
                   configuration's "state" asks for it
  noisy.json       elements whose final float32 value is rounding noise, not
                   training (see noisy_elements), with their value in a
                   float64 run of the same loop and a bound around it

The loop is the plain one, as the trainer specifies it: step k (1-based)
takes samples ((k - 1) B + i) mod N for i in [0, B), B being the model's
batch times the number K of microbatches (--accumulate K compiles a step
whose inputs hold K of the model's batches). The datasets hold 3 batches' worth of samples (2.5 for mlp_mse_sgd,
so that some batches wrap around in the middle), so the data wraps around
within 10 steps; then

  model.train(); opt.zero_grad()
  for each of K microbatches (the model's batch, B / K samples in order):
      (loss_fn(model(x), y) / K).backward()
  [torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)]
  opt.step()

and the logged loss is the mean of the K microbatch losses. Deterministic:
one thread, fixed seeds, deterministic algorithms.

Mixed precision ("precision": "bf16" or "fp16", cleave-compile --precision)
is emulated in float32 by LowPrecision: every torch function the model calls
rounds its floating-point arguments and results to the 16-bit type (values
stay float32 tensors, so every op computes in float32 from 16-bit inputs and
stores a 16-bit output, as Cleave's kernels do), and the gradient reaching
each rounding is rounded too (so a 16-bit backward overflows to inf where
Cleave's does). An MoE router (its Linear, softmax and top-k) is not
rounded: it computes in float32 from the rounded tokens and the float32
router weight, as cleave-compile --router-f32 does. Parameters, their .grad
and the optimizer stay float32; the loss is float32 cross-entropy on the rounded logits. With "loss_scale", the
loop is torch.cuda.amp.GradScaler's, written out (GradScaler itself needs
CUDA): the backward starts from loss * scale; a step with a non-finite
gradient is skipped (no optimizer step, the scale halves, the growth count
restarts); otherwise the gradients are multiplied by 1/scale (then clipped)
and, after "growth_interval" finite steps in a row, the scale doubles.
expected.json then also holds the scale after each step, final.npz the
final "amp.loss_scale" and "amp.growth_tracker". The float64 run for
noisy.json is the plain (not emulated) loop.

  /usr/bin/python3 test/Integration/training/generate.py [--only gpt]
"""

import argparse
import importlib.util
import json
import math
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EXAMPLES = os.path.join(ROOT, "examples")
STEPS = 10

# name: model, loss, optimizer and its hyperparameters, gradient clipping,
# microbatches. "state" also records the final optimizer state: of every
# parameter (True) or of the ones listed (to keep the files small).
CONFIGS = {
    "mlp_sgd": dict(model="mlp", loss="cross-entropy", optimizer="sgd", lr=0.1,
                    momentum=0.9, weight_decay=0.01, state=True),
    "mlp_sgd_nesterov": dict(model="mlp", loss="cross-entropy", optimizer="sgd",
                             lr=0.1, momentum=0.9, weight_decay=0.01,
                             nesterov=True, state=True),
    "mlp_sgd_dampening": dict(model="mlp", loss="cross-entropy", optimizer="sgd",
                              lr=0.1, momentum=0.9, dampening=0.5, state=True),
    "mlp_adamw": dict(model="mlp", loss="cross-entropy", optimizer="adamw",
                      lr=0.01, weight_decay=0.01, state=True),
    "mlp_adamw_betas": dict(model="mlp", loss="cross-entropy", optimizer="adamw",
                            lr=0.01, beta1=0.8, beta2=0.95, eps=1e-4,
                            weight_decay=0.1, state=True),
    # 20 samples, 2.5 batches: batches that wrap around mid-batch.
    "mlp_mse_sgd": dict(model="mlp", loss="mse", optimizer="sgd", lr=0.1,
                        momentum=0.9, weight_decay=0.01, state=True, samples=20),
    "gpt_sgd": dict(model="gpt", loss="cross-entropy", optimizer="sgd", lr=0.1,
                    momentum=0.9, weight_decay=0.01),
    "gpt_adamw": dict(model="gpt", loss="cross-entropy", optimizer="adamw",
                      lr=0.01, weight_decay=0.01,
                      state=["wte.weight", "ln_f.weight", "ln_f.bias"]),
    "gpt_adamw_clip": dict(model="gpt", loss="cross-entropy", optimizer="adamw",
                           lr=0.01, weight_decay=0.01, grad_clip=1.0),
    "gpt_adamw_accum2": dict(model="gpt", loss="cross-entropy", optimizer="adamw",
                             lr=0.01, weight_decay=0.01, accumulate=2),
    # Mixed precision: 16-bit activations, float32 master weights.
    "mlp_sgd_bf16": dict(model="mlp", loss="cross-entropy", optimizer="sgd",
                         lr=0.1, momentum=0.9, weight_decay=0.01, state=True,
                         precision="bf16"),
    "gpt_adamw_bf16": dict(model="gpt", loss="cross-entropy", optimizer="adamw",
                           lr=0.01, weight_decay=0.01, precision="bf16",
                           state=["ln_f.weight"]),
    # The moe example: top-2 routing by torch.topk. Under bf16 the router
    # (its Linear, softmax and top-k) stays float32 (--router-f32, the
    # default). Rounded to bf16 (--router-f32=false), its probabilities tie
    # exactly on 2 of the 320 top-k choices of these 10 steps, which the two
    # programs break differently, and the losses part by 2e-2.
    "moe_adamw": dict(model="moe", loss="cross-entropy", optimizer="adamw",
                      lr=0.01, weight_decay=0.01,
                      state=["blocks.0.moe.router.weight"]),
    # moe_adamw checks the routed experts that -cleave-raise makes of the
    # dense mixture (float32 computes the same function either way). The
    # bf16 emulation rounds the dense form op by op, so moe_adamw_bf16
    # compiles that form (--moe-dense): the routed form rounds elsewhere
    # (the gates renormalized in f32, the combination summed in f32) and
    # its losses part from this emulation by 1.6e-2 after 10 steps.
    "moe_adamw_bf16": dict(model="moe", loss="cross-entropy", optimizer="adamw",
                           lr=0.01, weight_decay=0.01, precision="bf16",
                           moe_dense=True,
                           state=["blocks.0.moe.router.weight"]),
    # The load-balancing loss (--moe-aux-loss 0.01, Switch Transformer's
    # coefficient) of each layer's mixture added to the cross-entropy, so
    # the router is also trained to spread its assignments.
    "moe_adamw_aux": dict(model="moe", loss="cross-entropy", optimizer="adamw",
                          lr=0.01, weight_decay=0.01, moe_aux=0.01,
                          state=["blocks.0.moe.router.weight"]),
    # --keep-f32 layer_norm: the layer norms compute and store float32 from
    # the bf16 activations and the float32 scales and shifts.
    "gpt_adamw_bf16_keep_ln": dict(model="gpt", loss="cross-entropy",
                                   optimizer="adamw", lr=0.01, weight_decay=0.01,
                                   precision="bf16", keep_f32=["layer_norm"],
                                   state=["ln_f.weight"]),
    # A scale far too large: the first steps overflow and are skipped; with a
    # growth interval of 3 it doubles again, overflows again, and so on.
    "gpt_adamw_fp16": dict(model="gpt", loss="cross-entropy", optimizer="adamw",
                           lr=0.01, weight_decay=0.01, precision="fp16",
                           loss_scale=2.0 ** 20, growth_interval=3, grad_clip=1.0,
                           state=["ln_f.weight"]),
    # Hyperparameters at launch ("run": the training binary's flags, the
    # compiled values above their defaults): a schedule of the update
    # number, other values than compiled, the no-decay group.
    # Warmup over 6 of the 10 steps, then cosine to 0.002: check_training's
    # resume at step 5 is in the middle of the warmup. Each gives the
    # schedule's end (decay_steps), which the 5-step run of check_training's
    # resume test must keep.
    "mlp_adamw_warmup_cosine": dict(model="mlp", loss="cross-entropy",
                                    optimizer="adamw", lr=0.01, weight_decay=0.01,
                                    state=True,
                                    run=dict(lr=0.02, schedule="cosine", warmup=6,
                                             min_lr=0.002, decay_steps=STEPS)),
    # Compiled with lr 0.01, weight decay 0.01 and clipping at 1.0; run with
    # lr 0.003 (warmup 2, then linear to 0.0003), weight decay 0.1 for the
    # matrices only (--no-decay-1d) and clipping at 0.5.
    "gpt_adamw_launch": dict(model="gpt", loss="cross-entropy", optimizer="adamw",
                             lr=0.01, weight_decay=0.01, grad_clip=1.0,
                             state=["wte.weight", "ln_f.weight", "ln_f.bias"],
                             run=dict(lr=0.003, weight_decay=0.1, grad_clip=0.5,
                                      no_decay_1d=True, schedule="linear", warmup=2,
                                      min_lr=0.0003, decay_steps=STEPS)),
    # SGD at other lr, momentum and weight decay, warmup-stable-decay: 0.05
    # until the last 4 steps, then linearly towards 0.005.
    "mlp_sgd_wsd": dict(model="mlp", loss="cross-entropy", optimizer="sgd", lr=0.1,
                        momentum=0.9, weight_decay=0.01, state=True,
                        run=dict(lr=0.05, momentum=0.8, weight_decay=0.001,
                                 schedule="wsd", cooldown=4, min_lr=0.005,
                                 decay_steps=STEPS)),
    # The validation loss ("eval": the trainer's --eval-every and
    # --eval-steps, the samples of a held-out set): model.eval() under
    # torch.no_grad() before the first step, after every 4th and after the
    # last, each over the same batches. 20 samples in 3 batches of 8: the
    # third wraps around.
    "mlp_adamw_eval": dict(model="mlp", loss="cross-entropy", optimizer="adamw",
                           lr=0.01, weight_decay=0.01,
                           eval=dict(every=4, steps=3, samples=20)),
    # Two microbatches a step and the load-balancing loss, which the
    # training loss has and the validation loss has not; by default the
    # evaluation takes the whole batches the set holds (2 of 2.5).
    "moe_adamw_aux_eval": dict(model="moe", loss="cross-entropy",
                               optimizer="adamw", lr=0.01, weight_decay=0.01,
                               moe_aux=0.01, accumulate=2,
                               state=["blocks.0.moe.router.weight"],
                               eval=dict(every=5, samples=20)),
}


def eff(cfg, key, default=None):
    """A hyperparameter as the run uses it: the launch's value, else the
    compiled one."""
    return cfg.get("run", {}).get(key, cfg.get(key, default))


def schedule_of(cfg):
    """The run's schedule: its name, peak and final learning rates, warmup,
    decay end and cooldown (the trainer's defaults where not given)."""
    run = cfg.get("run", {})
    decay = run.get("decay_steps", STEPS)
    return (run.get("schedule", "constant"), eff(cfg, "lr"), run.get("min_lr", 0.0),
            run.get("warmup", 0), decay, run.get("cooldown", max(1, decay // 5)))


def lr_factor(cfg, s):
    """The learning rate of update s + 1 over the peak: the trainer's
    schedules (runtime/lib/trainer/Hyperparameters.h), as the lambda of a
    torch.optim.lr_scheduler.LambdaLR after s scheduler steps."""
    schedule, base, m, warmup, decay, cooldown = schedule_of(cfg)
    if s < warmup:
        return (s + 1) / warmup
    if schedule == "cosine":
        t = min(s - warmup, decay - warmup)
        lr = m + (base - m) * (1 + math.cos(math.pi * t / (decay - warmup))) / 2
    elif schedule == "linear":
        t = min(s - warmup, decay - warmup)
        lr = base + (m - base) * t / (decay - warmup)
    elif schedule == "wsd":
        start = decay - cooldown
        lr = base if s < start else base + (m - base) * min(s - start, cooldown) / cooldown
    else:
        lr = base
    return lr / base


def check_against_torch_schedulers(cfg):
    """The decay phase of lr_factor against torch's own schedulers stepped
    on a dummy optimizer: CosineAnnealingLR(T_max = D - W, eta_min = m) and
    LinearLR(1, m / lr, D - W), and wsd's decay against LinearLR over the
    cooldown, within 1e-12 relative."""
    schedule, base, m, warmup, decay, cooldown = schedule_of(cfg)
    sched = torch.optim.lr_scheduler
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base)
    if schedule == "cosine":
        first, n = warmup, decay - warmup
        ref = sched.CosineAnnealingLR(opt, T_max=n, eta_min=m)
    elif schedule == "linear":
        first, n = warmup, decay - warmup
        ref = sched.LinearLR(opt, start_factor=1.0, end_factor=m / base, total_iters=n)
    elif schedule == "wsd":
        first, n = decay - cooldown, cooldown
        ref = sched.LinearLR(opt, start_factor=1.0, end_factor=m / base, total_iters=n)
    else:
        return
    for t in range(n):
        want = opt.param_groups[0]["lr"]
        got = base * lr_factor(cfg, first + t)
        assert abs(got - want) <= 1e-12 * want, (schedule, t, got, want)
        opt.step()
        ref.step()

LOW_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}


class _Round(torch.autograd.Function):
    """x rounded to a 16-bit type and back; its gradient rounded the same way."""

    @staticmethod
    def forward(ctx, x, low):
        ctx.low = low
        return x.to(low).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.low).to(grad.dtype), None


# The functions of an MoE router: its Linear, the softmax and the top-k.
ROUTING_FUNCS = (F.linear, torch.softmax, torch.Tensor.softmax, F.softmax,
                 torch.topk, torch.Tensor.topk)
# The torch functions of the graph ops that --keep-f32 names.
KEEP_F32_FUNCS = {"layer_norm": (F.layer_norm,)}


class LowPrecision(TorchFunctionMode):
    """Every torch function called under this mode reads 16-bit-rounded
    floating-point arguments and returns 16-bit-rounded results (see the
    module docstring).

    Except the router: a routing function (ROUTING_FUNCS) that reads one of
    `router_weights`, or a result of such a call, runs in float32 on its
    arguments as they are and returns float32 results, which the next
    function outside the router rounds. That is cleave-compile
    --router-f32: the top-k and the ops that only feed it stay f32. The
    functions in `keep` (cleave-compile --keep-f32) run so too."""

    def __init__(self, low, router_weights=(), keep=()):
        super().__init__()
        self.low = low
        self.f32 = list(router_weights)  # router weights and results
        self.keep = keep

    def _round(self, value):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return _Round.apply(value, self.low)
        return value

    def _in_f32(self, func, args, kwargs):
        if func in self.keep:
            return True
        if func not in ROUTING_FUNCS:
            return False
        tensors = tree_flatten((args, kwargs))[0]
        return any(t is r for t in tensors for r in self.f32)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._in_f32(func, args, kwargs):
            out = func(*args, **kwargs)
            self.f32 += [t for t in tree_flatten(out)[0]
                         if isinstance(t, torch.Tensor) and t.is_floating_point()]
            return out
        args = tree_map(self._round, args)
        kwargs = tree_map(self._round, kwargs)
        return tree_map(self._round, func(*args, **kwargs))


def load_example(model):
    """The example's generate.py as a module (its main() does not run)."""
    path = os.path.join(EXAMPLES, model, "generate.py")
    spec = importlib.util.spec_from_file_location(model + "_generate", path)
    module = importlib.util.module_from_spec(spec)
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)  # for onnx_export_util
    spec.loader.exec_module(module)
    return module


def onnx_initializers(model):
    """Float initializers of the example's model.onnx, in file order, and the
    graph's input names and shapes."""
    graph = onnx.load(os.path.join(EXAMPLES, model, "model.onnx")).graph
    inits = [(t.name, numpy_helper.to_array(t)) for t in graph.initializer
             if t.data_type == onnx.TensorProto.FLOAT]
    inputs = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim])
              for i in graph.input]
    return inits, inputs


def build_module(model, inits, dtype):
    """The example's module with its parameters set from the ONNX initializers.

    The examples are exported by onnx_export_util.export_example, which checks
    that every float initializer keeps its state_dict name and that every
    nn.Parameter is exported exactly once (the gpt's lm_head.weight is the
    same Parameter as wte.weight, so only wte.weight is an initializer).
    named_parameters() lists a tied Parameter once, under its first name, which
    is the name the exporter keeps.
    """
    module = load_example(model)
    net = getattr(module, {"gpt": "GPT", "mlp": "MLP", "moe": "MoEDecoder"}[model])()
    params = dict(net.named_parameters())
    names = [name for name, _ in inits]
    if sorted(names) != sorted(params):
        raise SystemExit(f"error: {model}: initializers {sorted(names)} are not the "
                         f"parameters {sorted(params)}")
    with torch.no_grad():
        for name, value in inits:
            if tuple(params[name].shape) != value.shape:
                raise SystemExit(f"error: {model}: {name} has shape {value.shape}, "
                                 f"the module {tuple(params[name].shape)}")
            params[name].copy_(torch.from_numpy(value.copy()))
    if model == "gpt":
        assert net.lm_head.weight is net.wte.weight
    return net.to(dtype), params


def make_data(model, loss, batch, input_shape, n, held_out=False):
    """n samples of inputs and targets, sample dimension first (of another
    seed for the held-out evaluation set)."""
    rng = np.random.default_rng({"mlp": 1, "gpt": 2, "moe": 3}[model]
                                + (100 if held_out else 0))
    if model in ("gpt", "moe"):
        seq = input_shape[1]
        stream = rng.integers(0, 64, size=(n, seq + 1)).astype(np.int64)
        return {"idx": stream[:, :-1].copy()}, stream[:, 1:].copy()
    x = rng.standard_normal((n, input_shape[1])).astype(np.float32)
    if loss == "mse":
        return {"x": x}, rng.standard_normal((n, 4)).astype(np.float32)
    return {"x": x}, rng.integers(0, 4, size=n).astype(np.int64)


def make_optimizer(cfg, params):
    """The optimizer at the run's values; with "no_decay_1d" the parameters
    of rank < 2 in a group without weight decay (nanoGPT's groups)."""
    wd = eff(cfg, "weight_decay", 0.0)
    groups = [{"params": params}]
    if cfg.get("run", {}).get("no_decay_1d"):
        groups = [{"params": [p for p in params if p.dim() >= 2]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if cfg["optimizer"] == "sgd":
        return torch.optim.SGD(groups, lr=eff(cfg, "lr"),
                               momentum=eff(cfg, "momentum", 0.0),
                               dampening=eff(cfg, "dampening", 0.0),
                               weight_decay=wd, nesterov=cfg.get("nesterov", False))
    return torch.optim.AdamW(groups, lr=eff(cfg, "lr"),
                             betas=(eff(cfg, "beta1", 0.9), eff(cfg, "beta2", 0.999)),
                             eps=eff(cfg, "eps", 1e-8), weight_decay=wd)


def run_flags(cfg):
    """The training binary's flags of a configuration's "run"."""
    run = cfg.get("run", {})
    flags = []
    for key in ("lr", "weight_decay", "momentum", "grad_clip"):
        if key in run:
            flags += ["--" + key.replace("_", "-"), repr(run[key])]
    if run.get("no_decay_1d"):
        flags.append("--no-decay-1d")
    if "schedule" in run:
        flags += ["--lr-schedule", run["schedule"]]
    for key, flag in (("warmup", "--warmup-steps"), ("min_lr", "--min-lr"),
                      ("decay_steps", "--decay-steps"), ("cooldown", "--cooldown-steps")):
        if key in run:
            flags += [flag, repr(run[key])]
    return flags


def cli_flags(cfg):
    """The cleave-compile flags of a configuration."""
    flags = ["--train", "--loss", cfg["loss"], "--optimizer", cfg["optimizer"],
             "--lr", repr(cfg["lr"])]
    for key in ("momentum", "dampening", "weight_decay", "beta1", "beta2", "eps",
                "grad_clip", "accumulate"):
        if key in cfg:
            flags += ["--" + key.replace("_", "-"), repr(cfg[key])]
    if cfg.get("nesterov"):
        flags.append("--nesterov")
    if "precision" in cfg:
        flags += ["--precision", cfg["precision"]]
    if "keep_f32" in cfg:
        flags += ["--keep-f32", ",".join(cfg["keep_f32"])]
    if cfg.get("moe_dense"):
        flags.append("--moe-dense")
    if "moe_aux" in cfg:
        flags += ["--moe-aux-loss", repr(cfg["moe_aux"])]
    if "loss_scale" in cfg:
        flags += ["--loss-scale", repr(cfg["loss_scale"]),
                  "--loss-scale-growth-interval", str(cfg["growth_interval"])]
    return flags


def load_balancing_hooks(net, losses):
    """Hooks that append each mixture's load-balancing loss to `losses` as
    its forward runs: E * sum_e f_e * P_e (Switch Transformer, Fedus et al.
    2021, eq. 4), f_e the share of the T * k top-k assignments routed to
    expert e, P_e the mean router probability of e; f is a count, without
    a gradient."""
    def hook(moe, inputs, output):
        x = inputs[0]
        tokens = x.reshape(-1, x.shape[-1])
        probs = torch.softmax(moe.router(tokens), dim=-1)  # [T, E]
        experts = probs.shape[-1]
        k = load_example("moe").TOP_K
        chosen = torch.topk(probs, k, dim=-1).indices  # [T, k]
        counts = F.one_hot(chosen, experts).sum(dim=(0, 1)).to(probs.dtype)
        share = counts / chosen.numel()
        losses.append(experts * (share * probs.mean(dim=0)).sum())
    return [module.register_forward_hook(hook) for name, module in
            net.named_modules() if name.endswith(".moe")]


def eval_steps(cfg, batch):
    """The batches of each evaluation: "steps", else the trainer's default,
    the whole batches of the held-out set (at least one)."""
    ev = cfg["eval"]
    return ev.get("steps", max(1, ev["samples"] // batch))


def evaluate(cfg, net, batch, data, targets, dtype):
    """The validation loss as the trainer defines it (--eval-*): batch b
    (from 0) takes samples (b B + i) mod N, each batch's loss is the mean
    of its K microbatches' (no load-balancing term), and the result the
    mean over the batches; model.eval() under torch.no_grad()."""
    inputs = [torch.from_numpy(a) for a in data.values()]
    inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    labels = torch.from_numpy(targets)
    labels = labels.to(dtype) if labels.is_floating_point() else labels
    n = labels.shape[0]
    micro = cfg.get("accumulate", 1)
    size = batch // micro
    net.eval()
    total = 0.0
    with torch.no_grad():
        for b in range(eval_steps(cfg, batch)):
            rows = torch.tensor([(b * batch + i) % n for i in range(batch)])
            parts = 0.0
            for j in range(micro):
                part = rows[j * size:(j + 1) * size]
                out = net(*[t[part] for t in inputs])
                y = labels[part]
                if cfg["loss"] == "mse":
                    parts += F.mse_loss(out, y).item()
                else:
                    parts += F.cross_entropy(out.reshape(-1, out.shape[-1]),
                                             y.reshape(-1)).item()
            total += parts / micro
    net.train()
    return total / eval_steps(cfg, batch)


def train(cfg, inits, batch, data, targets, dtype, emulate=True, held_out=None):
    """PyTorch's loop; returns the per-step losses, gradient norms (and loss
    scales), the final parameters and optimizer state by ONNX name, the
    largest |gradient| of every element over the steps, the learning rates
    and, with a held-out set (data, targets), the validation losses as
    [step, loss] pairs. emulate=False runs a mixed-precision configuration
    at `dtype` throughout."""
    torch.manual_seed(0)
    low = LOW_PRECISION.get(cfg.get("precision")) if emulate else None
    scale = float(cfg["loss_scale"]) if low is not None and "loss_scale" in cfg \
        else None
    tracker, scales = 0, []
    net, params = build_module(cfg["model"], inits, dtype)
    aux = []
    if "moe_aux" in cfg:
        load_balancing_hooks(net, aux)
    opt = make_optimizer(cfg, list(params.values()))
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(cfg, s))
    lrs = []
    micro = cfg.get("accumulate", 1)
    assert batch % micro == 0
    inputs = [torch.from_numpy(a) for a in data.values()]
    inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    labels = torch.from_numpy(targets)
    labels = labels.to(dtype) if labels.is_floating_point() else labels
    n = labels.shape[0]
    losses, norms = [], []
    grad_max = {name: np.zeros(p.shape) for name, p in params.items()}
    evals = []
    every = cfg["eval"]["every"] if held_out else 0
    if every:
        evals.append([0, evaluate(cfg, net, batch, *held_out, dtype)])
        aux.clear()  # the evaluation's forward passes ran the hooks too
    for k in range(1, STEPS + 1):
        rows = torch.tensor([((k - 1) * batch + i) % n for i in range(batch)])
        net.train()
        opt.zero_grad()
        total = 0.0
        size = batch // micro
        for j in range(micro):
            part = rows[j * size:(j + 1) * size]
            if low is not None:
                router = [p for name, p in params.items()
                          if name.endswith(".router.weight")]
                keep = sum((KEEP_F32_FUNCS[op] for op in cfg.get("keep_f32", [])), ())
                with LowPrecision(low, router, keep):
                    out = net(*[t[part] for t in inputs])
            else:
                out = net(*[t[part] for t in inputs])
            y = labels[part]
            if cfg["loss"] == "mse":
                loss = F.mse_loss(out, y)
            else:
                loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            if aux:
                loss = loss + cfg["moe_aux"] * sum(aux)
                aux.clear()
            (loss / micro * scale if scale else loss / micro).backward()
            total += loss.item()
        losses.append(total / micro)
        if scale:
            if not all(bool(torch.isfinite(p.grad).all()) for p in params.values()):
                scale *= 0.5
                tracker = 0
                scales.append(scale)
                if "grad_clip" in cfg:
                    norms.append(float("nan"))
                lrs.append(opt.param_groups[0]["lr"])
                scheduler.step()  # a skipped step still counts
                continue
            inverse = torch.tensor(1.0 / scale, dtype=dtype)
            for p in params.values():
                p.grad.mul_(inverse)
        for name, p in params.items():
            grad_max[name] = np.maximum(grad_max[name], np.abs(p.grad.detach().numpy()))
        if "grad_clip" in cfg:
            norms.append(float(torch.nn.utils.clip_grad_norm_(list(params.values()),
                                                               eff(cfg, "grad_clip"))))
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
        if scale:
            tracker += 1
            if tracker == cfg["growth_interval"]:
                scale *= 2.0
                tracker = 0
            scales.append(scale)
        if held_out and (k % every == 0 or k == STEPS):
            evals.append([k, evaluate(cfg, net, batch, *held_out, dtype)])
            aux.clear()
    final = {name: p.detach().numpy().copy() for name, p in params.items()}
    state = {}
    if scale:
        state["amp.loss_scale"] = np.array(scale, dtype=np.float32)
        state["amp.growth_tracker"] = np.array(float(tracker), dtype=np.float32)
    for name, p in params.items():
        s = opt.state[p]
        for key, suffix in (("exp_avg", ".m"), ("exp_avg_sq", ".v"),
                            ("momentum_buffer", ".momentum")):
            if s.get(key) is not None:
                state[name + suffix] = s[key].detach().numpy().copy()
        if "step" in s:
            state["optimizer.step"] = np.array(float(s["step"]), dtype=np.float32)
    return losses, norms, scales, final, state, grad_max, lrs, evals


def adamw_bound(cfg):
    """A bound on how far AdamW moves an element in STEPS steps beyond its
    weight decay, whatever its gradients: lr * sum over t of C_t, where

      |m_hat_t| / sqrt(v_hat_t) <= sqrt(1 - b2^t) / (1 - b1^t)
                                   * (1 - b1) / sqrt(1 - b2)
                                   * sqrt(sum_{j<t} (b1^2 / b2)^j)

    (Cauchy-Schwarz on m_t = (1 - b1) sum b1^(t-i) g_i against
    v_t = (1 - b2) sum b2^(t-i) g_i^2; eps only makes it smaller). C_t is
    1.0 to 1.04 for PyTorch's betas, so the bound is about lr * STEPS.
    """
    b1, b2 = eff(cfg, "beta1", 0.9), eff(cfg, "beta2", 0.999)
    total = 0.0
    for t in range(1, STEPS + 1):
        total += (np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * (1 - b1) / np.sqrt(1 - b2)
                  * np.sqrt(sum((b1 * b1 / b2) ** j for j in range(t))))
    return eff(cfg, "lr") * total


def noisy_elements(cfg, final32, final64, grad64):
    """Elements whose float32 value is rounding noise, not training.

    An element whose gradient is zero in exact arithmetic at every step (in
    the gpt: the key part of each attention's qkv bias, since softmax does not
    change when the same q.b_k is added to every score) gets float32 rounding
    noise of about 1e-9 as its gradient. AdamW divides that by
    sqrt(v) + eps = about 1e-8, and moves the element by up to lr a step in a
    direction that depends on the order of the floating-point sums, so two
    correct float32 programs end up as much as lr * STEPS apart there. Those
    elements (float64 |gradient| <= 1e-12 at every step, under AdamW), and any
    other element where the float32 and float64 runs differ by more than
    1e-5 max(1, |float64|) (not under mixed precision), are listed with their
    float64 value and a bound:
    under AdamW, adamw_bound() away from the float64 value (each step decays
    the difference by 1 - lr wd and adds at most lr C_t to it).
    """
    noisy = {}
    for name, a in final32.items():
        b = final64[name]
        diff = np.abs(a.astype(np.float64) - b)
        # Mixed precision is far from float64 everywhere; only the
        # zero-gradient elements get the bound.
        mask = diff > 1e-5 * np.maximum(1.0, np.abs(b))
        if "precision" in cfg:
            mask[...] = False
        if cfg["optimizer"] == "adamw":
            mask |= grad64[name] <= 1e-12
        flat = np.flatnonzero(mask)
        if not flat.size:
            continue
        if cfg["optimizer"] != "adamw":
            raise SystemExit(f"error: {name}: {flat.size} elements where float32 and "
                             f"float64 PyTorch differ by up to {diff.max():.3g}")
        noisy[name] = {"index": flat.tolist(),
                       "float64": b.reshape(-1)[flat].tolist(),
                       "float32_diff": [float("%.3g" % d) for d in diff.reshape(-1)[flat]],
                       "bound": adamw_bound(cfg)}
    return noisy


def float32_error(losses32, losses64, final32, final64, noisy):
    """How far PyTorch float32 is from float64: the largest relative loss
    difference, and the largest |diff| / max(1, |float64|) of the parameters
    outside the noisy elements."""
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses32, losses64))
    param_err = 0.0
    for name, a in final32.items():
        b = final64[name].reshape(-1)
        err = np.abs(a.reshape(-1) - b) / np.maximum(1.0, np.abs(b))
        if name in noisy:
            err[noisy[name]["index"]] = 0.0
        param_err = max(param_err, float(err.max()))
    return loss_err, param_err


def generate(name, cfg, folder=HERE):
    out = os.path.join(folder, name)
    inits, graph_inputs = onnx_initializers(cfg["model"])
    # With K microbatches a step takes K of the model's batches.
    batch = graph_inputs[0][1][0] * cfg.get("accumulate", 1)
    data, targets = make_data(cfg["model"], cfg["loss"], batch, graph_inputs[0][1],
                              cfg.get("samples", 3 * batch))
    assert list(data) == [n for n, _ in graph_inputs], (list(data), graph_inputs)
    held_out = None
    if "eval" in cfg:
        held_out = make_data(cfg["model"], cfg["loss"], batch, graph_inputs[0][1],
                             cfg["eval"]["samples"], held_out=True)
    check_against_torch_schedulers(cfg)
    losses, norms, scales, final, state, _, lrs, evals = train(
        cfg, inits, batch, data, targets, torch.float32, held_out=held_out)
    losses64, _, _, final64, _, grad64, _, _ = train(cfg, inits, batch, data, targets,
                                                     torch.float64, emulate=False)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for input_name, array in data.items():
        np.save(os.path.join(out, input_name + ".npy"), array)
    np.save(os.path.join(out, "targets.npy"), targets)
    if held_out:
        for input_name, array in held_out[0].items():
            np.save(os.path.join(out, "eval_" + input_name + ".npy"), array)
        np.save(os.path.join(out, "eval_targets.npy"), held_out[1])
    config = {
        "model": cfg["model"],
        "flags": cli_flags(cfg),
        "steps": STEPS,
        "batch": batch,
        "inputs": [n + ".npy" for n in data],
        "targets": "targets.npy",
        "torch": torch.__version__,
    }
    if "run" in cfg:
        config["train_flags"] = run_flags(cfg)
    if held_out:
        config["eval_flags"] = (
            ["--eval-inputs", ",".join("eval_" + n + ".npy" for n in data),
             "--eval-targets", "eval_targets.npy",
             "--eval-every", str(cfg["eval"]["every"])]
            + (["--eval-steps", str(cfg["eval"]["steps"])]
               if "steps" in cfg["eval"] else []))
    if "precision" in cfg:
        config["precision"] = cfg["precision"]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    expected = {"loss": losses}
    if "run" in cfg:
        expected["lr"] = lrs
    if norms:
        expected["grad_norm"] = norms
    if scales:
        expected["loss_scale"] = scales
    if evals:
        expected["eval_loss"] = evals
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    arrays = dict(final)
    keep = cfg.get("state", False)
    for key, value in state.items():
        if keep is True or key.startswith("amp.") or \
                key == "optimizer.step" and keep or \
                keep and key.rsplit(".", 1)[0] in keep:
            arrays[key] = value
    np.savez(os.path.join(out, "final.npz"), **arrays)
    noisy = noisy_elements(cfg, final, final64, grad64)
    if "precision" in cfg:
        losses64 = losses  # the float64 run is not emulated: no comparison
    with open(os.path.join(out, "noisy.json"), "w") as f:
        json.dump(noisy, f, indent=1)
        f.write("\n")
    count = sum(len(v["index"]) for v in noisy.values())
    loss_err, param_err = float32_error(losses, losses64, final, final64, noisy)
    print(f"{name}: losses {losses[0]:.5f} -> {losses[-1]:.5f}"
          + (f", grad norms {min(norms):.3f}..{max(norms):.3f}" if norms else "")
          + f"; float32 vs float64: loss {loss_err:.1e}, params {param_err:.1e}"
          + f"; {count} noisy elements"
          + (f" in {', '.join(sorted(noisy))}" if noisy else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name, cfg in CONFIGS.items():
        if args.only in name:
            generate(name, cfg)


if __name__ == "__main__":
    main()
