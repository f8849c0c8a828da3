// A two-layer perceptron: 16 input features, 32 hidden units, 4 classes, on
// a batch of 8. `@forward` gives the logits and `@loss` the mean
// cross-entropy against class labels; the batch is split over the two
// devices of the "dp" axis (data parallelism).
//
//   cleave-opt examples/mlp/mlp.mlir --cleave-print-sharding-rules

dist.mesh @mesh ["dp" = 2]

// Small deterministic initial values, exact in binary floating point so that
// they print back unchanged; splats keep the file readable.
graph.param @fc1.weight : tensor<16x32xf32> = dense<0.0625> : tensor<16x32xf32>
graph.param @fc1.bias : tensor<32xf32> = dense<0.125> : tensor<32xf32>
graph.param @fc2.weight : tensor<32x4xf32> = dense<-0.03125> : tensor<32x4xf32>
graph.param @fc2.bias : tensor<4xf32> = dense<[0.0, 0.25, -0.25, 0.5]> : tensor<4xf32>

// logits = relu(x @ fc1.weight + fc1.bias) @ fc2.weight + fc2.bias
func.func @forward(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
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

// The same forward computation followed by the mean cross-entropy; labels
// are class indices in [0, 4).
func.func @loss(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                %labels: tensor<8xi64> {dist.sharding = #dist.sharding<@mesh, [{"dp"}]>}) -> tensor<f32> {
  %w1 = graph.read_param @fc1.weight : tensor<16x32xf32>
  %b1 = graph.read_param @fc1.bias : tensor<32xf32>
  %w2 = graph.read_param @fc2.weight : tensor<32x4xf32>
  %b2 = graph.read_param @fc2.bias : tensor<4xf32>
  %h0 = graph.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>
  %h1 = graph.add %h0, %b1 : tensor<8x32xf32>, tensor<32xf32>
  %h = graph.relu %h1 : tensor<8x32xf32>
  %y0 = graph.matmul %h, %w2 : tensor<8x32xf32>, tensor<32x4xf32>
  %logits = graph.add %y0, %b2 : tensor<8x4xf32>, tensor<4xf32>
  %l = graph.cross_entropy %logits, %labels : tensor<8x4xf32>, tensor<8xi64>
  return %l : tensor<f32>
}
