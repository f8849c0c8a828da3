// Errors of -dist-add-mesh, each a diagnostic on the module and a failed
// pass. The axes are the option's, so the errors of a malformed option are
// checked on the output of the runs with that option; a module that
// already has a mesh is an error whatever the option.
// RUN: cleave-opt %s -split-input-file -dist-add-mesh="axes=dp=2" -verify-diagnostics -o /dev/null
//
// An axis named twice.
// RUN: not cleave-opt %s -split-input-file -dist-add-mesh="axes=dp=2,tp=2,dp=4" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: -dist-add-mesh: axis 'dp' appears twice
//
// A size below 1.
// RUN: not cleave-opt %s -split-input-file -dist-add-mesh="axes=dp=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: -dist-add-mesh: 'dp=0' is not an axis name=size (a name of letters, digits and '_', a size >= 1)
// RUN: not cleave-opt %s -split-input-file -dist-add-mesh="axes=tp=-2" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: -dist-add-mesh: 'tp=-2' is not an axis name=size (a name of letters, digits and '_', a size >= 1)
//
// Malformed: no size, a size that is no number, no name.
// RUN: not cleave-opt %s -split-input-file -dist-add-mesh="axes=dp" 2>&1 | FileCheck %s --check-prefix=NOSIZE
// NOSIZE: error: -dist-add-mesh: 'dp' is not an axis name=size (a name of letters, digits and '_', a size >= 1)
// RUN: not cleave-opt %s -split-input-file -dist-add-mesh="axes=dp=two" 2>&1 | FileCheck %s --check-prefix=NOTANUMBER
// NOTANUMBER: error: -dist-add-mesh: 'dp=two' is not an axis name=size (a name of letters, digits and '_', a size >= 1)
// RUN: not cleave-opt %s -split-input-file -dist-add-mesh="axes==2" 2>&1 | FileCheck %s --check-prefix=NONAME
// NONAME: error: -dist-add-mesh: '=2' is not an axis name=size (a name of letters, digits and '_', a size >= 1)
//
// No axes at all.
// RUN: not cleave-opt %s -split-input-file -dist-add-mesh 2>&1 | FileCheck %s --check-prefix=NOAXES
// NOAXES: error: -dist-add-mesh needs axes, e.g. axes=dp=2,tp=2

// The module already has a mesh (another name, other axes): a second one
// is not added.
// expected-error @below {{-dist-add-mesh: the module already has a dist.mesh}}
module {
  dist.mesh @devices ["x" = 4]
  func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// No mesh: valid with axes=dp=2, the input of the option errors above.
module {
  func.func @g(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}
