// One tiny model per op conversion (Inputs/make_inputs.py). Runtime inputs
// keep the ops from folding, so each test shows the graph ops the converter
// emits and their static types.

// Shape -> Gather -> Mul -> Unsqueeze -> Concat -> Reshape, as exporters write
// x.view(x.size(0), x.size(1) * x.size(2)) and x.view(x.size(0), -1): folded
// at import into single static reshapes, with no constant left behind.
// RUN: cleave-translate --import-onnx %S/Inputs/shape_arith.onnx \
// RUN:   | FileCheck %s --check-prefix=SHAPE --implicit-check-not=graph.constant
// SHAPE-LABEL: func.func @forward(
// SHAPE-SAME:      %[[X:.*]]: tensor<2x3x4xf32>
// SHAPE-NEXT:    %[[F:.*]] = graph.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// SHAPE-NEXT:    %[[R:.*]] = graph.relu %[[X]] : tensor<2x3x4xf32>
// SHAPE-NEXT:    %[[F2:.*]] = graph.reshape %[[R]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// SHAPE-NEXT:    return %[[F]], %[[F2]] : tensor<2x12xf32>, tensor<2x12xf32>

// MatMul with a 1-D operand: promoted to a matrix and the added dimension
// dropped again (NumPy semantics), on either side.
// RUN: cleave-translate --import-onnx %S/Inputs/matmul_1d.onnx \
// RUN:   | FileCheck %s --check-prefix=MATVEC
// MATVEC-LABEL: func.func @forward(
// MATVEC-SAME:      %[[V:[^:]*]]: tensor<3xf32> {onnx.name = "v"}, %[[M:[^:]*]]: tensor<2x3x4xf32> {onnx.name = "m"},
// MATVEC-SAME:      %[[A:[^:]*]]: tensor<5x3xf32> {onnx.name = "a"}, %[[W:[^:]*]]: tensor<3xf32> {onnx.name = "w"})
// MATVEC-SAME:      -> (tensor<2x4xf32> {onnx.name = "vm"}, tensor<5xf32> {onnx.name = "aw"})
// MATVEC-NEXT:    %[[VR:.*]] = graph.reshape %[[V]] : tensor<3xf32> -> tensor<1x3xf32>
// MATVEC-NEXT:    %[[VM:.*]] = graph.matmul %[[VR]], %[[M]] : tensor<1x3xf32>, tensor<2x3x4xf32>
// MATVEC-NEXT:    %[[VMR:.*]] = graph.reshape %[[VM]] : tensor<2x1x4xf32> -> tensor<2x4xf32>
// MATVEC-NEXT:    %[[WR:.*]] = graph.reshape %[[W]] : tensor<3xf32> -> tensor<3x1xf32>
// MATVEC-NEXT:    %[[AW:.*]] = graph.matmul %[[A]], %[[WR]] : tensor<5x3xf32>, tensor<3x1xf32>
// MATVEC-NEXT:    %[[AWR:.*]] = graph.reshape %[[AW]] : tensor<5x1xf32> -> tensor<5xf32>
// MATVEC-NEXT:    return %[[VMR]], %[[AWR]]

