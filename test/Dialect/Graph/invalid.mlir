// Every verifier check of the graph dialect fires with a clear message.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics

func.func @param_not_at_module_level() {
  // expected-error @+1 {{expects parent op 'builtin.module'}}
  "graph.param"() <{sym_name = "p", type = tensor<2xf32>}> : () -> ()
  return
}

// -----

// expected-error @+1 {{initial value type 'tensor<3xf32>' does not match parameter type 'tensor<2xf32>'}}
graph.param @p : tensor<2xf32> = dense<1.0> : tensor<3xf32>

// -----

graph.param @ok : tensor<2x4xbf16> = #graph.external<"w.bin", offset = 0, size = 16>
// expected-error @+1 {{external weights hold 12 bytes but 'tensor<2x4xf32>' needs 32}}
graph.param @p : tensor<2x4xf32> = #graph.external<"w.bin", offset = 0, size = 12>

// -----

// expected-error @+1 {{initial value must be elements or #graph.external, got 1 : i64}}
graph.param @p : tensor<2xf32> = 1

// -----

// expected-error @+1 {{external weights need a file path}}
graph.param @p : tensor<2xf32> = #graph.external<"", offset = 0, size = 8>

// -----

// expected-error @+1 {{external weights offset must be >= 0, got -4}}
graph.param @p : tensor<2xf32> = #graph.external<"w.bin", offset = -4, size = 8>

// -----

// expected-error @+1 {{external weights size must be > 0, got 0}}
graph.param @p : tensor<2xf32> = #graph.external<"w.bin", offset = 0, size = 0>

// -----

// expected-error @+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor}}
graph.param @p : tensor<?xf32>

// -----

func.func @read_missing_param() {
  // expected-error @+1 {{'@missing' does not name a graph.param}}
  %0 = graph.read_param @missing : tensor<2xf32>
  return
}

// -----

graph.param @p : tensor<2xf32>
func.func @read_param_wrong_type() {
  // expected-error @+1 {{result type 'tensor<3xf32>' does not match the type 'tensor<2xf32>' of parameter @p}}
  %0 = graph.read_param @p : tensor<3xf32>
  return
}

// -----

func.func @constant_type_mismatch() {
  // expected-error @+1 {{all of {value, result} have same type}}
  %0 = "graph.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

// -----

func.func @iota_dim_out_of_range() {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = graph.iota dim 2 : tensor<2x5xi64>
  return
}

// -----

func.func @cast_changes_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{expects the same shape, got 'tensor<4xf32>' and 'tensor<2x2xf16>'}}
  %0 = graph.cast %x : tensor<4xf32> -> tensor<2x2xf16>
  return
}

// -----

func.func @unary_wrong_element_type(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = graph.exp %x : tensor<4xi64>
  return
}

// -----

func.func @unary_dynamic_shape(%x: tensor<?xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = graph.relu %x : tensor<?xf32>
  return
}

// -----

func.func @binary_element_types_differ(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{expects operands to have the same element type, got 'tensor<4xf32>' and 'tensor<4xf16>'}}
  %0 = graph.add %a, %b : tensor<4xf32>, tensor<4xf16>
  return
}

// -----

func.func @binary_not_broadcastable(%a: tensor<4x3xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{operands are not broadcast-compatible: 'tensor<4x3xf32>' and 'tensor<5xf32>' differ at result dimension 1 (3 vs 5)}}
  %0 = graph.mul %a, %b : tensor<4x3xf32>, tensor<5xf32>
  return
}

// -----

func.func @binary_dynamic(%a: tensor<?xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{expects operands to be a statically shaped tensor, got 'tensor<?xf32>'}}
  %0 = graph.sub %a, %b : tensor<?xf32>, tensor<4xf32>
  return
}

// -----

func.func @binary_on_booleans(%a: tensor<4xi1>, %b: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer values}}
  %0 = graph.add %a, %b : tensor<4xi1>, tensor<4xi1>
  return
}

// -----

func.func @binary_result_type_wrong(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "graph.div"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @compare_element_types_differ(%a: tensor<4xi64>, %b: tensor<4xi32>) {
  // expected-error @+1 {{expects operands to have the same element type}}
  %0 = graph.compare eq %a, %b : tensor<4xi64>, tensor<4xi32>
  return
}

// -----

func.func @where_branches_differ(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{expects on_true and on_false to have the same element type}}
  %0 = graph.where %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xbf16>
  return
}

// -----

func.func @where_not_broadcastable(%c: tensor<3xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operands are not broadcast-compatible}}
  %0 = graph.where %c, %a, %b : tensor<3xi1>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @matmul_rank_one(%a: tensor<4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+1 {{expects operands of rank >= 2, got 'tensor<4xf32>' and 'tensor<4x2xf32>'}}
  %0 = graph.matmul %a, %b : tensor<4xf32>, tensor<4x2xf32>
  return
}

// -----

