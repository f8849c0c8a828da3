// Optional outputs that inference exports use, and limits that must be clear
// errors rather than bad IR.

// LayerNormalization's Mean and InvStdDev outputs: mean and
// 1/sqrt(mean((x - mean)^2) + eps) over the normalized dims, kept as size 1.
// RUN: cleave-translate --import-onnx %S/Inputs/layer_norm_stats.onnx | FileCheck %s --check-prefix=LN
// LN-LABEL: func.func @forward
// LN-SAME: (%[[X:.*]]: tensor<2x4xf32> {onnx.name = "x"})
// LN: %[[Y:.*]] = graph.layer_norm %[[X]], %{{.*}} dim 1
// LN: %[[MEAN:.*]] = graph.reduce mean %[[X]] dims [1] keepdim : tensor<2x4xf32>
// LN: %[[D:.*]] = graph.sub %[[X]], %[[MEAN]]
// LN: %[[SQ:.*]] = graph.mul %[[D]], %[[D]]
// LN: %[[VAR:.*]] = graph.reduce mean %[[SQ]] dims [1] keepdim
// LN: %[[SHIFT:.*]] = graph.add %[[VAR]], %{{.*}}
// LN: %[[INV:.*]] = graph.rsqrt %[[SHIFT]] : tensor<2x1xf32>
// LN: return %[[Y]], %[[MEAN]], %[[INV]]

// Dropout in inference keeps everything: the mask output is all true.
// RUN: cleave-translate --import-onnx %S/Inputs/dropout_mask.onnx | FileCheck %s --check-prefix=DROP
// DROP-LABEL: func.func @forward
// DROP-SAME: (%[[X:.*]]: tensor<2x3xf32>
// DROP-NEXT: %[[M:.*]] = graph.constant dense<true> : tensor<2x3xi1>
// DROP-NEXT: return %[[X]], %[[M]]

// RUN: not cleave-translate --import-onnx %S/Inputs/pow_int.onnx 2>&1 | FileCheck %s --check-prefix=POW --implicit-check-not=error: --implicit-check-not="Stack dump"
// POW: error: node 'sq/Pow' (Pow): Pow of 'tensor<3xi64>': unsupported element type (graph.pow is for floats)

// RUN: not cleave-translate --import-onnx %S/Inputs/topk_empty_k.onnx 2>&1 | FileCheck %s --check-prefix=TOPK --implicit-check-not=error: --implicit-check-not="Stack dump"
// TOPK: error: node 'route/TopK' (TopK): k must have one element, got 0

// A shape given twice is a mistake, not "last one wins".
// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx --input-shape batch_input=4x3 --input-shape batch_input=2x3 2>&1 | FileCheck %s --check-prefix=TWICE --implicit-check-not=error:
// TWICE: error: --input-shape gives 'batch_input' twice

// A Reshape to a shape whose element count overflows int64 is an error,
// not undefined behaviour. The fuzzer found it in a model that also has a
// damaged op type and a damaged value name, which the ONNX checker now
// reports first.
// RUN: not cleave-translate --import-onnx %S/Inputs/reshape_overflow.onnx 2>&1 | FileCheck %s --check-prefix=OVERFLOW --implicit-check-not="Stack dump"
// OVERFLOW: error: node 'huge/Reshape' (Reshape): shape has more than 1099511627776 elements
// RUN: not cleave-translate --import-onnx %S/Inputs/fuzz_reshape_overflow.onnx 2>&1 | FileCheck %s --check-prefix=FUZZ --implicit-check-not="Stack dump"
// FUZZ: error: node '/layers.0/attention/Softmax' (Softmax): the ONNX checker rejects '{{.*}}fuzz_reshape_overflow.onnx': Nodes in a graph must be topologically sorted
