//===- Checkpoint.cpp - training checkpoints as safetensors ---------------===//
//
// Writing streams the tensors from the arena one at a time through a host
// buffer (a checkpoint can be as large as the model and its optimizer
// state, and the arena may be device memory); reading checks the header
// against the program before touching the arena, so that a checkpoint of
// another model is reported with its first differences and nothing is
// loaded. Every tensor's CRC-32C is in its file's __metadata__
// ("crc32c:<name>"), and reading checks it: a damaged byte is an error
// naming the tensor, not a resume with other values.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"

#include "Json.h"
#include "Mesh.h"
#include "Program.h"

#include "cleave/Version.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <unistd.h>

using namespace cleave::rt::trainer;
namespace fs = std::filesystem;

namespace {

constexpr const char *kModelFile = "model.safetensors";
constexpr const char *kIndexFile = "model.index.json";
constexpr const char *kMetaFile = "meta.json";
constexpr const char *kFormatVersion = "1";
/// The safetensors reference implementation rejects larger headers.
constexpr uint64_t kMaxHeaderBytes = 100 << 20;

/// The safetensors name of each dtype of the ABI.
const char *safetensorsDtype(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
    return "F32";
  case CLEAVE_F16:
    return "F16";
  case CLEAVE_BF16:
    return "BF16";
  case CLEAVE_I64:
    return "I64";
  case CLEAVE_I32:
    return "I32";
  case CLEAVE_I1:
    return "BOOL";
  }
  return "?";
}

int32_t dtypeFromSafetensors(const std::string &name) {
  for (int32_t d = 0; d < CLEAVE_NUM_DTYPES; ++d)
    if (name == safetensorsDtype(d))
      return d;
  return -1;
}

std::string describeEntry(int32_t dtype, const std::vector<int64_t> &shape) {
  return dtypeName(dtype) + " " + shapeString(shape);
}

std::string checkpointPath(const std::string &dir) {
  return (fs::path(dir) / kModelFile).string();
}

std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// The training config as JSON: itself when it parses, else as a string.
std::string trainingConfigJson() {
  const char *config = program().training_config;
  if (!config)
    return "null";
  JsonValue value;
  std::string error;
  return parseJson(config, value, error) ? std::string(config)
                                         : jsonQuote(config);
}

void writeMeta(const std::string &dir, int64_t step, std::optional<float> loss,
               const RunRecord &run) {
  const cleave_program_info &p = program();
  std::string json = "{\n";
  json += "  \"format\": \"cleave\",\n";
  json += std::string("  \"format_version\": ") + kFormatVersion + ",\n";
  json += "  \"step\": " + std::to_string(step) + ",\n";
  json += "  \"loss\": " + (loss ? jsonFloat(*loss) : "null") + ",\n";
  json += "  \"saved_at\": \"" + utcNow() + "\",\n";
  json += "  \"cleave_version\": " + jsonQuote(CLEAVE_VERSION_STRING) + ",\n";
  json += "  \"fingerprint\": \"" + paramFingerprint() + "\",\n";
  json += "  \"source_model\": " +
          (p.source_model ? jsonQuote(p.source_model) : "null") + ",\n";
  json += "  \"training_config\": " + trainingConfigJson() + ",\n";
  json += "  \"data_order\": " + jsonQuote(run.dataOrder) + ",\n";
  if (!run.hyperparameters.empty())
    json += "  \"hyperparameters\": " + run.hyperparameters + ",\n";
  int64_t numModel = 0;
  const std::vector<const cleave_named_tensor *> &params =
      wholeProgramParams(&numModel);
  json += "  \"num_model_params\": " + std::to_string(numModel) + ",\n";
  json += "  \"params\": [";
  for (size_t i = 0; i < params.size(); ++i) {
    const cleave_named_tensor &t = *params[i];
    json += std::string(i ? "," : "") +
            "\n    {\"name\": " + jsonQuote(t.name) + ", \"dtype\": \"" +
            safetensorsDtype(t.tensor.dtype) +
            "\", \"shape\": " + shapeString(globalShape(t)) +
            ", \"model\": " + (int64_t(i) < numModel ? "true" : "false") +
            ", \"role\": \"" + cleave_param_role_name(t.role) + "\"}";
  }
  json += "\n  ]\n}\n";
  writeFileAtomically(
      (fs::path(dir) / kMetaFile).string(), "checkpoint", [&](FILE *f) {
        return std::fwrite(json.data(), 1, json.size(), f) == json.size();
      });
}

/// One tensor entry of a safetensors header.
struct Entry {
  int32_t dtype = -1;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;
  /// The CRC-32C its file records (checkpoints before checksums have none).
  std::optional<uint32_t> crc;
};

