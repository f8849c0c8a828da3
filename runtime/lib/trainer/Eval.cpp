//===- Eval.cpp - the validation loss of a training run -------------------===//
//
// The checks of the evaluation program against the training program, and
// the evaluator (Eval.h).
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

using namespace cleave::rt::trainer;

namespace {

bool sameSharding(const cleave_sharding *a, const cleave_sharding *b) {
  if (!a || !b)
    return a == b;
  return std::memcmp(a, b, sizeof(cleave_sharding)) == 0;
}

/// Checks that `e` (of the evaluation program) is laid out as `t` (of the
/// training program) on this device.
void checkSameLayout(const char *kind, const cleave_named_tensor &e,
                     const cleave_named_tensor &t) {
  if (e.tensor.dtype != t.tensor.dtype ||
      shapeOf(e.tensor) != shapeOf(t.tensor) ||
      !sameSharding(e.sharding, t.sharding))
    fail(std::string("program metadata: the evaluation program's ") + kind +
         " '" + e.name + "' is " + describe(e.tensor) +
         (e.sharding ? " (sharded)" : "") + " but the training program's is " +
         describe(t.tensor) + (t.sharding ? " (sharded)" : ""));
}

void checkEvalProgram(const cleave_program_info &e) {
  const cleave_program_info &p = program();
  if (e.abi_version != CLEAVE_RT_ABI_VERSION || e.kind != CLEAVE_PROGRAM_EVAL ||
      e.num_stages != 0 || e.eval)
    fail("program metadata: the evaluation program is not an eval program "
         "of this ABI");
  if (e.arena_bytes < 0 || e.num_model_params != e.num_params)
    fail("program metadata: the evaluation program has a negative arena or "
         "optimizer state");
  checkTensors("parameter", e.params, e.num_params, e.arena_bytes);
  checkTensors("input", e.inputs, e.num_inputs, e.arena_bytes);
  checkTensors("output", e.outputs, e.num_outputs, e.arena_bytes);
  bool sameMesh = e.mesh_rank == p.mesh_rank;
  for (int32_t a = 0; sameMesh && a < p.mesh_rank; ++a)
    sameMesh = e.mesh_shape[a] == p.mesh_shape[a] &&
               std::strcmp(e.mesh_axis_names[a], p.mesh_axis_names[a]) == 0;
  if (!sameMesh)
    fail("program metadata: the evaluation program has another mesh than "
         "the training program");
  if (e.num_groups < 0 || (e.num_groups > 0 && !e.groups))
    fail("program metadata: the evaluation program has a bad communicator "
         "group list");
  for (int64_t g = 0; g < e.num_groups; ++g)
    if (!namesDistinctAxes(e.groups[g], p.mesh_rank))
      fail("program metadata: the evaluation program's communicator group " +
           std::to_string(g) + " does not name distinct axes of the mesh");
  if (e.num_inputs != p.num_inputs)
    fail("program metadata: the evaluation program has " +
         std::to_string(e.num_inputs) + " inputs, the training program " +
         std::to_string(p.num_inputs));
  for (int64_t i = 0; i < e.num_inputs; ++i) {
    if (std::strcmp(e.inputs[i].name, p.inputs[i].name) != 0)
      fail(std::string("program metadata: the evaluation program's input ") +
           std::to_string(i) + " is '" + e.inputs[i].name +
           "', the training program's '" + p.inputs[i].name + "'");
    checkSameLayout("input", e.inputs[i], p.inputs[i]);
  }
  if (e.num_outputs < 1 || e.outputs[0].tensor.dtype != CLEAVE_F32 ||
      numElements(e.outputs[0].tensor) != 1)
    fail("program metadata: output 0 of the evaluation program must be the "
         "f32 scalar loss");
}

} // namespace

const cleave_program_info &cleave::rt::trainer::evalProgram() {
  const cleave_program_info &top = cleave_program;
  if (!top.eval || !top.eval_run)
    fail("this training program has no evaluation program, which --eval-* "
         "runs: it was compiled with " +
         std::string(top.num_stages > 0
                         ? "pipeline parallelism (--mesh pp=N), whose "
                           "evaluation is still to come"
                         : "cleave-compile --no-eval") +
         "; evaluate a checkpoint with a binary compiled without it");
  static const bool checked = [&] {
    checkEvalProgram(*top.eval);
    return true;
  }();
  (void)checked;
  return *top.eval;
}

Evaluator::Evaluator(std::unique_ptr<Dataset> evalData, int64_t batches)
    : program(evalProgram()), data(std::move(evalData)),
      numBatches(batches > 0 ? batches
                             : std::max<int64_t>(1, data->numSamples() /
                                                        programBatchSize())),
      arena(program.arena_bytes),
      schedule(data->numSamples(), programBatchSize(), /*shuffle=*/false, 0),
      staging(program), context(program) {
  const cleave_program_info &p = cleave::rt::trainer::program();
  std::map<std::string, const cleave_named_tensor *> byName;
  for (int64_t i = 0; i < p.num_model_params; ++i)
    byName[p.params[i].name] = &p.params[i];
  for (int64_t i = 0; i < program.num_params; ++i) {
    const cleave_named_tensor &e = program.params[i];
    auto it = byName.find(e.name);
    if (it == byName.end())
      fail(std::string("program metadata: the evaluation program's "
                       "parameter '") +
           e.name + "' is not a model parameter of the training program");
    checkSameLayout("parameter", e, *it->second);
    params.emplace_back(&e, it->second);
  }
}

double Evaluator::evaluate(const Arena &train) {
  std::vector<char> host; // one parameter at a time
  for (auto [e, t] : params) {
    host.resize(size_t(tensorBytes(t->tensor)));
    train.read(t->tensor, host.data());
    arena.write(e->tensor, host.data());
  }
  const cleave_tensor &loss = program.outputs[0].tensor;
  double sum = 0;
  for (int64_t batch = 1; batch <= numBatches; ++batch) {
    staging.fill(*data, schedule, batch, arena);
    cleave_program.eval_run(arena.base(), context.get());
    float value = 0;
    arena.read(loss, &value);
    sum += double(value);
  }
  return sum / double(numBatches);
}
