#!/usr/bin/python3
# ===- make_inputs.py - ONNX inputs of the importer lit tests ---------------===#
#
# Writes the tiny ONNX files that test/Import/*.mlir import: malformed and
# unsupported models for the error tests, and one model per importer feature
# (tied weights, shape arithmetic, external data, op conversions). Every model
# is built node by node with onnx.helper, so the files are a few hundred bytes
# and the same bytes on every run.
#
#   /usr/bin/python3 test/Import/Inputs/make_inputs.py
#
# Debian's python3-onnx (1.12) and numpy; writes next to this script.
#
# ===------------------------------------------------------------------------===#

import os

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def vinfo(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def weights(name, shape):
    """Small distinct float values, deterministic."""
    n = int(np.prod(shape))
    return numpy_helper.from_array(
        (np.arange(n, dtype=np.float32) / 8 - 1).reshape(shape), name)


def model(nodes, inputs, outputs, initializers=(), opset=17, name="test",
          extra_opsets=()):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)] + list(extra_opsets)
    m = helper.make_model(graph, opset_imports=opsets,
                          producer_name="cleave-test")
    m.ir_version = 8
    return m


def save(m, filename, check=True):
    if check:
        onnx.checker.check_model(m)
    with open(os.path.join(HERE, filename), "wb") as f:
        f.write(m.SerializeToString())


def node(op, inputs, outputs, name, **attrs):
    return helper.make_node(op, inputs, outputs, name=name, **attrs)


# --- Malformed files -------------------------------------------------------


def gemm_model():
    """x[2,4] -> Gemm(W[4,3], b[3]) -> y[2,3]; also the base of truncated."""
    return model(
        [node("Gemm", ["x", "W", "b"], ["y"], "fc/Gemm")],
        [vinfo("x", F32, [2, 4])], [vinfo("y", F32, [2, 3])],
        [weights("W", [4, 3]), weights("b", [3])])


def write_malformed():
    data = gemm_model().SerializeToString()
    truncated = data[: len(data) // 2]
    # The cut must make the protobuf unparsable, not a shorter valid model.
    try:
        onnx.ModelProto().ParseFromString(truncated)
    except DecodeError:
        pass
    else:
        raise SystemExit("truncated.onnx parses; choose another cut")
    with open(os.path.join(HERE, "truncated.onnx"), "wb") as f:
        f.write(truncated)
    with open(os.path.join(HERE, "not_onnx.onnx"), "w") as f:
        f.write("This is a plain text file, not an ONNX model.\n")
    # Zero bytes: a valid (empty) protobuf message, but no graph.
    open(os.path.join(HERE, "empty.onnx"), "wb").close()


# --- Unsupported models ----------------------------------------------------


def write_unsupported():
    save(model([node("NonZero", ["x"], ["y"], "find/NonZero")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", I64, [2, None])]),
         "unsupported_op.onnx")
    # Several unsupported ops: one error lists them all.
    save(model([node("NonZero", ["x"], ["n1"], "find/NonZero"),
                node("Relu", ["x"], ["r"], "custom/Relu", domain="com.example"),
                node("NonZero", ["r"], ["n2"], "find2/NonZero"),
                node("Unique", ["x"], ["u"], "")],
               [vinfo("x", F32, [2, 3])],
               [vinfo("n1", I64, [2, None]), vinfo("n2", I64, [2, None]),
                vinfo("u", F32, [None])],
               extra_opsets=[helper.make_opsetid("com.example", 1)]),
         "unsupported_ops.onnx", check=False)
    # A custom-domain op whose name is also a default-domain op.
    save(model([node("Relu", ["x"], ["y"], "custom/Relu",
                     domain="com.example")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])],
               extra_opsets=[helper.make_opsetid("com.example", 1)]),
         "custom_domain.onnx", check=False)
    save(model([node("Relu", ["x"], ["y"], "act/Relu")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])],
               opset=11),
         "opset11.onnx")
    save(model([node("Relu", ["x"], ["y"], "act/Relu")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])],
               opset=6),
         "opset6.onnx")
    # Input that no node, initializer or graph input produces.
    save(model([node("Add", ["x", "ghost"], ["y"], "use/Add")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])]),
         "undefined_input.onnx", check=False)
    # A required input given as "" (the ONNX spelling of an absent optional
    # input).
    save(model([node("MatMul", ["x", ""], ["y"], "proj/MatMul")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])]),
         "missing_input.onnx", check=False)
    # A Reshape to a constant shape whose element count overflows int64.
    save(model([node("Reshape", ["x", "target"], ["y"], "huge/Reshape")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [None, None])],
               [const("target", [1 << 40, 1 << 40])]),
         "reshape_overflow.onnx", check=False)
    # A Reshape whose target shape is computed from a runtime input.
    save(model([node("Reshape", ["x", "s"], ["y"], "dyn/Reshape")],
               [vinfo("x", F32, [2, 6]), vinfo("s", I64, [2])],
               [vinfo("y", F32, [None, None])]),
         "dynamic_reshape.onnx")
    # Slice with a negative step (x[:, ::-1]).
    save(model([node("Slice", ["x", "st", "en", "ax", "sp"], ["y"],
                     "rev/Slice")],
               [vinfo("x", F32, [2, 5])], [vinfo("y", F32, [2, 5])],
               [const("st", [-1]), const("en", [-(2**63)]),
                const("ax", [1]), const("sp", [-1])]),
         "slice_negative_step.onnx")
    # An initializer of an element type the graph dialect lacks.
    save(model([node("Identity", ["x"], ["y"], "id")],
               [vinfo("x", F32, [2])], [vinfo("y", F32, [2])],
               [const("table", [1, 2, 3], dtype=np.uint8)]),
         "uint8_initializer.onnx")


