// Plain data parallelism of mlp.mlir on 4 devices: the global batch of 8
// is split on "dp" (2 samples per device), every parameter and its AdamW
// state is replicated. Each gradient is a sum over this device's samples
// (the loss is a sum divided by the global count, 8), partial over "dp",
// and is all_reduced before the update, so every device applies the same
// AdamW step to its full copy. The loss's sum is all_reduced too.
dist.mesh @mesh ["dp" = 4]
graph.param @fc1.weight : tensor<16x32xf32> = #graph.external<"weights.bin", offset = 0, size = 2048>
graph.param @fc1.bias : tensor<32xf32> = #graph.external<"weights.bin", offset = 2048, size = 128>
graph.param @fc2.weight : tensor<32x4xf32> = #graph.external<"weights.bin", offset = 2176, size = 512>
graph.param @fc2.bias : tensor<4xf32> = #graph.external<"weights.bin", offset = 2688, size = 16>
graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
graph.param @fc1.weight.m frozen : tensor<16x32xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @fc1.weight.v frozen : tensor<16x32xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @fc1.bias.m frozen : tensor<32xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @fc1.bias.v frozen : tensor<32xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @fc2.weight.m frozen : tensor<32x4xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @fc2.weight.v frozen : tensor<32x4xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @fc2.bias.m frozen : tensor<4xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @fc2.bias.v frozen : tensor<4xf32> {cleave.role = #cleave.role<optimizer_state>}
func.func @train_step(%arg0: tensor<2x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<2xi64> {onnx.name = "labels", dist.sharding = #dist.sharding<@mesh, [{"dp"}]>}) -> (tensor<f32> {onnx.name = "loss"}) attributes {dist.partitioned, cleave.training_config = {accumulate = 1 : i64, beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, grad_clip = 0.000000e+00 : f64, loss = "cross-entropy", lr = 1.000000e-02 : f64, optimizer = "adamw", weight_decay = 1.000000e-02 : f64}} {
  %0 = graph.constant dense<1> : tensor<i64>
  %1 = graph.constant dense<0.000000e+00> : tensor<f32>
  %2 = graph.constant dense<1.000000e+00> : tensor<f32>
  %3 = graph.constant dense<8.000000e+00> : tensor<f32>
  %4 = graph.read_param @fc1.weight : tensor<16x32xf32>
  %5 = graph.read_param @fc1.bias : tensor<32xf32>
  %6 = graph.read_param @fc2.weight : tensor<32x4xf32>
  %7 = graph.read_param @fc2.bias : tensor<4xf32>
  %8 = graph.matmul %arg0, %4 : tensor<2x16xf32>, tensor<16x32xf32>
  %9 = graph.add %8, %5 : tensor<2x32xf32>, tensor<32xf32>
  %10 = graph.relu %9 : tensor<2x32xf32>
  %11 = graph.matmul %10, %6 : tensor<2x32xf32>, tensor<32x4xf32>
  %12 = graph.add %11, %7 : tensor<2x4xf32>, tensor<4xf32>
  %13 = graph.cross_entropy %12, %arg1 reduction sum : tensor<2x4xf32>, tensor<2xi64>
  %g13 = dist.all_reduce %13 on @mesh ["dp"] sum : tensor<f32>
  %14 = graph.div %g13, %3 : tensor<f32>, tensor<f32>
  %15 = graph.div %2, %3 : tensor<f32>, tensor<f32>
  %16 = graph.cross_entropy_grad %12, %arg1, %15 reduction sum : tensor<2x4xf32>, tensor<2xi64>, tensor<f32>
  %17 = graph.reduce sum %16 dims [0] keepdim : tensor<2x4xf32>
  %18 = graph.reshape %17 : tensor<1x4xf32> -> tensor<4xf32>
  %g18 = dist.all_reduce %18 on @mesh ["dp"] sum : tensor<4xf32>
  %19 = graph.transpose %6 perm [1, 0] : tensor<32x4xf32>
  %20 = graph.matmul %16, %19 : tensor<2x4xf32>, tensor<4x32xf32>
  %21 = graph.transpose %10 perm [1, 0] : tensor<2x32xf32>
  %22 = graph.matmul %21, %16 : tensor<32x2xf32>, tensor<2x4xf32>
  %g22 = dist.all_reduce %22 on @mesh ["dp"] sum : tensor<32x4xf32>
  %23 = graph.compare gt %9, %1 : tensor<2x32xf32>, tensor<f32>
  %24 = graph.cast %23 : tensor<2x32xi1> -> tensor<2x32xf32>
  %25 = graph.mul %20, %24 : tensor<2x32xf32>, tensor<2x32xf32>
  %26 = graph.reduce sum %25 dims [0] keepdim : tensor<2x32xf32>
  %27 = graph.reshape %26 : tensor<1x32xf32> -> tensor<32xf32>
  %g27 = dist.all_reduce %27 on @mesh ["dp"] sum : tensor<32xf32>
  %28 = graph.transpose %arg0 perm [1, 0] : tensor<2x16xf32>
  %29 = graph.matmul %28, %25 : tensor<16x2xf32>, tensor<2x32xf32>
  %g29 = dist.all_reduce %29 on @mesh ["dp"] sum : tensor<16x32xf32>
  %30 = graph.read_param @optimizer.step : tensor<i64>
  %31 = graph.add %30, %0 : tensor<i64>, tensor<i64>
  graph.assign @optimizer.step, %31 : tensor<i64>
  %32 = graph.read_param @fc1.weight : tensor<16x32xf32>
  %33 = graph.read_param @fc1.weight.m : tensor<16x32xf32>
  %34 = graph.read_param @fc1.weight.v : tensor<16x32xf32>
  %new_param, %new_first_moment, %new_second_moment = graph.adamw %32, %g29, %33, %34, %31 {lr = 1.000000e-02 : f64} : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<i64>) -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>)
  graph.assign @fc1.weight, %new_param : tensor<16x32xf32>
  graph.assign @fc1.weight.m, %new_first_moment : tensor<16x32xf32>
  graph.assign @fc1.weight.v, %new_second_moment : tensor<16x32xf32>
  %35 = graph.read_param @fc1.bias : tensor<32xf32>
  %36 = graph.read_param @fc1.bias.m : tensor<32xf32>
  %37 = graph.read_param @fc1.bias.v : tensor<32xf32>
  %new_param_0, %new_first_moment_1, %new_second_moment_2 = graph.adamw %35, %g27, %36, %37, %31 {lr = 1.000000e-02 : f64} : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<i64>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  graph.assign @fc1.bias, %new_param_0 : tensor<32xf32>
  graph.assign @fc1.bias.m, %new_first_moment_1 : tensor<32xf32>
  graph.assign @fc1.bias.v, %new_second_moment_2 : tensor<32xf32>
  %38 = graph.read_param @fc2.weight : tensor<32x4xf32>
  %39 = graph.read_param @fc2.weight.m : tensor<32x4xf32>
  %40 = graph.read_param @fc2.weight.v : tensor<32x4xf32>
  %new_param_3, %new_first_moment_4, %new_second_moment_5 = graph.adamw %38, %g22, %39, %40, %31 {lr = 1.000000e-02 : f64} : (tensor<32x4xf32>, tensor<32x4xf32>, tensor<32x4xf32>, tensor<32x4xf32>, tensor<i64>) -> (tensor<32x4xf32>, tensor<32x4xf32>, tensor<32x4xf32>)
  graph.assign @fc2.weight, %new_param_3 : tensor<32x4xf32>
  graph.assign @fc2.weight.m, %new_first_moment_4 : tensor<32x4xf32>
  graph.assign @fc2.weight.v, %new_second_moment_5 : tensor<32x4xf32>
  %41 = graph.read_param @fc2.bias : tensor<4xf32>
  %42 = graph.read_param @fc2.bias.m : tensor<4xf32>
  %43 = graph.read_param @fc2.bias.v : tensor<4xf32>
  %new_param_6, %new_first_moment_7, %new_second_moment_8 = graph.adamw %41, %g18, %42, %43, %31 {lr = 1.000000e-02 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  graph.assign @fc2.bias, %new_param_6 : tensor<4xf32>
  graph.assign @fc2.bias.m, %new_first_moment_7 : tensor<4xf32>
  graph.assign @fc2.bias.v, %new_second_moment_8 : tensor<4xf32>
  return %14 : tensor<f32>
}
