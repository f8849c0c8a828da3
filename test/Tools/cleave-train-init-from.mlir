// The training binary's --init-from (docs/training.md): the model's
// parameters from a checkpoint folder or a safetensors file, by name; the
// optimizer state and step start afresh. Bad sources are refused before
// training, naming the problem.
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: %python -c "import numpy as n; r = n.random.default_rng(0); n.save('x.npy', r.standard_normal((8, 3), dtype=n.float32)); n.save('t.npy', r.standard_normal((8, 5), dtype=n.float32))"
// RUN: cleave-compile %s --train --loss mse --optimizer adamw --lr 0.01 -o train
// RUN: ./train --inputs x.npy --targets t.npy --steps 4 --save ck --quiet
// The checkpoint's weights, written again as a plain safetensors file (no
// Cleave metadata) with only the model's two tensors plus an unrelated one.
// RUN: %python %S/Inputs/resave_safetensors.py ck/model.safetensors w,b,w.m plain.safetensors
// RUN: %python %S/Inputs/resave_safetensors.py ck/model.safetensors w plain-no-b.safetensors

// From the checkpoint: 2 model parameters, its optimizer state not read;
// the run starts at step 1 and its first loss is the checkpoint's model's.
// RUN: ./train --inputs x.npy --targets t.npy --steps 1 --init-from ck --log-json a.jsonl | FileCheck %s --check-prefix=CKPT
// CKPT: initialized 2 model parameters from ck (5 other tensors not read: the optimizer state)
// CKPT: training steps 1..1
// From the safetensors file: the same weights, the same first loss.
// RUN: ./train --inputs x.npy --targets t.npy --steps 1 --init-from plain.safetensors --log-json b.jsonl | FileCheck %s --check-prefix=FILE
// FILE: initialized 2 model parameters from plain.safetensors (1 other tensors not read)
// RUN: %python -c "import json; a, b = (json.loads(open(f).readline()) for f in ('a.jsonl', 'b.jsonl')); assert a['step'] == b['step'] == 1 and a['loss'] == b['loss'], (a, b)"
// The optimizer state starts afresh: the checkpoint written after it holds
// optimizer.step 1, not 5.
// RUN: ./train --inputs x.npy --targets t.npy --steps 1 --init-from ck --save ck2 --quiet
// RUN: %python -c "import json, struct; f = open('ck2/model.safetensors', 'rb'); n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n)); s, e = h['optimizer.step']['data_offsets']; f.seek(8 + n + s); assert struct.unpack('<q', f.read(8))[0] == 1; assert h['__metadata__']['step'] == '1', h['__metadata__']"

// RUN: not ./train --inputs x.npy --targets t.npy --steps 1 --init-from ck --resume ck 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: --init-from and --resume are exclusive
// RUN: not ./train --inputs x.npy --targets t.npy --steps 1 --init-from missing.safetensors 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: --init-from missing.safetensors: no such checkpoint folder or safetensors file
// RUN: mkdir -p empty && not ./train --inputs x.npy --targets t.npy --steps 1 --init-from empty 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: --init-from empty: the folder holds no checkpoint
// RUN: not ./train --inputs x.npy --targets t.npy --steps 1 --init-from plain-no-b.safetensors 2>&1 | FileCheck %s --check-prefix=LACKS
// LACKS: error: --init-from plain-no-b.safetensors is not of this model: parameter 'b' (f32 [5]) is not in it
// A model whose b is [6]:
// RUN: sed 's/x5xf32/x6xf32/g; s/<5xf32>/<6xf32>/g' %s > wide.mlir
// RUN: cleave-compile wide.mlir --train --loss mse --optimizer adamw -o wide
// RUN: not ./wide --inputs x.npy --targets t.npy --steps 1 --init-from ck 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: --init-from ck is not of this model: parameter 'w' is f32 [3, 5] there but f32 [3, 6] in this program; parameter 'b' is f32 [5] there but f32 [6] in this program
// RUN: head -c 100 ck/model.safetensors > cut.safetensors && not ./train --inputs x.npy --targets t.npy --steps 1 --init-from cut.safetensors 2>&1 | FileCheck %s --check-prefix=CUT
// CUT: error: checkpoint cut.safetensors is not a valid safetensors file

graph.param @w : tensor<3x5xf32> = dense<0.25> : tensor<3x5xf32>
graph.param @b : tensor<5xf32> = dense<0.5> : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  return %z : tensor<4x5xf32>
}
