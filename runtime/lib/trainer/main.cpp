//===- main.cpp - the main of compiled Cleave programs --------------------===//
//
// Linked into every compiled program (the cleave_rt_main library): parses
// the command line, allocates and fills the arena (parameters from the
// program's initial values, inputs from .npy files), calls
// cleave_program_run and writes each output to <output-dir>/<name>.npy.
// Every error ends the process with "error: ..." and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Npy.h"
#include "cleave/Runtime/cleave_rt.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace cleave::rt;
namespace fs = std::filesystem;

namespace {

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};
struct FileCloser {
  void operator()(FILE *f) const { std::fclose(f); }
};

[[noreturn]] void fatal(const std::string &message) {
  cleave_rt_fail("%s", message.c_str());
  std::abort(); // unreachable: cleave_rt_fail exits
}

void printUsage(const char *argv0) {
  std::printf(
      "usage: %s [--input NAME=FILE.npy | --input FILE.npy]... "
      "--output-dir DIR\n\n"
      "Runs the compiled program once: loads each input from a .npy file\n"
      "(by name, or positionally in the program's input order), then writes\n"
      "each output to DIR/<name>.npy.\n\n"
      "options:\n"
      "  --input NAME=FILE   the .npy file of input NAME\n"
      "  --input FILE        the .npy file of the next unnamed input\n"
      "  --output-dir DIR    where outputs are written (created if needed)\n"
      "  --repeat N          time N more runs after the first and print the\n"
      "                      median and fastest forward time\n"
      "  --help              this message\n",
      argv0);
  const cleave_program_info &p = cleave_program;
  std::printf("\ninputs:\n");
  for (int64_t i = 0; i < p.num_inputs; ++i)
    std::printf("  %s\n", p.inputs[i].name);
  std::printf("outputs:\n");
  for (int64_t i = 0; i < p.num_outputs; ++i)
    std::printf("  %s\n", p.outputs[i].name);
}

struct Options {
  std::vector<std::string> inputFiles; // one per program input
  std::string outputDir;
  int64_t repeat = 0;
};

Options parseArgs(int argc, char **argv) {
  const cleave_program_info &p = cleave_program;
  Options opts;
  opts.inputFiles.resize(size_t(p.num_inputs));
  std::vector<std::string> positional;
  auto value = [&](int &i, const std::string &arg, const char *flag) {
    std::string prefix = std::string(flag) + "=";
    if (arg.compare(0, prefix.size(), prefix) == 0)
      return arg.substr(prefix.size());
    if (i + 1 >= argc)
      fatal(std::string("missing value after ") + flag);
    return std::string(argv[++i]);
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      printUsage(argv[0]);
      std::exit(0);
    }
    if (arg == "--output-dir" || arg.rfind("--output-dir=", 0) == 0) {
      opts.outputDir = value(i, arg, "--output-dir");
      continue;
    }
    if (arg == "--repeat" || arg.rfind("--repeat=", 0) == 0) {
      std::string n = value(i, arg, "--repeat");
      char *end = nullptr;
      opts.repeat = std::strtoll(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || opts.repeat < 0)
        fatal("--repeat expects a count >= 0, got '" + n + "'");
      continue;
    }
    if (arg != "--input" && arg.rfind("--input=", 0) != 0)
      fatal("unknown argument '" + arg + "' (see --help)");
    std::string spec = value(i, arg, "--input");
    // NAME=FILE when the text before an '=' names an input (the longest
    // such name wins); anything else is a file for the next unnamed input.
    int64_t match = -1;
    size_t matchLen = 0;
    for (int64_t in = 0; in < p.num_inputs; ++in) {
      std::string name = p.inputs[in].name;
      if (spec.size() > name.size() &&
          spec.compare(0, name.size(), name) == 0 && spec[name.size()] == '=' &&
          name.size() >= matchLen) {
        match = in;
        matchLen = name.size();
      }
    }
    if (match < 0) {
      positional.push_back(spec);
      continue;
    }
    std::string &slot = opts.inputFiles[size_t(match)];
    if (!slot.empty())
      fatal(std::string("input '") + p.inputs[match].name + "' is given twice");
    slot = spec.substr(matchLen + 1);
  }
  size_t next = 0;
  for (const std::string &file : positional) {
    while (next < opts.inputFiles.size() && !opts.inputFiles[next].empty())
      ++next;
    if (next == opts.inputFiles.size())
      fatal("too many inputs: the program has " + std::to_string(p.num_inputs) +
            ", and '" + file + "' is one more");
    opts.inputFiles[next++] = file;
  }
  for (int64_t in = 0; in < p.num_inputs; ++in)
    if (opts.inputFiles[size_t(in)].empty())
      fatal(std::string("missing input '") + p.inputs[in].name +
            "' (give --input " + p.inputs[in].name + "=FILE.npy)");
  if (opts.outputDir.empty() && p.num_outputs > 0)
    fatal("missing --output-dir");
  return opts;
}