// Gemm: transA/transB become transposes, alpha scales the product, beta
// scales C; with beta = 0, C is not read at all.
// RUN: cleave-translate --import-onnx %S/Inputs/gemm.onnx \
// RUN:   | FileCheck %s --check-prefix=GEMM
// GEMM-LABEL: func.func @forward(
// GEMM-SAME:      %[[A:[^:]*]]: tensor<3x2xf32> {onnx.name = "a"}, %[[B:[^:]*]]: tensor<4x3xf32> {onnx.name = "b"},
// GEMM-SAME:      %[[C:[^:]*]]: tensor<4xf32> {onnx.name = "c"}, %[[A2:[^:]*]]: tensor<2x3xf32> {onnx.name = "a2"},
// GEMM-SAME:      %[[B2:[^:]*]]: tensor<3x4xf32> {onnx.name = "b2"}, %[[C2:[^:]*]]: tensor<4xf32> {onnx.name = "c2"})
// GEMM-NEXT:    %[[AT:.*]] = graph.transpose %[[A]] perm [1, 0] : tensor<3x2xf32>
// GEMM-NEXT:    %[[BT:.*]] = graph.transpose %[[B]] perm [1, 0] : tensor<4x3xf32>
// GEMM-NEXT:    %[[AB:.*]] = graph.matmul %[[AT]], %[[BT]] : tensor<2x3xf32>, tensor<3x4xf32>
// GEMM-NEXT:    %[[ALPHA:.*]] = graph.constant dense<5.000000e-01> : tensor<f32>
// GEMM-NEXT:    %[[SAB:.*]] = graph.mul %[[AB]], %[[ALPHA]] : tensor<2x4xf32>, tensor<f32>
// GEMM-NEXT:    %[[BETA:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// GEMM-NEXT:    %[[SC:.*]] = graph.mul %[[C]], %[[BETA]] : tensor<4xf32>, tensor<f32>
// GEMM-NEXT:    %[[Y:.*]] = graph.add %[[SAB]], %[[SC]] : tensor<2x4xf32>, tensor<4xf32>
// GEMM-NEXT:    %[[Y2:.*]] = graph.matmul %[[A2]], %[[B2]] : tensor<2x3xf32>, tensor<3x4xf32>
// GEMM-NEXT:    return %[[Y]], %[[Y2]] : tensor<2x4xf32>, tensor<2x4xf32>

// Slice with negative starts, ends and axes, an INT64_MAX end and a step:
// starts [1, -8] ends [-1, max] axes [0, -1] steps [1, 3] on 4x10.
// RUN: cleave-translate --import-onnx %S/Inputs/slice.onnx \
// RUN:   | FileCheck %s --check-prefix=SLICE
// SLICE: %[[S:.*]] = graph.slice %arg0 start [1, 2] limit [3, 10] strides [1, 3] : tensor<4x10xf32>
// SLICE-NEXT: return %[[S]] : tensor<2x3xf32>

// Split with sizes as an input (opset 13) and with num_outputs (opset 18,
// uneven: the last piece is smaller).
// RUN: cleave-translate --import-onnx %S/Inputs/split.onnx \
// RUN:   | FileCheck %s --check-prefix=SPLIT
// SPLIT: %[[P:.*]]:2 = graph.split %arg0 dim 1 sizes [2, 3] : tensor<2x5xf32>
// SPLIT-NEXT: return %[[P]]#0, %[[P]]#1 : tensor<2x2xf32>, tensor<2x3xf32>
// RUN: cleave-translate --import-onnx %S/Inputs/split_opset18.onnx \
// RUN:   | FileCheck %s --check-prefix=SPLIT18
// SPLIT18: %[[P:.*]]:3 = graph.split %arg0 dim 1 sizes [3, 3, 2] : tensor<2x8xf32>
// SPLIT18-NEXT: return %[[P]]#0, %[[P]]#1, %[[P]]#2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x2xf32>

// Unsqueeze (axes [0, -2]) and Squeeze (axes [0]) of a runtime tensor are
// reshapes; their axes inputs leave no constants.
// RUN: cleave-translate --import-onnx %S/Inputs/squeeze_unsqueeze.onnx \
// RUN:   | FileCheck %s --check-prefix=SQUEEZE --implicit-check-not=graph.constant
// SQUEEZE: %[[U:.*]] = graph.reshape %arg0 : tensor<2x3xf32> -> tensor<1x2x1x3xf32>
// SQUEEZE-NEXT: %[[S:.*]] = graph.reshape %[[U]] : tensor<1x2x1x3xf32> -> tensor<2x1x3xf32>
// SQUEEZE-NEXT: return %[[U]], %[[S]]