func.func @matmul_element_types_differ(%a: tensor<2x4xf32>, %b: tensor<4x2xbf16>) {
  // expected-error @+1 {{expects operands to have the same element type}}
  %0 = graph.matmul %a, %b : tensor<2x4xf32>, tensor<4x2xbf16>
  return
}

// -----

func.func @matmul_contraction_mismatch(%a: tensor<2x4xf32>, %b: tensor<5x2xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs 'tensor<2x4xf32>' has 4 columns, rhs 'tensor<5x2xf32>' has 5 rows}}
  %0 = graph.matmul %a, %b : tensor<2x4xf32>, tensor<5x2xf32>
  return
}

// -----

func.func @matmul_batch_mismatch(%a: tensor<3x2x4xf32>, %b: tensor<5x4x2xf32>) {
  // expected-error @+1 {{operands are not broadcast-compatible}}
  %0 = graph.matmul %a, %b : tensor<3x2x4xf32>, tensor<5x4x2xf32>
  return
}

// -----

func.func @softmax_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = graph.softmax %x dim 2 : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_negative_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim -1 is out of range for rank 2}}
  %0 = graph.log_softmax %x dim -1 : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_no_dims(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{expects at least one dimension to reduce}}
  %0 = graph.reduce sum %x dims [] : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 3 is out of range for rank 2}}
  %0 = graph.reduce sum %x dims [3] : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_dims_unsorted(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{expects reduced dims in increasing order without repeats}}
  %0 = graph.reduce max %x dims [1, 0] : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_mean_of_integers(%x: tensor<4x8xi64>) {
  // expected-error @+1 {{mean reduction needs a float tensor, got 'tensor<4x8xi64>'}}
  %0 = graph.reduce mean %x dims [1] : tensor<4x8xi64>
  return
}

// -----

func.func @layer_norm_dim_out_of_range(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = graph.layer_norm %x, %g dim 2 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>) {
  // expected-error @+1 {{expects scale and bias of type 'tensor<8xf32>' (the normalized dimensions of 'tensor<2x8xf32>'), got 'tensor<2x8xf32>'}}
  %0 = graph.layer_norm %x, %g dim 1 : tensor<2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_bias_type(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{expects scale and bias of type 'tensor<8xf32>' (the normalized dimensions of 'tensor<2x8xf32>'), got 'tensor<8xbf16>'}}
  %0 = graph.layer_norm %x, %g, %b dim 1 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xbf16>
  return
}

// -----

func.func @rms_norm_scale_shape(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{expects scale and bias of type 'tensor<8xf32>'}}
  %0 = graph.rms_norm %x, %g dim 1 : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @rms_norm_dim_out_of_range(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{dim -1 is out of range for rank 2}}
  %0 = graph.rms_norm %x, %g dim -1 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @reshape_element_count(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{cannot reshape 'tensor<4x8xf32>' (32 elements) into 'tensor<30xf32>' (30 elements)}}
  %0 = graph.reshape %x : tensor<4x8xf32> -> tensor<30xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{expects the same element type, got 'tensor<4x8xf32>' and 'tensor<32xf16>'}}
  %0 = graph.reshape %x : tensor<4x8xf32> -> tensor<32xf16>
  return
}

// -----

func.func @transpose_wrong_length(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{expects a permutation of 2 dimensions, got 3}}
  %0 = graph.transpose %x perm [0, 1, 2] : tensor<4x8xf32>
  return
}

// -----

func.func @transpose_not_a_permutation(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{perm is not a permutation of [0, 2)}}
  %0 = graph.transpose %x perm [1, 1] : tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_element_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{expects the same element type, got 'tensor<8xf32>' and 'tensor<4x8xf16>'}}
  %0 = graph.broadcast_in_dim %x dims [1] : tensor<8xf32> -> tensor<4x8xf16>
  return
}

// -----