# --- Input shapes ----------------------------------------------------------


def write_symbolic():
    # batch_input["batch", 3] -> x.view(x.size(0), 3, 1): the given batch size
    # must flow through the shape arithmetic into a static reshape.
    save(model([node("Relu", ["batch_input"], ["r"], "act/Relu"),
                node("Shape", ["batch_input"], ["s"], "view/Shape"),
                node("Gather", ["s", "i0"], ["b"], "view/Gather", axis=0),
                node("Unsqueeze", ["b", "ax0"], ["b1"], "view/Unsqueeze"),
                node("Concat", ["b1", "rest"], ["target"], "view/Concat",
                     axis=0),
                node("Reshape", ["r", "target"], ["y"], "view/Reshape")],
               [vinfo("batch_input", F32, ["batch", 3])],
               [vinfo("y", F32, ["batch", 3, 1])],
               [const("i0", 0), const("ax0", [0]), const("rest", [3, 1])]),
         "symbolic_dim.onnx")


# --- External data ---------------------------------------------------------


def external(name, dims, elem, location, offset, length):
    t = TensorProto()
    t.name = name
    t.data_type = elem
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)),
                 ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def write_external():
    w = (np.arange(6, dtype=np.float32) / 4).reshape(2, 3)
    shape = np.array([3, 2], dtype=np.int64)
    blob = w.tobytes() + shape.tobytes()  # 24 + 16 bytes
    with open(os.path.join(HERE, "external.bin"), "wb") as f:
        f.write(blob)
    nodes = [node("Add", ["x", "ext.weight"], ["h"], "ext/Add"),
             node("Reshape", ["h", "ext.shape"], ["y"], "ext/Reshape")]
    ins, outs = [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [3, 2])]
    # Float weight at bytes [0, 24), int64 shape at [24, 40).
    save(model(nodes, ins, outs,
               [external("ext.weight", [2, 3], F32, "external.bin", 0, 24),
                external("ext.shape", [2], I64, "external.bin", 24, 16)]),
         "external_data.onnx", check=False)
    # The side file is missing.
    save(model(nodes, ins, outs,
               [external("ext.weight", [2, 3], F32, "missing.bin", 0, 24),
                external("ext.shape", [2], I64, "missing.bin", 24, 16)]),
         "external_missing.onnx", check=False)
    # The range lies past the end of external.bin (40 bytes).
    save(model(nodes, ins, outs,
               [external("ext.weight", [2, 3], F32, "external.bin", 32, 24),
                external("ext.shape", [2], I64, "external.bin", 24, 16)]),
         "external_out_of_range.onnx", check=False)
    # Locations outside the model's folder (read nothing), and bad counts.
    for filename, location in (("external_dotdot.onnx", "../Inputs/external.bin"),
                               ("external_absolute.onnx", "/etc/passwd"),
                               ("external_link.onnx", "link.bin"),
                               ("external_folder.onnx", ".")):
        save(model(nodes, ins, outs,
                   [external("ext.weight", [2, 3], F32, location, 0, 24),
                    external("ext.shape", [2], I64, "external.bin", 24, 16)]),
             filename, check=False)
    # An int64 initializer whose offset is past the end, with no length.
    past = external("ext.shape", [2], I64, "external.bin", 48, 0)
    del past.external_data[2]
    save(model(nodes, ins, outs,
               [external("ext.weight", [2, 3], F32, "external.bin", 0, 24),
                past]),
         "external_past_end.onnx", check=False)
    bad = external("ext.weight", [2, 3], F32, "external.bin", 0, 24)
    bad.external_data[1].value = "-8"
    save(model(nodes, ins, outs,
               [bad, external("ext.shape", [2], I64, "external.bin", 24, 16)]),
         "external_bad_offset.onnx", check=False)


