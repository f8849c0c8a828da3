//===- Estimate.h - memory, communication and time of a layout --*- C++ -*-===//
//
// The planner's cost model, built from the published formulas:
//  - model states: ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory
//    Optimizations Toward Training Trillion Parameter Models");
//  - activations: Korthikanti et al. 2022, "Reducing Activation
//    Recomputation in Large Transformer Models" (tensor and sequence
//    parallelism, selective and full recomputation, in-flight microbatches
//    of 1F1B and interleaved pipelines);
//  - FLOPs, pipeline bubble: Narayanan et al. 2021, "Efficient Large-Scale
//    Language Model Training on GPU Clusters Using Megatron-LM".
// Sizes are bytes per GPU; times are seconds per optimizer step.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_ESTIMATE_H
#define CLEAVE_PLANNER_ESTIMATE_H

#include "cleave/Planner/Cluster.h"
#include "cleave/Planner/Layout.h"
#include "cleave/Planner/Model.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace cleave::planner {

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Model-state bytes on one GPU.
struct ModelStates {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double offloaded = 0; ///< optimizer state moved to host memory
  double total() const { return params + grads + optimizer; }
};

/// ZeRO's model states of `numParams` parameters on one GPU, with stage
/// `zero` sharding over `shards` data-parallel ranks: stage 1 (P_os) shards
/// the optimizer state, stage 2 (P_os+g) also the gradients, stage 3
/// (P_os+g+p) also the parameters. With `offload` the optimizer state is in
/// host memory.
ModelStates modelStates(double numParams, const StateBytes &bytes, int zero,
                        int64_t shards, bool offload);

/// The activations one GPU keeps for one transformer layer and microbatch.
struct ActivationShape {
  int64_t microBatch = 1;
  int64_t seq = 0;    ///< query tokens on this GPU (sequence / cp)
  int64_t keySeq = 0; ///< tokens each query attends to (the sequence)
  int64_t tp = 1;
  bool sequenceParallel = true;
  bool fusedAttention = false; ///< TrainingConfig::fusedAttention
  Recompute recompute = Recompute::None;
  int64_t elementBytes = 2; ///< dropout masks always take one byte
};

/// Korthikanti et al. 2022, section 4 and table 2, generalized to any element
/// size e, grouped-query attention (g = kv heads / heads), FFN size F, gated
/// MLPs, models without dropout (d = 0) and experts. Per layer:
///   attention  e(3 + 2g) sbh + d sbh + (e + d + d e) a s^2 b
///   MLP        e sbh + 2 e sbF (3 e sbF gated) + d sbh
///   norms      2 e sbh
/// For GPT (e = 2, g = 1, F = 4h, d = 1) this is the paper's
/// `sbh (34 + 5 a s / h)`. With tensor parallelism t the norm and dropout
/// activations and the inputs of the two TP regions are replicated
/// (`sbh (10 + 24 / t + 5 a s / h t)`) unless sequence parallelism splits
/// them too (`sbh (34 / t + 5 a s / h t)`). Selective recomputation drops the
/// `a s^2 b` terms; full recomputation keeps only the layer input (`2 sbh`,
/// split by t under sequence parallelism). Fused attention keeps no scores
/// either, but the fp32 log-sum-exp of each query row (4 a s b / t).
double activationBytesPerLayer(const ModelSpec &model,
                               const ActivationShape &shape);

/// Layers per stage, as even as possible, earlier stages taking the
/// remainder (what a layer count says before any cost is known).
std::vector<int64_t> splitLayers(int64_t layers, int64_t stages);

/// The first layer of each of `chunks` runs of consecutive layers, balanced
/// by forward FLOPs as -dist-pipeline-parallel balances them (the same
/// pipeline::balance): 2 x parameters + 4 s h per token and layer, the
/// embedding on the first run and the LM head and the loss (2 V h + 4 V)
/// on the last; ties to the earlier cut.
std::vector<int64_t> balanceLayers(const ModelSpec &model, int64_t chunks);

/// A layout's pipeline as the compiler builds it: the chunks (chunk c of p
/// v on stage c mod p; the layout's split, or balanceLayers()), and the
/// schedule unrolled and run with equal stages (pipeline::unroll and
/// pipeline::simulate, backward twice the forward).
struct PipelineShape {
  std::vector<int64_t> chunkStarts; ///< p v first layers
  std::vector<int64_t> chunkLayers; ///< p v layer counts
  std::vector<int64_t> stageLayers; ///< p layer counts
  /// Microbatches whose activations each stage holds at most, in units of
  /// a full stage (microbatch-chunks / v). GPipe: m. 1F1B: min(m, p - s).
  /// Interleaved: Megatron's warm-up ((p - s - 1) 2 + (v - 1) p + 1) / v,
  /// that is p + (p - 1) / v on the first stage (Korthikanti et al.'s
  /// `1 + (p - 1) / p v` factor over L layers).
  std::vector<double> inFlight;
  double bubble = 0; ///< idle time over all stages' time
};
PipelineShape pipelineShape(const ModelSpec &model, const Layout &layout);

