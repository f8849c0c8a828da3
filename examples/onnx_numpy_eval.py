"""A small numpy interpreter for the ONNX ops the example models use.

onnx 1.12 has no reference evaluator (onnx.reference came in 1.13) and
onnxruntime is not installed, so the generators check their exports with this.
It implements opset-17 semantics of only the ops listed in OPS, on the graph's
topological node order, and raises on anything else.

Usage:  /usr/bin/python3 examples/onnx_numpy_eval.py examples/gpt
        (runs model.onnx on input_*.npy and compares with expected_*.npy)
"""

import math
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.BOOL: np.bool_,
}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _axes(axes, rank):
    return tuple(int(a) + rank if a < 0 else int(a) for a in axes)


def _constant(node, inputs, attrs):
    (name,) = attrs.keys()
    value = attrs[name]
    if name == "value":
        return [value]
    if name in ("value_float", "value_int"):
        return [np.array(value, dtype=np.float32 if name == "value_float" else np.int64)]
    if name in ("value_floats", "value_ints"):
        return [np.array(value, dtype=np.float32 if name == "value_floats" else np.int64)]
    raise NotImplementedError(f"Constant with attribute {name}")


def _gemm(node, inputs, attrs):
    a, b = inputs[0], inputs[1]
    if attrs.get("transA", 0):
        a = a.T
    if attrs.get("transB", 0):
        b = b.T
    y = attrs.get("alpha", 1.0) * (a @ b)
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + attrs.get("beta", 1.0) * inputs[2]
    return [y.astype(inputs[0].dtype)]


def _div(node, inputs, attrs):
    a, b = inputs
    if np.issubdtype(a.dtype, np.integer):
        return [np.trunc(a / b).astype(a.dtype)]
    return [a / b]


def _reshape(node, inputs, attrs):
    x, shape = inputs
    shape = [int(s) for s in shape]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


def _transpose(node, inputs, attrs):
    perm = attrs.get("perm")
    return [np.transpose(inputs[0], perm)]


