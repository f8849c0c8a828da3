//===- FakeProgram.cpp - a hand-written stand-in for a compiled program ---===//
//
// Defines what a compiled object defines (cleave_program and
// cleave_program_run) for a tiny program, linked with cleave_rt_main into
// the CleaveRuntimeFakeProgram executable that ProgramTest runs:
//   sum        = a + b * w + v      a [2, 3], b [3] inputs (f32)
//   model/idx:0 = iota along dim 1   [2, 3] i64
// w comes from init_data and v from "fake_weights.bin" at byte offset 8.
// Built a second time with CLEAVE_FAKE_ABI_VERSION=1 (a program compiled
// for an older runtime) for the ABI check.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_rt.h"

#ifndef CLEAVE_FAKE_ABI_VERSION
#define CLEAVE_FAKE_ABI_VERSION CLEAVE_RT_ABI_VERSION
#endif

namespace {

constexpr cleave_tensor tensor(int64_t offset, int32_t dtype, int32_t rank,
                               int64_t d0, int64_t d1 = 0) {
  return cleave_tensor{offset, dtype, rank, {d0, d1}};
}

const cleave_tensor kA = tensor(0, CLEAVE_F32, 2, 2, 3);
const cleave_tensor kB = tensor(64, CLEAVE_F32, 1, 3);
const cleave_tensor kW = tensor(128, CLEAVE_F32, 1, 3);
const cleave_tensor kV = tensor(192, CLEAVE_F32, 1, 3);
const cleave_tensor kTmp = tensor(256, CLEAVE_F32, 1, 3);
const cleave_tensor kSum = tensor(320, CLEAVE_F32, 2, 2, 3);
const cleave_tensor kIdx = tensor(384, CLEAVE_I64, 2, 2, 3);

const float kWInit[3] = {0.5f, -1.0f, 2.0f};

const cleave_named_tensor kParams[] = {
    {"w", kW, kWInit, nullptr, 0, CLEAVE_PARAM_MODEL},
    {"v", kV, nullptr, "fake_weights.bin", 8, CLEAVE_PARAM_MODEL},
};
const cleave_named_tensor kInputs[] = {
    {"a", kA, nullptr, nullptr, 0},
    {"b", kB, nullptr, nullptr, 0},
};
const cleave_named_tensor kOutputs[] = {
    {"sum", kSum, nullptr, nullptr, 0},
    {"model/idx:0", kIdx, nullptr, nullptr, 0},
};

} // namespace

extern "C" {

const cleave_program_info cleave_program = {
    CLEAVE_FAKE_ABI_VERSION,
    CLEAVE_PROGRAM_INFERENCE,
    /*arena_bytes=*/448,
    /*num_params=*/2,
    /*num_model_params=*/2,
    kParams,
    /*num_inputs=*/2,
    kInputs,
    /*num_outputs=*/2,
    kOutputs,
    /*source_model=*/nullptr,
    /*training_config=*/nullptr,
};

void cleave_program_run(char *arena, const cleave_program_context *) {
  cleave_rt_binary(arena, CLEAVE_MUL, &kB, &kW, &kTmp);
  cleave_rt_binary(arena, CLEAVE_ADD, &kA, &kTmp, &kSum);
  cleave_rt_binary(arena, CLEAVE_ADD, &kSum, &kV, &kSum);
  cleave_rt_iota(arena, &kIdx, 1);
}

} // extern "C"
