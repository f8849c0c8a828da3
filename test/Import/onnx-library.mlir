// What the importer takes from libonnx
// (import/lib/OnnxLibrary.cpp): the ONNX checker, shape inference and the
// version converter; the checker and, for opsets 7 to 12, inference and the
// converter before the import, inference after it. Inputs from
// Inputs/make_inputs.py.

// The checker's message is the error, at the node it names.
// RUN: not cleave-translate --import-onnx %S/Inputs/checker_inputs.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=INPUTS --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// INPUTS: checker_inputs.onnx:0:0: error: node 'act/Relu' (Relu): the ONNX checker rejects '{{.*}}checker_inputs.onnx': Node (act/Relu) has input size 2 not in range [min=1, max=1]{{$}}

// Two nodes writing one value: without the checker the second would have
// silently replaced the first.
// RUN: not cleave-translate --import-onnx %S/Inputs/checker_ssa.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SSA --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// SSA: checker_ssa.onnx:0:0: error: the ONNX checker rejects '{{.*}}checker_ssa.onnx': Graph must be in single static assignment (SSA) form, however 'h' has been used as output names multiple times{{$}}

// Opsets 7 to 12 are converted to 13, and the import says so. Node names
// (and so locations) survive; the nodes the converter adds are named by op
// type and index. Softmax(axis=1) of opset 11 normalizes over all of a
// batch's 12 values: the converter flattens around it, which it can only do
// because shape inference gave the shape of its input (the model has no
// value_info).
// RUN: cleave-translate --import-onnx %S/Inputs/convert_opset11.onnx \
// RUN:     --mlir-print-debuginfo 2>&1 \
// RUN:   | FileCheck %s --check-prefix=CONV --implicit-check-not=error:
// CONV:      convert_opset11.onnx:0:0: note: converted the model from opset 11 to opset 13 (ONNX version converter){{$}}
// CONV-LABEL: func.func @forward(
// CONV-SAME:    %{{.*}}: tensor<2x3x4xf32> {onnx.name = "x"}
// CONV-SAME:    -> (tensor<2x1xf32> {onnx.name = "y1"}, tensor<2x2xf32> {onnx.name = "y2"})
// CONV:        graph.add {{.*}} loc(#[[ADD:loc[0-9]+]])
// CONV-NEXT:   graph.reshape {{.*}} -> tensor<2x12xf32> loc(#[[FLAT:loc[0-9]+]])
// CONV-NEXT:   graph.softmax {{.*}} dim 1 : tensor<2x12xf32> loc(#[[SOFTMAX:loc[0-9]+]])
// CONV-NEXT:   graph.reshape {{.*}} -> tensor<2x3x4xf32>
// CONV-NEXT:   graph.reduce sum {{.*}} dims [2]
// CONV:        graph.split {{.*}} dim 1 sizes [1, 2]
// CONV-DAG:  #[[ADD]] = loc("bias/Add"(
// CONV-DAG:  #[[FLAT]] = loc("Flatten_1"(
// CONV-DAG:  #[[SOFTMAX]] = loc("norm/Softmax"(

// RUN: cleave-translate --import-onnx %S/Inputs/convert_opset7.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=CONV7 --implicit-check-not=error:
// CONV7: convert_opset7.onnx:0:0: note: converted the model from opset 7 to opset 13 (ONNX version converter){{$}}
// CONV7: graph.slice {{.*}} start [0, 1] limit [2, 3]

// The same numbers at opsets 7, 9, 11 (converted) and 17, against float64.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as n; n.save('%t/x.npy', n.random.default_rng(0).standard_normal((2, 3, 4), dtype=n.float32))"
// RUN: cleave-compile %S/Inputs/convert_opset7.onnx -o %t/p7
// RUN: cleave-compile %S/Inputs/convert_opset9.onnx -o %t/p9
// RUN: cleave-compile %S/Inputs/convert_opset11.onnx -o %t/p11
// RUN: cleave-compile %S/Inputs/convert_opset17.onnx -o %t/p17
// RUN: %t/p7 --input x=%t/x.npy --output-dir %t/o7
// RUN: %t/p9 --input x=%t/x.npy --output-dir %t/o9
// RUN: %t/p11 --input x=%t/x.npy --output-dir %t/o11
// RUN: %t/p17 --input x=%t/x.npy --output-dir %t/o17
// RUN: %python %S/Inputs/check_conversion.py %t | FileCheck %s --check-prefix=NUMBERS
// NUMBERS:      opset 7: y1, y2 match float64
// NUMBERS-NEXT: opset 9: y1, y2 match float64
// NUMBERS-NEXT: opset 11: y1, y2 match float64
// NUMBERS-NEXT: opset 17: y1, y2 match float64

// A conversion the converter cannot make is an error, not a crash: its
// Softmax adapter needs the rank of its input, here the result of a Reshape
// to a runtime shape.
// RUN: not cleave-translate --import-onnx %S/Inputs/convert_unknown_rank.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOCONV --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// NOCONV: convert_unknown_rank.onnx:0:0: error: the ONNX version converter cannot convert '{{.*}}convert_unknown_rank.onnx' from opset 11 to opset 13: Version conversion for Softmax failed because input shape is unknown{{$}}

// What the converter assumes and the checker does not check is checked
// before converting: libonnx 1.12 dereferences a graph output that nothing
// produces.
// RUN: not cleave-translate --import-onnx %S/Inputs/convert_undefined_output.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNDEFOUT --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// UNDEFOUT: convert_undefined_output.onnx:0:0: error: graph output 'y0' is not produced by any node{{$}}

// Graph outputs without shapes (which the checker requires) import; shape
// inference, which runs after the import, gives them.
// RUN: cleave-translate --import-onnx %S/Inputs/no_output_shape.onnx \
// RUN:   | FileCheck %s --check-prefix=NOSHAPE
// NOSHAPE: func.func @forward(%{{.*}}: tensor<2x3xf32> {onnx.name = "x"}) -> (tensor<3x2xf32> {onnx.name = "y"})

// A declared shape that contradicts the node is an error at that node: from
// shape inference, or at opset 18 (newer than libonnx 1.12, which infers
// nothing there) from the importer's own check of the declared shapes.
// RUN: not cleave-translate --import-onnx %S/Inputs/wrong_output_shape.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WRONG --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// WRONG: wrong_output_shape.onnx:0:0: error: node 'swap/Transpose' (Transpose): ONNX shape inference fails on '{{.*}}wrong_output_shape.onnx': Inferred shape and existing shape differ in dimension 0: (3) vs (2){{$}}
// RUN: not cleave-translate --import-onnx %S/Inputs/wrong_output_shape_opset18.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WRONG18 --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// WRONG18: wrong_output_shape_opset18.onnx:0:0: error: node 'swap/Transpose' (Transpose): output 0 ('y') has shape 3x2 in the import but shape 2x3 in the model (declared or found by ONNX shape inference){{$}}

// Shape inference runs on what the importer accepted: libonnx 1.12's
// inference of LayerNormalization crashes on an axis out of range, which the
// importer reports first (the fuzzer found it).
// RUN: not cleave-translate --import-onnx %S/Inputs/layer_norm_bad_axis.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LNAXIS --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// LNAXIS: layer_norm_bad_axis.onnx:0:0: error: node 'ln/LayerNormalization' (LayerNormalization): axis -5 is out of range for rank 2{{$}}