/// The __metadata__ key of a tensor's CRC-32C.
std::string crcKey(const std::string &name) { return "crc32c:" + name; }

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `n` bytes,
/// continuing from `crc` (0 to start): table-driven, eight bytes a step.
uint32_t crc32c(const void *data, size_t n, uint32_t crc = 0) {
  static const auto tables = [] {
    std::array<std::array<uint32_t, 256>, 8> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int k = 1; k < 8; ++k)
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
    return t;
  }();
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = crc ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 |
                         uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    crc = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^
          tables[5][(lo >> 16) & 0xFF] ^ tables[4][lo >> 24] ^
          tables[3][p[4]] ^ tables[2][p[5]] ^ tables[1][p[6]] ^
          tables[0][p[7]];
  }
  for (; n; --n, ++p)
    crc = (crc >> 8) ^ tables[0][(crc ^ *p) & 0xFF];
  return ~crc;
}

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", unsigned(v));
  return buf;
}

[[noreturn]] void badFile(const std::string &path, const std::string &why) {
  fail("checkpoint " + path + " is not a valid safetensors file: " + why);
}

/// Reads and checks the header of `path`; fills `entries`, `metadata` and
/// the absolute file offset where the tensor data starts.
void readHeader(const std::string &path, FILE *f,
                std::map<std::string, Entry> &entries,
                std::map<std::string, std::string> &metadata,
                uint64_t &dataStart) {
  if (std::fseek(f, 0, SEEK_END) != 0)
    badFile(path, "cannot determine its size");
  uint64_t fileSize = uint64_t(std::ftell(f));
  std::fseek(f, 0, SEEK_SET);
  unsigned char len[8];
  if (std::fread(len, 1, 8, f) != 8)
    badFile(path, "shorter than 8 bytes");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = headerBytes << 8 | len[i];
  if (headerBytes > kMaxHeaderBytes || headerBytes > fileSize - 8)
    badFile(path, "header length " + std::to_string(headerBytes) +
                      " exceeds the file");
  std::string header(size_t(headerBytes), '\0');
  if (headerBytes &&
      std::fread(&header[0], 1, header.size(), f) != header.size())
    badFile(path, "truncated header");
  JsonValue root;
  std::string error;
  if (!parseJson(header, root, error))
    badFile(path, "header: " + error);
  if (root.kind != JsonValue::Object)
    badFile(path, "the header is not a JSON object");
  dataStart = 8 + headerBytes;
  uint64_t dataBytes = fileSize - dataStart;
  for (const auto &[name, value] : root.members) {
    if (name == "__metadata__") {
      if (value.kind != JsonValue::Object)
        badFile(path, "__metadata__ is not an object");
      for (const auto &[key, v] : value.members) {
        if (v.kind != JsonValue::String)
          badFile(path, "__metadata__ value '" + key + "' is not a string");
        metadata[key] = v.text;
      }
      continue;
    }
    Entry e;
    const JsonValue *dtype = value.find("dtype");
    const JsonValue *shape = value.find("shape");
    const JsonValue *offsets = value.find("data_offsets");
    if (value.kind != JsonValue::Object || !dtype || !shape || !offsets ||
        dtype->kind != JsonValue::String || shape->kind != JsonValue::Array ||
        offsets->kind != JsonValue::Array || offsets->items.size() != 2)
      badFile(path,
              "tensor '" + name + "' needs dtype, shape and data_offsets");
    e.dtype = dtypeFromSafetensors(dtype->text);
    if (e.dtype < 0)
      badFile(path, "tensor '" + name + "' has unsupported dtype '" +
                        dtype->text + "'");
    int64_t elements = 1;
    for (const JsonValue &d : shape->items) {
      int64_t v;
      if (!d.asInt64(v) || v < 0 || (v && elements > (int64_t(1) << 56) / v))
        badFile(path, "tensor '" + name + "' has a bad shape");
      elements *= v;
      e.shape.push_back(v);
    }
    if (!offsets->items[0].asInt64(e.begin) ||
        !offsets->items[1].asInt64(e.end) || e.begin < 0 || e.end < e.begin ||
        uint64_t(e.end) > dataBytes)
      badFile(path, "tensor '" + name +
                        "' has data_offsets outside the file of " +
                        std::to_string(fileSize) + " bytes (is it truncated?)");
    if (e.end - e.begin != elements * int64_t(dtypeSize(e.dtype)))
      badFile(path, "tensor '" + name + "' has " +
                        std::to_string(e.end - e.begin) + " bytes for " +
                        describeEntry(e.dtype, e.shape));
    if (!entries.emplace(name, e).second)
      badFile(path, "tensor '" + name + "' appears twice");
  }
  // The reference reader's layout: the tensors tile the data from 0 to
  // its end, in some order, with no gap, overlap or trailing byte.
  std::vector<const std::pair<const std::string, Entry> *> order;
  for (const auto &entry : entries)
    order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(), [](auto *a, auto *b) {
    return a->second.begin < b->second.begin;
  });
  int64_t at = 0;
  for (const auto *entry : order) {
    if (entry->second.begin != at)
      badFile(path, "tensor '" + entry->first + "' starts at byte " +
                        std::to_string(entry->second.begin) + " of the data, " +
                        (entry->second.begin < at ? "inside another tensor"
                                                  : "after a gap") +
                        " (the tensors must tile the data)");
    at = entry->second.end;
  }
  if (uint64_t(at) != dataBytes)
    badFile(path, std::to_string(dataBytes - uint64_t(at)) +
                      " bytes after the last tensor");
  for (auto &[name, e] : entries) {
    auto it = metadata.find(crcKey(name));
    if (it == metadata.end())
      continue;
    char *end = nullptr;
    unsigned long v = std::strtoul(it->second.c_str(), &end, 16);
    if (it->second.size() != 8 || *end != '\0')
      badFile(path, "tensor '" + name + "' has a bad CRC-32C '" + it->second +
                        "' in __metadata__");
    e.crc = uint32_t(v);
  }
}

} // namespace

