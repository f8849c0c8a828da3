// The training binary's evaluation (docs/training.md): the flags' bad
// values and the binary without an evaluation program are refused before
// training with a message naming the problem; an evaluation's data must
// fit the model's inputs; evaluation lines go to the progress, the JSON log
// and the summary, and a checkpoint resumed with no steps to run is
// evaluated.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as n; r = n.random.default_rng(0); n.save('%t/x.npy', r.standard_normal((8, 3), dtype=n.float32)); n.save('%t/t.npy', r.standard_normal((8, 5), dtype=n.float32)); n.save('%t/vx.npy', r.standard_normal((6, 3), dtype=n.float32)); n.save('%t/vt.npy', r.standard_normal((6, 5), dtype=n.float32)); n.save('%t/bad.npy', r.standard_normal((6, 4), dtype=n.float32))"
// RUN: cleave-compile %s --train --loss mse --optimizer sgd --lr 0.1 -o %t/train
// RUN: cleave-compile %s --train --loss mse --optimizer sgd --lr 0.1 --no-eval -o %t/no-eval
// RUN: cleave-compile %s --train --loss mse --optimizer sgd --lr 0.1 --emit mlir -o - | FileCheck %s --check-prefix=IR
// IR: llvm.func @cleave_eval_run
// IR: llvm.mlir.global external constant @cleave_eval_program()
// RUN: cleave-compile %s --train --loss mse --optimizer sgd --lr 0.1 --no-eval --emit mlir -o - | FileCheck %s --check-prefix=NO-IR
// NO-IR-NOT: cleave_eval
// RUN: %t/train --help | FileCheck %s --check-prefix=HELP
// HELP: --eval-every K
// The step's matrix products: x w, [4, 3] x [3, 5], forward, and x^T dy,
// [3, 4] x [4, 5], for w's gradient: 2 x 60 multiply-adds each. The
// evaluation has the forward's only.
// HELP: matrix-product FLOPs per step: 240
// HELP: evaluation program (--eval-*): arena {{.*}}, matrix-product FLOPs per batch 120
// RUN: %t/no-eval --help | FileCheck %s --check-prefix=NO-EVAL-HELP
// NO-EVAL-HELP: evaluation program: none (compiled with --no-eval)

// RUN: cd %t
// RUN: not ./no-eval --inputs x.npy --targets t.npy --steps 2 --eval-inputs vx.npy --eval-targets vt.npy 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: error: this training program has no evaluation program, which --eval-* runs: it was compiled with cleave-compile --no-eval
// RUN: not ./train --inputs x.npy --targets t.npy --steps 2 --eval-every 1 2>&1 | FileCheck %s --check-prefix=NO-DATA
// NO-DATA: error: --eval-every needs evaluation data (--eval-tokens FILE, or --eval-inputs and --eval-targets)
// RUN: not ./train --inputs x.npy --targets t.npy --steps 2 --eval-inputs vx.npy --eval-targets vt.npy --eval-every 3 2>&1 | FileCheck %s --check-prefix=PAST
// PAST: error: --eval-every 3 is past the run's 2 steps
// RUN: not ./train --inputs x.npy --targets t.npy --steps 2 --eval-inputs vx.npy --eval-targets vt.npy --eval-steps 0 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: error: --eval-steps expects an integer >= 1, got '0'
// RUN: not ./train --inputs x.npy --targets t.npy --steps 2 --eval-inputs vx.npy 2>&1 | FileCheck %s --check-prefix=NO-TARGETS
// NO-TARGETS: error: missing --eval-targets FILE.npy (the data of 'targets')
// RUN: not ./train --inputs x.npy --targets t.npy --steps 2 --eval-inputs bad.npy --eval-targets vt.npy 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: input 'input0': bad.npy: expected shape [N, 3] (samples of the input's [4, 3] batches), got [6, 4]
// RUN: not ./train --inputs x.npy --targets t.npy --steps 2 --eval-tokens vx.npy --eval-inputs vx.npy 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: --eval-tokens and --eval-inputs/--eval-targets are exclusive
// RUN: not ./train --inputs x.npy --targets t.npy --steps 2 --eval-tokens vx.npy 2>&1 | FileCheck %s --check-prefix=TOKENS
// TOKENS: error: --tokens needs a model with one integer input [B, S] and integer labels [B, S]

// Before the first step, after step 2, after the last (3): 2 batches of 4
// (the 6 samples hold one whole batch; --eval-steps 2 wraps around).
// RUN: ./train --inputs x.npy --targets t.npy --steps 3 --eval-inputs vx.npy --eval-targets vt.npy --eval-every 2 --eval-steps 2 --log-json log.jsonl --save ck | FileCheck %s --check-prefix=TRAIN
// TRAIN-LABEL: evaluation: 6 samples from vx.npy, vt.npy; 2 batches before the first step, every 2 steps and after the last; arena
// TRAIN: eval step 0  loss [[L0:[0-9.e+-]+]]  (2 batches
// TRAIN: step 1/3
// TRAIN: step 2/3
// TRAIN-NEXT: eval step 2  loss
// TRAIN: step 3/3
// TRAIN: eval step 3  loss [[L3:[0-9.e+-]+]]  (2 batches
// TRAIN: eval loss [[L3]]{{[0-9]*}} at step 3 (2 batches)
// RUN: FileCheck %s --check-prefix=LOG < log.jsonl
// LOG: {"step": 0, "eval_loss": [[E0:[0-9.e+-]+]], "eval_batches": 2, "time": {{[0-9.]+}}, "ms": {{[0-9.]+}}}
// LOG: {"step": 2, "loss":
// LOG-NEXT: {"step": 2, "eval_loss":
// LOG: {"step": 3, "eval_loss": [[E3:[0-9.e+-]+]], "eval_batches": 2
// With no steps to run, the checkpoint at step 3 is evaluated: the same loss.
// RUN: ./train --inputs x.npy --targets t.npy --steps 3 --resume ck --eval-inputs vx.npy --eval-targets vt.npy --eval-steps 2 --log-json resumed.jsonl --quiet
// RUN: %python -c "import json; a = [json.loads(l) for l in open('log.jsonl')][-1]; b = [json.loads(l) for l in open('resumed.jsonl')]; assert len(b) == 1 and b[0]['step'] == 3 and b[0]['eval_loss'] == a['eval_loss'], (a, b)"

graph.param @w : tensor<3x5xf32> = dense<0.25> : tensor<3x5xf32>
graph.param @b : tensor<5xf32> = dense<0.5> : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  return %z : tensor<4x5xf32>
}
