// The training binary's run-time hyperparameters (docs/training.md): each
// bad value is refused before training with a message naming the flag; a
// schedule is logged per step and recorded in the checkpoint; a program
// compiled with clipping trains as one without it under --grad-clip 0.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as n; r = n.random.default_rng(0); n.save('%t/x.npy', r.standard_normal((8, 3), dtype=n.float32)); n.save('%t/t.npy', r.standard_normal((8, 5), dtype=n.float32))"
// RUN: cleave-compile %s --train --loss mse --optimizer adamw --lr 0.01 -o %t/adamw
// RUN: cleave-compile %s --train --loss mse --optimizer sgd --lr 0.1 -o %t/sgd
// RUN: cleave-compile %s --train --loss mse --optimizer adamw --lr 0.01 --grad-clip 0.5 -o %t/clipped
// RUN: %t/adamw --help | FileCheck %s --check-prefix=HELP
// HELP: hyperparameters (the program's compiled values are the defaults
// HELP: --no-decay-1d
// HELP: --lr-schedule S     constant (default), cosine, linear or wsd

// RUN: not %t/adamw --steps 4 --lr -1 2>&1 | FileCheck %s --check-prefix=NEG-LR
// NEG-LR: error: --lr must be >= 0, got -1
// RUN: not %t/adamw --steps 4 --lr fast 2>&1 | FileCheck %s --check-prefix=NAN-LR
// NAN-LR: error: --lr expects a finite number, got 'fast'
// RUN: not %t/adamw --steps 4 --lr 0.1 --lr 0.2 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: --lr is given twice
// RUN: not %t/adamw --steps 4 --warmup-steps 5 2>&1 | FileCheck %s --check-prefix=WARMUP
// WARMUP: error: --warmup-steps 5 is past the schedule's end, step 4 (--decay-steps, by default the run's --steps)
// RUN: not %t/adamw --steps 10 --lr-schedule cosine --warmup-steps 3 --decay-steps 3 2>&1 | FileCheck %s --check-prefix=DECAY
// DECAY: error: --decay-steps 3 must be after the warmup's 3 steps (the cosine schedule decays in between)
// RUN: not %t/adamw --steps 10 --lr-schedule wsd --cooldown-steps 11 2>&1 | FileCheck %s --check-prefix=COOLDOWN
// COOLDOWN: error: --cooldown-steps 11 must be in [1, 10]: the steps between the warmup's 0 and --decay-steps 10
// RUN: not %t/adamw --steps 4 --lr-schedule exp 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: error: --lr-schedule expects constant, cosine, linear or wsd, got 'exp'
// RUN: not %t/adamw --steps 4 --lr 0.01 --min-lr 0.1 2>&1 | FileCheck %s --check-prefix=MIN-LR
// MIN-LR: error: --min-lr 0.1 must be in [0, --lr 0.01]
// RUN: not %t/adamw --steps 4 --beta1 1 2>&1 | FileCheck %s --check-prefix=BETA
// BETA: error: --beta1 must be in [0, 1), got 1
// RUN: not %t/adamw --steps 4 --momentum 0.9 2>&1 | FileCheck %s --check-prefix=NOT-SGD
// NOT-SGD: error: --momentum is SGD's; this program's optimizer is AdamW
// RUN: not %t/sgd --steps 4 --beta2 0.9 2>&1 | FileCheck %s --check-prefix=NOT-ADAMW
// NOT-ADAMW: error: --beta2 is AdamW's; this program's optimizer is SGD
// RUN: not %t/sgd --steps 4 --momentum 0.9 2>&1 | FileCheck %s --check-prefix=NO-BUFFERS
// NO-BUFFERS: error: --momentum: this program was compiled without momentum, so it has no momentum buffers; compile it with --momentum to change it at run time
// RUN: not %t/adamw --steps 4 --grad-clip 1 2>&1 | FileCheck %s --check-prefix=NO-CLIP
// NO-CLIP: error: --grad-clip: this program was compiled without gradient clipping (it computes no gradient norm); compile it with --grad-clip to change the norm at run time
// RUN: not %t/clipped --steps 4 --grad-clip -1 2>&1 | FileCheck %s --check-prefix=NEG-CLIP
// NEG-CLIP: error: --grad-clip must be >= 0 (0: off), got -1
// RUN: not %t/adamw --steps 4 --loss-scale-growth-interval 10 2>&1 | FileCheck %s --check-prefix=NO-SCALER
// NO-SCALER: error: --loss-scale-growth-interval: this program has no dynamic loss scaling (compile it with --precision fp16)
// RUN: not %t/adamw --steps 4 --no-decay-1d --weight-decay-1d 0.1 2>&1 | FileCheck %s --check-prefix=GROUPS
// GROUPS: error: --no-decay-1d and --weight-decay-1d are exclusive

