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

#endif // CLEAVE_TRANSFORMS_PASSES_TD