func.func @broadcast_dims_length(%x: tensor<8xf32>) {
  // expected-error @+1 {{expects one entry in dims per operand dimension (1), got 2}}
  %0 = graph.broadcast_in_dim %x dims [0, 1] : tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_dim_out_of_range(%x: tensor<8xf32>) {
  // expected-error @+1 {{dims[0] = 2 is out of range for result rank 2}}
  %0 = graph.broadcast_in_dim %x dims [2] : tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_dim_twice(%x: tensor<1x8xf32>) {
  // expected-error @+1 {{dims has result dimension 1 twice}}
  %0 = graph.broadcast_in_dim %x dims [1, 1] : tensor<1x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_size_mismatch(%x: tensor<3xf32>) {
  // expected-error @+1 {{operand dimension 0 of size 3 cannot broadcast to result dimension 1 of size 8}}
  %0 = graph.broadcast_in_dim %x dims [1] : tensor<3xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @slice_wrong_length(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{expects start, limit and strides of 2 entries each (the operand rank)}}
  %0 = graph.slice %x start [0] limit [4] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_out_of_bounds(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension 1 range [2, 9) is empty or outside [0, 8)}}
  %0 = graph.slice %x start [0, 2] limit [4, 9] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_empty(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension 0 range [3, 3) is empty or outside [0, 4)}}
  %0 = graph.slice %x start [3, 0] limit [3, 8] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_bad_stride(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension 1 stride must be >= 1, got 0}}
  %0 = graph.slice %x start [0, 0] limit [4, 8] strides [1, 0] : tensor<4x8xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+2 {{expects at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "graph.concat"() <{dim = 0 : i64}> : () -> tensor<4xf32>
  return
}

// -----

func.func @concat_dim_out_of_range(%a: tensor<4xf32>) {
  // expected-error @+1 {{dim 1 is out of range for rank 1}}
  %0 = graph.concat %a, %a dim 1 : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @concat_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{expects inputs to have the same element type}}
  %0 = graph.concat %a, %b dim 0 : tensor<4xf32>, tensor<4xf16>
  return
}

// -----

func.func @concat_other_dims_differ(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{inputs 'tensor<4x2xf32>' and 'tensor<4x3xf32>' differ outside the concatenated dim 0}}
  %0 = graph.concat %a, %b dim 0 : tensor<4x2xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @split_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0:2 = graph.split %x dim 2 sizes [4, 4] : tensor<4x8xf32>
  return
}

// -----

func.func @split_size_zero(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{split sizes must be >= 1, got 0}}
  %0:2 = graph.split %x dim 1 sizes [8, 0] : tensor<4x8xf32>
  return
}

// -----

func.func @split_sizes_sum(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{split sizes add up to 7 but dimension 1 has size 8}}
  %0:2 = graph.split %x dim 1 sizes [3, 4] : tensor<4x8xf32>
  return
}

// -----

// Sizes whose sum would overflow int64 (found by the ONNX import fuzzer).
func.func @split_sizes_overflow(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{split sizes add up to more than dimension 1's size 8}}
  %0:2 = graph.split %x dim 1 sizes [5, 9223372036854775807] : tensor<4x8xf32>
  return
}

// -----

func.func @gather_dim_out_of_range(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = graph.gather %t[%i] dim 2 : tensor<10x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @gather_offset_not_i64(%t: tensor<10x4xf32>, %i: tensor<3xi64>, %o: tensor<i32>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 64-bit signless integer values}}
  %0 = "graph.gather"(%t, %i, %o) {dim = 0 : i64} : (tensor<10x4xf32>, tensor<3xi64>, tensor<i32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_offset_not_scalar(%t: tensor<10x4xf32>, %i: tensor<3xi64>, %o: tensor<2xi64>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 64-bit signless integer values}}
  %0 = "graph.gather"(%t, %i, %o) {dim = 0 : i64} : (tensor<10x4xf32>, tensor<3xi64>, tensor<2xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_float_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values}}
  %0 = graph.gather %t[%i] dim 0 : tensor<10x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @topk_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0:2 = graph.topk %x k 2 dim 2 : tensor<4x8xf32>
  return
}

// -----

func.func @topk_k_too_large(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{k = 9 must be in [1, 8]}}
  %0:2 = graph.topk %x k 9 dim 1 : tensor<4x8xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<8x16x32xf32>) {
  // expected-error @+1 {{expects query, key and value of rank 4 [batch, heads, seq, head_dim]}}
  %0 = graph.attention %q, %q, %q : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>
  return
}

// -----

// No key/value heads (it once divided by zero while parsing).
func.func @attention_no_kv_heads(%q: tensor<2x4x16x32xf32>, %k: tensor<2x0x16x32xf32>) {
  // expected-error @+1 {{needs at least one key/value head, got 0 and 0}}
  %0 = graph.attention %q, %k, %k : tensor<2x4x16x32xf32>, tensor<2x0x16x32xf32>, tensor<2x0x16x32xf32>
  return
}

// -----

