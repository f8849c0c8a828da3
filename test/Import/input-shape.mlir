// Inputs with symbolic dimensions need --input-shape; the given shape flows
// through the model's shape arithmetic into static types. symbolic_dim.onnx:
// batch_input["batch", 3] -> Relu -> x.view(x.size(0), 3, 1).

// Without the flag: one error that names the dimension and suggests the flag.
// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MISSING --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// MISSING: symbolic_dim.onnx:0:0: error: input 'batch_input' has unknown dimension 0 ('batch'); Cleave needs static shapes: set them with --input-shape batch_input=8x3{{$}}

// RUN: cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch_input=4x3 | FileCheck %s --check-prefix=GIVEN
// GIVEN-LABEL: func.func @forward(
// GIVEN-SAME:      %[[X:.*]]: tensor<4x3xf32> {onnx.name = "batch_input"})
// GIVEN-SAME:      -> (tensor<4x3x1xf32> {onnx.name = "y"})
// GIVEN-NEXT:    %[[R:.*]] = graph.relu %[[X]] : tensor<4x3xf32>
// GIVEN-NEXT:    %[[Y:.*]] = graph.reshape %[[R]] : tensor<4x3xf32> -> tensor<4x3x1xf32>
// GIVEN-NEXT:    return %[[Y]] : tensor<4x3x1xf32>

// A name that is not a model input is an error that lists the inputs.
// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch_input=4x3 --input-shape batch=4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NAME --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// NAME: symbolic_dim.onnx:0:0: error: --input-shape names 'batch', which is not a model input (inputs: batch_input){{$}}

// Naming the dim_param instead of the input is caught first and the error
// lists the inputs, so the user sees the right spelling.
// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch=4x3 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIMNAME --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// DIMNAME: error: --input-shape names 'batch', which is not a model input (inputs: batch_input){{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch_input=4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANK --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// RANK: symbolic_dim.onnx:0:0: error: --input-shape batch_input=4 has rank 1 but the model's input has rank 2{{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch_input=4x5 2>&1 \
// RUN:   | FileCheck %s --check-prefix=CONTRA --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// CONTRA: symbolic_dim.onnx:0:0: error: --input-shape batch_input=4x5 contradicts the model: dimension 1 is 3{{$}}

// Malformed specs.
// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch_input=4xa 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADDIM --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// BADDIM: error: --input-shape batch_input=4xa: dimensions must be positive integers separated by 'x'{{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch_input=0x3 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ZERO --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// ZERO: error: --input-shape batch_input=0x3: dimensions must be positive integers separated by 'x'{{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/symbolic_dim.onnx \
// RUN:   --input-shape batch_input 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOEQ --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// NOEQ: error: --input-shape expects NAME=DxDx..., got 'batch_input'{{$}}

// On a static input, a shape that agrees with the model is accepted.
// RUN: cleave-translate --import-onnx %S/Inputs/slice.onnx --input-shape x=4x10 \
// RUN:   | FileCheck %s --check-prefix=STATIC
// STATIC: func.func @forward(%{{.*}}: tensor<4x10xf32> {onnx.name = "x"})
