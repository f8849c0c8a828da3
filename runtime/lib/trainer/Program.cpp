//===- Program.cpp - the linked program as the main sees it ---------------===//
//
// Metadata checks, the arena and the parameters' initial values, shared by
// the inference and the training main.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "Mesh.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <fcntl.h>
#include <unistd.h>

using namespace cleave::rt::trainer;
namespace fs = std::filesystem;

size_t cleave::rt::trainer::dtypeSize(int32_t dtype) {
  return size_t(cleave_dtype_size(dtype));
}

std::string cleave::rt::trainer::dtypeName(int32_t dtype) {
  if (const char *name = cleave_dtype_name(dtype))
    return name;
  return "dtype " + std::to_string(dtype);
}

std::vector<int64_t> cleave::rt::trainer::shapeOf(const cleave_tensor &t) {
  return std::vector<int64_t>(t.shape, t.shape + t.rank);
}

int64_t cleave::rt::trainer::numElements(const cleave_tensor &t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d)
    n *= t.shape[d];
  return n;
}

int64_t cleave::rt::trainer::tensorBytes(const cleave_tensor &t) {
  return numElements(t) * int64_t(dtypeSize(t.dtype));
}

std::string
cleave::rt::trainer::shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string cleave::rt::trainer::describe(const cleave_tensor &t) {
  return dtypeName(t.dtype) + " " + shapeString(shapeOf(t));
}

void cleave::rt::trainer::checkTensors(const char *kind,
                                       const cleave_named_tensor *list,
                                       int64_t count, int64_t arenaBytes) {
  if (count < 0 || (count > 0 && !list))
    fail(std::string("program metadata: bad ") + kind + " list");
  for (int64_t i = 0; i < count; ++i) {
    const cleave_named_tensor &nt = list[i];
    const cleave_tensor &t = nt.tensor;
    if (!nt.name)
      fail(std::string(kind) + " " + std::to_string(i) + " has no name");
    std::string what = std::string(kind) + " '" + nt.name + "'";
    if (!cleave_dtype_name(t.dtype) || t.rank < 0 ||
        t.rank > CLEAVE_RT_MAX_RANK)
      fail("program metadata: " + what + " has dtype " +
           std::to_string(t.dtype) + " and rank " + std::to_string(t.rank));
    int64_t elements = 1;
    for (int d = 0; d < t.rank; ++d) {
      if (t.shape[d] < 0)
        fail("program metadata: " + what + " has a negative size");
      if (t.shape[d] != 0 && elements > (int64_t(1) << 56) / t.shape[d])
        fail("program metadata: " + what + " is too large");
      elements *= t.shape[d];
    }
    if (t.offset < 0 || t.offset + tensorBytes(t) > arenaBytes)
      fail("program metadata: " + what + " at offset " +
           std::to_string(t.offset) + " (" + std::to_string(tensorBytes(t)) +
           " bytes) lies outside the arena of " + std::to_string(arenaBytes) +
           " bytes");
  }
}

namespace {

/// Checks the parameters' roles (after checkTensors).
void checkRoles(const cleave_program_info &p) {
  const cleave_named_tensor *unique[CLEAVE_NUM_PARAM_ROLES] = {};
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &param = p.params[i];
    std::string what = "parameter '" + std::string(param.name) + "'";
    const char *role = cleave_param_role_name(param.role);
    if (!role)
      fail("program metadata: " + what + " has unknown role " +
           std::to_string(param.role));
    bool model = param.role == CLEAVE_PARAM_MODEL;
    if (model != (i < p.num_model_params))
      fail("program metadata: " + what + " has role " + role + " but is " +
           (model ? "after" : "among") + " the " +
           std::to_string(p.num_model_params) + " model parameters");
    if (model || param.role == CLEAVE_PARAM_OPTIMIZER_STATE)
      continue;
    if (const cleave_named_tensor *other = unique[param.role])
      fail("program metadata: parameters '" + std::string(other->name) +
           "' and '" + param.name + "' both have role " + role);
    unique[param.role] = &param;
    // The trainer reads these as scalars of one type.
    int32_t dtype =
        param.role == CLEAVE_PARAM_LOSS_SCALE ? CLEAVE_F32 : CLEAVE_I64;
    if (param.tensor.dtype != dtype || param.tensor.rank != 0)
      fail("program metadata: " + what + " of role " + role + " is " +
           describe(param.tensor) + ", not an " + dtypeName(dtype) +
           " scalar");
  }
  // The trainer tells a skipped step by its step counter.
  if (p.kind == CLEAVE_PROGRAM_TRAINING && !unique[CLEAVE_PARAM_STEP_COUNTER])
    fail("program metadata: the training program has no parameter of role "
         "step_counter");
}

struct FileCloser {
  void operator()(FILE *f) const { std::fclose(f); }
};

} // namespace

namespace {
const cleave_program_info *selected = nullptr;
} // namespace

