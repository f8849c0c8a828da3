// A float initializer used twice (tied embedding / LM head) is one
// graph.param, read once, and the read feeds both uses. Every imported op
// carries its ONNX node name as location (NameLoc over the file).

// RUN: cleave-translate --import-onnx %S/Inputs/tied_weight.onnx \
// RUN:   | FileCheck %s --implicit-check-not=@emb
// CHECK:       graph.param @emb : tensor<5x4xf32> = dense<{{\[\[}}-1.000000e+00, -8.750000e-01,
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[IDS:.*]]: tensor<2x3xi64> {onnx.name = "ids"}) -> (tensor<2x3x5xf32> {onnx.name = "logits"})
// CHECK-NEXT:    %[[W:.*]] = graph.read_param @emb : tensor<5x4xf32>
// CHECK-NEXT:    %[[E:.*]] = graph.gather %[[W]][%[[IDS]]] dim 0 : tensor<5x4xf32>, tensor<2x3xi64>
// CHECK-NEXT:    %[[WT:.*]] = graph.transpose %[[W]] perm [1, 0] : tensor<5x4xf32>
// CHECK-NEXT:    %[[L:.*]] = graph.matmul %[[E]], %[[WT]] : tensor<2x3x4xf32>, tensor<4x5xf32>
// CHECK-NEXT:    return %[[L]] : tensor<2x3x5xf32>

// RUN: cleave-translate --import-onnx %S/Inputs/tied_weight.onnx \
// RUN:   --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC
// LOC:      #[[FILE:loc[0-9]*]] = loc("{{.*}}tied_weight.onnx":0:0)
// LOC:      graph.param @emb {{.*}} loc(#[[EMB:loc[0-9]*]])
// LOC:      graph.read_param @emb : tensor<5x4xf32> loc(#[[GATHER:loc[0-9]*]])
// LOC-NEXT: graph.gather {{.*}} loc(#[[GATHER]])
// LOC-NEXT: graph.transpose {{.*}} loc(#[[TRANSPOSE:loc[0-9]*]])
// LOC-NEXT: graph.matmul {{.*}} loc(#[[MATMUL:loc[0-9]*]])
// LOC-DAG:  #[[EMB]] = loc("emb"(#[[FILE]]))
// LOC-DAG:  #[[GATHER]] = loc("embed/Gather"(#[[FILE]]))
// LOC-DAG:  #[[TRANSPOSE]] = loc("head/Transpose"(#[[FILE]]))
// LOC-DAG:  #[[MATMUL]] = loc("head/MatMul"(#[[FILE]]))
