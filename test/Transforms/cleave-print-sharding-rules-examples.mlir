// Every op of the full training step of every example has a sharding rule
// that agrees with its types: the pass fails on an op without one, and the
// runs below must succeed. The forward, backward and optimizer ops of each
// step are reported, including the updates and their assignments.
//
// RUN: cleave-translate --import-onnx %examples/mlp/model.onnx \
// RUN:   | cleave-opt --cleave-raise --cleave-autodiff="optimizer=adamw grad-clip=1.0" \
// RUN:       --cleave-print-sharding-rules -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefixes=CHECK,ADAMW
// RUN: cleave-translate --import-onnx %examples/gpt/model.onnx \
// RUN:   | cleave-opt --cleave-raise --cleave-mixed-precision --cleave-autodiff="optimizer=adamw accumulate=2" \
// RUN:       --canonicalize --cse --cleave-fuse-linear \
// RUN:       --cleave-print-sharding-rules -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefixes=CHECK,ADAMW,GPT
// RUN: cleave-translate --import-onnx %examples/llama/model.onnx \
// RUN:   | cleave-opt --cleave-raise --cleave-autodiff="optimizer=sgd momentum=0.9" \
// RUN:       --cleave-print-sharding-rules -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefixes=CHECK,SGD
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx \
// RUN:   | cleave-opt --cleave-raise --cleave-mixed-precision --cleave-autodiff="optimizer=adamw loss-scale=1024" \
// RUN:       --cleave-print-sharding-rules -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefixes=CHECK,ADAMW
//
// CHECK-NOT: error
// The loss: a sum over positions, divided by their count.
// CHECK: remark: sharding rule {{.*}} reduction(sum)
// CHECK-NOT: error
// GPT: remark: sharding rule {{.*}} linear in (0)
// The optimizer: elementwise over parameter, gradient and state.
// ADAMW: remark: sharding rule ([a, b], [a, b], [a, b], [a, b], []{{.*}}) -> ([a, b], [a, b], [a, b])
// SGD: remark: sharding rule ([a, b], [a, b], [], [a, b]) -> ([a, b], [a, b])
// CHECK-NOT: error
// CHECK: remark: sharding rule ([a, b]) -> ()
// CHECK-NOT: error