int64_t tensorBytes(const cleave_tensor &t) {
  static const int64_t sizes[] = {4, 2, 2, 8, 4, 1};
  int64_t n = t.dtype >= 0 && t.dtype <= CLEAVE_I1 ? sizes[t.dtype] : 0;
  for (int d = 0; d < t.rank; ++d)
    n *= t.shape[d];
  return n;
}

/// Checks that each named tensor is well formed and lies inside the arena.
void checkTensors(const char *kind, const cleave_named_tensor *list,
                  int64_t count, int64_t arenaBytes) {
  for (int64_t i = 0; i < count; ++i) {
    const cleave_named_tensor &nt = list[i];
    const cleave_tensor &t = nt.tensor;
    std::string what =
        std::string(kind) + " '" + (nt.name ? nt.name : "") + "'";
    if (!nt.name)
      fatal(std::string(kind) + " " + std::to_string(i) + " has no name");
    if (t.dtype < 0 || t.dtype > CLEAVE_I1 || t.rank < 0 ||
        t.rank > CLEAVE_RT_MAX_RANK)
      fatal("program metadata: " + what + " has dtype " +
            std::to_string(t.dtype) + " and rank " + std::to_string(t.rank));
    for (int d = 0; d < t.rank; ++d)
      if (t.shape[d] < 0)
        fatal("program metadata: " + what + " has a negative size");
    if (t.offset < 0 || t.offset + tensorBytes(t) > arenaBytes)
      fatal("program metadata: " + what + " at offset " +
            std::to_string(t.offset) + " (" + std::to_string(tensorBytes(t)) +
            " bytes) lies outside the arena of " + std::to_string(arenaBytes) +
            " bytes");
  }
}

