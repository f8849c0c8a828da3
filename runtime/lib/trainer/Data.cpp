//===- Data.cpp - training data and the batch schedule --------------------===//
//
// .npy datasets are read whole and converted once to the inputs' dtypes, so
// that a batch is one memcpy per sample and input into a host staging
// buffer; token files are mapped and converted per batch, since they may be
// far larger than memory. Each input then goes to the arena in one copy.
//
//===----------------------------------------------------------------------===//

#include "Data.h"

#include "Json.h"
#include "Mesh.h"
#include "Program.h"

#include "cleave/Runtime/Float16.h"
#include "cleave/Runtime/Npy.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace cleave::rt;
using namespace cleave::rt::trainer;

//===----------------------------------------------------------------------===//
// BatchSchedule
//===----------------------------------------------------------------------===//

BatchSchedule::BatchSchedule(int64_t numSamples, int64_t batchSize,
                             bool shuffle, uint64_t seed)
    : numSamples(numSamples), batchSize(batchSize), shuffle(shuffle),
      seed(seed) {}

std::vector<int64_t> BatchSchedule::permutation(int64_t numSamples,
                                                uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(numSamples));
  for (int64_t i = 0; i < numSamples; ++i)
    perm[size_t(i)] = i;
  // std::mt19937_64's output sequence is fixed by the standard (unlike
  // std::shuffle and the distributions), so the order is the same with
  // every standard library.
  std::mt19937_64 rng(seed + uint64_t(epoch));
  for (int64_t i = numSamples - 1; i > 0; --i) {
    uint64_t j = rng() % uint64_t(i + 1);
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  return perm;
}

int64_t BatchSchedule::sample(int64_t step, int64_t row) {
  int64_t position = (step - 1) * batchSize + row;
  int64_t epoch = position / numSamples, index = position % numSamples;
  if (!shuffle)
    return index;
  auto it = cache.find(epoch);
  if (it == cache.end()) {
    // Steps move forward through the epochs: older ones are not needed.
    while (!cache.empty() && cache.begin()->first < epoch - 1)
      cache.erase(cache.begin());
    it = cache.emplace(epoch, permutation(numSamples, seed, epoch)).first;
  }
  return it->second[size_t(index)];
}

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

Dataset::~Dataset() = default;

namespace {

/// The program's inputs as the data sees them: global (a partitioned
/// program's inputs are this device's blocks of the global batch, which
/// BatchStaging cuts out).
const cleave_named_tensor *globalInputs() {
  static const std::vector<cleave_named_tensor> inputs = [] {
    const cleave_program_info &p = program();
    std::vector<cleave_named_tensor> v(p.inputs, p.inputs + p.num_inputs);
    for (cleave_named_tensor &in : v) {
      in.tensor = globalTensor(in);
      in.sharding = nullptr;
    }
    return v;
  }();
  return inputs.data();
}

} // namespace

int64_t cleave::rt::trainer::programBatchDims() {
  const cleave_program_info &p = program();
  if (!p.training_config)
    return 1;
  JsonValue config;
  std::string error;
  if (!parseJson(p.training_config, config, error))
    fail("the program's training configuration is not JSON: " + error);
  int64_t k = 1;
  if (const JsonValue *accumulate = config.find("accumulate"))
    if (!accumulate->asInt64(k) || k < 1)
      fail("the program's training configuration has accumulate " +
           accumulate->text + ", expected a positive integer");
  return k > 1 ? 2 : 1;
}