/// pipelineShape()'s in-flight microbatches of one stage, for an even split.
double inFlightMicrobatches(Schedule schedule, int64_t pp, int64_t stage,
                            int64_t microbatches, int64_t virtualStages);

/// The bubble as a fraction of the step with equal stages, as the compiler
/// reports it: (p - 1) / (m + p - 1), and (p - 1) / (v m + p - 1)
/// interleaved. (Narayanan et al. 2021 give the same idle time relative to
/// the busy time instead: (p - 1) / m and (p - 1) / (v m).)
double bubbleFraction(Schedule schedule, int64_t pp, int64_t microbatches,
                      int64_t virtualStages);

struct MemoryEstimate {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  /// Communication buffers of sharded states: under ZeRO-2 and 3 the
  /// reduce-scatter of the largest layer's whole gradient (it exists
  /// unsharded until it is reduced), under ZeRO-3 also the largest layer's
  /// gathered 16-bit parameters twice (the layer in use and the next one
  /// prefetched), as DeepSpeed's estimate_zero3_model_states_mem_needs
  /// counts them (4 bytes per parameter of the largest layer).
  double buffers = 0;
  double offloaded = 0; ///< in host memory, not counted in total()
  int64_t stage = 0;    ///< the pipeline stage these bytes belong to
  double total() const {
    return params + grads + optimizer + activations + buffers;
  }
};

/// MemoryEstimate::buffers for a stage whose largest layer (a transformer
/// layer, the embedding or the LM head) has `layerParams` parameters per
/// GPU, with `zero` sharding over `shards` ranks.
double zeroBufferBytes(double layerParams, const StateBytes &bytes, int zero,
                       int64_t shards);

//===----------------------------------------------------------------------===//
// Compute time
//===----------------------------------------------------------------------===//

/// The seconds of a batch of `batch` GEMMs (M x K) x (K x N) on one GPU, by
/// the roofline (Williams et al. 2009) with wave quantization: its FLOPs
/// at `computeEfficiency` of the peak, divided by the fraction of SMs busy
/// over its waves of 256 x 128 output tiles (one tile per SM a wave; NVIDIA
/// Deep Learning Performance Guide, "Matrix Multiplication Background",
/// sections "Tile Quantization" and "Wave Quantization"), or the bytes of
/// its operands and result at `memEfficiency` of the memory bandwidth,
/// whichever is longer. Small per-GPU slices lose to the last wave; GEMMs
/// with a short inner dimension (the attention's Q K^T over a head of 64
/// to 160) to the memory.
double gemmSeconds(const ClusterSpec &cluster, Precision precision, double m,
                   double n, double k, double batch = 1);

/// The seconds of a memory-bound kernel moving `bytes` (0 when the memory
/// bandwidth is unknown).
double memorySeconds(const ClusterSpec &cluster, double bytes);

/// The forward of one transformer layer and microbatch on one GPU, kernel
/// by kernel. The weight GEMMs (QKV, output projection, MLP or experts,
/// router) and the attention core's two batched GEMMs by gemmSeconds();
/// the memory-bound kernels by the bytes they read and write at
/// `memEfficiency` of the memory bandwidth, per token and element size e:
///   norms and residual adds  (10 e + 2 d) h (two norms reading and
///                            writing h, two residual adds reading two and
///                            writing one, dropout masks of d bytes);
///                            replicated by tp unless sequence parallel
///   rotary embedding         2 e (1 + g) h / t (without learned positions)
///   activation function      2 e F / t (3 e F gated; k times with experts)
///   softmax and dropout      (2 e + (2 e + d)) a s_k / t over the scores
///                            (Megatron's fused softmax reads and writes
///                            them, dropout also writes its mask)
/// The backward computes two GEMMs per forward GEMM and its memory-bound
/// kernels read the saved input and the output gradient and write the input
/// gradient: twice the forward, in time. A fused attention core
/// (FlashAttention) runs its two GEMMs' FLOPs at the GEMM rate on the
/// blocks a causal mask leaves (half of them), reading Q, K and V and
/// writing the output; its backward recomputes the scores, five GEMMs to
/// the forward's two (Dao 2023, FlashAttention-2, section 3.1.2): 2.5 times
/// the forward.
struct LayerSeconds {
  double gemm = 0;      ///< weight GEMMs
  double attention = 0; ///< the core: Q K^T, softmax, dropout, A V
  double memory = 0;    ///< norms, residual adds, rotary, activation
  double attentionBackwardRatio = 2; ///< 2.5 for a fused core
  double forward() const { return gemm + attention + memory; }
  double backward() const {
    return 2 * (gemm + memory) + attentionBackwardRatio * attention;
  }
};
LayerSeconds layerForwardSeconds(const ModelSpec &model,
                                 const ActivationShape &shape,
                                 const ClusterSpec &cluster,
                                 Precision precision);

