#!/usr/bin/python3
"""Checks the gradient rule of every differentiable graph op against central
finite differences in float64.

Each case is a tiny module: `graph.param`s with seeded random float32 values
(away from kinks and ties: relu, abs, max/min, reduce max/min and topk
inputs keep a margin from 0 or from each other; log, sqrt, pow bases stay
positive), and a `@forward` that applies one op, sometimes with a fixed
non-param input (indices, a condition, a mask). cleave-compile --loss mse
turns it into a gradient program, which runs on random targets. The
reference is an independent float64 NumPy forward of the op: the loss is
mean((forward(params) - targets)^2), and the gradient of each param element
is (L(x + h) - L(x - h)) / 2h with h = 1e-6 max(1, |x|). Every op of
GraphOps.td (apart from the backward ops) must appear in a case or be listed
as having no gradient; the ops without a rule yet (MoE routing) must fail to
compile with an error that names them. A case marked with a known bug is
reported XFAIL while it fails and XPASS (a failure, to remove the mark) once
it passes.

Tolerances, for each gradient tensor g against its reference r:

  max |g - r| <= 1e-4 max |r| + 1e-8

The reference is accurate to about 1e-9 relative (truncation h^2 |L'''|,
rounding 1e-16 |L| / h). Cleave computes in float32: sums of a few dozen
rounded products and the runtime's polynomial exp/tanh/erf (relative error
1.5e-7, normal CDF 3e-7 absolute) give errors of order 1e-6 of the largest
gradient, also where terms cancel (softmax, norms, attention), so 1e-4 has
two orders of headroom, while a wrong rule (a missing term, a wrong factor,
a broadcast summed over the wrong dims) is off by O(1) of max |r|. The
bound is per tensor rather than per element because cancelling rules give
elements near 0 whose relative error means nothing. The loss must agree to
1e-5 relative (+1e-7). The casts through bf16 and f16 round the forward
values and the gradient itself, and rounding has no useful finite
difference: their gradient is compared with the straight-through
(identity) derivative at 1e-2 max |r| (bf16 keeps 8 bits), and their loss
with the rounded forward at 1e-5.

  check_op_gradients.py --compile build/bin/cleave-compile [--filter NAME]
"""

import argparse
import concurrent.futures
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPS_TD = os.path.join(ROOT, "dialect/include/cleave/Dialect/Graph/IR/GraphOps.td")

RTOL, ATOL = 1e-4, 1e-8
LOSS_RTOL, LOSS_ATOL = 1e-5, 1e-7
CAST_RTOL = 1e-2
FD_STEP = 1e-6

# Ops of GraphOps.td that no gradient flows through.
NO_GRADIENT = {"read_param", "constant", "iota", "compare"}

# ----------------------------------------------------------------------------
# MLIR text
# ----------------------------------------------------------------------------

ELEMENT = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64",
           np.dtype(np.int32): "i32", np.dtype(np.bool_): "i1"}


def T(shape, elem="f32"):
    """The tensor type of a shape: T((2, 3)) is tensor<2x3xf32>."""
    return "tensor<%s%s>" % ("".join("%dx" % d for d in shape), elem)


def literal(a):
    """A dense<...> literal that holds the array's values exactly."""
    def value(v):
        if a.dtype == np.bool_:
            return "true" if v else "false"
        if a.dtype.kind == "f":
            return repr(float(v))
        return str(int(v))

    def nested(x):
        if x.ndim == 0:
            return value(x[()])
        return "[" + ", ".join(nested(s) for s in x) + "]"
    return "dense<%s>" % nested(a)