func.func @attention_element_types(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x32xbf16>) {
  // expected-error @+1 {{expects query and key to have the same element type}}
  %0 = graph.attention %q, %k, %q : tensor<2x4x16x32xf32>, tensor<2x4x16x32xbf16>, tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_value_type(%q: tensor<2x4x16x32xf32>, %v: tensor<2x4x16x32xf16>) {
  // expected-error @+1 {{expects query and value to have the same element type}}
  %0 = graph.attention %q, %q, %v : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf16>
  return
}

// -----

func.func @attention_mask_rank(%q: tensor<2x4x16x32xf32>, %m: tensor<1x2x4x16x16xi1>) {
  // expected-error @+1 {{mask 'tensor<1x2x4x16x16xi1>' does not broadcast to the scores shape 'tensor<2x4x16x16xi1>'}}
  %0 = graph.attention %q, %q, %q mask %m : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<1x2x4x16x16xi1>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x4x16x32xf32>, %k: tensor<3x4x16x32xf32>) {
  // expected-error @+1 {{batch sizes differ: 2, 3, 2}}
  %0 = graph.attention %q, %k, %q : tensor<2x4x16x32xf32>, tensor<3x4x16x32xf32>, tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x6x16x32xf32>, %k: tensor<2x4x16x32xf32>) {
  // expected-error @+1 {{query heads (6) must be a multiple of the key/value heads (4, 4) and those equal}}
  %0 = graph.attention %q, %k, %k : tensor<2x6x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_kv_seq(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x32xf32>, %v: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{key and value sequence lengths differ: 16 vs 8}}
  %0 = graph.attention %q, %k, %v : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x8x32xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x16xf32>) {
  // expected-error @+1 {{query and key head dims differ: 32 vs 16}}
  %0 = graph.attention %q, %k, %k : tensor<2x4x16x32xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>
  return
}

// -----

func.func @attention_mask_type(%q: tensor<2x4x16x32xf32>, %m: tensor<16x16xi64>) {
  // expected-error @+1 {{mask must be i1 or 'f32', got 'tensor<16x16xi64>'}}
  %0 = graph.attention %q, %q, %q mask %m : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<16x16xi64>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<2x4x16x32xf32>, %m: tensor<16x8xi1>) {
  // expected-error @+1 {{mask 'tensor<16x8xi1>' does not broadcast to the scores shape 'tensor<2x4x16x16xi1>'}}
  %0 = graph.attention %q, %q, %q mask %m : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<16x8xi1>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x4x16x32xf32>) {
  // expected-error @+1 {{scale must be positive, got -1.000000e+00}}
  %0 = graph.attention %q, %q, %q scale -1.0 : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>
  return
}

// -----

func.func @cross_entropy_labels_shape(%l: tensor<2x8x100xf32>, %y: tensor<2x100xi64>) {
  // expected-error @+1 {{labels 'tensor<2x100xi64>' must have the shape of logits 'tensor<2x8x100xf32>' without the class dimension}}
  %0 = graph.cross_entropy %l, %y : tensor<2x8x100xf32>, tensor<2x100xi64>
  return
}

// -----

func.func @mse_types_differ(%p: tensor<4xf32>, %t: tensor<5xf32>) {
  // expected-error @+1 {{all of {prediction, target} have same type}}
  %0 = "graph.mse"(%p, %t) : (tensor<4xf32>, tensor<5xf32>) -> tensor<f32>
  return
}

// -----

func.func @router_rank(%l: tensor<2x16x8xf32>) {
  // expected-error @+1 {{expects logits [tokens, experts], got 'tensor<2x16x8xf32>'}}
  %0:2 = graph.router_topk %l k 2 : tensor<2x16x8xf32>
  return
}

// -----

func.func @router_k(%l: tensor<16x8xf32>) {
  // expected-error @+1 {{k = 0 must be in [1, 8] (the number of experts)}}
  %0:2 = graph.router_topk %l k 0 : tensor<16x8xf32>
  return
}

// -----

func.func @dispatch_shapes(%x: tensor<16x64xf32>, %e: tensor<8x2xi64>) {
  // expected-error @+1 {{expects tokens [T, H] and experts [T, k], got 'tensor<16x64xf32>' and 'tensor<8x2xi64>'}}
  %0 = graph.moe_dispatch %x, %e experts 8 capacity 4 : tensor<16x64xf32>, tensor<8x2xi64>
  return
}

// -----

func.func @dispatch_capacity(%x: tensor<16x64xf32>, %e: tensor<16x2xi64>) {
  // expected-error @+1 {{experts (8), capacity (0) and groups (1) must be >= 1}}
  %0 = graph.moe_dispatch %x, %e experts 8 capacity 0 : tensor<16x64xf32>, tensor<16x2xi64>
  return
}

// -----

func.func @dispatch_groups(%x: tensor<16x64xf32>, %e: tensor<16x2xi64>) {
  // expected-error @+1 {{the 3 groups do not divide the 16 tokens}}
  %0 = graph.moe_dispatch %x, %e experts 8 capacity 4 groups 3 : tensor<16x64xf32>, tensor<16x2xi64>
  return
}

// -----

func.func @dispatch_too_large(%x: tensor<16x64xf32>, %e: tensor<16x2xi64>) {
  // expected-error @+1 {{a dispatch buffer of 8 experts x 1 groups x 288230376151711744 slots x 64 features is too large}}
  %0 = graph.moe_dispatch %x, %e experts 8 capacity 288230376151711744 : tensor<16x64xf32>, tensor<16x2xi64>
  return
}

// -----

func.func @combine_groups(%o: tensor<8x6x64xf32>, %g: tensor<16x2xf32>, %e: tensor<16x2xi64>) {
  // expected-error @+1 {{groups (4) must be >= 1 and divide the 16 tokens and the 6 slots}}
  %0 = graph.moe_combine %o, %g, %e groups 4 : tensor<8x6x64xf32>, tensor<16x2xf32>, tensor<16x2xi64>
  return
}

// -----

func.func @expert_matmul_shapes(%x: tensor<8x4x64xf32>, %w: tensor<4x64x256xf32>) {
  // expected-error @+1 {{expects input [E, C, H] and weight [E, H, F], got 'tensor<8x4x64xf32>' and 'tensor<4x64x256xf32>'}}
  %0 = graph.expert_matmul %x, %w : tensor<8x4x64xf32>, tensor<4x64x256xf32>
  return
}

// -----

func.func @expert_matmul_types(%x: tensor<8x4x64xf32>, %w: tensor<8x64x256xbf16>) {
  // expected-error @+1 {{expects input and weight to have the same element type}}
  %0 = graph.expert_matmul %x, %w : tensor<8x4x64xf32>, tensor<8x64x256xbf16>
  return
}

// -----

func.func @combine_shapes(%o: tensor<8x4x64xf32>, %g: tensor<16x2xf32>, %e: tensor<16x1xi64>) {
  // expected-error @+1 {{expects expert_out [E, C, H] and gates and experts [T, k], got 'tensor<8x4x64xf32>', 'tensor<16x2xf32>', 'tensor<16x1xi64>'}}
  %0 = graph.moe_combine %o, %g, %e : tensor<8x4x64xf32>, tensor<16x2xf32>, tensor<16x1xi64>
  return
}

// -----

func.func @combine_types(%o: tensor<8x4x64xf32>, %g: tensor<16x2xf16>, %e: tensor<16x2xi64>) {
  // expected-error @+1 {{expects expert_out and gates to have the same element type}}
  %0 = graph.moe_combine %o, %g, %e : tensor<8x4x64xf32>, tensor<16x2xf16>, tensor<16x2xi64>
  return
}

// -----

func.func @gather_grad_shape(%g: tensor<2x8x32xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{grad 'tensor<2x8x32xf32>' is not the gather of 'tensor<100x64xf32>' at 'tensor<2x8xi64>' along dim 0}}
  %0 = graph.gather_grad %g[%ids] dim 0 : tensor<2x8x32xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
  return
}

