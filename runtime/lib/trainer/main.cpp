//===- main.cpp - the main of compiled Cleave programs --------------------===//
//
// Linked into every compiled program (the cleave_rt_main library). It checks
// the program's metadata and dispatches on its kind: a training program goes
// to the trainer (Train.cpp); an inference program is handled here: parse
// the command line, allocate and fill the arena (parameters from the
// program's initial values, inputs from .npy files), call
// cleave_program_run and write each output to <output-dir>/<name>.npy.
// The arena belongs to the backend (device memory on CUDA): inputs and
// outputs pass through host buffers and the backend's copies.
// Every user error is thrown as trainer::Error and ends the process here
// with "error: ..." and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "Mesh.h"
#include "Program.h"
#include "Train.h"

#include "cleave/Runtime/Npy.h"
#include "cleave/Runtime/cleave_rt.h"
#include "cleave/Version.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <string>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::trainer;
namespace fs = std::filesystem;

namespace {

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
      "  --help              this message\n"
      "  --version           Cleave's version and commit, the ABI, the "
      "backend\n",
      argv0);
  const cleave_program_info &p = program();
  std::printf("\ninputs:\n");
  for (int64_t i = 0; i < p.num_inputs; ++i)
    std::printf("  %s  %s\n", p.inputs[i].name,
                describe(p.inputs[i].tensor).c_str());
  std::printf("outputs:\n");
  for (int64_t i = 0; i < p.num_outputs; ++i)
    std::printf("  %s  %s\n", p.outputs[i].name,
                describe(p.outputs[i].tensor).c_str());
}

struct Options {
  std::vector<std::string> inputFiles; // one per program input
  std::string outputDir;
  int64_t repeat = 0;
};

Options parseArgs(int argc, char **argv) {
  const cleave_program_info &p = program();
  Options opts;
  opts.inputFiles.resize(size_t(p.num_inputs));
  std::vector<std::string> positional;
  auto value = [&](int &i, const std::string &arg, const char *flag) {
    std::string prefix = std::string(flag) + "=";
    if (arg.compare(0, prefix.size(), prefix) == 0)
      return arg.substr(prefix.size());
    if (i + 1 >= argc)
      fail(std::string("missing value after ") + flag);
    return std::string(argv[++i]);
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--output-dir" || arg.rfind("--output-dir=", 0) == 0) {
      opts.outputDir = value(i, arg, "--output-dir");
      continue;
    }
    if (arg == "--repeat" || arg.rfind("--repeat=", 0) == 0) {
      std::string n = value(i, arg, "--repeat");
      char *end = nullptr;
      opts.repeat = std::strtoll(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || opts.repeat < 0)
        fail("--repeat expects a count >= 0, got '" + n + "'");
      continue;
    }
    if (arg != "--input" && arg.rfind("--input=", 0) != 0)
      fail("unknown argument '" + arg + "' (see --help)");
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
      fail(std::string("input '") + p.inputs[match].name + "' is given twice");
    slot = spec.substr(matchLen + 1);
  }
  size_t next = 0;
  for (const std::string &file : positional) {
    while (next < opts.inputFiles.size() && !opts.inputFiles[next].empty())
      ++next;
    if (next == opts.inputFiles.size())
      fail("too many inputs: the program has " + std::to_string(p.num_inputs) +
           ", and '" + file + "' is one more");
    opts.inputFiles[next++] = file;
  }
  for (int64_t in = 0; in < p.num_inputs; ++in)
    if (opts.inputFiles[size_t(in)].empty())
      fail(std::string("missing input '") + p.inputs[in].name +
           "' (give --input " + p.inputs[in].name + "=FILE.npy)");
  if (opts.outputDir.empty() && p.num_outputs > 0)
    fail("missing --output-dir");
  return opts;
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

