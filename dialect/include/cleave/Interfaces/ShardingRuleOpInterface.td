//===- ShardingRuleOpInterface.td - Factor sharding rules --*- tablegen -*-===//
//
// The op interface through which every `graph` op tells propagation and
// partitioning how its operand and result dimensions relate (DESIGN.md §3).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_INTERFACES_SHARDINGRULEOPINTERFACE_TD
#define CLEAVE_INTERFACES_SHARDINGRULEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::cleave";
  let description = [{
    Describes an op's sharding behaviour as a factor rule, in the manner of an
    einsum: every tensor dimension of size > 1 is the product (major to minor)
    of one or more factors; dimensions of different operands and results that
    carry the same factor are split together. Each factor has a kind:

    - `parallel`: sharding it shards every tensor that carries it, with no
      communication;
    - `reduction`: it is summed (or averaged, maxed) away; sharding it leaves
      the results *partial* over the sharding axes;
    - `need_replication`: it must stay whole, unless the factor is marked as
      handled by the op's partition hook (ring attention, vocabulary-parallel
      embedding and cross-entropy, MoE all-to-all).

    A reduction factor that a result carries leaves that result sharded
    along it; only the results that do not carry it become partial. In
    `layer_norm_grad`, the leading (batch) factors are reductions for the
    scale and bias gradients but carried by the input gradient: sharding
    the batch leaves the input gradient sharded and the two others partial.

    A rule also lists the groups of operands the op is linear in (jointly,
    the other operands fixed): `add` in `(0, 1)`, `mul` and `matmul` in
    `(0)` and in `(1)`. Applied to values partial over some axes, where the
    partial operands are exactly one group, the result is partial over the
    same axes, so a partitioner can keep a sum of partial values (the
    gradients of K microbatches) partial and reduce it once.

    Propagation and partitioning are generic over these rules.
  }];

  let methods = [
    InterfaceMethod<
      "Returns the factor rule of this op for its current operand and result "
      "types.",
      "::cleave::ShardingRule", "getShardingRule", (ins)>
  ];
}

#endif // CLEAVE_INTERFACES_SHARDINGRULEOPINTERFACE_TD