std::string cleave::rt::trainer::paramFingerprint() {
  std::vector<std::string> lines;
  for (const cleave_named_tensor *param : wholeProgramParams()) {
    // Of the global values, so that every mesh has the same one.
    const cleave_tensor t = globalTensor(*param);
    std::string line =
        std::string(param->name) + "\t" + safetensorsDtype(t.dtype) + "\t";
    for (int d = 0; d < t.rank; ++d)
      line += (d ? "," : "") + std::to_string(t.shape[d]);
    lines.push_back(line + "\n");
  }
  std::sort(lines.begin(), lines.end());
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const std::string &line : lines)
    for (unsigned char c : line) {
      hash ^= c;
      hash *= 0x100000001b3ull;
    }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)hash);
  return buf;
}

void cleave::rt::trainer::prepareCheckpointDir(const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    fail("cannot create the checkpoint directory " + dir + ": " + ec.message());
  // Find out now, not after hours of training, whether files can be
  // written there.
  std::string probe =
      (fs::path(dir) / (".cleave-probe-" + std::to_string(::getpid())))
          .string();
  FILE *f = std::fopen(probe.c_str(), "wb");
  if (!f)
    fail("cannot write in the checkpoint directory " + dir + ": " +
         std::strerror(errno));
  std::fclose(f);
  std::remove(probe.c_str());
}

bool cleave::rt::trainer::holdsCheckpoint(const std::string &dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / kIndexFile, ec) ||
         fs::exists(fs::path(dir) / "model.safetensors", ec);
}

namespace {

/// The __metadata__ every checkpoint file starts with (as JSON members).
std::string commonMetadata(int64_t step, const RunRecord &run) {
  const cleave_program_info &p = program();
  int64_t numModel = 0;
  wholeProgramParams(&numModel);
  std::string meta = "\"format\":\"cleave\",\"format_version\":\"" +
                     std::string(kFormatVersion) + "\",\"step\":\"" +
                     std::to_string(step) + "\",\"fingerprint\":\"" +
                     paramFingerprint() + "\",\"num_model_params\":\"" +
                     std::to_string(numModel) + "\"";
  if (p.source_model)
    meta += ",\"source_model\":" + jsonQuote(p.source_model);
  if (p.training_config)
    meta += ",\"training_config\":" + jsonQuote(p.training_config);
  meta += ",\"data_order\":" + jsonQuote(run.dataOrder);
  meta += ",\"cleave_version\":" + jsonQuote(CLEAVE_VERSION_STRING);
  if (!run.hyperparameters.empty())
    meta += ",\"hyperparameters\":" + jsonQuote(run.hyperparameters);
  return meta;
}

/// Writes `tensors` (their descriptors' bytes, read from the arena one at a
/// time) as the safetensors file `path`, atomically, with the __metadata__
/// members `meta`.
void writeSafetensors(const std::string &path, const std::string &meta,
                      std::vector<const cleave_named_tensor *> tensors,
                      const Arena &arena) {
  // Decreasing element size, so that every tensor is naturally aligned.
  std::stable_sort(
      tensors.begin(), tensors.end(),
      [](const cleave_named_tensor *a, const cleave_named_tensor *b) {
        return dtypeSize(a->tensor.dtype) > dtypeSize(b->tensor.dtype);
      });
  // The checksums go in the header, before the data. Each is 8 hex digits,
  // so the header's length is known first: it is written with zeros, the
  // tensors are streamed through once with their CRC-32C computed on the
  // way, and the header is written again in place.
  std::vector<uint32_t> crcs(tensors.size(), 0);
  auto headerOf = [&] {
    std::string header = "{\"__metadata__\":{" + meta;
    for (size_t i = 0; i < tensors.size(); ++i)
      header += "," + jsonQuote(crcKey(tensors[i]->name)) + ":\"" +
                hex8(crcs[i]) + "\"";
    header += "}";
    int64_t offset = 0;
    for (const cleave_named_tensor *t : tensors) {
      int64_t bytes = tensorBytes(t->tensor);
      header += "," + jsonQuote(t->name) + ":{\"dtype\":\"" +
                safetensorsDtype(t->tensor.dtype) + "\",\"shape\":[";
      for (int d = 0; d < t->tensor.rank; ++d)
        header += (d ? "," : "") + std::to_string(t->tensor.shape[d]);
      header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
                std::to_string(offset + bytes) + "]}";
      offset += bytes;
    }
    header += "}";
    header.append((8 - header.size() % 8) % 8, ' ');
    return header;
  };
  std::string header = headerOf();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = (unsigned char)(uint64_t(header.size()) >> (8 * i));

  std::vector<char> host; // one tensor at a time, reused
  writeFileAtomically(path, "checkpoint", [&](FILE *f) {
    if (std::fwrite(len, 1, 8, f) != 8 ||
        std::fwrite(header.data(), 1, header.size(), f) != header.size())
      return false;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const cleave_named_tensor *t = tensors[i];
      size_t bytes = size_t(tensorBytes(t->tensor));
      host.resize(bytes);
      if (bytes)
        arena.read(t->tensor, host.data());
      crcs[i] = crc32c(host.data(), bytes);
      if (bytes && std::fwrite(host.data(), 1, bytes, f) != bytes)
        return false;
    }
    std::string done = headerOf();
    return done.size() == header.size() && std::fseek(f, 8, SEEK_SET) == 0 &&
           std::fwrite(done.data(), 1, done.size(), f) == done.size();
  });
}

