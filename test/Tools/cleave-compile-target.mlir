// --target: the runtime backends this cleave-compile links (cpu, and cuda
// when it was built with the CUDA backend, lit feature `cuda`), listed in
// --help and in the error for an unknown one.

// RUN: not cleave-compile %s --target=tpu 2>&1 | FileCheck %s --check-prefix=%if cuda %{UNKNOWN-CUDA%} %else %{UNKNOWN%}
// UNKNOWN: cleave-compile: error: unknown --target 'tpu' (available: cpu)
// UNKNOWN-CUDA: cleave-compile: error: unknown --target 'tpu' (available: cpu, cuda)

// RUN: cleave-compile --help | FileCheck %s --check-prefix=%if cuda %{HELP-CUDA%} %else %{HELP%}
// HELP: Targets (--target): cpu.
// HELP: --target=<backend>{{ +}}- Runtime backend to link: cpu (default cpu)
// HELP-CUDA: Targets (--target): cpu, cuda.
// HELP-CUDA: --target=<backend>{{ +}}- Runtime backend to link: cpu, cuda (default cpu)

// Both targets compile the same object: only the link differs.
// RUN: cleave-compile %s --target=cpu --emit=obj -o %t.o && test -s %t.o

func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
