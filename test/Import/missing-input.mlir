// A required input spelled "" (the ONNX marker of an absent optional input)
// must be a clean error that names the node, not a crash.
//
// Importer bug: converters call NodeContext::value()/type() on the absent
// input, get a null Value/type and dereference it (segfault in convertMatMul,
// driver or the converters reject absent required inputs.

// RUN: not cleave-translate --import-onnx %S/Inputs/missing_input.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: \
// RUN:       --implicit-check-not="Stack dump"
// CHECK: missing_input.onnx:0:0: error: node 'proj/MatMul' (MatMul): {{.*}}input 1{{.*}}
