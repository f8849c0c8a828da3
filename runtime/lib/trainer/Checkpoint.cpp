//===- Checkpoint.cpp - training checkpoints as safetensors ---------------===//
//
// Writing streams the tensors from the arena one at a time through a host
// buffer (a checkpoint can be as large as the model and its optimizer
// state, and the arena may be device memory); reading checks the header
// against the program before touching the arena, so that a checkpoint of
// another model is reported with its first differences and nothing is
// loaded.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"

#include "Json.h"
#include "Program.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include <unistd.h>

using namespace cleave::rt::trainer;
namespace fs = std::filesystem;

namespace {

constexpr const char *kModelFile = "model.safetensors";
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

/// The parameters in file order: decreasing element size, then program
/// order, so that every tensor starts naturally aligned.
std::vector<const cleave_named_tensor *> fileOrder() {
  const cleave_program_info &p = cleave_program;
  std::vector<const cleave_named_tensor *> order;
  for (int64_t i = 0; i < p.num_params; ++i)
    order.push_back(&p.params[i]);
  std::stable_sort(
      order.begin(), order.end(),
      [](const cleave_named_tensor *a, const cleave_named_tensor *b) {
        return dtypeSize(a->tensor.dtype) > dtypeSize(b->tensor.dtype);
      });
  return order;
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
  const char *config = cleave_program.training_config;
  if (!config)
    return "null";
  JsonValue value;
  std::string error;
  return parseJson(config, value, error) ? std::string(config)
                                         : jsonQuote(config);
}

void writeMeta(const std::string &dir, int64_t step, std::optional<float> loss,
               const std::string &dataOrder) {
  const cleave_program_info &p = cleave_program;
  std::string json = "{\n";
  json += "  \"format\": \"cleave\",\n";
  json += std::string("  \"format_version\": ") + kFormatVersion + ",\n";
  json += "  \"step\": " + std::to_string(step) + ",\n";
  json += "  \"loss\": " + (loss ? jsonFloat(*loss) : "null") + ",\n";
  json += "  \"saved_at\": \"" + utcNow() + "\",\n";
  json += "  \"fingerprint\": \"" + paramFingerprint() + "\",\n";
  json += "  \"source_model\": " +
          (p.source_model ? jsonQuote(p.source_model) : "null") + ",\n";
  json += "  \"training_config\": " + trainingConfigJson() + ",\n";
  json += "  \"data_order\": " + jsonQuote(dataOrder) + ",\n";
  json +=
      "  \"num_model_params\": " + std::to_string(p.num_model_params) + ",\n";
  json += "  \"params\": [";
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &t = p.params[i];
    json += std::string(i ? "," : "") +
            "\n    {\"name\": " + jsonQuote(t.name) + ", \"dtype\": \"" +
            safetensorsDtype(t.tensor.dtype) +
            "\", \"shape\": " + shapeString(shapeOf(t.tensor)) +
            ", \"model\": " + (i < p.num_model_params ? "true" : "false") +
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
};

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
}

} // namespace

