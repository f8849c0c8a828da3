// The training binary's --nan-check: a run that diverges (SGD at lr 1e18:
// step 2's loss is 7e34, step 3's overflows to inf) stops after the first
// non-finite loss with exit 1 and a message naming the step, saving no
// checkpoint of the diverged parameters: the last one kept is step 2's.
// Without a save, step 4, already in flight (the host runs a step ahead),
// completes before the run stops. Without the flag the run goes on to its
// last step.
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: %python -c "import numpy as n; r = n.random.default_rng(0); n.save('x.npy', r.standard_normal((8, 3), dtype=n.float32)); n.save('t.npy', r.standard_normal((8, 5), dtype=n.float32))"
// RUN: cleave-compile %s --train --loss mse --optimizer sgd --lr 1e18 -o train
// RUN: not ./train --inputs x.npy --targets t.npy --steps 10 --nan-check --save ck --save-every 1 --log-json log.jsonl --quiet 2>&1 | FileCheck %s
// CHECK: error: the loss of step 3 is inf (--nan-check): the run stopped after step 3, keeping the checkpoint of step 2 in ck
// RUN: %python -c "import json; assert json.load(open('ck/meta.json'))['step'] == 2; steps = [json.loads(l)['step'] for l in open('log.jsonl')]; assert steps == [1, 2, 3], steps"
// RUN: not ./train --inputs x.npy --targets t.npy --steps 10 --nan-check --quiet 2>&1 | FileCheck %s --check-prefix=NO-SAVE
// NO-SAVE: error: the loss of step 3 is inf (--nan-check): the run stopped after step 4, with no checkpoint of a finite step saved (--save-every keeps one)
// RUN: ./train --inputs x.npy --targets t.npy --steps 10 --log-json all.jsonl --quiet
// RUN: %python -c "import json; steps = [json.loads(l)['step'] for l in open('all.jsonl')]; assert steps == list(range(1, 11)), steps"

graph.param @w : tensor<3x5xf32> = dense<0.25> : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  return %y : tensor<4x5xf32>
}
