//===- Passes.td - Cleave passes ----------------------------*- tablegen -*-===//
//
// Every Cleave pass, with its flag, options and an example.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES_TD
#define CLEAVE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PrintShardingRulesPass : Pass<"cleave-print-sharding-rules"> {
  let summary = "Reports the factor sharding rule of every op";
  let description = [{
    Emits a remark on each op that implements `ShardingRuleOpInterface`
    with its rule in einsum-like form, after checking that the rule agrees
    with the op's types (a mismatch is an error). It shows how propagation
    will see the program and is how the rules are tested end to end.

    ```mlir
    %0 = graph.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32>
    ```
    gives

    ```
    remark: sharding rule ([a, b], [b, c]) -> ([a, c]) {a=4, b=8 reduction(sum), c=16}
    ```
  }];
  let statistics = [
    Statistic<"numRules", "num-rules", "Number of sharding rules reported">
  ];
}

def RaisePass : Pass<"cleave-raise"> {
  let summary = "Rewrites decomposed exporter patterns into fused graph ops";
  let description = [{
    ONNX exporters spell fused operations as chains of primitives. This pass
    recognizes them, in any operand order and their common variants, and
    replaces each with the fused op that matters for speed and sharding:

    - layer norm: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`, then
      optional `* gamma` and `+ beta` -> `graph.layer_norm`;
    - RMS norm: `x * rsqrt(mean(x^2) + eps)` (or `/ sqrt`, `* 1/sqrt`), then
      optional `* weight` -> `graph.rms_norm`;
    - GELU: `0.5 * x * (1 + erf(x / sqrt(2)))` and the tanh form
      `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` -> `graph.gelu`;
    - SiLU: `x * sigmoid(x)` -> `graph.silu`;
    - attention: `matmul(softmax(mask(scale * matmul(q, k^T))), v)` on
      `[B, H, S, D]` tensors, with the mask a `where` or an additive tensor;
      a constant lower-triangular mask becomes the `causal` flag.

    A chain that differs in a constant, an axis or an operand is left alone.

    ```mlir
    %s = graph.sigmoid %x : tensor<4x8xf32>
    %y = graph.mul %x, %s : tensor<4x8xf32>, tensor<4x8xf32>
    ```
    becomes
    ```mlir
    %y = graph.silu %x : tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

#endif // CLEAVE_TRANSFORMS_PASSES_TD