def module_text(case):
    lines = ["// check_op_gradients.py: %s" % case.name]
    for name, value in case.params.items():
        ty = T(value.shape)
        lines.append("graph.param @%s : %s = %s : %s" % (name, ty, literal(value), ty))
    args = ", ".join('%%%s: %s {onnx.name = "%s"}' % (n, T(a.shape, ELEMENT[a.dtype]), n)
                     for n, a in case.inputs.items())
    lines.append("func.func @forward(%s) -> %s {" % (args, T(case.out_shape)))
    for name, value in case.params.items():
        lines.append("  %%%s = graph.read_param @%s : %s" % (name, name, T(value.shape)))
    lines += ["  " + line.strip() for line in case.body.strip().splitlines()]
    lines.append("  return %%out : %s" % T(case.out_shape))
    lines.append("}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------
# float64 references
# ----------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, scale, bias, dim, eps):
    axes = tuple(range(dim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * scale
    return y if bias is None else y + bias


def rms_norm(x, scale, dim, eps):
    axes = tuple(range(dim, x.ndim))
    return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps) * scale


def attention(q, k, v, mask=None, causal=False, scale=None):
    rep = q.shape[1] // k.shape[1]
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
    return softmax(s, -1) @ v


def cross_entropy(logits, labels, ignore_index=None):
    lp = log_softmax(logits, -1)
    keep = np.ones(labels.shape, bool) if ignore_index is None else labels != ignore_index
    picked = np.take_along_axis(lp, np.where(keep, labels, 0)[..., None], -1)[..., 0]
    return np.array(-picked[keep].mean())


def topk(x, k, dim, smallest=False):
    order = np.argsort(x if smallest else -x, axis=dim, kind="stable")
    return np.take_along_axis(x, np.take(order, np.arange(k), axis=dim), axis=dim)


def strided_slice(x, start, limit, strides):
    return x[tuple(slice(a, b, s) for a, b, s in zip(start, limit, strides))]


def round_bf16(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def round_f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float64)


# ----------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------

class Case:
    """One module: params, fixed inputs, the MLIR body ending in %out, and the
    float64 forward of the same computation."""

    def __init__(self, name, params, body, forward, inputs=None, surrogate=None,
                 rtol=RTOL, expect_error=None, out_shape=None, known_bug=None):
        self.name = name
        self.params = {n: np.asarray(v, np.float32) for n, v in params.items()}
        self.inputs = inputs or {}
        self.body = body
        self.forward = forward          # exact semantics: the loss reference
        self.surrogate = surrogate or forward  # what finite differences see
        self.rtol = rtol
        self.expect_error = expect_error
        self.known_bug = known_bug    # fails today for this reason (XFAIL)
        self.out_shape = out_shape
        if expect_error is None:
            self.out_shape = np.shape(self.forward(*self.float64_values()))

    def float64_values(self):
        """The params and the float inputs widened to float64 (exactly)."""
        p = {n: v.astype(np.float64) for n, v in self.params.items()}
        x = {n: (v.astype(np.float64) if v.dtype == np.float32 else v)
             for n, v in self.inputs.items()}
        return p, x


class Rng:
    """Seeded float32 generators, each case from its own seed."""

    def __init__(self, name):
        self.g = np.random.default_rng(zlib.crc32(name.encode()))

    def normal(self, *shape, scale=1.0):
        return (self.g.standard_normal(shape) * scale).astype(np.float32)

    def uniform(self, lo, hi, *shape):
        return self.g.uniform(lo, hi, shape).astype(np.float32)

    def away(self, *shape, lo=0.2, hi=1.5):
        """|x| in [lo, hi] with a random sign: clear of a kink at 0."""
        sign = np.where(self.g.random(shape) < 0.5, -1.0, 1.0)
        return (sign * self.g.uniform(lo, hi, shape)).astype(np.float32)

    def distinct(self, *shape, gap=0.1):
        """Values at least `gap` apart (no ties for max/min/topk)."""
        n = int(np.prod(shape))
        v = (np.arange(n) - n / 2) * gap * 1.5 + self.g.uniform(-0.25, 0.25, n) * gap
        return self.g.permutation(v).reshape(shape).astype(np.float32)

    def grid(self, *shape, offset=0.0):
        """Multiples of 0.5 plus `offset`, within 0.05: values from two grids
        of different offsets are at least 0.15 apart (no max/min ties)."""
        k = self.g.integers(-4, 5, shape)
        return (0.5 * k + offset + self.g.uniform(-0.05, 0.05, shape)).astype(np.float32)


def unary_cases():
    cases = []
    ops = [
        # name, attribute text, float64 forward, input generator
        ("neg", "", lambda x: -x, lambda r: r.normal(3, 4)),
        ("abs", "", np.abs, lambda r: r.away(3, 4)),
        ("relu", "", lambda x: np.maximum(x, 0.0), lambda r: r.away(3, 4)),
        ("exp", "", np.exp, lambda r: r.normal(3, 4)),
        ("log", "", np.log, lambda r: r.uniform(0.3, 3.0, 3, 4)),
        ("sqrt", "", np.sqrt, lambda r: r.uniform(0.3, 3.0, 3, 4)),
        ("rsqrt", "", lambda x: 1.0 / np.sqrt(x), lambda r: r.uniform(0.3, 3.0, 3, 4)),
        ("reciprocal", "", lambda x: 1.0 / x, lambda r: r.away(3, 4, lo=0.4, hi=2.0)),
        ("tanh", "", np.tanh, lambda r: r.normal(3, 4)),
        ("erf", "", _erf, lambda r: r.normal(3, 4)),
        ("sigmoid", "", sigmoid, lambda r: r.normal(3, 4, scale=2.0)),
        ("silu", "", lambda x: x * sigmoid(x), lambda r: r.normal(3, 4, scale=2.0)),
        ("sin", "", np.sin, lambda r: r.normal(3, 4, scale=2.0)),
        ("cos", "", np.cos, lambda r: r.normal(3, 4, scale=2.0)),
        ("gelu", "", gelu, lambda r: r.normal(3, 4, scale=2.0)),
        ("gelu", " approximate tanh", gelu_tanh, lambda r: r.normal(3, 4, scale=2.0)),
    ]
    for op, attr, fn, gen in ops:
        name = op + attr.replace(" approximate ", ".")
        x = gen(Rng(name))
        cases.append(Case(name, {"x": x},
                          "%%out = graph.%s %%x%s : %s" % (op, attr, T(x.shape)),
                          lambda p, _, fn=fn: fn(p["x"])))
    return cases


def binary_cases():
    cases = []
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
           "div": np.divide, "pow": np.power, "max": np.maximum,
           "min": np.minimum}
    # Broadcast patterns: lhs shape, rhs shape.
    shapes = {"row": ((3, 4), (4,)), "scalar": ((3, 4), ()),
              "scalar_lhs": ((), (3, 4)), "outer": ((2, 3, 1), (4,)),
              "col": ((3, 1), (2, 3, 4))}
    for op, fn in fns.items():
        for kind, (ls, rs) in shapes.items():
            name = "%s.%s" % (op, kind)
            r = Rng(name)
            if op == "div":
                a, b = r.normal(*ls), r.away(*rs, lo=0.5, hi=2.0)
            elif op == "pow":
                a, b = r.uniform(0.5, 2.0, *ls), r.uniform(-1.5, 2.5, *rs)
            elif op in ("max", "min"):
                # Two interleaved grids: |a - b| >= 0.15 for every pair.
                a, b = r.grid(*ls), r.grid(*rs, offset=0.25)
            else:
                a, b = r.normal(*ls), r.normal(*rs)
            body = "%%out = graph.%s %%a, %%b : %s, %s" % (op, T(np.shape(a)), T(np.shape(b)))
            cases.append(Case(name, {"a": a, "b": b}, body,
                              lambda p, _, fn=fn: fn(p["a"], p["b"])))
    return cases


def other_cases():
    cases = []

    def add(name, params, body, forward, **kw):
        cases.append(Case(name, params, body, forward, **kw))

    # One value as both operands, and the even split of the max/min tie
    # rule: max(a, a) = a has derivative 1.
    r = Rng("mul.same")
    add("mul.same", {"a": r.normal(3, 4)},
        "%out = graph.mul %a, %a : tensor<3x4xf32>, tensor<3x4xf32>",
        lambda p, _: p["a"] * p["a"])
    for op in ("max", "min"):
        r = Rng(op + ".same")
        add(op + ".same", {"a": r.normal(3, 4)},
            "%%out = graph.%s %%a, %%a : tensor<3x4xf32>, tensor<3x4xf32>" % op,
            lambda p, _: p["a"])

    # Gradients summed over two reads of one param and over two uses of one
    # value by different ops.
    r = Rng("read_param.twice")
    add("read_param.twice", {"a": r.normal(3, 4)},
        """%a2 = graph.read_param @a : tensor<3x4xf32>
           %t = graph.tanh %a : tensor<3x4xf32>
           %out = graph.mul %t, %a2 : tensor<3x4xf32>, tensor<3x4xf32>""",
        lambda p, _: np.tanh(p["a"]) * p["a"])
    r = Rng("fanout")
    add("fanout", {"a": r.normal(3, 4)},
        """%t = graph.tanh %a : tensor<3x4xf32>
           %s = graph.sin %t : tensor<3x4xf32>
           %out = graph.mul %t, %s : tensor<3x4xf32>, tensor<3x4xf32>""",
        lambda p, _: np.tanh(p["a"]) * np.sin(np.tanh(p["a"])))
    # pow by a constant exponent, negative bases included (x^2, x^3).
    r = Rng("pow.const_exponent")
    add("pow.const_exponent", {"a": r.away(3, 4, lo=0.3, hi=1.5)},
        """%two = graph.constant dense<[2.0, 3.0, 2.0, 3.0]> : tensor<4xf32>
           %out = graph.pow %a, %two : tensor<3x4xf32>, tensor<4xf32>""",
        lambda p, _: p["a"] ** np.array([2.0, 3.0, 2.0, 3.0]))

    # pow at a zero base: 0^b is 0 near b = 2 or 3, so d/db is 0 (PyTorch
    # masks it so); b log(a) must not turn into 0 * -inf.
    add("pow.zero_base", {"a": np.array([[0.0, 0.7, 0.6], [1.3, 0.0, 0.4]]),
                          "b": np.array([2.0, 3.0, 2.5])},
        "%out = graph.pow %a, %b : tensor<2x3xf32>, tensor<3xf32>",
        lambda p, _: np.power(p["a"], p["b"]))

    # where: i1 condition input, broadcast branches.
    r = Rng("where.row")
    add("where.row", {"a": r.normal(3, 4), "b": r.normal(4)},
        "%out = graph.where %c, %a, %b : tensor<3x4xi1>, tensor<3x4xf32>, tensor<4xf32>",
        lambda p, x: np.where(x["c"], p["a"], p["b"]),
        inputs={"c": r.g.random((3, 4)) < 0.5})
    r = Rng("where.wide_condition")
    add("where.wide_condition", {"a": r.normal(4), "b": r.normal(3, 1)},
        "%out = graph.where %c, %a, %b : tensor<2x3x4xi1>, tensor<4xf32>, tensor<3x1xf32>",
        lambda p, x: np.where(x["c"], p["a"], p["b"]),
        inputs={"c": r.g.random((2, 3, 4)) < 0.5})
    r = Rng("where.scalar")
    add("where.scalar", {"a": r.normal(2, 1, 4), "b": r.normal()},
        "%out = graph.where %c, %a, %b : tensor<3x1xi1>, tensor<2x1x4xf32>, tensor<f32>",
        lambda p, x: np.where(x["c"], p["a"], p["b"]),
        inputs={"c": np.array([[True], [False], [True]])})

    # cast round trips: straight-through gradient, rounded forward.
    for elem, rounding in (("bf16", round_bf16), ("f16", round_f16)):
        name = "cast." + elem
        r = Rng(name)
        add(name, {"x": r.normal(3, 4)},
            """%%h = graph.cast %%x : tensor<3x4xf32> -> tensor<3x4x%s>
               %%out = graph.cast %%h : tensor<3x4x%s> -> tensor<3x4xf32>""" % (elem, elem),
            lambda p, _, rounding=rounding: rounding(p["x"]),
            surrogate=lambda p, _: p["x"], rtol=CAST_RTOL)

    # matmul: 2D, batched x 2D, 2D x batched, batched x batched with a
    # broadcast batch. (The rule handles rank-1 operands, but the verifier
    # rejects them.)
    for name, ls, rs in (("matmul.2d", (3, 4), (4, 5)),
                         ("matmul.3d_2d", (2, 3, 4), (4, 5)),
                         ("matmul.2d_3d", (3, 4), (2, 4, 5)),
                         ("matmul.batched", (2, 3, 4), (2, 4, 2)),
                         ("matmul.batch1", (2, 3, 4), (1, 4, 5)),
                         ("matmul.broadcast_batch", (3, 1, 2, 4), (2, 4, 3))):
        r = Rng(name)
        add(name, {"a": r.normal(*ls), "b": r.normal(*rs)},
            "%%out = graph.matmul %%a, %%b : %s, %s" % (T(ls), T(rs)),
            lambda p, _: p["a"] @ p["b"])

    for op, fn in (("softmax", softmax), ("log_softmax", log_softmax)):
        for dim in (0, 1, 2):
            name = "%s.dim%d" % (op, dim)
            r = Rng(name)
            add(name, {"x": r.normal(2, 3, 4, scale=1.5)},
                "%%out = graph.%s %%x dim %d : tensor<2x3x4xf32>" % (op, dim),
                lambda p, _, fn=fn, dim=dim: fn(p["x"], dim))

    # reduce: every kind, keepdim and not, one and several dims, all dims.
    reducers = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}
    for kind, fn in reducers.items():
        for dims, keep in (((1,), False), ((0, 2), True), ((0, 2), False),
                           ((2,), True), ((0, 1, 2), False)):
            name = "reduce.%s.%s%s" % (kind, "_".join(map(str, dims)),
                                        ".keepdim" if keep else "")
            r = Rng(name)
            x = r.distinct(2, 3, 4) if kind in ("max", "min") else r.normal(2, 3, 4)
            add(name, {"x": x},
                "%%out = graph.reduce %s %%x dims [%s]%s : tensor<2x3x4xf32>"
                % (kind, ", ".join(map(str, dims)), " keepdim" if keep else ""),
                lambda p, _, fn=fn, dims=dims, keep=keep: fn(p["x"], axis=dims,
                                                             keepdims=keep))

    # layer_norm: with and without bias, over 1 and 2 trailing dims, a
    # non-default epsilon; the scale and bias are not ones and zeros.
    for name, dim, bias, eps in (("layer_norm.bias.dim2", 2, True, None),
                                 ("layer_norm.nobias.dim2", 2, False, None),
                                 ("layer_norm.bias.dim1", 1, True, 1e-3),
                                 ("layer_norm.nobias.dim1", 1, False, None),
                                 ("layer_norm.bias.dim0", 0, True, None)):
        r = Rng(name)
        shape = (2, 3, 5)
        norm = shape[dim:]
        params = {"x": r.normal(*shape, scale=2.0) + np.float32(0.5),
                  "g": r.uniform(0.5, 1.5, *norm)}
        if bias:
            params["b"] = r.normal(*norm)
        operands = "%x, %g" + (", %b" if bias else "")
        types = ", ".join([T(shape), T(norm)] + ([T(norm)] if bias else []))
        add(name, params,
            "%%out = graph.layer_norm %s dim %d%s : %s"
            % (operands, dim, " eps %r" % eps if eps else "", types),
            lambda p, _, dim=dim, eps=eps: layer_norm(p["x"], p["g"], p.get("b"),
                                                      dim, eps or 1e-5))

    for name, dim, eps in (("rms_norm.dim2", 2, None), ("rms_norm.dim1", 1, 1e-3),
                           ("rms_norm.dim0", 0, None)):
        r = Rng(name)
        shape = (2, 3, 5)
        norm = shape[dim:]
        add(name, {"x": r.normal(*shape, scale=2.0), "g": r.uniform(0.5, 1.5, *norm)},
            "%%out = graph.rms_norm %%x, %%g dim %d%s : %s, %s"
            % (dim, " eps %r" % eps if eps else "", T(shape), T(norm)),
            lambda p, _, dim=dim, eps=eps: rms_norm(p["x"], p["g"], dim, eps or 1e-6))

    # Shape ops.
    r = Rng("reshape")
    add("reshape", {"x": r.normal(2, 6)},
        "%out = graph.reshape %x : tensor<2x6xf32> -> tensor<3x2x2xf32>",
        lambda p, _: p["x"].reshape(3, 2, 2))
    r = Rng("transpose")
    add("transpose", {"x": r.normal(2, 3, 4)},
        "%out = graph.transpose %x perm [2, 0, 1] : tensor<2x3x4xf32>",
        lambda p, _: p["x"].transpose(2, 0, 1))
    for name, shape, dims, out in (("broadcast_in_dim.new_dims", (3,), (1,), (2, 3, 4)),
                                   ("broadcast_in_dim.size1", (3, 1), (0, 2), (3, 2, 4)),
                                   ("broadcast_in_dim.permuted", (4, 3), (2, 0), (3, 2, 4))):
        r = Rng(name)

        def bcast(p, _, dims=dims, out=out):
            x = p["x"]
            # Move operand dim i to result dim dims[i], then broadcast.
            order = np.argsort(dims)
            x = x.transpose(order)
            shape = [1] * len(out)
            for i in order:
                shape[dims[i]] = p["x"].shape[i]
            return np.broadcast_to(x.reshape(shape), out)
        add(name, {"x": r.normal(*shape)},
            "%%out = graph.broadcast_in_dim %%x dims [%s] : %s -> %s"
            % (", ".join(map(str, dims)), T(shape), T(out)), bcast)
    for name, shape, start, limit, strides in (
            ("slice.strided", (5, 7), (1, 0), (5, 7), (2, 3)),
            ("slice.3d", (2, 5, 6), (0, 1, 2), (2, 4, 6), (1, 1, 1)),
            ("slice.strided_3d", (3, 4, 7), (1, 1, 1), (3, 4, 6), (1, 2, 2))):
        r = Rng(name)
        explicit = " strides [%s]" % ", ".join(map(str, strides)) if name != "slice.3d" else ""
        add(name, {"x": r.normal(*shape)},
            "%%out = graph.slice %%x start [%s] limit [%s]%s : %s"
            % (", ".join(map(str, start)), ", ".join(map(str, limit)), explicit, T(shape)),
            lambda p, _, s=start, l=limit, st=strides: strided_slice(p["x"], s, l, st))
    r = Rng("concat")
    add("concat", {"a": r.normal(2, 3), "b": r.normal(2, 1)},
        "%out = graph.concat %a, %b, %a dim 1 : tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x3xf32>",
        lambda p, _: np.concatenate([p["a"], p["b"], p["a"]], axis=1))
    r = Rng("concat.dim0")
    add("concat.dim0", {"a": r.normal(1, 2, 3), "b": r.normal(2, 2, 3)},
        "%out = graph.concat %a, %b dim 0 : tensor<1x2x3xf32>, tensor<2x2x3xf32>",
        lambda p, _: np.concatenate([p["a"], p["b"]], axis=0))
    r = Rng("split")
    add("split", {"x": r.normal(3, 6)},
        """%p:3 = graph.split %x dim 1 sizes [2, 2, 2] : tensor<3x6xf32>
           %out = graph.mul %p#0, %p#2 : tensor<3x2xf32>, tensor<3x2xf32>""",
        lambda p, _: p["x"][:, 0:2] * p["x"][:, 4:6])
    r = Rng("split.one_piece")
    add("split.one_piece", {"x": r.normal(2, 5, 3)},
        """%p:3 = graph.split %x dim 1 sizes [1, 3, 1] : tensor<2x5x3xf32>
           %out = graph.tanh %p#1 : tensor<2x3x3xf32>""",
        lambda p, _: np.tanh(p["x"][:, 1:4]))

    # gather: an embedding with repeated ids, dim 1, negative indices.
    r = Rng("gather.embedding")
    add("gather.embedding", {"table": r.normal(6, 4)},
        "%out = graph.gather %table[%ids] dim 0 : tensor<6x4xf32>, tensor<2x3xi64>",
        lambda p, x: p["table"][x["ids"]],
        inputs={"ids": np.array([[1, 4, 1], [0, 4, 1]], np.int64)})
    r = Rng("gather.dim1")
    add("gather.dim1", {"x": r.normal(3, 5)},
        "%out = graph.gather %x[%ids] dim 1 : tensor<3x5xf32>, tensor<4xi64>",
        lambda p, x: p["x"][:, x["ids"]],
        inputs={"ids": np.array([3, 0, 3, 2], np.int64)})
    r = Rng("gather.negative")
    add("gather.negative", {"x": r.normal(5, 3)},
        "%out = graph.gather %x[%ids] dim 0 : tensor<5x3xf32>, tensor<3xi64>",
        lambda p, x: p["x"][x["ids"]],
        inputs={"ids": np.array([-1, 2, -5], np.int64)})
    r = Rng("gather.i32")
    add("gather.i32", {"x": r.normal(2, 4, 3)},
        "%out = graph.gather %x[%ids] dim 1 : tensor<2x4x3xf32>, tensor<2x2xi32>",
        lambda p, x: p["x"][:, x["ids"]],
        inputs={"ids": np.array([[3, 1], [1, 1]], np.int32)})

    # topk values (the indices unused).
    for name, shape, k, dim, smallest in (("topk.last", (3, 6), 3, 1, False),
                                          ("topk.dim0.smallest", (4, 3, 2), 2, 0, True),
                                          ("topk.middle", (2, 5, 3), 2, 1, False)):
        r = Rng(name)
        add(name, {"x": r.distinct(*shape)},
            """%%v, %%i = graph.topk %%x k %d dim %d%s : %s
               %%out = graph.mul %%v, %%v : %s, %s"""
            % (k, dim, " smallest" if smallest else "", T(shape),
               T(topk_shape(shape, k, dim)), T(topk_shape(shape, k, dim))),
            lambda p, _, k=k, dim=dim, s=smallest: topk(p["x"], k, dim, s) ** 2)

    # attention: causal, GQA (H 4, Hkv 2), bool and float masks, an explicit
    # scale, Sq != Sk, Dv != D.
    B, H, Hkv, Sq, Sk, D, Dv = 2, 4, 2, 3, 5, 4, 3
    qt, kt, vt = T((B, H, Sq, D)), T((B, Hkv, Sk, D)), T((B, Hkv, Sk, Dv))
    bool_mask = Rng("attention.mask").g.random((Sq, Sk)) < 0.6
    bool_mask[:, 0] = True  # every query keeps a key
    float_mask = Rng("attention.float_mask").normal(B, 1, Sq, Sk)
    for name, extra, types, mask, causal, scale in (
            ("attention.plain", "", "", None, False, None),
            ("attention.causal", " causal", "", None, True, None),
            ("attention.mask", " mask %m", ", " + T((Sq, Sk), "i1"), bool_mask, False, None),
            ("attention.float_mask.causal", " mask %m causal", ", " + T((B, 1, Sq, Sk)),
             float_mask, True, None),
            ("attention.scale", " causal scale 0.7", "", None, True, 0.7)):
        r = Rng(name)
        add(name, {"q": r.normal(B, H, Sq, D), "k": r.normal(B, Hkv, Sk, D),
                   "v": r.normal(B, Hkv, Sk, Dv)},
            "%%out = graph.attention %%q, %%k, %%v%s : %s, %s, %s%s"
            % (extra, qt, kt, vt, types),
            lambda p, x, c=causal, s=scale: attention(p["q"], p["k"], p["v"], x.get("m"),
                                                      c, s),
            inputs={} if mask is None else {"m": mask})

    # An additive mask with -inf (as exporters write it), and a bool mask
    # together with causal.
    inf_mask = np.where(Rng("attention.neg_inf").g.random((Sq, Sk)) < 0.5,
                        -np.inf, 0.0).astype(np.float32)
    inf_mask[:, 0] = 0.0
    for name, extra, types, mask in (
            ("attention.float_mask.neg_inf", " mask %m", T((Sq, Sk)), inf_mask),
            ("attention.mask.causal", " mask %m causal", T((1, 1, Sq, Sk), "i1"),
             bool_mask.reshape(1, 1, Sq, Sk))):
        r = Rng(name)
        add(name, {"q": r.normal(B, H, Sq, D), "k": r.normal(B, Hkv, Sk, D),
                   "v": r.normal(B, Hkv, Sk, Dv)},
            "%%out = graph.attention %%q, %%k, %%v%s : %s, %s, %s, %s"
            % (extra, qt, kt, vt, types),
            lambda p, x, c="causal" in extra: attention(p["q"], p["k"], p["v"], x["m"], c),
            inputs={"m": mask})

    # Multi-query (Hkv 1), and more queries than keys under causal.
    for name, hkv, sq, sk in (("attention.mqa", 1, 3, 4), ("attention.causal.long_query", 2, 5, 3)):
        r = Rng(name)
        extra = " causal" if "causal" in name else ""
        shapes = ((1, 4, sq, 4), (1, hkv, sk, 4), (1, hkv, sk, 2))
        add(name, {"q": r.normal(*shapes[0]), "k": r.normal(*shapes[1]),
                   "v": r.normal(*shapes[2])},
            "%%out = graph.attention %%q, %%k, %%v%s : %s, %s, %s"
            % (extra, T(shapes[0]), T(shapes[1]), T(shapes[2])),
            lambda p, _, c=bool(extra): attention(p["q"], p["k"], p["v"], None, c))
    # A trainable additive mask (a learned position bias) would need a mask
    # gradient, which attention_grad does not compute: compiling must fail
    # and say so rather than leave the parameter untrained.
    r = Rng("attention.float_mask.param")
    add("attention.float_mask.param", {"q": r.normal(1, 2, 3, 4), "k": r.normal(1, 2, 3, 4),
                                       "v": r.normal(1, 2, 3, 4), "m": r.normal(2, 3, 3)},
        "%out = graph.attention %q, %k, %v mask %m : tensor<1x2x3x4xf32>, "
        "tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<2x3x3xf32>",
        None, expect_error="'graph.attention' op has no gradient for operand #3",
        out_shape=(1, 2, 3, 4))

    # cross_entropy (a scalar output: the targets are a scalar), with and
    # without ignored labels.
    r = Rng("cross_entropy")
    add("cross_entropy", {"logits": r.normal(4, 5, scale=2.0)},
        "%out = graph.cross_entropy %logits, %labels : tensor<4x5xf32>, tensor<4xi64>",
        lambda p, x: cross_entropy(p["logits"], x["labels"]),
        inputs={"labels": np.array([1, 4, 0, 1], np.int64)})
    r = Rng("cross_entropy.ignore_index")
    add("cross_entropy.ignore_index", {"logits": r.normal(2, 3, 5, scale=2.0)},
        "%out = graph.cross_entropy %logits, %labels ignore_index -100 : "
        "tensor<2x3x5xf32>, tensor<2x3xi64>",
        lambda p, x: cross_entropy(p["logits"], x["labels"], -100),
        inputs={"labels": np.array([[2, -100, 4], [0, 3, -100]], np.int64)})

    r = Rng("cross_entropy.i32")
    add("cross_entropy.i32", {"logits": r.normal(2, 3, 4, scale=2.0)},
        "%out = graph.cross_entropy %logits, %labels : tensor<2x3x4xf32>, tensor<2x3xi32>",
        lambda p, x: cross_entropy(p["logits"], x["labels"]),
        inputs={"labels": np.array([[3, 0, 0], [1, 2, 3]], np.int32)})

    # mse as an op: both the prediction and the target are params.
    r = Rng("mse")
    add("mse", {"pred": r.normal(3, 4), "target": r.normal(3, 4)},
        "%out = graph.mse %pred, %target : tensor<3x4xf32>",
        lambda p, _: np.array(((p["pred"] - p["target"]) ** 2).mean()))
    r = Rng("mse.input_target")
    add("mse.input_target", {"pred": r.normal(2, 3)},
        "%out = graph.mse %pred, %t : tensor<2x3xf32>",
        lambda p, x: np.array(((p["pred"] - x["t"]) ** 2).mean()),
        inputs={"t": r.normal(2, 3)})

    r = Rng("expert_matmul")
    add("expert_matmul", {"x": r.normal(2, 3, 4), "w": r.normal(2, 4, 5)},
        "%out = graph.expert_matmul %x, %w : tensor<2x3x4xf32>, tensor<2x4x5xf32>",
        lambda p, _: p["x"] @ p["w"])

    # MoE routing. The logits are spread apart so that no finite difference
    # changes the choice of experts (the choice itself has no gradient).
    for normalize in (False, True):
        name = "router_topk" + (".normalize" if normalize else "")
        r = Rng(name)
        logits = (np.stack([r.g.permutation(5) for _ in range(4)]) * 0.7
                  + r.uniform(-0.1, 0.1, 4, 5)).astype(np.float32)
        add(name, {"logits": logits},
            "%%out, %%e = graph.router_topk %%logits k 2%s : tensor<4x5xf32>"
            % (" normalize" if normalize else ""),
            lambda p, _, n=normalize: router_topk(p["logits"], 2, n)[0])
    # Expert 1 gets five assignments for capacity 3: two are dropped.
    experts = np.array([[1, 0], [1, 0], [0, 1], [1, 0], [1, 0]], np.int64)
    r = Rng("moe_dispatch")
    add("moe_dispatch", {"x": r.normal(5, 3)},
        "%out = graph.moe_dispatch %x, %e experts 2 capacity 3 : "
        "tensor<5x3xf32>, tensor<5x2xi64>",
        lambda p, x: moe_dispatch(p["x"], x["e"], 2, 3), inputs={"e": experts})
    r = Rng("moe_combine")
    add("moe_combine", {"h": r.normal(2, 3, 3), "g": r.uniform(0.2, 1.0, 5, 2)},
        "%out = graph.moe_combine %h, %g, %e : tensor<2x3x3xf32>, "
        "tensor<5x2xf32>, tensor<5x2xi64>",
        lambda p, x: moe_combine(p["h"], p["g"], x["e"]), inputs={"e": experts})
    # A whole MoE layer: router, dispatch, experts, combine.
    r = Rng("moe_layer")
    add("moe_layer", {"x": r.normal(6, 4), "wr": r.normal(4, 3, scale=2.0),
                      "w": r.normal(3, 4, 5)},
        """%logits = graph.matmul %x, %wr : tensor<6x4xf32>, tensor<4x3xf32>
           %g, %e = graph.router_topk %logits k 2 normalize : tensor<6x3xf32>
           %d = graph.moe_dispatch %x, %e experts 3 capacity 3 : tensor<6x4xf32>, tensor<6x2xi64>
           %h = graph.expert_matmul %d, %w : tensor<3x3x4xf32>, tensor<3x4x5xf32>
           %out = graph.moe_combine %h, %g, %e : tensor<3x3x5xf32>, tensor<6x2xf32>, tensor<6x2xi64>""",
        lambda p, _: moe_layer(p["x"], p["wr"], p["w"], 3))
    return cases