/// "shard-<rank>-of-<ranks>.step-<step>.safetensors".
std::string shardFile(int32_t rank, int32_t ranks, int64_t step) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "shard-%05d-of-%05d.step-%lld.safetensors",
                int(rank), int(ranks), (long long)step);
  return buf;
}

/// Removes the files of `dir` for which `stale(name)` holds.
void removeFiles(const std::string &dir,
                 const std::function<bool(const std::string &)> &stale) {
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (stale(name))
      fs::remove(entry.path(), ec);
  }
}

bool isShardFile(const std::string &name) {
  const std::string suffix = ".safetensors";
  return name.rfind("shard-", 0) == 0 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The checkpoint of a partitioned program: each rank writes the blocks it
/// owns (one writer per block) with their offsets in the global tensors,
/// then rank 0 commits the index that names every shard. The index is the
/// commit point: until it is replaced, the previous checkpoint (whose
/// shards have other names) stays whole.
void saveSharded(const std::string &dir, const Arena &arena, int64_t step,
                 const RunRecord &run) {
  const cleave_program_info &p = program();
  const Device &dev = device();
  std::vector<const cleave_named_tensor *> owned;
  std::string blocks = "{";
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &t = p.params[i];
    // A parameter that several stages hold (a tied embedding): the first
    // writes it.
    if (!ownsBlock(t, dev.coords) || firstStageOf(t.name) != dev.stage)
      continue;
    owned.push_back(&t);
    blocks += std::string(owned.size() > 1 ? "," : "") + jsonQuote(t.name) +
              ":" + shapeString(blockStart(t, dev.coords));
  }
  blocks += "}";
  std::string meta = commonMetadata(step, run) +
                     ",\"rank\":\"" + std::to_string(dev.rank) +
                     "\",\"blocks\":" + jsonQuote(blocks);
  std::string mine = shardFile(dev.rank, dev.size, step);
  writeSafetensors((fs::path(dir) / mine).string(), meta, owned, arena);
  // Every shard is durable before the index names it.
  dev.comm->barrier(CLEAVE_COMM_WORLD);
  if (dev.rank == 0) {
    std::string index = "{\n  \"format\": \"cleave\",\n  \"format_version\": " +
                        std::string(kFormatVersion) + ",\n  \"sharded\": true" +
                        ",\n  \"step\": " + std::to_string(step) +
                        ",\n  \"fingerprint\": \"" + paramFingerprint() +
                        "\",\n  \"mesh\": {\"axes\": [";
    for (size_t a = 0; a < dev.axisNames.size(); ++a)
      index += (a ? ", " : "") + jsonQuote(dev.axisNames[a]);
    index += "], \"shape\": " + shapeString(dev.shape) + "},\n  \"files\": [";
    for (int32_t r = 0; r < dev.size; ++r)
      index += std::string(r ? ", " : "") + "\"" + shardFile(r, dev.size, step) +
               "\"";
    index += "],\n  \"params\": {";
    const std::vector<const cleave_named_tensor *> &params =
        wholeProgramParams();
    for (size_t i = 0; i < params.size(); ++i) {
      const cleave_named_tensor &t = *params[i];
      std::string sharding = "[";
      for (int d = 0; d < t.tensor.rank; ++d) {
        sharding += d ? ", [" : "[";
        for (int64_t j = 0; t.sharding && j < t.sharding->num_axes[d]; ++j)
          sharding += std::string(j ? ", " : "") +
                      jsonQuote(dev.axisNames[size_t(t.sharding->axes[d][j])]);
        sharding += "]";
      }
      sharding += "]";
      index += std::string(i ? "," : "") + "\n    " + jsonQuote(t.name) +
               ": {\"dtype\": \"" + safetensorsDtype(t.tensor.dtype) +
               "\", \"shape\": " + shapeString(globalShape(t)) +
               ", \"sharding\": " + sharding + "}";
    }
    index += "\n  },\n  \"metadata\": {" + commonMetadata(step, run) +
             "}\n}\n";
    writeFileAtomically((fs::path(dir) / kIndexFile).string(), "checkpoint",
                        [&](FILE *f) {
                          return std::fwrite(index.data(), 1, index.size(),
                                             f) == index.size();
                        });
  }
  dev.comm->barrier(CLEAVE_COMM_WORLD);
  // The new checkpoint is committed: each rank removes its older shards,
  // rank 0 also those of meshes of another size and a one-device file.
  removeFiles(dir, [&](const std::string &name) {
    int rank = -1, ranks = -1;
    long long at = -1;
    if (!isShardFile(name) || name == mine ||
        std::sscanf(name.c_str(), "shard-%d-of-%d.step-%lld", &rank, &ranks,
                    &at) != 3)
      return false;
    return ranks == dev.size ? rank == dev.rank : dev.rank == 0;
  });
  if (dev.rank == 0) {
    std::error_code ec;
    fs::remove(checkpointPath(dir), ec);
  }
}

} // namespace