int64_t cleave::rt::trainer::programBatchSize() {
  const cleave_program_info &p = program();
  const int64_t dims = programBatchDims();
  int64_t batch = -1;
  for (int64_t i = 0; i < p.num_inputs; ++i) {
    const cleave_named_tensor &in = globalInputs()[i];
    if (in.tensor.rank < dims)
      fail("input '" + std::string(in.name) + "' is " + describe(in.tensor) +
           ": a training input needs " +
           (dims == 1 ? "a batch dimension"
                      : "microbatch and batch dimensions [K, B, ...]"));
    int64_t samples = 1;
    for (int64_t d = 0; d < dims; ++d)
      samples *= in.tensor.shape[d];
    bool agree = true;
    for (int64_t d = 0; i > 0 && d < dims; ++d)
      agree &= in.tensor.shape[d] == globalInputs()[0].tensor.shape[d];
    if (!agree)
      fail("the program's inputs disagree on the batch size: '" +
           std::string(globalInputs()[0].name) + "' is " +
           describe(globalInputs()[0].tensor) + ", '" + in.name + "' is " +
           describe(in.tensor));
    batch = samples;
  }
  if (batch <= 0)
    fail("the program's batch size is " + std::to_string(batch));
  return batch;
}

BatchStaging::BatchStaging(const cleave_program_info &target)
    : target(target), batchSize(programBatchSize()) {
  const cleave_program_info &p = target;
  // Per set: each input's global batch, then the blocks of the sharded
  // inputs (what goes to the arena).
  std::vector<size_t> offsets, blockOffsets;
  size_t setBytes = 0;
  auto reserve = [&](int64_t bytes) {
    size_t at = setBytes;
    setBytes += (size_t(bytes) + 63) / 64 * 64;
    return at;
  };
  for (int64_t i = 0; i < p.num_inputs; ++i)
    offsets.push_back(reserve(tensorBytes(globalInputs()[i].tensor)));
  for (int64_t i = 0; i < p.num_inputs; ++i)
    blockOffsets.push_back(p.inputs[i].sharding
                               ? reserve(tensorBytes(p.inputs[i].tensor))
                               : offsets[size_t(i)]);
  buffer = std::make_unique<HostBuffer>(2 * setBytes);
  // Row r of the global batch (flattened over the batch dimensions) is
  // read when some input's block on this device holds it.
  const int64_t dims = programBatchDims();
  rowNeeded.assign(size_t(batchSize), false);
  for (int64_t i = 0; i < p.num_inputs; ++i) {
    const cleave_named_tensor &in = p.inputs[i];
    std::vector<int64_t> start = blockStart(in, device().coords);
    std::vector<int64_t> global = globalShape(in);
    for (int64_t row = 0; row < batchSize; ++row) {
      bool inside = true;
      for (int64_t d = dims - 1, r = row; d >= 0; --d) {
        int64_t at = r % global[size_t(d)];
        r /= global[size_t(d)];
        inside &= at >= start[size_t(d)] &&
                  at < start[size_t(d)] + in.tensor.shape[d];
      }
      if (inside)
        rowNeeded[size_t(row)] = true;
    }
  }
  for (int set = 0; set < 2; ++set) {
    char *base = buffer->get() + size_t(set) * setBytes;
    for (size_t i = 0; i < offsets.size(); ++i) {
      inputs[set].push_back(base + offsets[i]);
      blocks[set].push_back(base + blockOffsets[i]);
    }
  }
}

BatchStaging::~BatchStaging() = default;

void BatchStaging::fill(const Dataset &data, BatchSchedule &schedule,
                        int64_t step, Arena &arena) {
  const cleave_program_info &p = target;
  std::vector<char *> &set = inputs[step & 1];
  // The schedule is a function of the step alone, so every device knows
  // the global batch; it reads the samples its blocks hold (all of them
  // when an input is not split along its batch dimensions) and keeps its
  // block of each input.
  for (int64_t row = 0; row < batchSize; ++row)
    if (rowNeeded[size_t(row)])
      data.copySample(schedule.sample(step, row), row, set.data());
  std::vector<char *> &local = blocks[step & 1];
  for (int64_t i = 0; i < p.num_inputs; ++i) {
    const cleave_named_tensor &in = p.inputs[i];
    if (in.sharding)
      copyBlock(in, device().coords, set[size_t(i)], local[size_t(i)]);
    arena.writeAsync(in.tensor, local[size_t(i)]);
  }
}