def router_topk(logits, k, normalize):
    """Gates (softmax probabilities of the top k, renormalized) and experts,
    ties to the lower index."""
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = z / z.sum(axis=1, keepdims=True)
    experts = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    gates = np.take_along_axis(p, experts, axis=1)
    if normalize:
        gates = gates / gates.sum(axis=1, keepdims=True)
    return gates, experts


def moe_slots(experts, num_experts, capacity):
    """The slot of each assignment (t, j), in (t, j) order; -1 if dropped."""
    used = [0] * num_experts
    slots = np.full(experts.shape, -1)
    for t in range(experts.shape[0]):
        for j in range(experts.shape[1]):
            e = experts[t, j]
            if used[e] < capacity:
                slots[t, j] = used[e]
                used[e] += 1
    return slots


def moe_dispatch(tokens, experts, num_experts, capacity):
    out = np.zeros((num_experts, capacity, tokens.shape[1]))
    slots = moe_slots(experts, num_experts, capacity)
    for (t, j), c in np.ndenumerate(slots):
        if c >= 0:
            out[experts[t, j], c] = tokens[t]
    return out


def moe_combine(expert_out, gates, experts):
    slots = moe_slots(experts, expert_out.shape[0], expert_out.shape[1])
    out = np.zeros((gates.shape[0], expert_out.shape[2]))
    for (t, j), c in np.ndenumerate(slots):
        if c >= 0:
            out[t] += gates[t, j] * expert_out[experts[t, j], c]
    return out


