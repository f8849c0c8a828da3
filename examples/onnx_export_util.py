"""Shared helpers for the example generators (examples/<model>/generate.py).

Run with Debian's Python (/usr/bin/python3: PyTorch 1.13, onnx 1.12, numpy).

`export_example` exports a model to ONNX with static shapes, checks that every
floating-point initializer is a real parameter of the model, saves the inputs
and the PyTorch outputs as .npy files next to the model, and re-runs the
exported graph with the small numpy evaluator in onnx_numpy_eval.py to check
that the graph computes the saved outputs.
"""

import collections
import os

import numpy as np
import onnx
from onnx import numpy_helper
import torch

import onnx_numpy_eval

_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
    onnx.TensorProto.DOUBLE,
}


def make_distinct(model, scale=0.1):
    """Re-initialize every parameter whose elements are all equal.

    nn.LayerNorm and hand-written RMSNorm start with weight = 1 and bias = 0, so
    several parameters hold identical values. PyTorch 1.13 exports an eval-mode
    model through _jit_pass_onnx_deduplicate_initializers, which merges
    initializers with EQUAL VALUES (not only shared storage): all layer norm
    weights would come out as one initializer, and the importer would make one
    trainable parameter of them. A small random perturbation keeps them apart
    (and makes the numerical checks sensitive to which weight goes where).
    """
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.add_(scale * torch.randn_like(p))


def check_initializers(onnx_model, torch_model):
    """Every float initializer must be a real nn.Parameter (same name, same value),
    and every parameter must appear exactly once."""
    params = dict(torch_model.named_parameters())  # tied parameters appear once
    state = torch_model.state_dict()
    seen = set()
    for init in onnx_model.graph.initializer:
        if init.data_type not in _FLOAT_TYPES:
            continue
        name = init.name
        assert name in state, f"float initializer {name!r} is not in the state_dict"
        tensor = state[name]
        matches = [n for n, p in params.items() if p is tensor or p.data_ptr() == tensor.data_ptr()]
        assert matches, f"float initializer {name!r} is a buffer, not an nn.Parameter"
        value = numpy_helper.to_array(init)
        assert value.shape == tuple(tensor.shape), (name, value.shape, tensor.shape)
        assert np.array_equal(value, tensor.detach().numpy()), f"{name!r}: value differs"
        assert matches[0] not in seen, f"parameter {matches[0]!r} exported twice"
        seen.add(matches[0])
    missing = set(params) - seen
    assert not missing, f"parameters missing from the initializers: {sorted(missing)}"
    return sorted(seen)


def op_counts(onnx_model):
    return collections.Counter(node.op_type for node in onnx_model.graph.node)


def export_example(model, inputs, input_names, output_names, directory,
                   rtol=1e-4, atol=1e-5):
    """Export `model` called on `inputs` (a tuple of tensors) into `directory`."""
    model.eval()
    path = os.path.join(directory, "model.onnx")
    with torch.no_grad():
        outputs = model(*inputs)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    assert len(outputs) == len(output_names)

    torch.onnx.export(
        model,
        tuple(inputs),
        path,
        opset_version=17,
        do_constant_folding=False,
        input_names=list(input_names),
        output_names=list(output_names),
    )

    onnx_model = onnx.load(path)
    onnx.checker.check_model(onnx_model, full_check=True)
    params = check_initializers(onnx_model, model)

    # The graph inputs are exactly the named inputs (no parameter is an input).
    graph_inputs = [i.name for i in onnx_model.graph.input]
    assert graph_inputs == list(input_names), graph_inputs
    # No dynamic axes: every input and output dimension is a number.
    for vi in list(onnx_model.graph.input) + list(onnx_model.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            assert d.HasField("dim_value"), f"{vi.name} has a symbolic dimension {d}"

    feeds = {}
    for name, tensor in zip(input_names, inputs):
        array = tensor.detach().numpy()
        np.save(os.path.join(directory, f"input_{name}.npy"), array)
        feeds[name] = array
    expected = {}
    for name, tensor in zip(output_names, outputs):
        array = tensor.detach().numpy()
        np.save(os.path.join(directory, f"expected_{name}.npy"), array)
        expected[name] = array

    # Run the exported graph with numpy and compare with PyTorch.
    got = onnx_numpy_eval.run(onnx_model, feeds)
    for name in output_names:
        assert got[name].shape == expected[name].shape, (name, got[name].shape)
        np.testing.assert_allclose(got[name], expected[name], rtol=rtol, atol=atol,
                                   err_msg=f"numpy evaluation of {name}")

    counts = op_counts(onnx_model)
    print(f"wrote {path}")
    print(f"parameters ({len(params)}): {', '.join(params)}")
    for name, array in list(feeds.items()) + list(expected.items()):
        print(f"  {name}: {array.dtype} {list(array.shape)}")
    print("op counts:", ", ".join(f"{op} {n}" for op, n in sorted(counts.items())))
    print("op types:", sorted(counts))
    return onnx_model