//===----------------------------------------------------------------------===//
// .npy datasets
//===----------------------------------------------------------------------===//

namespace {

/// Converts the elements of `array` to `dtype` into `out`, or explains why
/// not in `why`.
bool convertArray(const NpyArray &array, int32_t dtype, std::vector<char> &out,
                  std::string &why) {
  const std::string &d = array.descr;
  char kind = d.size() >= 3 ? d[1] : '?';
  size_t width = d.size() >= 3 ? size_t(std::atoi(d.c_str() + 2)) : 0;
  if (d.size() >= 3 && d[0] != '<' && d[0] != '|' && d[0] != '=')
    kind = '?';
  size_t count = width ? array.data.size() / width : 0;
  const char *src = array.data.data();
  out.resize(count * dtypeSize(dtype));

  if (isFloatDtype(dtype)) {
    bool ok = kind == 'f' && (width == 2 || width == 4 || width == 8);
    if (!ok) {
      why = "expected dtype " + dtypeName(dtype) +
            " ('<f4'; '<f8' and '<f2' are converted), got '" + d + "'";
      return false;
    }
    if ((dtype == CLEAVE_F32 && width == 4) ||
        (dtype == CLEAVE_F16 && width == 2)) {
      std::memcpy(out.data(), src, array.data.size());
      return true;
    }
    for (size_t i = 0; i < count; ++i) {
      float v;
      if (width == 4) {
        std::memcpy(&v, src + 4 * i, 4);
      } else if (width == 8) {
        double w;
        std::memcpy(&w, src + 8 * i, 8);
        v = float(w);
      } else {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        v = halfToFloat(h);
      }
      if (dtype == CLEAVE_F32) {
        std::memcpy(out.data() + 4 * i, &v, 4);
      } else {
        uint16_t h = dtype == CLEAVE_F16 ? floatToHalf(v) : floatToBf16(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return true;
  }

  if (isIntegerDtype(dtype)) {
    if (kind != 'i' || (width != 4 && width != 8)) {
      why = "expected dtype " + dtypeName(dtype) + " ('" +
            (dtype == CLEAVE_I64 ? "<i8'; '<i4'" : "<i4'; '<i8'") +
            " is converted), got '" + d + "'";
      return false;
    }
    for (size_t i = 0; i < count; ++i) {
      int64_t v;
      if (width == 8) {
        std::memcpy(&v, src + 8 * i, 8);
      } else {
        int32_t w;
        std::memcpy(&w, src + 4 * i, 4);
        v = w;
      }
      if (dtype == CLEAVE_I64) {
        std::memcpy(out.data() + 8 * i, &v, 8);
        continue;
      }
      if (v < std::numeric_limits<int32_t>::min() ||
          v > std::numeric_limits<int32_t>::max()) {
        why = "value " + std::to_string(v) + " at element " +
              std::to_string(i) + " does not fit the input's i32";
        return false;
      }
      int32_t w = int32_t(v);
      std::memcpy(out.data() + 4 * i, &w, 4);
    }
    return true;
  }

  // i1
  if (kind != 'b' || width != 1) {
    why = "expected dtype i1 ('|b1'), got '" + d + "'";
    return false;
  }
  std::memcpy(out.data(), src, array.data.size());
  return true;
}

class NpyDataset : public Dataset {
public:
  explicit NpyDataset(const std::vector<std::string> &files) : files(files) {
    const cleave_program_info &p = program();
    if (int64_t(files.size()) != p.num_inputs)
      fail("internal: " + std::to_string(files.size()) + " files for " +
           std::to_string(p.num_inputs) + " inputs");
    std::string first;
    // The sample dimensions follow the batch dimensions of every input.
    const size_t dims = size_t(programBatchDims());
    const int64_t batch = programBatchSize();
    for (int64_t i = 0; i < p.num_inputs; ++i) {
      const cleave_named_tensor &in = globalInputs()[i];
      const std::string &file = files[size_t(i)];
      std::string prefix = "input '" + std::string(in.name) + "': " + file;
      NpyArray array;
      std::string error;
      if (!readNpy(file, array, error))
        fail("input '" + std::string(in.name) + "': " + error);
      // [N, d1, ...] for an input [B, d1, ...] (or [K, B, d1, ...]).
      std::vector<int64_t> want = shapeOf(in.tensor);
      bool ok = array.shape.size() + dims - 1 == want.size();
      for (size_t d = dims; ok && d < want.size(); ++d)
        ok = array.shape[d - dims + 1] == want[d];
      if (!ok) {
        std::string expected = "[N";
        for (size_t d = dims; d < want.size(); ++d)
          expected += ", " + std::to_string(want[d]);
        fail(prefix + ": expected shape " + expected + "] (samples of the " +
             "input's " + shapeString(want) + " batches), got " +
             shapeString(array.shape));
      }
      int64_t n = array.shape[0];
      if (n == 0)
        fail(prefix + ": the array has no samples");
      Column column;
      column.sampleBytes =
          size_t(tensorBytes(in.tensor) / batch);
      if (!convertArray(array, in.tensor.dtype, column.data, error))
        fail(prefix + ": " + error);
      if (i == 0) {
        samples = n;
        first = "'" + std::string(in.name) + "' (" + file + ")";
      } else if (n != samples) {
        fail("the inputs have different sample counts: " + first + " has " +
             std::to_string(samples) + ", '" + in.name + "' (" + file +
             ") has " + std::to_string(n));
      }
      columns.push_back(std::move(column));
    }
  }

  void copySample(int64_t sample, int64_t row,
                  char *const *batch) const override {
    for (size_t i = 0; i < columns.size(); ++i) {
      const Column &c = columns[i];
      std::memcpy(batch[i] + size_t(row) * c.sampleBytes,
                  c.data.data() + size_t(sample) * c.sampleBytes,
                  c.sampleBytes);
    }
  }

  std::string summary() const override {
    std::string s = std::to_string(samples) + " samples from ";
    for (size_t i = 0; i < files.size(); ++i)
      s += (i ? ", " : "") + files[i];
    return s;
  }

private:
  struct Column {
    size_t sampleBytes = 0;
    std::vector<char> data; // samples x sampleBytes, in the input's dtype
  };
  std::vector<std::string> files;
  std::vector<Column> columns;
};

//===----------------------------------------------------------------------===//
// Token files
//===----------------------------------------------------------------------===//

class TokenDataset : public Dataset {
public:
  TokenDataset(const std::string &path, const std::string &tokenDtype,
               int64_t seqArg)
      : path(path) {
    const cleave_program_info &p = program();
    if (tokenDtype == "uint16")
      tokenBytes = 2;
    else if (tokenDtype == "uint32")
      tokenBytes = 4;
    else
      fail("--token-dtype expects uint16 or uint32, got '" + tokenDtype + "'");
    // [B, S] inputs, or [K, B, S] when accumulating microbatches.
    const int64_t dims = programBatchDims();
    bool shapeOk = p.num_inputs == 2;
    for (int64_t i = 0; shapeOk && i < 2; ++i)
      shapeOk = isIntegerDtype(globalInputs()[i].tensor.dtype) &&
                globalInputs()[i].tensor.rank == dims + 1;
    if (shapeOk)
      shapeOk = shapeOf(globalInputs()[0].tensor) == shapeOf(globalInputs()[1].tensor);
    if (!shapeOk) {
      std::string have;
      for (int64_t i = 0; i < p.num_inputs; ++i)
        have += std::string(i ? ", " : "") + "'" + globalInputs()[i].name + "' " +
                describe(globalInputs()[i].tensor);
      fail("--tokens needs a model with one integer input [B, S] and integer "
           "labels [B, S]; this program's inputs are " +
           (have.empty() ? std::string("none") : have));
    }
    seq = globalInputs()[0].tensor.shape[dims];
    if (seqArg != 0 && seqArg != seq)
      fail("--seq " + std::to_string(seqArg) +
           " does not match the model's sequence length " +
           std::to_string(seq) + " (input '" + globalInputs()[0].name + "' is " +
           describe(globalInputs()[0].tensor) + ")");
    if (seq <= 0)
      fail("the model's sequence length is " + std::to_string(seq));

    // A FIFO or a device would block the open or the read: only files.
    struct stat before;
    if (::stat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode))
      fail(path + ": not a regular file (--tokens reads a file of tokens)");
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
      fail(path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      fail(path + ": cannot stat: " + std::strerror(err));
    }
    size_t size = size_t(st.st_size);
    if (size % tokenBytes != 0) {
      ::close(fd);
      fail(path + ": its size of " + std::to_string(size) +
           " bytes is not a whole number of " + tokenDtype + " tokens");
    }
    numTokens = int64_t(size / tokenBytes);
    if (numTokens < seq + 1) {
      ::close(fd);
      fail(path + ": one sample of sequence length " + std::to_string(seq) +
           " needs " + std::to_string(seq + 1) + " tokens, the file has " +
           std::to_string(numTokens));
    }
    void *m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (m == MAP_FAILED)
      fail(path + ": cannot map: " + std::strerror(err));
    map = static_cast<const unsigned char *>(m);
    mapBytes = size;
    samples = (numTokens - 1) / seq;
  }

  ~TokenDataset() override {
    if (map)
      ::munmap(const_cast<unsigned char *>(map), mapBytes);
  }

  void copySample(int64_t sample, int64_t row,
                  char *const *batch) const override {
    const cleave_program_info &p = program();
    for (int64_t i = 0; i < 2; ++i) {
      const cleave_tensor &t = globalInputs()[i].tensor;
      int64_t first = sample * seq + i; // labels are shifted by one token
      char *dst = batch[i] + size_t(row * seq) * dtypeSize(t.dtype);
      for (int64_t j = 0; j < seq; ++j) {
        uint32_t token = tokenAt(first + j);
        if (t.dtype == CLEAVE_I64) {
          int64_t v = token;
          std::memcpy(dst + 8 * j, &v, 8);
          continue;
        }
        if (token > uint32_t(std::numeric_limits<int32_t>::max()))
          fail(path + ": token " + std::to_string(token) + " at index " +
               std::to_string(first + j) + " does not fit input '" +
               globalInputs()[i].name + "' of dtype i32");
        int32_t v = int32_t(token);
        std::memcpy(dst + 4 * j, &v, 4);
      }
    }
  }

  std::string summary() const override {
    return std::to_string(samples) + " samples of " + std::to_string(seq) +
           " tokens from " + path + " (" + std::to_string(numTokens) +
           " tokens)";
  }

private:
  uint32_t tokenAt(int64_t index) const {
    const unsigned char *b = map + size_t(index) * tokenBytes;
    if (tokenBytes == 2)
      return uint32_t(b[0]) | uint32_t(b[1]) << 8;
    return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
           uint32_t(b[3]) << 24;
  }

  std::string path;
  size_t tokenBytes = 2;
  int64_t seq = 0, numTokens = 0;
  const unsigned char *map = nullptr;
  size_t mapBytes = 0;
};

} // namespace

std::unique_ptr<Dataset>
cleave::rt::trainer::loadNpyDataset(const std::vector<std::string> &files) {
  return std::make_unique<NpyDataset>(files);
}

std::unique_ptr<Dataset> cleave::rt::trainer::openTokenDataset(
    const std::string &path, const std::string &tokenDtype, int64_t seq) {
  return std::make_unique<TokenDataset>(path, tokenDtype, seq);
}
