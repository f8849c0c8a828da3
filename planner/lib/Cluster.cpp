//===- Cluster.cpp - cluster figures and presets ------------------------===//
//
// The published figures of common GPU systems. Bandwidths are per GPU and
// per direction (NVIDIA quotes NVLink bidirectional: halved here); network
// bandwidth is one NIC per GPU, as in the DGX/HGX reference designs.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Cluster.h"

#include <cmath>

namespace cleave::planner {

std::vector<std::string> checkCluster(const ClusterSpec &c) {
  std::vector<std::string> errors;
  auto need = [&](bool ok, const char *what, const char *flag) {
    if (!ok)
      errors.push_back(std::string("the ") + what + " is unknown: give " +
                       flag + " or --cluster");
  };
  if (c.gpus <= 0)
    errors.push_back("the number of GPUs is unknown: give --gpus");
  need(c.gpusPerNode > 0, "number of GPUs per node", "--gpus-per-node");
  // Written so that NaN fails every check (every comparison with it is
  // false) and infinity fails the finite ones.
  auto finite = [&](double x, const char *flag) {
    if (std::isinf(x) || std::isnan(x))
      errors.push_back(std::string(flag) + " must be a finite number");
  };
  finite(c.memGB, "--gpu-mem");
  finite(c.tflops, "--gpu-tflops");
  finite(c.intraBW, "--intra-bw");
  finite(c.interBW, "--inter-bw");
  finite(c.pcieBW, "--pcie-bw");
  finite(c.hbmBW, "--hbm-bw");
  need(c.memGB > 0, "GPU memory", "--gpu-mem");
  need(c.tflops > 0, "GPU peak TFLOP/s", "--gpu-tflops");
  need(c.intraBW > 0, "intra-node bandwidth", "--intra-bw");
  need(c.interBW > 0, "inter-node bandwidth", "--inter-bw");
  need(c.hbmBW > 0, "GPU memory bandwidth", "--hbm-bw");
  if (c.sms < 0)
    errors.push_back("--gpu-sms must be >= 0");
  if (!(c.computeEfficiency > 0 && c.computeEfficiency <= 1))
    errors.push_back("--compute-efficiency must be in (0, 1]");
  if (!(c.memEfficiency > 0 && c.memEfficiency <= 1))
    errors.push_back("--mem-efficiency must be in (0, 1]");
  if (!(c.commEfficiency > 0 && c.commEfficiency <= 1))
    errors.push_back("--comm-efficiency must be in (0, 1]");
  if (!(c.memHeadroom >= 0 && c.memHeadroom < 1))
    errors.push_back("--mem-headroom must be in [0, 1)");
  return errors;
}

namespace {

ClusterSpec makeCluster(const char *name, double memGB, double tflops,
                        double hbmBW, int64_t sms, double intraBW,
                        double interBW, double pcieBW) {
  ClusterSpec c;
  c.name = name;
  c.gpusPerNode = 8;
  c.memGB = memGB;
  c.tflops = tflops;
  c.hbmBW = hbmBW;
  c.sms = sms;
  c.intraBW = intraBW;
  c.interBW = interBW;
  c.pcieBW = pcieBW;
  return c;
}

} // namespace

const std::vector<ClusterPreset> &clusterPresets() {
  static const std::vector<ClusterPreset> presets = {
      // NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): 312 TFLOP/s dense
      // BF16/FP16, 80 GB HBM2e at 2039 GB/s, NVLink 3 at 600 GB/s
      // bidirectional, PCIe Gen4 (32 GB/s); 108 SMs (NVIDIA A100 Tensor
      // Core GPU Architecture whitepaper). DGX A100: 8 GPUs per node, 8
      // ConnectX-6 200 Gb/s HDR InfiniBand NICs for compute traffic (25 GB/s
      // per GPU).
      {"a100-80g", "NVIDIA A100 SXM4 80GB, DGX A100 nodes",
       makeCluster("a100-80g", 80, 312, 2039, 108, 300, 25, 32)},
      // NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989 TFLOP/s dense BF16
      // (1979 with sparsity), 80 GB HBM3 at 3.35 TB/s, NVLink 4 at 900 GB/s
      // bidirectional, PCIe Gen5 (64 GB/s); 132 SMs (NVIDIA H100 Tensor
      // Core GPU Architecture whitepaper). DGX H100: 8 GPUs, 8 ConnectX-7
      // 400 Gb/s NDR NICs (50 GB/s per GPU).
      {"h100", "NVIDIA H100 SXM5 80GB, DGX H100 nodes",
       makeCluster("h100", 80, 989, 3350, 132, 450, 50, 64)},
      // H800 SXM5: the H100 compute and memory with NVLink cut to 400 GB/s
      // bidirectional (NVIDIA H800 product brief); 400 Gb/s InfiniBand per
      // GPU. DeepSeek-V3 technical report (2024), section 3.2.2, measures
      // 160 GB/s NVLink and 50 GB/s InfiniBand per GPU on such nodes.
      {"h800", "NVIDIA H800 SXM5 80GB, 8 per node, 400 Gb/s IB per GPU",
       makeCluster("h800", 80, 989, 3350, 132, 200, 50, 64)},
      // NVIDIA H200 Tensor Core GPU datasheet (SXM): 989 TFLOP/s dense BF16,
      // 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s bidirectional, PCIe Gen5;
      // the H100's 132 SMs. DGX H200: 8 GPUs, 8 ConnectX-7 400 Gb/s NICs.
      {"h200", "NVIDIA H200 SXM 141GB, DGX H200 nodes",
       makeCluster("h200", 141, 989, 4800, 132, 450, 50, 64)},
  };
  return presets;
}

const ClusterPreset *findClusterPreset(std::string_view name) {
  for (const ClusterPreset &p : clusterPresets())
    if (name == p.name)
      return &p;
  return nullptr;
}

} // namespace cleave::planner
