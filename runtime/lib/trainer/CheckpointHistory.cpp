//===- CheckpointHistory.cpp - the trainer's --keep-last history ---------===//
//
// DIR/step_N for each checkpoint of a run with --keep-last K, the K latest
// kept; --resume DIR takes the latest complete one (Checkpoint.h).
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

using namespace cleave::rt::trainer;
namespace fs = std::filesystem;

namespace {

/// The entries of the history in `dir` that hold a checkpoint, by step.
std::map<int64_t, fs::path> historyEntries(const std::string &dir) {
  std::map<int64_t, fs::path> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("step_", 0) != 0 || name.size() == 5 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos ||
        name.size() > 5 + 18)
      continue;
    if (holdsCheckpoint(it->path().string()))
      entries[std::stoll(name.substr(5))] = it->path();
  }
  return entries;
}

} // namespace

std::string cleave::rt::trainer::historyEntry(const std::string &dir,
                                              int64_t step) {
  return (fs::path(dir) / ("step_" + std::to_string(step))).string();
}

std::string cleave::rt::trainer::latestCheckpoint(const std::string &dir) {
  if (holdsCheckpoint(dir))
    return dir;
  std::map<int64_t, fs::path> entries = historyEntries(dir);
  return entries.empty() ? dir : entries.rbegin()->second.string();
}

void cleave::rt::trainer::pruneHistory(const std::string &dir, int64_t keep) {
  std::map<int64_t, fs::path> entries = historyEntries(dir);
  int64_t extra = int64_t(entries.size()) - keep;
  for (auto it = entries.begin(); extra > 0; ++it, --extra) {
    std::error_code ec;
    fs::remove_all(it->second, ec);
    if (ec)
      std::fprintf(stderr, "warning: cannot remove the old checkpoint %s: %s\n",
                   it->second.c_str(), ec.message().c_str());
  }
}