def moe_layer(x, wr, w, capacity):
    gates, experts = router_topk(x @ wr, 2, True)
    h = moe_dispatch(x, experts, w.shape[0], capacity) @ w
    return moe_combine(h, gates, experts)


def topk_shape(shape, k, dim):
    return tuple(k if d == dim else s for d, s in enumerate(shape))


# ----------------------------------------------------------------------------
# Running and comparing
# ----------------------------------------------------------------------------

def all_cases():
    return unary_cases() + binary_cases() + other_cases()


def uncovered_ops(cases):
    """Forward ops of GraphOps.td that no case uses and that are not known
    to have no gradient."""
    with open(OPS_TD) as f:
        td = f.read()
    ops = set(re.findall(r'def Graph_\w+\s*:\s*Graph_(?:Op|UnaryOp|BinaryOp|SoftmaxLikeOp)'
                         r'<"(\w+)"', td))
    used = set()
    for case in cases:
        used |= set(re.findall(r"graph\.(\w+)", case.body))
    return sorted(ops - used - NO_GRADIENT)


def finite_differences(case, targets):
    """Loss and central-difference gradients of the surrogate forward."""
    params, inputs = case.float64_values()

    def loss(fn):
        return float(np.mean((np.asarray(fn(params, inputs)) - targets) ** 2))

    grads = {}
    for name, value in params.items():
        g = np.zeros_like(value)
        flat, gflat = value.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            x = flat[i]
            h = FD_STEP * max(1.0, abs(x))
            flat[i] = x + h
            up = loss(case.surrogate)
            flat[i] = x - h
            down = loss(case.surrogate)
            flat[i] = x
            gflat[i] = (up - down) / (2 * h)
        grads[name] = g
    return loss(case.forward), grads