# --- Importer features -----------------------------------------------------


def write_features():
    # Tied weight: one initializer read by a Gather and by the LM-head MatMul.
    save(model([node("Gather", ["emb", "ids"], ["e"], "embed/Gather"),
                node("Transpose", ["emb"], ["embT"], "head/Transpose",
                     perm=[1, 0]),
                node("MatMul", ["e", "embT"], ["logits"], "head/MatMul")],
               [vinfo("ids", I64, [2, 3])], [vinfo("logits", F32, [2, 3, 5])],
               [weights("emb", [5, 4])]),
         "tied_weight.onnx")
    # Tied weight through an Identity placed before the first use, as
    # PyTorch exports a shared parameter under its second name.
    save(model([node("Identity", ["emb"], ["head.weight"], "head/Identity"),
                node("Gather", ["emb", "ids"], ["e"], "embed/Gather"),
                node("Transpose", ["head.weight"], ["embT"], "head/Transpose",
                     perm=[1, 0]),
                node("MatMul", ["e", "embT"], ["logits"], "head/MatMul")],
               [vinfo("ids", I64, [2, 3])], [vinfo("logits", F32, [2, 3, 5])],
               [weights("emb", [5, 4])]),
         "tied_identity.onnx")

    # Shape arithmetic as exporters write x.view(x.size(0), -1) and
    # x.view(b, s1 * s2): everything folds to static reshapes.
    save(model([
        node("Shape", ["x"], ["s"], "shape/Shape"),
        node("Gather", ["s", "i0"], ["d0"], "shape/Gather_0", axis=0),
        node("Gather", ["s", "i1"], ["d1"], "shape/Gather_1", axis=0),
        node("Gather", ["s", "i2"], ["d2"], "shape/Gather_2", axis=0),
        node("Mul", ["d1", "d2"], ["d12"], "shape/Mul"),
        node("Unsqueeze", ["d0", "ax0"], ["u0"], "shape/Unsqueeze_0"),
        node("Unsqueeze", ["d12", "ax0"], ["u12"], "shape/Unsqueeze_1"),
        node("Concat", ["u0", "u12"], ["target"], "shape/Concat", axis=0),
        node("Reshape", ["x", "target"], ["flat"], "flat/Reshape"),
        node("Concat", ["u0", "minus1"], ["target2"], "shape/Concat_1",
             axis=0),
        node("Relu", ["x"], ["r"], "act/Relu"),
        node("Reshape", ["r", "target2"], ["flat2"], "flat2/Reshape"),
    ], [vinfo("x", F32, [2, 3, 4])],
        [vinfo("flat", F32, [2, 12]), vinfo("flat2", F32, [2, 12])],
        [const("i0", 0), const("i1", 1), const("i2", 2), const("ax0", [0]),
         const("minus1", [-1])]),
        "shape_arith.onnx")

    # MatMul with a 1-D operand on either side (NumPy promotion).
    save(model([node("MatMul", ["v", "m"], ["vm"], "vec/MatMul_lhs"),
                node("MatMul", ["a", "w"], ["aw"], "vec/MatMul_rhs")],
               [vinfo("v", F32, [3]), vinfo("m", F32, [2, 3, 4]),
                vinfo("a", F32, [5, 3]), vinfo("w", F32, [3])],
               [vinfo("vm", F32, [2, 4]), vinfo("aw", F32, [5])]),
         "matmul_1d.onnx")

    # Gemm with transposes, alpha and beta; and one with beta = 0.
    save(model([node("Gemm", ["a", "b", "c"], ["y"], "fc/Gemm",
                     transA=1, transB=1, alpha=0.5, beta=2.0),
                node("Gemm", ["a2", "b2", "c2"], ["y2"], "fc/Gemm_nobias",
                     beta=0.0)],
               [vinfo("a", F32, [3, 2]), vinfo("b", F32, [4, 3]),
                vinfo("c", F32, [4]), vinfo("a2", F32, [2, 3]),
                vinfo("b2", F32, [3, 4]), vinfo("c2", F32, [4])],
               [vinfo("y", F32, [2, 4]), vinfo("y2", F32, [2, 4])]),
         "gemm.onnx")

    # Slice with negative starts/ends/axes, an INT64_MAX end and a step.
    save(model([node("Slice", ["x", "st", "en", "ax", "sp"], ["y"],
                     "cut/Slice")],
               [vinfo("x", F32, [4, 10])], [vinfo("y", F32, [2, 3])],
               [const("st", [1, -8]), const("en", [-1, 2**63 - 1]),
                const("ax", [0, -1]), const("sp", [1, 3])]),
         "slice.onnx")

    # Split (opset 13: sizes as an input; opset 18: num_outputs).
    save(model([node("Split", ["x", "sizes"], ["p", "q"], "qkv/Split",
                     axis=1)],
               [vinfo("x", F32, [2, 5])],
               [vinfo("p", F32, [2, 2]), vinfo("q", F32, [2, 3])],
               [const("sizes", [2, 3])], opset=13),
         "split.onnx")
    save(model([node("Split", ["x"], ["p", "q", "r"], "qkv/Split",
                     axis=-1, num_outputs=3)],
               [vinfo("x", F32, [2, 8])],
               [vinfo("p", F32, [2, 3]), vinfo("q", F32, [2, 3]),
                vinfo("r", F32, [2, 2])], opset=18),
         "split_opset18.onnx", check=False)  # onnx 1.12 knows opset <= 17

    # Squeeze and Unsqueeze of a runtime tensor: reshapes.
    save(model([node("Unsqueeze", ["x", "ax"], ["u"], "add_dims/Unsqueeze"),
                node("Squeeze", ["u", "sq"], ["s"], "drop_dims/Squeeze")],
               [vinfo("x", F32, [2, 3])],
               [vinfo("u", F32, [1, 2, 1, 3]), vinfo("s", F32, [2, 1, 3])],
               [const("ax", [0, -2]), const("sq", [0])]),
         "squeeze_unsqueeze.onnx")

    # Expand: broadcast a runtime tensor to a larger shape.
    save(model([node("Expand", ["x", "shape"], ["y"], "bcast/Expand")],
               [vinfo("x", F32, [3, 1])], [vinfo("y", F32, [2, 3, 4])],
               [const("shape", [2, 1, 4])]),
         "expand.onnx")

    # Where on a runtime condition (from Greater) with broadcasting.
    save(model([node("Greater", ["x", "zero"], ["c"], "mask/Greater"),
                node("Where", ["c", "x", "fill"], ["y"], "mask/Where")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])],
               [const("zero", 0.0, np.float32),
                const("fill", -1.0, np.float32)]),
         "where.onnx")

    # Trilu (lower, k = 1) of a runtime tensor.
    save(model([node("Trilu", ["x", "k"], ["y"], "causal/Trilu", upper=0)],
               [vinfo("x", F32, [2, 3, 3])], [vinfo("y", F32, [2, 3, 3])],
               [const("k", 1)]),
         "trilu.onnx")

    # TopK smallest-2 on the last axis; both outputs used.
    save(model([node("TopK", ["x", "k"], ["v", "i"], "route/TopK",
                     axis=-1, largest=0)],
               [vinfo("x", F32, [3, 5])],
               [vinfo("v", F32, [3, 2]), vinfo("i", I64, [3, 2])],
               [const("k", [2])]),
         "topk.onnx")

    # ReduceSum with axes as an input (opset 13+), keepdims = 0; ReduceMean
    # with axes as an input (opset 18), keepdims = 1.
    save(model([node("ReduceSum", ["x", "axes"], ["y"], "sum/ReduceSum",
                     keepdims=0)],
               [vinfo("x", F32, [2, 3, 4])], [vinfo("y", F32, [3])],
               [const("axes", [-1, 0])]),
         "reduce_sum_axes.onnx")
    save(model([node("ReduceMean", ["x", "axes"], ["y"], "mean/ReduceMean")],
               [vinfo("x", F32, [2, 3, 4])], [vinfo("y", F32, [2, 3, 1])],
               [const("axes", [2])], opset=18),
         "reduce_mean_opset18.onnx", check=False)
    # ReduceSum whose axes come from a runtime input: must be rejected.
    save(model([node("ReduceSum", ["x", "axes"], ["y"], "sum/ReduceSum")],
               [vinfo("x", F32, [2, 3]), vinfo("axes", I64, [1])],
               [vinfo("y", F32, None)]),
         "reduce_sum_dynamic_axes.onnx", check=False)


