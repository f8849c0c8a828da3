graph.param @fc1.weight : tensor<16x32xf32> = #graph.external<"weights.bin", offset = 0, size = 2048>
graph.param @fc1.bias : tensor<32xf32> = #graph.external<"weights.bin", offset = 2048, size = 128>
graph.param @fc2.weight : tensor<32x4xf32> = #graph.external<"weights.bin", offset = 2176, size = 512>
graph.param @fc2.bias : tensor<4xf32> = #graph.external<"weights.bin", offset = 2688, size = 16>
func.func @forward(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w1 = graph.read_param @fc1.weight : tensor<16x32xf32>
  %b1 = graph.read_param @fc1.bias : tensor<32xf32>
  %w2 = graph.read_param @fc2.weight : tensor<32x4xf32>
  %b2 = graph.read_param @fc2.bias : tensor<4xf32>
  %h0 = graph.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>
  %h1 = graph.add %h0, %b1 : tensor<8x32xf32>, tensor<32xf32>
  %h = graph.relu %h1 : tensor<8x32xf32>
  %y0 = graph.matmul %h, %w2 : tensor<8x32xf32>, tensor<32x4xf32>
  %logits = graph.add %y0, %b2 : tensor<8x4xf32>, tensor<4xf32>
  return %logits : tensor<8x4xf32>
}