def _softmax(node, inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", -1)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return [(e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)]


def _layer_norm(node, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    axis = attrs.get("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    axes = tuple(range(axis, x.ndim))
    eps = attrs.get("epsilon", 1e-5)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps) * scale
    if bias is not None:
        y = y + bias
    return [y.astype(x.dtype)]


def _gather(node, inputs, attrs):
    data, indices = inputs
    axis = attrs.get("axis", 0)
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    return [np.take(data, indices, axis=axis)]


def _unsqueeze(node, inputs, attrs):
    x, axes = inputs
    rank = x.ndim + len(axes)
    y = x
    for a in sorted(_axes(axes, rank)):
        y = np.expand_dims(y, a)
    return [y]


def _concat(node, inputs, attrs):
    return [np.concatenate(inputs, axis=attrs["axis"])]


def _split(node, inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", 0)
    n = len(node.output)
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = [int(s) for s in inputs[1]]
    else:
        assert x.shape[axis] % n == 0
        sizes = [x.shape[axis] // n] * n
    offsets = np.cumsum(sizes)[:-1]
    return list(np.split(x, offsets, axis=axis))


def _slice(node, inputs, attrs):
    x, starts, ends = inputs[0], inputs[1], inputs[2]
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else range(len(starts))
    steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(_axes(axes, x.ndim), starts, ends, steps):
        n = x.shape[a]
        s, e, st = int(s), int(e), int(st)
        s = min(max(s + n if s < 0 else s, 0), n)
        if st > 0:
            e = min(max(e + n if e < 0 else e, 0), n)
            index[a] = slice(s, e, st)
        else:
            s = min(s, n - 1)
            e = e + n if e < 0 else e
            index[a] = slice(s, None if e < 0 else e, st)
    return [x[tuple(index)]]


def _reduce(fn):
    def op(node, inputs, attrs):
        x = inputs[0]
        if "axes" in attrs:  # ReduceMean (opset < 18): axes attribute
            axes = attrs["axes"]
        elif len(inputs) > 1 and inputs[1] is not None:  # ReduceSum (opset >= 13): input
            axes = [int(a) for a in inputs[1]]
        else:
            axes = None
        if axes is not None and len(axes) == 0:
            axes = None
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
        keep = bool(attrs.get("keepdims", 1))
        ax = None if axes is None else _axes(axes, x.ndim)
        return [fn(x, axis=ax, keepdims=keep).astype(x.dtype)]
    return op


def _trilu(node, inputs, attrs):
    x = inputs[0]
    k = int(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else 0
    return [np.triu(x, k) if attrs.get("upper", 1) else np.tril(x, k)]


def _cast(node, inputs, attrs):
    return [inputs[0].astype(_DTYPES[attrs["to"]])]


def _topk(node, inputs, attrs):
    x, k = inputs
    k = int(np.asarray(k).reshape(-1)[0])
    axis = attrs.get("axis", -1)
    largest = attrs.get("largest", 1)
    key = -x if largest else x
    order = np.argsort(key, axis=axis, kind="stable")  # ties: lower index first
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


def _unary(fn):
    return lambda node, inputs, attrs: [fn(inputs[0]).astype(inputs[0].dtype)]


def _binary(fn):
    return lambda node, inputs, attrs: [fn(inputs[0], inputs[1])]


OPS = {
    "Constant": _constant,
    "Gemm": _gemm,
    "MatMul": _binary(np.matmul),
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _div,
    "Pow": lambda node, inputs, attrs: [np.power(inputs[0], inputs[1]).astype(inputs[0].dtype)],
    "Equal": _binary(np.equal),
    "Where": lambda node, inputs, attrs: [np.where(inputs[0], inputs[1], inputs[2])],
    "Not": _unary(np.logical_not),
    "Neg": _unary(np.negative),
    "Sqrt": _unary(np.sqrt),
    "Erf": _unary(_erf),
    "Tanh": _unary(np.tanh),
    "Sigmoid": _unary(lambda x: 1.0 / (1.0 + np.exp(-x.astype(np.float64)))),
    "Cos": _unary(np.cos),
    "Sin": _unary(np.sin),
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Softmax": _softmax,
    "LayerNormalization": _layer_norm,
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "ReduceMean": _reduce(np.mean),
    "ReduceSum": _reduce(np.sum),
    "Trilu": _trilu,
    "Cast": _cast,
    "TopK": _topk,
}


def run(model, feeds):
    """Evaluate `model` (an onnx.ModelProto) on `feeds` {input name: array};
    returns {output name: array}."""
    env = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    env.update(feeds)
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in OPS:
            raise NotImplementedError(f"op {node.domain}:{node.op_type} ({node.name})")
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if "value" in attrs and isinstance(attrs["value"], onnx.TensorProto):
            attrs["value"] = numpy_helper.to_array(attrs["value"])
        inputs = [env[name] if name else None for name in node.input]
        with np.errstate(over="ignore"):
            outputs = OPS[node.op_type](node, inputs, attrs)
        for name, value in zip(node.output, outputs):
            if name:
                env[name] = np.asarray(value)
    return {out.name: env[out.name] for out in model.graph.output}


def main(directory):
    model = onnx.load(os.path.join(directory, "model.onnx"))
    feeds = {i.name: np.load(os.path.join(directory, f"input_{i.name}.npy"))
             for i in model.graph.input}
    got = run(model, feeds)
    for name, value in got.items():
        expected = np.load(os.path.join(directory, f"expected_{name}.npy"))
        err = float(np.max(np.abs(value.astype(np.float64) - expected)))
        ok = value.shape == expected.shape and np.allclose(value, expected, rtol=1e-4, atol=1e-5)
        print(f"{directory}: {name} {list(value.shape)} max abs error {err:.3g} "
              f"{'ok' if ok else 'MISMATCH'}")
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(max(main(d) for d in sys.argv[1:]) if len(sys.argv) > 1 else 2)