//===----------------------------------------------------------------------===//
// Communication and time
//===----------------------------------------------------------------------===//

/// Bytes one GPU sends per step over each link class.
struct LinkBytes {
  double intra = 0;
  double inter = 0;
  double total() const { return intra + inter; }
  LinkBytes &operator+=(const LinkBytes &o) {
    intra += o.intra;
    inter += o.inter;
    return *this;
  }
};

struct CommEstimate {
  LinkBytes tp; ///< activation all-reduces (all-gather/reduce-scatter with SP)
  LinkBytes cp; ///< ring attention K/V blocks
  LinkBytes ep; ///< all-to-all token dispatch and combine
  LinkBytes pp; ///< activations and their gradients between stages
  LinkBytes dp; ///< gradient reduction and ZeRO parameter gathers
  LinkBytes total() const;
};

/// Where the time of one step goes, on the slowest pipeline stage. Every
/// term is exposed time: the sum is the step time. Overlapped communication
/// counts what exceeds the compute it hides behind, plus the cluster's
/// overlapCost of the rest.
struct TimeBreakdown {
  double compute = 0;   ///< forward and backward of all microbatches
  double recompute = 0; ///< the extra forward of recomputation
  double tp = 0;        ///< tensor-parallel collectives (not overlapped)
  double cp = 0;        ///< ring attention beyond what attention hides
  double ep = 0;        ///< all-to-alls (not overlapped)
  double pp = 0;        ///< stage-to-stage transfers
  double bubble = 0;    ///< pipeline fill and drain: the other stages'
                        ///< microbatch times over v
  double dp = 0;        ///< gradient sync beyond the backward it overlaps
  double offload = 0;   ///< host transfers of gradients and parameters
  double step() const {
    return compute + recompute + tp + cp + ep + pp + bubble + dp + offload;
  }
};

struct Estimate {
  Layout layout;
  int64_t microBatch = 0; ///< sequences per microbatch
  PipelineShape pipeline;
  std::vector<MemoryEstimate> stageMemory; ///< of every stage
  MemoryEstimate memory; ///< of the stage that needs the most
  CommEstimate comm;     ///< of the slowest stage
  TimeBreakdown time;
  double bubble = 0; ///< pipeline.bubble: idle over all stages' time
  double stepTime = 0;
  double tokensPerSecond = 0;
  double modelFlopsPerStep = 0; ///< without recomputation
  double tflopsPerGpu = 0;      ///< model TFLOP/s per GPU
  /// With the recomputed forward (full: the layers'; selective: their
  /// attention core), as Megatron-LM's tables count throughput.
  double hardwareFlopsPerStep = 0;
  double hardwareTflopsPerGpu = 0;
  double mfu = 0;               ///< tflopsPerGpu over the peak
  /// Tensor-parallel time if its groups were inside one node (to report the
  /// cost of crossing nodes).
  double tpTimeIntraNode = 0;
  bool fits = false;      ///< memory.total() within the usable GPU memory
  double usableBytes = 0; ///< the cluster's usable memory per GPU
  /// Host memory the offloaded optimizer state takes on one node: the
  /// node's GPUs' shares (those of the stage offloading the most).
  double hostBytesPerNode = 0;
  /// How far the stage that needs the most is over the usable memory (0
  /// when it fits).
  double overBytes() const {
    return std::max(0.0, memory.total() - usableBytes);
  }
  /// The stages whose memory is over the usable memory.
  std::vector<int64_t> stagesOver() const;
};

/// Model FLOPs per token for forward and backward (3x forward), without
/// recomputation: 6 x (matmul parameters used per token, LM head included)
/// + 12 L s h for attention scores, as Narayanan et al. 2021 count them
/// (`72 B s L h^2 (1 + s / 6h + V / 12 L h)` per step for GPT).
double modelFlopsPerToken(const ModelSpec &model);

/// Estimates a layout that passed validateLayout() (it does not re-check).
Estimate estimate(const ModelSpec &model, const TrainingConfig &training,
                  const ClusterSpec &cluster, const Layout &layout);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_ESTIMATE_H