// A linear decay from 0.1 to 0 over 4 steps: 0.1, 0.075, 0.05, 0.025, in
// the log and in the checkpoint's record, which a resume reads back.
// RUN: %t/adamw --inputs %t/x.npy --targets %t/t.npy --steps 4 --lr 0.1 --lr-schedule linear --no-decay-1d --save %t/ck --log-json %t/linear.jsonl | FileCheck %s --check-prefix=BANNER
// BANNER: hyperparameters: lr 0.1 (linear, to 0 at step 4), weight decay 0.01 (rank < 2: 0)
// BANNER: step 4/4 {{.*}} lr 0.025
// RUN: FileCheck %s --check-prefix=LOG < %t/linear.jsonl
// LOG: "step": 1, {{.*}}"lr": 0.1,
// LOG: "step": 2, {{.*}}"lr": 0.075,
// LOG: "step": 3, {{.*}}"lr": 0.05,
// LOG: "step": 4, {{.*}}"lr": 0.025,
// RUN: FileCheck %s --check-prefix=META < %t/ck/meta.json
// META: "hyperparameters": {"lr": 0.10000000000000001, "weight_decay": 0.01, "weight_decay_1d": 0, {{.*}}"lr_schedule": "linear", "warmup_steps": 0, "decay_steps": 4,
// Resumed with another --weight-decay, the run keeps its no-decay group
// (and, given no schedule flags, its schedule).
// RUN: %t/adamw --inputs %t/x.npy --targets %t/t.npy --steps 5 --resume %t/ck --weight-decay 0.2 --save %t/ck2 --quiet
// RUN: FileCheck %s --check-prefix=RESUMED < %t/ck2/meta.json
// RESUMED: "hyperparameters": {"lr": 0.10000000000000001, "weight_decay": 0.20000000000000001, "weight_decay_1d": 0, {{.*}}"lr_schedule": "linear", "warmup_steps": 0, "decay_steps": 4,

// Clipping off at run time (--grad-clip 0) trains as the program compiled
// without clipping, and at 0.5 it does not (the gradients' norm is larger).
// RUN: %t/adamw --inputs %t/x.npy --targets %t/t.npy --steps 4 --log-json %t/plain.jsonl --quiet
// RUN: %t/clipped --inputs %t/x.npy --targets %t/t.npy --steps 4 --grad-clip 0 --log-json %t/off.jsonl --quiet
// RUN: %t/clipped --inputs %t/x.npy --targets %t/t.npy --steps 4 --log-json %t/on.jsonl --quiet
// RUN: %python -c "import json; l = lambda f: [json.loads(x)['loss'] for x in open('%t/' + f)]; assert l('plain.jsonl') == l('off.jsonl'), (l('plain.jsonl'), l('off.jsonl')); assert l('on.jsonl')[1:] != l('plain.jsonl')[1:]"

graph.param @w : tensor<3x5xf32> = dense<0.25> : tensor<3x5xf32>
graph.param @b : tensor<5xf32> = dense<0.5> : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  return %z : tensor<4x5xf32>
}
