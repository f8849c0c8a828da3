// Malformed and unsupported ONNX files: each gives exactly one
// `file:0:0: error:` line that names the problem, a non-zero exit status and
// no crash. The inputs come from Inputs/make_inputs.py.

// RUN: not cleave-translate --import-onnx %S/Inputs/truncated.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TRUNC --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// TRUNC: truncated.onnx:0:0: error: '{{.*}}truncated.onnx' is not a valid ONNX model (the protobuf does not parse; is the file truncated?){{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/not_onnx.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TEXT --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// TEXT: not_onnx.onnx:0:0: error: '{{.*}}not_onnx.onnx' is not a valid ONNX model (the protobuf does not parse; is the file truncated?){{$}}

// Zero bytes parse as an empty ModelProto: no graph.
// RUN: not cleave-translate --import-onnx %S/Inputs/empty.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=EMPTY --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// EMPTY: empty.onnx:0:0: error: '{{.*}}empty.onnx' is not an ONNX model (no graph or IR version){{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/does_not_exist.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOFILE --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// NOFILE: cannot open input file '{{.*}}does_not_exist.onnx': No such file or directory

// Opsets below 7 are refused (7 to 12 are converted, see onnx-library.mlir).
// RUN: not cleave-translate --import-onnx %S/Inputs/opset6.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OPSET --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// OPSET: opset6.onnx:0:0: error: '{{.*}}opset6.onnx' uses opset 6 of the default ONNX domain; Cleave imports opsets 7 to 18 (7 to 12 converted to 13; re-export with opset_version=17){{$}}

// The error names the node, its op type and the opset, and lists what is
// supported.
// RUN: not cleave-translate --import-onnx %S/Inputs/unsupported_op.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNSUP --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// UNSUP: unsupported_op.onnx:0:0: error: unsupported ONNX op: node 'find/NonZero' has op type 'NonZero' (opset 17); supported ops: Abs, Add, {{.*}}, MatMul, {{.*}}, Where, Xor{{$}}

// Several unsupported ops: one error lists every op type, its count and its
// first node (a node without a name is named by its op type and index).
// RUN: not cleave-translate --import-onnx %S/Inputs/unsupported_ops.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNSUPS --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// UNSUPS: unsupported_ops.onnx:0:0: error: unsupported ONNX ops: 4 nodes of 3 op types: 'NonZero' (2 nodes, the first 'find/NonZero'), 'com.example::Relu' (1 node 'custom/Relu'), 'Unique' (1 node 'Unique_3') (opset 17); supported ops: Abs, {{.*}}, Xor{{$}}

// A custom-domain op is unsupported even when its name is a default-domain op.
// RUN: not cleave-translate --import-onnx %S/Inputs/custom_domain.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DOMAIN --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// DOMAIN: custom_domain.onnx:0:0: error: unsupported ONNX op: node 'custom/Relu' has op type 'com.example::Relu' (opset 17); supported ops: Abs, {{.*}}, Relu, {{.*}}, Xor{{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/undefined_input.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNDEF --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// The ONNX checker finds it first.
// UNDEF: undefined_input.onnx:0:0: error: node 'use/Add' (Add): the ONNX checker rejects '{{.*}}undefined_input.onnx': Nodes in a graph must be topologically sorted, however input 'ghost' of node: name: use/Add OpType: Add is not output of any previous nodes{{$}}

// Shapes computed from runtime values cannot be made static.
// RUN: not cleave-translate --import-onnx %S/Inputs/dynamic_reshape.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DYNSHAPE --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// DYNSHAPE: dynamic_reshape.onnx:0:0: error: node 'dyn/Reshape' (Reshape): shape (input 1) must be known at import time: static shapes only{{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/reduce_sum_dynamic_axes.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DYNAXES --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// DYNAXES: reduce_sum_dynamic_axes.onnx:0:0: error: node 'sum/ReduceSum' (ReduceSum): axes (input 1) must be known at import time: static shapes only{{$}}

// Reversing slices (x[:, ::-1], torch.flip) are not supported.
// RUN: not cleave-translate --import-onnx %S/Inputs/slice_negative_step.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NEGSTEP --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// NEGSTEP: slice_negative_step.onnx:0:0: error: node 'rev/Slice' (Slice): step -1 on axis 1 is not supported (only positive steps){{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/uint8_initializer.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UINT8 --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// UINT8: uint8_initializer.onnx:0:0: error: initializer 'table' has unsupported element type UINT8 (supported: FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT64, INT32, BOOL){{$}}