def write_outputs_and_limits():
    # LayerNormalization's optional Mean and InvStdDev outputs, used.
    save(model([node("LayerNormalization", ["x", "g"], ["y", "mean", "inv"],
                     "ln/LayerNormalization", axis=-1, epsilon=1e-5)],
               [vinfo("x", F32, [2, 4])],
               [vinfo("y", F32, [2, 4]), vinfo("mean", F32, [2, 1]),
                vinfo("inv", F32, [2, 1])],
               [weights("g", [4])]),
         "layer_norm_stats.onnx")
    # Dropout in inference with its mask output used: an all-true mask.
    save(model([node("Dropout", ["x"], ["y", "m"], "drop/Dropout")],
               [vinfo("x", F32, [2, 3])],
               [vinfo("y", F32, [2, 3]), vinfo("m", TensorProto.BOOL, [2, 3])]),
         "dropout_mask.onnx")
    # Pow on integers: graph.pow is for floats; a clear error.
    save(model([node("Pow", ["x", "e"], ["y"], "sq/Pow")],
               [vinfo("x", I64, [3]), vinfo("e", I64, [3])],
               [vinfo("y", I64, [3])]),
         "pow_int.onnx")
    # TopK with an empty k tensor.
    save(model([node("TopK", ["x", "k"], ["v", "i"], "route/TopK")],
               [vinfo("x", F32, [3, 5])],
               [vinfo("v", F32, None), vinfo("i", I64, None)],
               [const("k", np.zeros([0], dtype=np.int64))]),
         "topk_empty_k.onnx", check=False)


