//===- Layout.h - how training is split over the GPUs -----------*- C++ -*-===//
//
// The training configuration (batch, precision, optimizer, offload) and a
// layout: the degrees of tensor, pipeline, data, context and expert
// parallelism, the pipeline schedule and microbatch count, the ZeRO stage
// and the activation recomputation.
//
// Ranks are numbered with tp innermost, then cp, then ep (when it is a
// separate axis), then dp, then pp outermost, as Megatron-LM does, so tensor
// parallel groups are the GPUs of one node when tp <= GPUs per node. When
// experts are folded into data parallelism (the default, as Megatron-Core and
// DeepSpeed-MoE do), the ep group is the innermost ep ranks of the dp axis.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_LAYOUT_H
#define CLEAVE_PLANNER_LAYOUT_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::planner {

enum class Precision { FP32, BF16, FP16 };
enum class Optimizer { Adam, SGD };
enum class Schedule { GPipe, OneFOneB, Interleaved };
enum class Recompute { None, Selective, Full };

const char *precisionName(Precision p);
const char *optimizerName(Optimizer o);
const char *scheduleName(Schedule s);
const char *recomputeName(Recompute r);
std::optional<Precision> parsePrecision(std::string_view name);
std::optional<Optimizer> parseOptimizer(std::string_view name);
std::optional<Schedule> parseSchedule(std::string_view name);
std::optional<Recompute> parseRecompute(std::string_view name);

struct TrainingConfig {
  int64_t globalBatch = 0; ///< sequences per optimizer step
  Precision precision = Precision::BF16;
  /// Keep an fp32 copy of 16-bit weights in the optimizer (mixed precision
  /// training); meaningless with fp32 weights.
  bool masterWeights = true;
  /// Keep the weight gradients of 16-bit weights in fp32, as cleave-compile
  /// emits them (each weight-gradient GEMM stores its f32 accumulators);
  /// off: 16-bit gradients, as in the ZeRO paper. Meaningless with fp32
  /// weights.
  bool f32Grads = true;
  Optimizer optimizer = Optimizer::Adam;
  /// Optimizer state (and its update) lives in host memory (ZeRO-Offload).
  bool offload = false;
  /// Megatron sequence parallelism with TP: the activations between the TP
  /// regions (norms, dropout) are split over the sequence too.
  bool sequenceParallel = true;
  /// The attention core as one fused kernel (FlashAttention, Dao et al.
  /// 2022): the scores are neither stored for the backward nor written to
  /// memory, and the backward recomputes them. Off: Megatron-LM's kernels
  /// (Korthikanti et al.'s accounting).
  bool fusedAttention = false;
};

/// Bytes per parameter of each model state.
struct StateBytes {
  double param = 0;
  double grad = 0;
  double optimizer = 0;
  double total() const { return param + grad + optimizer; }
};

/// Bytes of model state per parameter. Mixed-precision Adam as Cleave
/// compiles it: 2 bytes of fp16/bf16 weights, 4 of fp32 gradients and K = 12
/// of optimizer state (fp32 master weights, momentum, variance): 18 bytes,
/// the "16-bit param, fp32 grads" row of Megatron-LM's distributed-optimizer
/// table. With 16-bit gradients (`f32Grads` off) it is ZeRO's accounting
/// (Rajbhandari et al. 2020, section 3.1): 2 + 2 + 12 = 16 bytes. Without
/// fp32 master weights K = 8. fp32 training: 4 + 4 + 8. SGD (no momentum)
/// keeps only the master weights, if any.
StateBytes stateBytes(const TrainingConfig &training);

/// Bytes of one activation element (16-bit or fp32).
int64_t activationBytes(Precision precision);

struct Layout {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t dp = 1;
  int64_t cp = 1;
  int64_t ep = 1;
  int64_t microbatches = 1;  ///< per step, per data-parallel replica
  int64_t virtualStages = 1; ///< model chunks per GPU (interleaved only)
  Schedule schedule = Schedule::OneFOneB;
  int zero = 0; ///< 0: none, 1: optimizer state, 2: + gradients, 3: + params
  Recompute recompute = Recompute::None;
  /// Expert-parallel ranks are data-parallel ranks of the dense layers;
  /// otherwise ep is a mesh axis of its own and counts in the GPU product.
  bool foldEp = true;
  /// The first layer of each of the pp x v chunks after the first, as
  /// -dist-pipeline-parallel's `split` takes them (Llama 3 gave its first
  /// and last stages one layer fewer); empty: balanced by FLOPs.
  std::vector<int64_t> split;

  int64_t gpus() const { return tp * pp * dp * cp * (foldEp ? 1 : ep); }
  /// Replicas of the dense layers that each see different data.
  int64_t denseDp() const { return foldEp ? dp : dp * ep; }
  /// Virtual stages per GPU that the schedule really uses.
  int64_t chunks() const {
    return schedule == Schedule::Interleaved ? virtualStages : 1;
  }
  /// `tp=8 pp=4 dp=2 cp=1 ep=1 microbatches=16 1f1b zero=1 selective`
  std::string str() const;
};

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_LAYOUT_H