void cleave::rt::trainer::saveCheckpoint(const std::string &dir,
                                         const Arena &arena, int64_t step,
                                         std::optional<float> loss,
                                         const RunRecord &run) {
  if (device().distributed) {
    saveSharded(dir, arena, step, run);
    if (isRankZero())
      writeMeta(dir, step, loss, run);
    return;
  }
  const cleave_program_info &p = program();
  std::vector<const cleave_named_tensor *> all;
  for (int64_t i = 0; i < p.num_params; ++i)
    all.push_back(&p.params[i]);
  writeSafetensors(checkpointPath(dir), commonMetadata(step, run), all,
                   arena);
  // The directory now holds a one-device checkpoint: a sharded one there
  // before is superseded.
  std::error_code ec;
  fs::remove(fs::path(dir) / kIndexFile, ec);
  removeFiles(dir, isShardFile);
  writeMeta(dir, step, loss, run);
}

namespace {

/// Where a parameter's global value is read from.
struct Source {
  int32_t dtype = -1;
  std::vector<int64_t> shape; // global
  struct Block {
    size_t file;
    Entry entry;
    std::vector<int64_t> start;
  };
  std::vector<Block> blocks;
};

/// An open checkpoint: the parameters' sources, its files and metadata.
struct OpenCheckpoint {
  std::string dir, what; // "checkpoint DIR"
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<FILE, int (*)(FILE *)>> files;
  std::vector<uint64_t> dataStart;
  std::map<std::string, Source> params;
  std::map<std::string, std::string> metadata;
};

FILE *openFile(OpenCheckpoint &c, const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    fail("cannot open the checkpoint " + path + ": " + std::strerror(errno));
  c.paths.push_back(path);
  c.files.emplace_back(f, &std::fclose);
  c.dataStart.push_back(0);
  return f;
}

/// A one-device checkpoint: DIR/model.safetensors (or the safetensors file
/// `file`) holds every global value.
void openSingle(OpenCheckpoint &c, const std::string &file = "") {
  std::string path = file.empty() ? checkpointPath(c.dir) : file;
  FILE *f = openFile(c, path);
  std::map<std::string, Entry> entries;
  readHeader(path, f, entries, c.metadata, c.dataStart[0]);
  for (const auto &[name, e] : entries) {
    Source &src = c.params[name];
    src.dtype = e.dtype;
    src.shape = e.shape;
    src.blocks.push_back({0, e, std::vector<int64_t>(e.shape.size(), 0)});
  }
}

/// A sharded checkpoint: the index names the shards, each shard's
/// metadata says where its blocks lie in the global values.
void openSharded(OpenCheckpoint &c) {
  std::string path = (fs::path(c.dir) / kIndexFile).string();
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"),
                                           &std::fclose);
  if (!f)
    fail("cannot open the checkpoint index " + path + ": " +
         std::strerror(errno));
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f.get())) > 0;)
    text.append(buf, n);
  JsonValue index;
  std::string error;
  if (!parseJson(text, index, error) || index.kind != JsonValue::Object)
    fail("checkpoint index " + path + " is not a JSON object: " + error);
  const JsonValue *files = index.find("files");
  const JsonValue *params = index.find("params");
  const JsonValue *meta = index.find("metadata");
  if (!files || files->kind != JsonValue::Array || !params ||
      params->kind != JsonValue::Object || !meta ||
      meta->kind != JsonValue::Object)
    fail("checkpoint index " + path + " lacks its files, params or metadata");
  for (const auto &[key, v] : meta->members)
    c.metadata[key] = v.text;
  for (const auto &[name, info] : params->members) {
    const JsonValue *dtype = info.find("dtype");
    const JsonValue *shape = info.find("shape");
    Source &src = c.params[name];
    src.dtype = dtype ? dtypeFromSafetensors(dtype->text) : -1;
    for (const JsonValue &d : shape ? shape->items : std::vector<JsonValue>()) {
      int64_t v = -1;
      d.asInt64(v);
      src.shape.push_back(v);
    }
    if (src.dtype < 0 || !shape)
      fail("checkpoint index " + path + ": parameter '" + name +
           "' has no valid dtype and shape");
  }
  for (const JsonValue &file : files->items) {
    std::string shard = (fs::path(c.dir) / file.text).string();
    if (!fs::exists(shard))
      fail("checkpoint " + c.dir + ": shard " + file.text +
           ", which the index names, is missing");
    FILE *sf = openFile(c, shard);
    size_t fi = c.files.size() - 1;
    std::map<std::string, Entry> entries;
    std::map<std::string, std::string> shardMeta;
    readHeader(shard, sf, entries, shardMeta, c.dataStart[fi]);
    JsonValue blocks;
    if (shardMeta["step"] != c.metadata["step"] ||
        !parseJson(shardMeta["blocks"], blocks, error) ||
        blocks.kind != JsonValue::Object)
      fail("checkpoint " + c.dir + ": shard " + file.text +
           " is not of the index's step " + c.metadata["step"] +
           " or has no block offsets");
    for (const auto &[name, e] : entries) {
      auto it = c.params.find(name);
      const JsonValue *at = blocks.find(name);
      if (it == c.params.end() || !at || at->items.size() != e.shape.size() ||
          e.dtype != it->second.dtype)
        fail("checkpoint " + c.dir + ": shard " + file.text + " holds '" +
             name + "', which the index does not describe so");
      Source::Block block{fi, e, {}};
      for (size_t d = 0; d < e.shape.size(); ++d) {
        int64_t v = -1;
        at->items[d].asInt64(v);
        if (v < 0 || v + e.shape[d] > it->second.shape[d])
          fail("checkpoint " + c.dir + ": shard " + file.text + "'s block of '" +
               name + "' lies outside its global shape");
        block.start.push_back(v);
      }
      it->second.blocks.push_back(block);
    }
  }
}