/// Runs an inference program once (and --repeat times more).
int runInference(int argc, char **argv) {
  const cleave_program_info &p = program();
  Options opts = parseArgs(argc, argv);
  Arena arena(p.arena_bytes);
  initParams(arena);
  std::string error;
  std::vector<char> host; // one tensor at a time, reused
  std::vector<char> block;
  for (int64_t i = 0; i < p.num_inputs; ++i) {
    // The file holds the global value; each device takes its block.
    const cleave_named_tensor &in = p.inputs[i];
    cleave_tensor global = globalTensor(in);
    host.resize(size_t(tensorBytes(global)));
    if (!loadTensorNpy(opts.inputFiles[size_t(i)], global, host.data(), error))
      fail("input '" + std::string(in.name) + "': " + error);
    block.resize(size_t(tensorBytes(in.tensor)));
    copyBlock(in, device().coords, host.data(), block.data());
    arena.write(in.tensor, block.data());
  }
  for (int64_t i = 0; i < p.num_outputs; ++i)
    if (p.outputs[i].sharding)
      fail(std::string("output '") + p.outputs[i].name +
           "' is split over the mesh: writing the blocks of an inference "
           "output is not supported yet (gather it in the program)");

  cleave_program_run(arena.base(), programContext());
  // A device backend reports the errors its kernels raised (an index out
  // of range) here, before any output is written, as the CPU does.
  cleave_rt_synchronize();
  if (opts.repeat > 0) {
    // Inputs and parameters live in the persistent region, which the
    // program only reads, so it can run again on the same arena.
    std::vector<double> ms;
    for (int64_t r = 0; r < opts.repeat; ++r) {
      auto start = std::chrono::steady_clock::now();
      cleave_program_run(arena.base(), programContext());
      // The time of the kernels, not of queueing them on a device.
      cleave_rt_synchronize();
      std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      ms.push_back(took.count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("forward: median %.3f ms, fastest %.3f ms over %lld runs\n",
                ms[ms.size() / 2], ms.front(), (long long)opts.repeat);
  }

  // Every device holds the same outputs: rank 0 writes them.
  if (!isRankZero())
    return 0;
  if (p.num_outputs > 0) {
    std::error_code ec;
    fs::create_directories(opts.outputDir, ec);
    if (ec)
      fail(opts.outputDir +
           ": cannot create the output directory: " + ec.message());
  }
  std::map<std::string, std::string> written;
  for (int64_t i = 0; i < p.num_outputs; ++i) {
    const cleave_named_tensor &out = p.outputs[i];
    std::string file = outputFileName(out.name, i);
    auto [it, fresh] = written.emplace(file, out.name);
    if (!fresh)
      fail("outputs '" + it->second + "' and '" + out.name +
           "' would both be written to " + file);
    std::string path = (fs::path(opts.outputDir) / file).string();
    host.resize(size_t(tensorBytes(out.tensor)));
    arena.read(out.tensor, host.data());
    if (!saveTensorNpy(path, out.tensor, host.data(), error))
      fail(error);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    checkProgram();
    // --help and --version need no engine, so that they work without
    // mpirun; under a launcher the launcher's rank 0 prints them.
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], "--version") == 0) {
        if (launcherRank() == 0)
          std::printf("%s: %s program, runtime ABI %d, %s backend\n",
                      CLEAVE_VERSION_STRING,
                      program().kind == CLEAVE_PROGRAM_TRAINING ? "training"
                                                                : "inference",
                      CLEAVE_RT_ABI_VERSION, cleave_rt_backend_name());
        return 0;
      }
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], "--help") == 0 ||
          std::strcmp(argv[i], "-h") == 0) {
        if (launcherRank() == 0) {
          if (program().kind == CLEAVE_PROGRAM_TRAINING)
            printTrainingUsage(argv[0]);
          else
            printUsage(argv[0]);
        }
        return 0;
      }
    // A partitioned program's engine first: from here on an error on one
    // rank ends every rank.
    startDevice(&argc, &argv);
    int rc = program().kind == CLEAVE_PROGRAM_TRAINING
                 ? runTraining(argc, argv)
                 : runInference(argc, argv);
    stopDevice();
    return rc;
  } catch (const Error &e) {
    cleave_rt_fail("%s", e.what());
  } catch (const std::bad_alloc &) {
    cleave_rt_fail("out of memory");
  } catch (const std::exception &e) {
    cleave_rt_fail("%s", e.what());
  }
  return 1;
}