int64_t cleave::rt::trainer::numStages() {
  return cleave_program.abi_version == CLEAVE_RT_ABI_VERSION &&
                 cleave_program.num_stages > 0 && cleave_program.stages
             ? cleave_program.num_stages
             : 0;
}

const cleave_program_info &cleave::rt::trainer::stageProgram(int64_t s) {
  return *cleave_program.stages[s];
}

void cleave::rt::trainer::selectStage(int64_t s) {
  selected = &stageProgram(s);
}

const cleave_program_info &cleave::rt::trainer::program() {
  if (!selected)
    selected = numStages() > 0 ? &stageProgram(0) : &cleave_program;
  return *selected;
}

namespace {

/// The whole program's parameters, each name once, and the first stage
/// holding each: built once, the metadata being constant.
struct WholeParams {
  std::vector<const cleave_named_tensor *> params; // the model's first
  int64_t numModel = 0;
  std::map<std::string, int64_t> firstStage;
};

const WholeParams &wholeParams() {
  static const WholeParams whole = [] {
    WholeParams w;
    std::vector<const cleave_named_tensor *> state;
    int64_t stages = std::max<int64_t>(numStages(), 1);
    for (int64_t s = 0; s < stages; ++s) {
      const cleave_program_info &p =
          numStages() > 0 ? stageProgram(s) : program();
      for (int64_t i = 0; i < p.num_params; ++i)
        if (w.firstStage.emplace(p.params[i].name, s).second)
          (i < p.num_model_params ? w.params : state).push_back(&p.params[i]);
    }
    w.numModel = int64_t(w.params.size());
    w.params.insert(w.params.end(), state.begin(), state.end());
    return w;
  }();
  return whole;
}

} // namespace

const std::vector<const cleave_named_tensor *> &
cleave::rt::trainer::wholeProgramParams(int64_t *numModel) {
  if (numModel)
    *numModel = wholeParams().numModel;
  return wholeParams().params;
}

int64_t cleave::rt::trainer::firstStageOf(const char *name) {
  auto it = wholeParams().firstStage.find(name);
  return it != wholeParams().firstStage.end() ? it->second : 0;
}

namespace {

/// The stages of a pipelined program: well formed, one mesh and one group
/// list for all.
void checkStages() {
  const cleave_program_info &top = cleave_program;
  if (top.num_stages == 0)
    return;
  if (top.num_stages < 0 || !top.stages || !top.stage_runs)
    fail("program metadata: bad pipeline stage list");
  for (int64_t s = 0; s < top.num_stages; ++s) {
    const cleave_program_info *p = top.stages[s];
    if (!p || p->abi_version != CLEAVE_RT_ABI_VERSION || p->num_stages != 0 ||
        p->kind != top.kind)
      fail("program metadata: pipeline stage " + std::to_string(s) +
           " is not a program of this ABI and kind");
  }
  const cleave_program_info &first = *top.stages[0];
  if (top.stage_axis < 0 || top.stage_axis >= first.mesh_rank ||
      first.mesh_shape[top.stage_axis] != top.num_stages)
    fail("program metadata: " + std::to_string(top.num_stages) +
         " pipeline stages do not match the mesh's stage axis " +
         std::to_string(top.stage_axis));
  for (int64_t s = 1; s < top.num_stages; ++s) {
    const cleave_program_info &p = *top.stages[s];
    bool same = p.mesh_rank == first.mesh_rank &&
                p.num_groups == first.num_groups;
    for (int32_t a = 0; same && a < p.mesh_rank; ++a)
      same = p.mesh_shape[a] == first.mesh_shape[a] &&
             std::strcmp(p.mesh_axis_names[a], first.mesh_axis_names[a]) == 0;
    for (int64_t g = 0; same && g < p.num_groups; ++g)
      same = std::memcmp(&p.groups[g], &first.groups[g],
                         sizeof(cleave_group)) == 0;
    if (!same)
      fail("program metadata: pipeline stage " + std::to_string(s) +
           " has another mesh or other communicator groups than stage 0");
  }
}

void checkOneProgram();

} // namespace

void cleave::rt::trainer::checkProgram() {
  const cleave_program_info &top = cleave_program;
  if (top.abi_version != CLEAVE_RT_ABI_VERSION)
    fail("the program was compiled for runtime ABI version " +
         std::to_string(top.abi_version) + " but this runtime implements " +
         std::to_string(CLEAVE_RT_ABI_VERSION) +
         ": compile it again with the cleave-compile of this runtime");
  checkStages();
  if (numStages() == 0)
    return checkOneProgram();
  for (int64_t s = 0; s < numStages(); ++s) {
    selectStage(s);
    checkOneProgram();
  }
  selectStage(0);
}