/// Reads the global value of `name` into `global`, checking that the blocks
/// cover it.
void readGlobal(OpenCheckpoint &c, const std::string &name,
                std::vector<char> &global) {
  const Source &src = c.params.at(name);
  size_t es = dtypeSize(src.dtype);
  int64_t elements = 1;
  for (int64_t d : src.shape)
    elements *= d;
  global.assign(size_t(elements) * es, 0);
  int64_t covered = 0;
  std::vector<char> bytes;
  for (const Source::Block &b : src.blocks) {
    size_t n = size_t(b.entry.end - b.entry.begin);
    bytes.resize(n);
    FILE *f = c.files[b.file].get();
    if (n && (std::fseek(f, long(c.dataStart[b.file] + uint64_t(b.entry.begin)),
                         SEEK_SET) != 0 ||
              std::fread(bytes.data(), 1, n, f) != n))
      fail("checkpoint " + c.paths[b.file] + ": cannot read tensor '" + name +
           "'");
    if (b.entry.crc) {
      uint32_t got = crc32c(bytes.data(), n);
      if (got != *b.entry.crc)
        fail("checkpoint " + c.paths[b.file] + ": tensor '" + name +
             "' fails its CRC-32C check (recorded " + hex8(*b.entry.crc) +
             ", read " + hex8(got) + "): the file is damaged");
    }
    copyRegion(global.data(), src.shape, b.start, b.entry.shape, es,
               bytes.data(), /*toGlobal=*/true);
    covered += int64_t(n / (es ? es : 1));
  }
  if (covered != elements)
    fail("checkpoint " + c.dir + ": the blocks of '" + name + "' cover " +
         std::to_string(covered) + " of its " + std::to_string(elements) +
         " elements");
}