// Expand of 3x1 to [2, 1, 4]: bidirectional broadcast to 2x3x4.
// RUN: cleave-translate --import-onnx %S/Inputs/expand.onnx \
// RUN:   | FileCheck %s --check-prefix=EXPAND --implicit-check-not=graph.constant
// EXPAND: %[[E:.*]] = graph.broadcast_in_dim %arg0 dims [1, 2] : tensor<3x1xf32> -> tensor<2x3x4xf32>
// EXPAND-NEXT: return %[[E]] : tensor<2x3x4xf32>

// Where on a runtime condition, with scalar operands broadcast.
// RUN: cleave-translate --import-onnx %S/Inputs/where.onnx \
// RUN:   | FileCheck %s --check-prefix=WHERE
// WHERE-LABEL: func.func @forward(
// WHERE-SAME:      %[[X:.*]]: tensor<2x3xf32>
// WHERE:         %[[C:.*]] = graph.compare gt %[[X]], %{{.*}} : tensor<2x3xf32>, tensor<f32>
// WHERE:         %[[Y:.*]] = graph.where %[[C]], %[[X]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32>
// WHERE-NEXT:    return %[[Y]] : tensor<2x3xf32>

// Trilu (lower, k = 1) of a runtime tensor: keep where col - row <= 1.
// RUN: cleave-translate --import-onnx %S/Inputs/trilu.onnx \
// RUN:   | FileCheck %s --check-prefix=TRILU
// TRILU:      %[[ROW:.*]] = graph.iota dim 0 : tensor<3x3xi64>
// TRILU-NEXT: %[[COL:.*]] = graph.iota dim 1 : tensor<3x3xi64>
// TRILU-NEXT: %[[D:.*]] = graph.sub %[[COL]], %[[ROW]] : tensor<3x3xi64>, tensor<3x3xi64>
// TRILU-NEXT: %[[K:.*]] = graph.constant dense<1> : tensor<i64>
// TRILU-NEXT: %[[M:.*]] = graph.compare le %[[D]], %[[K]] : tensor<3x3xi64>, tensor<i64>
// TRILU-NEXT: %[[Z:.*]] = graph.constant dense<0.000000e+00> : tensor<f32>
// TRILU-NEXT: %[[Y:.*]] = graph.where %[[M]], %arg0, %[[Z]] : tensor<3x3xi1>, tensor<2x3x3xf32>, tensor<f32>
// TRILU-NEXT: return %[[Y]] : tensor<2x3x3xf32>

// TopK, smallest 2 on axis -1, both outputs.
// RUN: cleave-translate --import-onnx %S/Inputs/topk.onnx \
// RUN:   | FileCheck %s --check-prefix=TOPK --implicit-check-not=graph.constant
// TOPK: %[[V:.*]], %[[I:.*]] = graph.topk %arg0 k 2 dim 1 smallest : tensor<3x5xf32>
// TOPK-NEXT: return %[[V]], %[[I]] : tensor<3x2xf32>, tensor<3x2xi64>

// ReduceSum with axes [-1, 0] as an input and keepdims = 0; ReduceMean with
// axes as an input (opset 18), keepdims by default.
// RUN: cleave-translate --import-onnx %S/Inputs/reduce_sum_axes.onnx \
// RUN:   | FileCheck %s --check-prefix=RSUM --implicit-check-not=graph.constant
// RSUM: %[[R:.*]] = graph.reduce sum %arg0 dims [0, 2] : tensor<2x3x4xf32>
// RSUM-NEXT: return %[[R]] : tensor<3xf32>
// RUN: cleave-translate --import-onnx %S/Inputs/reduce_mean_opset18.onnx \
// RUN:   | FileCheck %s --check-prefix=RMEAN --implicit-check-not=graph.constant
// RMEAN: %[[R:.*]] = graph.reduce mean %arg0 dims [2] keepdim : tensor<2x3x4xf32>
// RMEAN-NEXT: return %[[R]] : tensor<2x3x1xf32>