namespace {
void checkOneProgram() {
  const cleave_program_info &p = program();
  if (p.kind == CLEAVE_PROGRAM_EVAL)
    fail("the program is an evaluation program (a training step's forward "
         "pass and loss), which runs inside its training program's binary, "
         "not on its own");
  if (p.kind != CLEAVE_PROGRAM_INFERENCE && p.kind != CLEAVE_PROGRAM_TRAINING)
    fail("program metadata: unknown program kind " + std::to_string(p.kind));
  if (p.arena_bytes < 0)
    fail("program metadata: negative arena size");
  if (p.num_model_params < 0 || p.num_model_params > p.num_params)
    fail("program metadata: " + std::to_string(p.num_model_params) +
         " model parameters out of " + std::to_string(p.num_params));
  checkTensors("parameter", p.params, p.num_params, p.arena_bytes);
  checkTensors("input", p.inputs, p.num_inputs, p.arena_bytes);
  checkTensors("output", p.outputs, p.num_outputs, p.arena_bytes);
  checkRoles(p);
  checkMeshMetadata();
}
} // namespace

const cleave_named_tensor *
cleave::rt::trainer::findParam(cleave_param_role role) {
  const cleave_program_info &p = program();
  for (int64_t i = 0; i < p.num_params; ++i)
    if (p.params[i].role == role)
      return &p.params[i];
  return nullptr;
}

Arena::Arena(int64_t bytes) {
  cleave_rt_backend_init();
  // The backend reports its own failure through cleave_rt_fail.
  arena = cleave_rt_arena_alloc(bytes);
  if (!arena)
    fail("cannot allocate the arena of " + std::to_string(bytes) + " bytes");
}

Arena::~Arena() { cleave_rt_arena_free(arena); }

std::string
cleave::rt::trainer::resolveBesideExecutable(const std::string &file) {
  fs::path path(file);
  std::error_code ec;
  if (path.is_absolute() || fs::exists(path, ec))
    return file;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path beside = exe.parent_path() / path;
    if (fs::exists(beside, ec))
      return beside.string();
  }
  return file;
}

void cleave::rt::trainer::initParams(Arena &arena) {
  const cleave_program_info &p = program();
  std::vector<char> host;  // one file-backed value at a time, reused
  std::vector<char> block; // this device's block of a sharded one
  const std::vector<int64_t> &coords = device().coords;
  // The value is global: a sharded parameter takes this device's block.
  auto store = [&](const cleave_named_tensor &param, const char *global) {
    if (!param.sharding) {
      arena.write(param.tensor, global);
      return;
    }
    block.resize(size_t(tensorBytes(param.tensor)));
    copyBlock(param, coords, global, block.data());
    arena.write(param.tensor, block.data());
  };
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &param = p.params[i];
    cleave_tensor global = globalTensor(param);
    size_t bytes = size_t(tensorBytes(global));
    if (param.init_data) {
      store(param, static_cast<const char *>(param.init_data));
      continue;
    }
    if (!param.init_file)
      continue; // stays zero
    std::string file = resolveBesideExecutable(param.init_file);
    std::unique_ptr<FILE, FileCloser> f(std::fopen(file.c_str(), "rb"));
    if (!f)
      fail(file + ": cannot open the initial value of parameter '" +
           param.name + "': " + std::strerror(errno));
    if (param.init_offset < 0 ||
        std::fseek(f.get(), long(param.init_offset), SEEK_SET) != 0)
      fail(file + ": cannot seek to offset " +
           std::to_string(param.init_offset) + " for parameter '" + param.name +
           "'");
    host.resize(bytes);
    size_t got = bytes ? std::fread(host.data(), 1, bytes, f.get()) : 0;
    if (got != bytes)
      fail(file + ": parameter '" + param.name + "' needs " +
           std::to_string(bytes) + " bytes at offset " +
           std::to_string(param.init_offset) + ", the file has " +
           std::to_string(got));
    store(param, host.data());
  }
}

void cleave::rt::trainer::writeFileAtomically(
    const std::string &path, const std::string &what,
    const std::function<bool(FILE *)> &write) {
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    fail("cannot write the " + what + " " + tmp + ": " + std::strerror(errno));
  errno = 0;
  bool ok = write(f) && !std::ferror(f) && std::fflush(f) == 0 &&
            ::fsync(::fileno(f)) == 0;
  int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail("cannot write the " + what + " " + tmp + ": " +
         std::strerror(err ? err : EIO));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    fail("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  // The rename is durable once the directory entry is.
  std::string dir = fs::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void cleave::rt::trainer::checkWritable(const std::string &flag,
                                        const std::string &path) {
  fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty())
    fs::create_directories(parent, ec);
  bool existed = fs::exists(path, ec);
  bool writable = !ec && std::ofstream(path, std::ios::app).good();
  if (!existed)
    fs::remove(path, ec);
  if (!writable)
    fail(flag + ": cannot write " + path);
}

int64_t cleave::rt::trainer::parseCount(const std::string &flag,
                                        const std::string &text, int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min)
    fail(flag + " expects an integer >= " + std::to_string(min) + ", got '" +
         text + "'");
  return v;
}