/// True when one shape is the other with its leading dimension split in
/// two, [n * h, ...] and [n, h, ...]: the same elements in the same
/// row-major order. A fused projection's weight and bias take the split
/// form in a tensor-parallel program (-cleave-split-projections), so a
/// checkpoint of either loads into the other.
bool isSplitView(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  if (a.size() == b.size() + 1)
    return isSplitView(b, a);
  if (b.size() != a.size() + 1 || a.empty())
    return false;
  if (a[0] != b[0] * b[1])
    return false;
  return std::equal(a.begin() + 1, a.end(), b.begin() + 2);
}

/// Opens the checkpoint in `dir` (either layout) and checks it against the
/// program: its format, its step (returned), and that it holds exactly the
/// program's parameters with their dtypes and global shapes.
int64_t openChecked(const std::string &dir, OpenCheckpoint &c) {
  const cleave_program_info &p = program();
  c.dir = dir;
  // A sharded checkpoint, from any mesh, or a one-device one: either is
  // resharded to this program's mesh.
  bool sharded = fs::exists(fs::path(dir) / kIndexFile);
  if (sharded)
    openSharded(c);
  else
    openSingle(c);
  std::string path =
      sharded ? (fs::path(dir) / kIndexFile).string() : checkpointPath(dir);
  std::map<std::string, std::string> &metadata = c.metadata;
  if (metadata["format"] != "cleave" || metadata["format_version"].empty())
    fail("checkpoint " + path +
         " was not written by a Cleave trainer (no \"format\": \"cleave\" in "
         "its __metadata__)");
  if (metadata["format_version"] != kFormatVersion)
    fail("checkpoint " + path + " has format version " +
         metadata["format_version"] + ", this runtime reads version " +
         kFormatVersion);
  JsonValue stepValue;
  stepValue.kind = JsonValue::Number;
  stepValue.text = metadata["step"];
  int64_t step = -1;
  if (!stepValue.asInt64(step) || step < 0)
    fail("checkpoint " + path + " has a bad step '" + metadata["step"] + "'");
  if (step > kMaxSteps)
    fail("checkpoint " + path + " is at step " + std::to_string(step) +
         ", past the most this trainer counts, 2^40 (damaged metadata?)");

  // Every parameter must be there with its dtype and global shape, and
  // nothing else: list the first differences.
  std::vector<std::string> diffs;
  std::map<std::string, bool> known;
  for (const cleave_named_tensor *whole : wholeProgramParams()) {
    const cleave_named_tensor &param = *whole;
    known[param.name] = true;
    auto it = c.params.find(param.name);
    std::string mine = describe(globalTensor(param));
    if (it == c.params.end()) {
      diffs.push_back("parameter '" + std::string(param.name) + "' (" + mine +
                      ") is not in the checkpoint");
      continue;
    }
    std::string theirs = describeEntry(it->second.dtype, it->second.shape);
    cleave_tensor global = globalTensor(param);
    if (theirs != mine &&
        !(it->second.dtype == global.dtype &&
          isSplitView(it->second.shape,
                      std::vector<int64_t>(global.shape,
                                           global.shape + global.rank))))
      diffs.push_back("parameter '" + std::string(param.name) + "' is " +
                      theirs + " in the checkpoint but " + mine +
                      " in this program");
  }
  for (const auto &[name, src] : c.params)
    if (!known.count(name))
      diffs.push_back("the checkpoint has '" + name + "' (" +
                      describeEntry(src.dtype, src.shape) +
                      "), which this program lacks");
  if (!diffs.empty()) {
    std::string message = "checkpoint " + dir + " is from another model: ";
    for (size_t i = 0; i < diffs.size() && i < 3; ++i)
      message += (i ? "; " : "") + diffs[i];
    if (diffs.size() > 3)
      message += "; and " + std::to_string(diffs.size() - 3) + " more";
    message += " (fingerprint " +
               (metadata.count("fingerprint") ? metadata["fingerprint"]
                                              : std::string("none")) +
               ", this program's " + paramFingerprint() + ")";
    fail(message);
  }

  return step;
}

} // namespace

std::map<std::string, std::vector<char>>
cleave::rt::trainer::readGlobalModelParams(const std::string &dir) {
  OpenCheckpoint c;
  openChecked(dir, c);
  std::map<std::string, std::vector<char>> values;
  int64_t numModel = 0;
  const std::vector<const cleave_named_tensor *> &params =
      wholeProgramParams(&numModel);
  for (int64_t i = 0; i < numModel; ++i)
    readGlobal(c, params[size_t(i)]->name, values[params[size_t(i)]->name]);
  return values;
}