std::string cleave::rt::trainer::paramFingerprint() {
  const cleave_program_info &p = cleave_program;
  std::vector<std::string> lines;
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_tensor &t = p.params[i].tensor;
    std::string line =
        std::string(p.params[i].name) + "\t" + safetensorsDtype(t.dtype) + "\t";
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

void cleave::rt::trainer::saveCheckpoint(const std::string &dir,
                                         const Arena &arena, int64_t step,
                                         std::optional<float> loss,
                                         const std::string &dataOrder) {
  const cleave_program_info &p = cleave_program;
  std::string meta = "{\"format\":\"cleave\",\"format_version\":\"" +
                     std::string(kFormatVersion) + "\",\"step\":\"" +
                     std::to_string(step) + "\",\"fingerprint\":\"" +
                     paramFingerprint() + "\",\"num_model_params\":\"" +
                     std::to_string(p.num_model_params) + "\"";
  if (p.source_model)
    meta += ",\"source_model\":" + jsonQuote(p.source_model);
  if (p.training_config)
    meta += ",\"training_config\":" + jsonQuote(p.training_config);
  meta += ",\"data_order\":" + jsonQuote(dataOrder);
  std::string header = "{\"__metadata__\":" + meta + "}";
  std::vector<const cleave_named_tensor *> order = fileOrder();
  int64_t offset = 0;
  for (const cleave_named_tensor *t : order) {
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
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = (unsigned char)(uint64_t(header.size()) >> (8 * i));

  std::vector<char> host; // one tensor at a time, reused
  writeFileAtomically(checkpointPath(dir), "checkpoint", [&](FILE *f) {
    if (std::fwrite(len, 1, 8, f) != 8 ||
        std::fwrite(header.data(), 1, header.size(), f) != header.size())
      return false;
    for (const cleave_named_tensor *t : order) {
      size_t bytes = size_t(tensorBytes(t->tensor));
      if (!bytes)
        continue;
      host.resize(bytes);
      arena.read(t->tensor, host.data());
      if (std::fwrite(host.data(), 1, bytes, f) != bytes)
        return false;
    }
    return true;
  });
  writeMeta(dir, step, loss, dataOrder);
}

int64_t cleave::rt::trainer::loadCheckpoint(const std::string &dir,
                                            Arena &arena,
                                            const std::string &dataOrder) {
  const cleave_program_info &p = cleave_program;
  std::string path = checkpointPath(dir);
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"),
                                           &std::fclose);
  if (!f)
    fail("cannot open the checkpoint " + path + ": " + std::strerror(errno));
  std::map<std::string, Entry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t dataStart = 0;
  readHeader(path, f.get(), entries, metadata, dataStart);
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

  // Every parameter must be there with its dtype and shape, and nothing
  // else: list the first differences.
  std::vector<std::string> diffs;
  std::map<std::string, bool> known;
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &param = p.params[i];
    known[param.name] = true;
    auto it = entries.find(param.name);
    std::string mine = describe(param.tensor);
    if (it == entries.end()) {
      diffs.push_back("parameter '" + std::string(param.name) + "' (" + mine +
                      ") is not in the checkpoint");
      continue;
    }
    std::string theirs = describeEntry(it->second.dtype, it->second.shape);
    if (theirs != mine)
      diffs.push_back("parameter '" + std::string(param.name) + "' is " +
                      theirs + " in the checkpoint but " + mine +
                      " in this program");
  }
  for (const auto &[name, e] : entries)
    if (!known.count(name))
      diffs.push_back("the checkpoint has '" + name + "' (" +
                      describeEntry(e.dtype, e.shape) +
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

  std::vector<char> host; // one tensor at a time, reused
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &param = p.params[i];
    const Entry &e = entries[param.name];
    size_t bytes = size_t(e.end - e.begin);
    if (!bytes)
      continue;
    host.resize(bytes);
    if (std::fseek(f.get(), long(dataStart + uint64_t(e.begin)), SEEK_SET) !=
            0 ||
        std::fread(host.data(), 1, bytes, f.get()) != bytes)
      fail("checkpoint " + path + ": cannot read tensor '" + param.name + "'");
    arena.write(param.tensor, host.data());
  }

  const char *config = p.training_config;
  auto saved = metadata.find("training_config");
  if (config && saved != metadata.end() && saved->second != config)
    std::fprintf(stderr,
                 "warning: checkpoint %s was written with another training "
                 "config: %s\n",
                 dir.c_str(), saved->second.c_str());
  auto order = metadata.find("data_order");
  if (order != metadata.end() && order->second != dataOrder)
    std::fprintf(stderr,
                 "warning: checkpoint %s was written with data order '%s', "
                 "this run uses '%s'\n",
                 dir.c_str(), order->second.c_str(), dataOrder.c_str());
  return step;
}
