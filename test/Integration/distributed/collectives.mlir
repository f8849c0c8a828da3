// Every collective kind a partitioned program lowers, in one inference
// program for mesh ["x" = 2] (check_collectives.py runs it under mpirun
// and checks each output against NumPy). The input is the global [8, 6]
// array split by rows; the outputs are whole on every rank (gathered
// where needed), so rank 0's files show every rank's part.
dist.mesh @mesh ["x" = 2]
func.func @forward(%x: tensor<4x6xf32> {onnx.name = "x", dist.sharding = #dist.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<8x6xf32> {onnx.name = "swapped"}, tensor<8x6xf32> {onnx.name = "exchanged"},
        tensor<4x6xf32> {onnx.name = "broadcast"}, tensor<4x6xf32> {onnx.name = "summed"},
        tensor<4x12xf32> {onnx.name = "gathered_cols"}, tensor<i64> {onnx.name = "index"},
        tensor<8x6xf32> {onnx.name = "mean"}, tensor<2x6xf32> {onnx.name = "block"})
    attributes {dist.partitioned} {
  // A ring of two: the halves change places.
  %p = dist.collective_permute %x on @mesh ["x"] pairs [[0, 1], [1, 0]] : tensor<4x6xf32>
  %swapped = dist.all_gather %p on @mesh ["x"] dim 0 : tensor<4x6xf32> -> tensor<8x6xf32>
  // Column halves exchanged and stacked by rows (normalized to dim 0).
  %a = dist.all_to_all %x on @mesh ["x"] split 1 concat 0 : tensor<4x6xf32> -> tensor<8x3xf32>
  %exchanged = dist.all_gather %a on @mesh ["x"] dim 1 : tensor<8x3xf32> -> tensor<8x6xf32>
  %b = dist.broadcast %x on @mesh ["x"] root 1 : tensor<4x6xf32>
  // The sum of both ranks' blocks, scattered by columns, gathered again.
  %r = dist.reduce_scatter %x on @mesh ["x"] sum dim 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %summed = dist.all_gather %r on @mesh ["x"] dim 1 : tensor<4x3xf32> -> tensor<4x6xf32>
  %cols = dist.all_gather %x on @mesh ["x"] dim 1 : tensor<4x6xf32> -> tensor<4x12xf32>
  // The rank's index, the largest over the group: 1.
  %i = dist.axis_index on @mesh ["x"] : tensor<i64>
  %imax = dist.all_reduce %i on @mesh ["x"] max : tensor<i64>
  %full = dist.all_gather %x on @mesh ["x"] dim 0 : tensor<4x6xf32> -> tensor<8x6xf32>
  %mean = dist.all_reduce %full on @mesh ["x"] mean : tensor<8x6xf32>
  // This rank's quarter of its own block, gathered: rows 0-1 of rank 0's
  // block and rows 2-3 of rank 1's.
  %q = dist.local_slice %x[%i] dim 0 : tensor<4x6xf32> -> tensor<2x6xf32>
  %block = dist.all_reduce %q on @mesh ["x"] sum : tensor<2x6xf32>
  return %swapped, %exchanged, %b, %summed, %cols, %imax, %mean, %block : tensor<8x6xf32>, tensor<8x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x12xf32>, tensor<i64>, tensor<8x6xf32>, tensor<2x6xf32>
}