# --- The ONNX library: checker, version converter, shape inference ---------


def conversion_model(opset):
    """One computation written in the ops of `opset` (7, 9, 11 or 17):
    x[2,3,4] + b -> Softmax over each batch's 12 values -> ReduceSum over the
    last axis -> Unsqueeze/Squeeze -> Slice -> Gemm -> Split into y1, y2.
    Below opset 13 Softmax(axis=1) flattens; ReduceSum, Squeeze, Unsqueeze
    and Split take attributes (and Slice below 10), which the version
    converter turns into inputs. No value_info: the converter's Softmax
    adapter needs the shape of its input, which only shape inference gives."""
    nodes = [node("Add", ["x", "b"], ["a"], "bias/Add")]
    inits = [weights("b", [4]), weights("W", [2, 3]), weights("bias", [3])]
    if opset < 13:
        nodes += [node("Softmax", ["a"], ["s"], "norm/Softmax", axis=1),
                  node("ReduceSum", ["s"], ["r"], "sum/ReduceSum", axes=[2],
                       keepdims=0),
                  node("Unsqueeze", ["r"], ["u"], "grow/Unsqueeze", axes=[0]),
                  node("Squeeze", ["u"], ["q"], "shrink/Squeeze", axes=[0])]
    else:
        nodes += [node("Flatten", ["a"], ["f"], "norm/Flatten", axis=1),
                  node("Softmax", ["f"], ["sf"], "norm/Softmax", axis=-1),
                  node("Reshape", ["sf", "shape"], ["s"], "norm/Reshape"),
                  node("ReduceSum", ["s", "ax2"], ["r"], "sum/ReduceSum",
                       keepdims=0),
                  node("Unsqueeze", ["r", "ax0"], ["u"], "grow/Unsqueeze"),
                  node("Squeeze", ["u", "ax0"], ["q"], "shrink/Squeeze")]
        inits += [const("shape", [2, 3, 4]), const("ax2", [2]),
                  const("ax0", [0])]
    if opset < 10:
        nodes.append(node("Slice", ["q"], ["z"], "cut/Slice", starts=[1],
                          ends=[3], axes=[1]))
    else:
        nodes.append(node("Slice", ["q", "st", "en", "ax1"], ["z"],
                          "cut/Slice"))
        inits += [const("st", [1]), const("en", [3]), const("ax1", [1])]
    nodes.append(node("Gemm", ["z", "W", "bias"], ["y"], "proj/Gemm"))
    if opset < 13:
        nodes.append(node("Split", ["y"], ["y1", "y2"], "heads/Split", axis=1,
                          split=[1, 2]))
    else:
        nodes.append(node("Split", ["y", "sizes"], ["y1", "y2"],
                          "heads/Split", axis=1))
        inits.append(const("sizes", [1, 2]))
    return model(nodes, [vinfo("x", F32, [2, 3, 4])],
                 [vinfo("y1", F32, [2, 1]), vinfo("y2", F32, [2, 2])], inits,
                 opset=opset)