/// A relative init_file is looked up in the working directory, then next to
/// the executable, so that a program and its weight files can move together.
std::string resolveInitFile(const std::string &file) {
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

void initParams(char *arena) {
  const cleave_program_info &p = cleave_program;
  for (int64_t i = 0; i < p.num_params; ++i) {
    const cleave_named_tensor &param = p.params[i];
    char *dst = arena + param.tensor.offset;
    size_t bytes = size_t(tensorBytes(param.tensor));
    if (param.init_data) {
      std::memcpy(dst, param.init_data, bytes);
      continue;
    }
    if (!param.init_file)
      continue; // stays zero
    std::string file = resolveInitFile(param.init_file);
    std::unique_ptr<FILE, FileCloser> f(std::fopen(file.c_str(), "rb"));
    if (!f)
      fatal(file + ": cannot open the initial value of parameter '" +
            param.name + "': " + std::strerror(errno));
    if (param.init_offset < 0 ||
        std::fseek(f.get(), long(param.init_offset), SEEK_SET) != 0)
      fatal(file + ": cannot seek to offset " +
            std::to_string(param.init_offset) + " for parameter '" +
            param.name + "'");
    size_t got = bytes ? std::fread(dst, 1, bytes, f.get()) : 0;
    if (got != bytes)
      fatal(file + ": parameter '" + param.name + "' needs " +
            std::to_string(bytes) + " bytes at offset " +
            std::to_string(param.init_offset) + ", the file has " +
            std::to_string(got));
  }
}

/// The output file name: the output's name with every character outside
/// [A-Za-z0-9._-] replaced by '_' (ONNX names may contain '/' or ':').
std::string outputFileName(const char *name, int64_t index) {
  std::string s = name;
  for (char &c : s)
    if (!(std::isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-'))
      c = '_';
  if (s.empty() || s == "." || s == "..")
    s = "output" + std::to_string(index);
  return s + ".npy";
}

} // namespace

int main(int argc, char **argv) {
  const cleave_program_info &p = cleave_program;
  if (p.abi_version != CLEAVE_RT_ABI_VERSION)
    fatal("the program was compiled for runtime ABI version " +
          std::to_string(p.abi_version) + " but this runtime implements " +
          std::to_string(CLEAVE_RT_ABI_VERSION));
  if (p.arena_bytes < 0)
    fatal("program metadata: negative arena size");
  checkTensors("parameter", p.params, p.num_params, p.arena_bytes);
  checkTensors("input", p.inputs, p.num_inputs, p.arena_bytes);
  checkTensors("output", p.outputs, p.num_outputs, p.arena_bytes);
  Options opts = parseArgs(argc, argv);

  // One zeroed, 64-byte aligned arena (aligned_alloc needs a multiple).
  size_t arenaBytes = (size_t(p.arena_bytes) + 63) / 64 * 64;
  if (arenaBytes == 0)
    arenaBytes = 64;
  std::unique_ptr<char, FreeDeleter> arena(
      static_cast<char *>(std::aligned_alloc(64, arenaBytes)));
  if (!arena)
    fatal("cannot allocate the arena of " + std::to_string(p.arena_bytes) +
          " bytes");
  std::memset(arena.get(), 0, arenaBytes);

  initParams(arena.get());
  std::string error;
  for (int64_t i = 0; i < p.num_inputs; ++i) {
    const cleave_named_tensor &in = p.inputs[i];
    if (!loadTensorNpy(opts.inputFiles[size_t(i)], in.tensor,
                       arena.get() + in.tensor.offset, error))
      fatal("input '" + std::string(in.name) + "': " + error);
  }

  cleave_program_run(arena.get());
  if (opts.repeat > 0) {
    // Inputs and parameters live in the persistent region, which the
    // program only reads, so it can run again on the same arena.
    std::vector<double> ms;
    for (int64_t r = 0; r < opts.repeat; ++r) {
      auto start = std::chrono::steady_clock::now();
      cleave_program_run(arena.get());
      std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      ms.push_back(took.count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("forward: median %.3f ms, fastest %.3f ms over %lld runs\n",
                ms[ms.size() / 2], ms.front(), (long long)opts.repeat);
  }

  if (p.num_outputs > 0) {
    std::error_code ec;
    fs::create_directories(opts.outputDir, ec);
    if (ec)
      fatal(opts.outputDir +
            ": cannot create the output directory: " + ec.message());
  }
  std::map<std::string, std::string> written;
  for (int64_t i = 0; i < p.num_outputs; ++i) {
    const cleave_named_tensor &out = p.outputs[i];
    std::string file = outputFileName(out.name, i);
    auto [it, fresh] = written.emplace(file, out.name);
    if (!fresh)
      fatal("outputs '" + it->second + "' and '" + out.name +
            "' would both be written to " + file);
    std::string path = (fs::path(opts.outputDir) / file).string();
    if (!saveTensorNpy(path, out.tensor, arena.get() + out.tensor.offset,
                       error))
      fatal(error);
  }
  return 0;
}