def run_cleave(compiler, case, work, targets):
    """Compiles and runs the gradient program; returns (outputs, error)."""
    folder = os.path.join(work, re.sub(r"[^A-Za-z0-9._-]", "_", case.name))
    os.makedirs(folder)
    model = os.path.join(folder, "model.mlir")
    with open(model, "w") as f:
        f.write(module_text(case))
    prog = os.path.join(folder, "prog")
    done = subprocess.run([compiler, model, "--loss", "mse", "-o", prog],
                          capture_output=True, text=True)
    if case.expect_error is not None or done.returncode != 0:
        return None, done
    args = [prog, "--output-dir", os.path.join(folder, "out")]
    for name, value in list(case.inputs.items()) + [("targets", targets)]:
        path = os.path.join(folder, name + ".npy")
        np.save(path, value)
        args += ["--input", "%s=%s" % (name, path)]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        return None, done
    out = os.path.join(folder, "out")
    results = {"loss": np.load(os.path.join(out, "loss.npy"))}
    for name in case.params:
        path = os.path.join(out, re.sub(r"[^A-Za-z0-9._-]", "_", "grad." + name) + ".npy")
        results["grad." + name] = np.load(path) if os.path.exists(path) else None
    return results, done


def check(case, got, done, targets):
    """Whether the case passed, and what to print about it."""
    if case.expect_error is not None:
        err = done.stderr.strip()
        ok = done.returncode != 0 and case.expect_error in err and "gradient" in err
        return ok, (("compile fails: " + err.splitlines()[0]) if err
                    else "compiled, but an error naming %s was expected" % case.expect_error)
    if got is None:
        return False, "%s exited with %d\n%s" % (done.args[0], done.returncode,
                                                 (done.stderr or done.stdout).strip())
    loss, grads = finite_differences(case, targets.astype(np.float64))
    loss_bound = LOSS_RTOL * abs(loss) + LOSS_ATOL
    loss_err = abs(float(got["loss"]) - loss)
    ok = got["loss"].shape == () and loss_err <= loss_bound
    parts = ["loss %.2g%s" % (loss_err, "" if ok else " > bound %.2g" % loss_bound)]
    for name, want in grads.items():
        g = got["grad." + name]
        if g is None:
            parts.append("grad.%s missing from the program's outputs" % name)
            ok = False
            continue
        if g.shape != want.shape:
            parts.append("grad.%s shape %s, expected %s" % (name, g.shape, want.shape))
            ok = False
            continue
        scale = float(np.abs(want).max())
        err = float(np.abs(g.astype(np.float64) - want).max())
        bound = case.rtol * scale + ATOL
        parts.append("grad.%s %.2g (%.2g of max %.2g)%s"
                     % (name, err, err / scale if scale else float("inf"), scale,
                        "" if err <= bound else " > bound %.2g" % bound))
        ok &= err <= bound
    return ok, ", ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", default=os.path.join(ROOT, "build/bin/cleave-compile"))
    parser.add_argument("--filter", default="",
                        help="only the cases whose name contains this")
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()

    cases = all_cases()
    missing = uncovered_ops(cases)
    cases = [c for c in cases if args.filter in c.name]
    passed = failed = known = 0
    if missing and not args.filter:
        print("FAIL coverage: no case for %s" % ", ".join(missing))
        failed += 1

    work = args.keep or tempfile.mkdtemp(prefix="op-gradients-")
    os.makedirs(work, exist_ok=True)
    try:
        targets = {}
        for case in cases:
            if case.out_shape is not None:
                r = Rng(case.name + ".targets")
                targets[case.name] = r.normal(*case.out_shape)
        # Compiling and running overlap with the finite differences.
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            futures = [pool.submit(run_cleave, args.compile, c, work, targets.get(c.name))
                       for c in cases]
            for case, future in zip(cases, futures):
                got, done = future.result()
                ok, detail = check(case, got, done, targets.get(case.name))
                if case.known_bug:
                    # A known bug fails as expected; a fix makes it fail
                    # until its known_bug note is removed.
                    label = "XFAIL" if not ok else "XPASS"
                    detail += " [known bug: %s]" % case.known_bug
                    known += not ok
                    failed += ok
                else:
                    label = "PASS" if ok else "FAIL"
                    passed += ok
                    failed += not ok
                print("%s %s: %s" % (label, case.name, detail))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed%s" % (passed, failed,
                                      ", %d known failures" % known if known else ""))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