std::string cleave::rt::trainer::initModelParams(const std::string &path,
                                                 Arena &arena) {
  const cleave_program_info &p = program();
  OpenCheckpoint c;
  std::string what = "--init-from " + path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    c.dir = latestCheckpoint(path);
    if (!holdsCheckpoint(c.dir))
      fail(what + ": the folder holds no checkpoint (" + kIndexFile +
           " or model.safetensors, or a history of them)");
    if (fs::exists(fs::path(c.dir) / kIndexFile))
      openSharded(c);
    else
      openSingle(c);
  } else {
    if (!fs::is_regular_file(path, ec))
      fail(what + ": no such checkpoint folder or safetensors file");
    c.dir = path;
    openSingle(c, path);
  }
  // Every model parameter by name, of its dtype and global shape; the rest
  // of the file (optimizer state, buffers) is not read.
  std::vector<std::string> diffs;
  int64_t numModel = 0;
  const std::vector<const cleave_named_tensor *> &whole =
      wholeProgramParams(&numModel);
  std::map<std::string, bool> model;
  for (int64_t i = 0; i < numModel; ++i) {
    const cleave_named_tensor &param = *whole[size_t(i)];
    model[param.name] = true;
    cleave_tensor global = globalTensor(param);
    auto it = c.params.find(param.name);
    if (it == c.params.end()) {
      diffs.push_back("parameter '" + std::string(param.name) + "' (" +
                      describe(global) + ") is not in it");
      continue;
    }
    std::vector<int64_t> shape(global.shape, global.shape + global.rank);
    if (it->second.dtype != global.dtype ||
        (it->second.shape != shape && !isSplitView(it->second.shape, shape)))
      diffs.push_back("parameter '" + std::string(param.name) + "' is " +
                      describeEntry(it->second.dtype, it->second.shape) +
                      " there but " + describe(global) + " in this program");
  }
  if (!diffs.empty()) {
    std::string message = what + " is not of this model: ";
    for (size_t i = 0; i < diffs.size() && i < 3; ++i)
      message += (i ? "; " : "") + diffs[i];
    if (diffs.size() > 3)
      message += "; and " + std::to_string(diffs.size() - 3) + " more";
    fail(message);
  }
  std::vector<char> global, block;
  for (int64_t i = 0; i < p.num_model_params; ++i) {
    const cleave_named_tensor &param = p.params[i];
    readGlobal(c, param.name, global);
    block.resize(size_t(tensorBytes(param.tensor)));
    copyBlock(param, device().coords, global.data(), block.data());
    arena.write(param.tensor, block.data());
  }
  size_t others = 0;
  for (const auto &entry : c.params)
    others += !model.count(entry.first);
  return std::to_string(numModel) + " model parameters from " + c.dir +
         (others
              ? " (" + std::to_string(others) + " other tensors not read" +
                    (c.params.count("optimizer.step") ? ": the optimizer state)"
                                                      : ")")
              : "");
}

int64_t cleave::rt::trainer::loadCheckpoint(const std::string &dir,
                                            Arena &arena,
                                            const std::string &dataOrder,
                                            std::string *hyperparameters) {
  const cleave_program_info &p = program();
  OpenCheckpoint c;
  int64_t step = openChecked(dir, c);
  std::map<std::string, std::string> &metadata = c.metadata;
  std::vector<char> global, block;
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &param = p.params[i];
    readGlobal(c, param.name, global);
    // The optimizer's update count can trail the metadata's step (fp16
    // skips the updates of non-finite steps) but never pass it: a
    // checkpoint where it does was edited or mixed.
    if (std::strcmp(param.name, "optimizer.step") == 0 &&
        param.tensor.dtype == CLEAVE_I64 && global.size() == 8) {
      int64_t counted;
      std::memcpy(&counted, global.data(), 8);
      if (counted < 0 || counted > step)
        fail("checkpoint " + dir + " is at step " + std::to_string(step) +
             " by its metadata but its optimizer.step is " +
             std::to_string(counted) +
             " (more updates than steps: an edited or mixed checkpoint)");
    }
    block.resize(size_t(tensorBytes(param.tensor)));
    copyBlock(param, device().coords, global.data(), block.data());
    arena.write(param.tensor, block.data());
  }

  const char *config = p.training_config;
  auto saved = metadata.find("training_config");
  if (isRankZero() && config && saved != metadata.end() &&
      saved->second != config)
    std::fprintf(stderr,
                 "warning: checkpoint %s was written with another training "
                 "config: %s\n",
                 dir.c_str(), saved->second.c_str());
  auto order = metadata.find("data_order");
  if (isRankZero() && order != metadata.end() && order->second != dataOrder)
    std::fprintf(stderr,
                 "warning: checkpoint %s was written with data order '%s', "
                 "this run uses '%s'\n",
                 dir.c_str(), order->second.c_str(), dataOrder.c_str());
  auto record = metadata.find("hyperparameters");
  if (hyperparameters && record != metadata.end())
    *hyperparameters = record->second;
  return step;
}