// -----

func.func @slice_grad_fit(%g: tensor<4x5xf32>) {
  // expected-error @+1 {{dimension 1: 5 elements from 1 by 2 do not fit in 8}}
  %0 = graph.slice_grad %g start [0, 1] strides [1, 2] : tensor<4x5xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @slice_grad_rank(%g: tensor<4x5xf32>) {
  // expected-error @+1 {{expects start and strides of 2 entries each (the result rank)}}
  %0 = graph.slice_grad %g start [0] strides [1] : tensor<4x5xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @ce_grad_labels(%l: tensor<2x8x100xf32>, %y: tensor<2x7xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{labels 'tensor<2x7xi64>' must have the shape of logits 'tensor<2x8x100xf32>' without the class dim}}
  %0 = graph.cross_entropy_grad %l, %y, %g : tensor<2x8x100xf32>, tensor<2x7xi64>, tensor<f32>
  return
}

// -----

func.func @ce_grad_scalar(%l: tensor<2x100xf32>, %y: tensor<2xi64>, %g: tensor<2xf32>) {
  // expected-error @+1 {{grad must be a scalar, got 'tensor<2xf32>'}}
  %0 = graph.cross_entropy_grad %l, %y, %g : tensor<2x100xf32>, tensor<2xi64>, tensor<2xf32>
  return
}

// -----

graph.param @w : tensor<4xf32>
func.func @assign_type(%v: tensor<4xf16>) {
  // expected-error @+1 {{parameter @w has type 'tensor<4xf32>', which the assigned 'tensor<4xf16>' is not (globally or locally)}}
  graph.assign @w, %v : tensor<4xf16>
  return
}

// -----

func.func @assign_missing(%v: tensor<4xf32>) {
  // expected-error @+1 {{'@nope' (parameter) does not name a graph.param}}
  graph.assign @nope, %v : tensor<4xf32>
  return
}

// -----

graph.param @w : tensor<4xf32>
func.func @sgd_buffer(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{needs a momentum_buffer exactly when momentum != 0}}
  %0 = graph.sgd %p, %g, %s {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

graph.param @w : tensor<4xf32>
func.func @sgd_nesterov(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{nesterov needs momentum > 0 and zero dampening}}
  %0 = graph.sgd %p, %g, %s {lr = 0.1 : f64, nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

graph.param @w : tensor<4xf32>
func.func @sgd_step(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<2xi64>) {
  // expected-error @+1 {{step must be a scalar, got 'tensor<2xi64>'}}
  %0 = graph.sgd %p, %g, %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<2xi64>) -> tensor<4xf32>
  return
}

// -----

graph.param @w : tensor<4xbf16>
func.func @sgd_grad_shape(%p: tensor<4xf32>, %g: tensor<2x2xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{grad 'tensor<2x2xf32>' must have the shape of the parameter 'tensor<4xf32>'}}
  %0 = graph.sgd %p, %g, %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<2x2xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

graph.param @w : tensor<4xf32>
graph.param @m : tensor<4xf32>
graph.param @v : tensor<3xf32>
func.func @adamw_moment(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<3xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{second moment has type 'tensor<3xf32>', expected the parameter's 'tensor<4xf32>'}}
  %0:3 = graph.adamw %p, %g, %m, %v, %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

graph.param @w : tensor<4xf32>
func.func @adamw_betas(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{betas must be in [0, 1), got 1.000000e+00, 9.990000e-01}}
  %0:3 = graph.adamw %p, %g, %p, %p, %s {lr = 0.1 : f64, beta1 = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @linear_element_types(%x: tensor<4x8xf32>, %w: tensor<8x6xbf16>, %b: tensor<6xf32>) {
  // expected-error @+1 {{expects one element type, got 'tensor<4x8xf32>' and 'tensor<8x6xbf16>'}}
  %0 = graph.linear %x, %w, %b : tensor<4x8xf32>, tensor<8x6xbf16>, tensor<6xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<4x8xf32>, %w: tensor<2x8x6xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{expects a weight of rank 2, got 'tensor<2x8x6xf32>'}}
  %0 = graph.linear %x, %w, %b : tensor<4x8xf32>, tensor<2x8x6xf32>, tensor<6xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @linear_contraction(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{contracting dimensions differ: input 'tensor<4x8xf32>' has 8 columns, weight 'tensor<8x6xf32>' (transposed) has 6 rows}}
  %0 = graph.linear %x, %w, %b transpose_weight : tensor<4x8xf32>, tensor<8x6xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<1x6xf32>) {
  // expected-error @+1 {{expects a bias of shape [6], got 'tensor<1x6xf32>'}}
  %0 = graph.linear %x, %w, %b : tensor<4x8xf32>, tensor<8x6xf32>, tensor<1x6xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @linear_result(%x: tensor<2x4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{expects a result of shape [2, 4, 6], got 'tensor<8x6xf32>'}}
  %0 = graph.linear %x, %w, %b : tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<6xf32> -> tensor<8x6xf32>
  return
}

// -----

func.func @linear_pre_without_activation(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{has a preactivation result but no activation}}
  %0:2 = graph.linear %x, %w, %b : tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32> -> tensor<4x6xf32>, tensor<4x6xf32>
  return
}

// -----

func.func @linear_pre_type(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{expects the preactivation to have the result's type 'tensor<4x6xf32>', got 'tensor<4x6xbf16>'}}
  %0:2 = graph.linear %x, %w, %b activation gelu : tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32> -> tensor<4x6xf32>, tensor<4x6xbf16>
  return
}

// -----

func.func @matmul_gelu_grad_pre(%dy: tensor<4x8xf32>, %w: tensor<8x6xf32>, %pre: tensor<4x5xf32>) {
  // expected-error @+1 {{expects the preactivation to have the result's type 'tensor<4x6xf32>', got 'tensor<4x5xf32>'}}
  %0 = graph.matmul_gelu_grad %dy, %w, %pre : tensor<4x8xf32>, tensor<8x6xf32>, tensor<4x5xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @matmul_gelu_grad_contraction(%dy: tensor<4x8xf32>, %w: tensor<6x6xf32>, %pre: tensor<4x6xf32>) {
  // expected-error @+1 {{contracting dimensions differ: grad 'tensor<4x8xf32>' has 8 columns, weight 'tensor<6x6xf32>' has 6 rows}}
  %0 = graph.matmul_gelu_grad %dy, %w, %pre : tensor<4x8xf32>, tensor<6x6xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @matmul_gelu_grad_bias_grad(%dy: tensor<2x4x8xf32>, %w: tensor<8x6xf32>, %pre: tensor<2x4x6xf32>) {
  // expected-error @+1 {{expects a bias gradient of shape [6] or with the summed dimensions kept, of 'f32', got 'tensor<2x1x6xf32>'}}
  %0:2 = graph.matmul_gelu_grad %dy, %w, %pre : tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>, tensor<2x1x6xf32>
  return
}

// -----

func.func @gemm_element_types(%a: tensor<4x8xf32>, %b: tensor<8x6xbf16>) {
  // expected-error @+1 {{expects one element type, got 'tensor<4x8xf32>' and 'tensor<8x6xbf16>'}}
  %0 = graph.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xbf16> -> tensor<4x6xf32>
  return
}

// -----

func.func @gemm_transposed_lhs_rank(%a: tensor<2x8x4xf32>, %b: tensor<8x6xf32>) {
  // expected-error @+1 {{expects rank-2 operands with transpose_lhs, got 'tensor<2x8x4xf32>' and 'tensor<8x6xf32>'}}
  %0 = graph.gemm %a, %b transpose_lhs : tensor<2x8x4xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @gemm_contraction(%a: tensor<8x4xf32>, %b: tensor<8x6xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs 'tensor<8x4xf32>' (transposed) has 8 columns, rhs 'tensor<8x6xf32>' (transposed) has 6 rows}}
  %0 = graph.gemm %a, %b transpose_lhs transpose_rhs : tensor<8x4xf32>, tensor<8x6xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @gemm_contraction_rows(%a: tensor<4x8xf32>, %b: tensor<6x8xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs 'tensor<4x8xf32>' has 8 columns, weight 'tensor<6x8xf32>' has 6 rows}}
  %0 = graph.gemm %a, %b : tensor<4x8xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @gemm_result(%a: tensor<8x4xf32>, %b: tensor<8x6xf32>) {
  // expected-error @+1 {{expects a result of shape [4, 6], got 'tensor<6x4xf32>'}}
  %0 = graph.gemm %a, %b transpose_lhs : tensor<8x4xf32>, tensor<8x6xf32> -> tensor<6x4xf32>
  return
}

// -----

func.func @gemm_result_type(%a: tensor<8x4xbf16>, %b: tensor<8x6xbf16>) {
  // expected-error @+1 {{expects a result of the operands' element type or f32, got 'tensor<4x6xf16>'}}
  %0 = graph.gemm %a, %b transpose_lhs : tensor<8x4xbf16>, tensor<8x6xbf16> -> tensor<4x6xf16>
  return
}

// -----

func.func @gemm_bias_grad_untransposed(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>) {
  // expected-error @+1 {{has a bias gradient but no transpose_lhs: it sums the rows of the [k, m] lhs}}
  %0:2 = graph.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>, tensor<4xf32>
  return
}

// -----

func.func @gemm_bias_grad_shape(%a: tensor<8x4xbf16>, %b: tensor<8x6xbf16>) {
  // expected-error @+1 {{expects a bias gradient of shape [4] or with the summed dimensions kept, of 'bf16' or 'f32', got 'tensor<2x4xf32>'}}
  %0:2 = graph.gemm %a, %b transpose_lhs : tensor<8x4xbf16>, tensor<8x6xbf16> -> tensor<4x6xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @gemm_bias_grad_type(%a: tensor<8x4xbf16>, %b: tensor<8x6xbf16>) {
  // expected-error @+1 {{expects a bias gradient of shape [4] or with the summed dimensions kept, of 'bf16', got 'tensor<4xf16>'}}
  %0:2 = graph.gemm %a, %b transpose_lhs : tensor<8x4xbf16>, tensor<8x6xbf16> -> tensor<4x6xbf16>, tensor<4xf16>
  return
}

// -----

graph.param @w : tensor<4xf32>
func.func @sgd_new_buffer(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{returns a new momentum buffer exactly when it takes one}}
  %0:2 = graph.sgd %p, %g, %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_buffer_type(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<i64>, %b: tensor<2xf32>) {
  // expected-error @+1 {{momentum_buffer has type 'tensor<2xf32>', expected the parameter's 'tensor<4xf32>'}}
  %0:2 = graph.sgd %p, %g, %s momentum_buffer %b {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>)
  return
}

// -----

// expected-error @+1 {{sharding of parameter @w names @nope, which is not a dist.mesh}}
graph.param @w : tensor<8x4xf32> sharding <@nope, [{"tp"}, {}]>

// -----

dist.mesh @m ["tp" = 2]
// expected-error @+1 {{sharding of parameter @w uses axis "x" that mesh @m does not have}}
graph.param @w : tensor<8x4xf32> sharding <@m, [{"x"}, {}]>

// -----

dist.mesh @m ["tp" = 2]
// expected-error @+1 {{sharding uses mesh axis "tp" more than once}}
graph.param @w : tensor<8x4xf32> sharding <@m, [{"tp"}, {"tp"}]>

// -----

dist.mesh @m ["tp" = 4]
// expected-error @+1 {{cannot shard dimension 1 of parameter @w (size 6) over mesh axis "tp" (4): the size is not divisible by 4}}
graph.param @w : tensor<8x6xf32> sharding <@m, [{}, {"tp"}]>

// -----

dist.mesh @m ["tp" = 4]
// expected-error @+1 {{sharding of parameter @w must not be partial}}
graph.param @w : tensor<8x6xf32> sharding <@m, [{}, {}], partial sum {"tp"}>

// -----

dist.mesh @m ["tp" = 4]
// expected-error @+1 {{sharding of parameter @w lists 1 dimension but 'tensor<8x6xf32>' has rank 2}}
graph.param @w : tensor<8x6xf32> sharding <@m, [{"tp"}]>

// -----

dist.mesh @m ["tp" = 4]
graph.param @w : tensor<8x6xf32> sharding <@m, [{"tp"}, {}]>
func.func @read_wrong_local(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{result type 'tensor<4x6xf32>' is neither the global type 'tensor<8x6xf32>' nor the local type 'tensor<2x6xf32>' of parameter @w}}
  %0 = graph.read_param @w : tensor<4x6xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
graph.param @w : tensor<8x6xf32> sharding <@m, [{"tp"}, {}]>
func.func @assign_wrong_local(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{parameter @w has type 'tensor<8x6xf32>', which the assigned 'tensor<4x6xf32>' is not (globally or locally)}}
  graph.assign @w, %x : tensor<4x6xf32>
  return
}

// -----

func.func @phase_not_a_phase(%x: tensor<4xf32>) {
  // expected-error @+1 {{'graph.phase' must be a #graph<phase ...>, got "forward"}}
  %0 = graph.neg %x {graph.phase = "forward"} : tensor<4xf32>
  return
}

// -----

func.func @negative_layer(%x: tensor<4xf32>) {
  // expected-error @+1 {{'graph.layer' must be a non-negative i64, got -1 : i64}}
  %0 = graph.neg %x {graph.layer = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @microbatch_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'graph.microbatch' must be a non-negative i64, got 1 : i32}}
  %0 = graph.neg %x {graph.microbatch = 1 : i32} : tensor<4xf32>
  return
}

// -----

func.func @unknown_graph_attribute(%x: tensor<4xf32>) {
  // expected-error @+1 {{unknown graph attribute 'graph.stage'}}
  %0 = graph.neg %x {graph.stage = 1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_max(%l: tensor<4x8xf32>, %y: tensor<4xi64>) {
  // expected-error @+1 {{reduction must be mean or sum, got max}}
  %0 = graph.cross_entropy %l, %y reduction max : tensor<4x8xf32>, tensor<4xi64>
  return
}

// -----

func.func @cross_entropy_grad_min(%l: tensor<4x8xf32>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{reduction must be mean or sum, got min}}
  %0 = graph.cross_entropy_grad %l, %y, %g reduction min : tensor<4x8xf32>, tensor<4xi64>, tensor<f32>
  return
}

// -----

func.func @attention_block_positions(%q: tensor<1x2x4x4xf32>, %p: tensor<4xi64>, %p3: tensor<3xi64>) {
  // expected-error @+1 {{key positions must be tensor<4xi64>, got 'tensor<3xi64>'}}
  %o, %l = graph.attention_block %q, %q, %q positions %p, %p3 scale 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<4xi64>, tensor<3xi64>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_block_heads(%q: tensor<1x2x4x4xf32>, %k: tensor<1x3x4x4xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{are not the operands of one attention}}
  %o, %l = graph.attention_block %q, %k, %k positions %p, %p scale 0.5 : (tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<4xi64>, tensor<4xi64>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_block_lse(%q: tensor<1x2x4x4xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{results must be 'tensor<1x2x4x4xf32>' and 'tensor<1x2x4xf32>', got 'tensor<1x2x4x4xf32>' and 'tensor<1x2x4xf16>'}}
  %o, %l = graph.attention_block %q, %q, %q positions %p, %p scale 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<4xi64>, tensor<4xi64>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf16>)
  return
}

// -----

func.func @attention_block_merge(%q: tensor<1x2x4x4xf32>, %p: tensor<4xi64>, %l: tensor<1x2x4xf32>, %o8: tensor<1x2x8x4xf32>) {
  // expected-error @+1 {{merges into 'tensor<1x2x8x4xf32>' and 'tensor<1x2x4xf32>', which are not the types of its results}}
  %o, %m = graph.attention_block %q, %q, %q positions %p, %p merge %o8, %l scale 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<4xi64>, tensor<4xi64>, tensor<1x2x8x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_block_scale(%q: tensor<1x2x4x4xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{scale must be positive, got 0}}
  %o, %l = graph.attention_block %q, %q, %q positions %p, %p scale 0.0 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<4xi64>, tensor<4xi64>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_block_grad_lse(%q: tensor<1x2x4x4xf32>, %p: tensor<4xi64>, %l: tensor<1x2xf32>) {
  // expected-error @+1 {{expects the forward's output and its gradient of 'tensor<1x2x4x4xf32>' and its log-sum-exp of 'tensor<1x2x4xf32>'}}
  %dq, %dk, %dv = graph.attention_block_grad %q, %q, %q, %q, %l, %q positions %p, %p scale 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2xf32>, tensor<1x2x4x4xf32>, tensor<4xi64>, tensor<4xi64>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

func.func @hyperparameter_unknown() {
  // expected-error @+1 {{names no hyperparameter: 'learning_rate' (known: lr, weight_decay, weight_decay_1d, beta1, beta2, eps, momentum, dampening, grad_clip, loss_scale_growth_interval)}}
  %0 = graph.hyperparameter "learning_rate" default 1.0 : tensor<f32>
  return
}