def write_library():
    for opset in (7, 9, 11, 17):
        save(conversion_model(opset), "convert_opset%d.onnx" % opset)
    # Rejected by the checker: a node with one input too many (the message
    # names the node), and a graph that is not in SSA form (it names none).
    save(model([node("Relu", ["x", "x"], ["y"], "act/Relu")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])]),
         "checker_inputs.onnx", check=False)
    save(model([node("Relu", ["x"], ["h"], "first/Relu"),
                node("Neg", ["x"], ["h"], "second/Neg")],
               [vinfo("x", F32, [2, 3])], [vinfo("h", F32, [2, 3])]),
         "checker_ssa.onnx", check=False)
    # The converter's Softmax adapter cannot work without the input's rank,
    # which a Reshape to a runtime shape hides from shape inference.
    save(model([node("Reshape", ["x", "s"], ["h"], "dyn/Reshape"),
                node("Softmax", ["h"], ["y"], "norm/Softmax", axis=0)],
               [vinfo("x", F32, [2, 6]), vinfo("s", I64, [2])],
               [vinfo("y", F32, None)], opset=11),
         "convert_unknown_rank.onnx", check=False)
    # A graph output that nothing produces, which the checker lets through
    # and libonnx's converter dereferences (the fuzzer found it).
    m = conversion_model(9)
    m.graph.output[0].name = "y0"
    save(m, "convert_undefined_output.onnx", check=False)
    # The declared output shape contradicts what the node computes.
    save(model([node("Transpose", ["x"], ["y"], "swap/Transpose")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])]),
         "wrong_output_shape.onnx", check=False)
    # The same at opset 18, newer than libonnx 1.12: no shape inference, the
    # importer's own check of the declared shape.
    save(model([node("Transpose", ["x"], ["y"], "swap/Transpose")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, [2, 3])],
               opset=18),
         "wrong_output_shape_opset18.onnx", check=False)
    # LayerNormalization's axis out of range: libonnx 1.12's shape inference
    # crashes on it (the fuzzer found it), so inference runs after the import.
    save(model([node("LayerNormalization", ["x", "g"], ["y"],
                     "ln/LayerNormalization", axis=-5)],
               [vinfo("x", F32, [2, 4])], [vinfo("y", F32, [2, 4])],
               [weights("g", [4])]),
         "layer_norm_bad_axis.onnx", check=False)
    # Outputs without shapes: inference gives them.
    save(model([node("Transpose", ["x"], ["t"], "swap/Transpose"),
                node("Relu", ["t"], ["y"], "act/Relu")],
               [vinfo("x", F32, [2, 3])], [vinfo("y", F32, None)]),
         "no_output_shape.onnx", check=False)


if __name__ == "__main__":
    write_malformed()
    write_unsupported()
    write_symbolic()
    write_external()
    write_features()
    write_outputs_and_limits()
    write_library()
