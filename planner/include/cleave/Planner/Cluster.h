//===- Cluster.h - the machines a plan runs on ------------------*- C++ -*-===//
//
// A homogeneous GPU cluster: how many GPUs, how many per node, their memory
// and peak throughput, and the bandwidth of the two link classes (inside a
// node: NVLink; between nodes: the network), with presets for common
// systems. All sizes are decimal: GB = 1e9 bytes, GB/s = 1e9 bytes/s.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_CLUSTER_H
#define CLEAVE_PLANNER_CLUSTER_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::planner {

struct ClusterSpec {
  std::string name;
  int64_t gpus = 0;
  int64_t gpusPerNode = 8;
  double memGB = 0;   ///< memory per GPU
  double tflops = 0;  ///< dense 16-bit (bf16/fp16) tensor peak per GPU;
                      ///< fp32 training is assumed to run on TF32 at half
  double intraBW = 0; ///< per GPU, per direction, inside a node
  double interBW = 0; ///< per GPU, per direction, between nodes
  double pcieBW = 32; ///< per GPU, host <-> device (optimizer offload)
  double hbmBW = 0;   ///< GPU memory bandwidth (memory-bound kernels)
  /// Streaming multiprocessors per GPU: a GEMM runs in waves of one tile
  /// per SM (wave quantization); 0 leaves GEMMs unquantized.
  int64_t sms = 0;

  /// The fraction of peak that large matmuls sustain: a GEMM's time is
  /// its FLOPs / (peak x this), over the fraction of its last wave's SMs
  /// that have a tile, or its bytes over the memory bandwidth if longer.
  double computeEfficiency = 0.7;
  /// The fraction of `hbmBW` that memory-bound kernels (norms, softmax,
  /// dropout, activation functions) reach.
  double memEfficiency = 0.8;
  /// The fraction of link bandwidth that collectives reach (NCCL bus
  /// bandwidth over link peak).
  double commEfficiency = 0.8;
  /// The fraction of communication time hidden behind compute that still
  /// delays it: NCCL kernels occupy SMs and memory bandwidth while they run.
  double overlapCost = 0.1;
  /// The fraction of `memGB` kept free for the CUDA context, communication
  /// buffers, allocator fragmentation and workspace the estimate leaves out.
  double memHeadroom = 0.1;

  int64_t nodes() const {
    return gpusPerNode ? (gpus + gpusPerNode - 1) / gpusPerNode : 0;
  }
  double usableBytes() const { return memGB * 1e9 * (1.0 - memHeadroom); }
};

/// The missing or invalid figures of `cluster`, as messages naming the flag.
std::vector<std::string> checkCluster(const ClusterSpec &cluster);

struct ClusterPreset {
  const char *name;
  const char *description;
  ClusterSpec spec; ///< gpus left 0: the count is always a flag
};

const std::vector<ClusterPreset> &clusterPresets();
const ClusterPreset *findClusterPreset(std::string_view name);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_CLUSTER_H
