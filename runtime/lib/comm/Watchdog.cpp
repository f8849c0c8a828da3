//===- Watchdog.cpp - a stuck collective becomes an error, not a hang -----===//
//
// Every collective waits by polling (MPI_Test on nonblocking MPI calls, the
// stream and the communicator's state for NCCL) from the calling thread
// against a deadline of CLEAVE_COMM_TIMEOUT_S seconds. A rank whose peers
// never join reports which call, on which communicator, after how long, and
// aborts the job, so that every rank ends with a non-zero exit.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <memory>
#include <thread>

using namespace cleave::rt::comm;

double cleave::rt::comm::timeoutSeconds() {
  static const double seconds = [] {
    const char *env = std::getenv("CLEAVE_COMM_TIMEOUT_S");
    if (!env || !*env)
      return 600.0;
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(env, &end);
    if (errno != 0 || *end != '\0' || !(v > 0) || !std::isfinite(v))
      cleave_rt_fail("CLEAVE_COMM_TIMEOUT_S must be a positive number of "
                     "seconds, got '%s'",
                     env);
    return v;
  }();
  return seconds;
}

Watchdog::Watchdog(const char *what, const Group &group)
    : what(what), group(group), start(std::chrono::steady_clock::now()) {}

bool Watchdog::expired() const {
  std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() >= timeoutSeconds();
}

void Watchdog::pause() {
  // About 100 us of spinning, then sleeps that grow to 1 ms: quick for
  // small messages, and idle while a slow peer catches up.
  ++polls;
  if (polls < 1000)
    return;
  unsigned us = polls < 2000 ? 20 : polls < 3000 ? 200 : 1000;
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

void Watchdog::fire() const {
  std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  std::fflush(stdout);
  std::fprintf(stderr,
               "error: rank %d: %s on %s (group rank %d of %d) did not "
               "complete within %g s (CLEAVE_COMM_TIMEOUT_S; %.1f s elapsed): "
               "another rank of the group did not call it or is stuck; "
               "aborting the job\n",
               worldRank(), what, group.label.c_str(), group.rank, group.size,
               timeoutSeconds(), elapsed.count());
  std::fflush(stderr);
  abortEngine();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void cleave::rt::comm::abortEngine() {
  Engine *engine = currentEngine();
  if (!engine)
    return;
  // An abort can itself block on a device that a stuck kernel keeps busy;
  // it runs on a thread of its own so that the job's abort still comes.
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread aborter([engine, done] {
    engine->abort();
    done->store(true);
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done->load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done->load()) {
    aborter.join();
    return;
  }
  std::fprintf(stderr, "note: rank %d: the communication engine's abort did "
                       "not return within 10 s; aborting the job anyway\n",
               worldRank());
  std::fflush(stderr);
  aborter.detach();
}

void cleave::rt::comm::waitRequests(int count, MPI_Request *requests,
                                    MPI_Status *statuses, Watchdog &watchdog) {
  for (;;) {
    int done = 0;
    MPI_Testall(count, requests, &done, statuses);
    if (done)
      return;
    if (watchdog.expired())
      watchdog.fire();
    watchdog.pause();
  }
}
