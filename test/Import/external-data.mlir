// Initializers stored as ONNX external data in a side file, found relative
// to the model. external.bin holds a float 2x3 weight at bytes [0, 24) and
// an int64 shape [3, 2] at [24, 40).

// The float weight stays in the file: the parameter points at its bytes. The
// int64 shape is read at import (from offset 24) and folds into the reshape.
// RUN: cleave-translate --import-onnx %S/Inputs/external_data.onnx \
// RUN:   | FileCheck %s --implicit-check-not=graph.constant
// CHECK:       graph.param @ext.weight : tensor<2x3xf32> = #graph.external<"{{.*}}Inputs{{/|\\}}external.bin", offset = 0, size = 24>
// CHECK-NOT:   graph.param
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32> {onnx.name = "x"}) -> (tensor<3x2xf32> {onnx.name = "y"})
// CHECK-NEXT:    %[[W:.*]] = graph.read_param @ext.weight : tensor<2x3xf32>
// CHECK-NEXT:    %[[H:.*]] = graph.add %[[X]], %[[W]] : tensor<2x3xf32>, tensor<2x3xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.reshape %[[H]] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT:    return %[[Y]]

// The side file is looked up next to the model, not in the working directory.
// RUN: cd %S && cleave-translate --import-onnx Inputs/external_data.onnx \
// RUN:   | FileCheck %s --check-prefix=RELATIVE
// RELATIVE: graph.param @ext.weight : tensor<2x3xf32> = #graph.external<"{{.*}}external.bin", offset = 0, size = 24>
// RELATIVE: graph.reshape %{{.*}} : tensor<2x3xf32> -> tensor<3x2xf32>

// RUN: not cleave-translate --import-onnx %S/Inputs/external_missing.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MISSING --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// MISSING: external_missing.onnx:0:0: error: initializer 'ext.weight' reads external data from '{{.*}}Inputs{{/|\\}}missing.bin', which cannot be opened: No such file or directory{{$}}

// RUN: not cleave-translate --import-onnx %S/Inputs/external_out_of_range.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANGE --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// RANGE: external_out_of_range.onnx:0:0: error: initializer 'ext.weight' reads bytes [32, 56) of '{{.*}}external.bin', which has 40 bytes{{$}}

// External data stays inside the model's folder: '..', an absolute path and
// a symbolic link out of it are refused (nothing outside is read), as is a
// location that is not a regular file.
// RUN: not cleave-translate --import-onnx %S/Inputs/external_dotdot.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DOTDOT --implicit-check-not="Stack dump"
// DOTDOT: error: initializer 'ext.weight' has external data location '../Inputs/external.bin' outside the model's folder (an absolute path or '..'): external data must be inside it{{$}}
// RUN: not cleave-translate --import-onnx %S/Inputs/external_absolute.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ABSOLUTE --implicit-check-not="Stack dump"
// ABSOLUTE: error: initializer 'ext.weight' has external data location '/etc/passwd' outside the model's folder
// RUN: rm -rf %t && mkdir -p %t && cp %S/Inputs/external_link.onnx %S/Inputs/external.bin %t/
// RUN: cp %S/Inputs/external.bin %t.outside && ln -s %t.outside %t/link.bin
// RUN: not cleave-translate --import-onnx %t/external_link.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LINK --implicit-check-not="Stack dump"
// LINK: error: initializer 'ext.weight' has external data location 'link.bin' that resolves to '{{.*}}.outside', outside the model's folder
// RUN: not cleave-translate --import-onnx %S/Inputs/external_folder.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FOLDER --implicit-check-not="Stack dump"
// FOLDER: error: initializer 'ext.weight' has external data location '.' that is not a regular file

// Counts: an offset past the end of the file with no length (once a
// negative length that crashed the slice), and an offset that is not a
// decimal integer >= 0.
// RUN: not cleave-translate --import-onnx %S/Inputs/external_past_end.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PAST --implicit-check-not="Stack dump"
// PAST: error: initializer 'ext.shape' has external data offset 48 past the end of '{{.*}}external.bin', which has 40 bytes{{$}}
// RUN: not cleave-translate --import-onnx %S/Inputs/external_bad_offset.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OFFSET --implicit-check-not="Stack dump"
// OFFSET: error: initializer 'ext.weight' has external data offset '-8', not a decimal integer from 0 to 10^18{{$}}
