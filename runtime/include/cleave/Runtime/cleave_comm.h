/*===- cleave_comm.h - the communication C ABI of Cleave programs -*- C -*-===*
 *
 * Collectives between the ranks of a distributed program (DESIGN.md §6). One
 * interface, two engines, chosen when the program is linked like the kernel
 * backend: libcleave_rt_comm_mpi.a (MPI; the arena in host memory, with the
 * CPU backend) and libcleave_rt_comm_nccl.a (NCCL on a communication
 * stream ordered with the CUDA backend's stream by events; the arena in
 * device memory; MPI starts the job and broadcasts each communicator's NCCL
 * unique id).
 *
 * Ranks and groups. The job's ranks are numbered 0..size-1 and laid out
 * row-major on the program's device mesh (the last axis varies fastest).
 * A communicator is one mesh-axis group: the ranks whose mesh coordinates
 * differ only along the given axes. A rank's group rank is the row-major
 * index of its coordinates along those axes taken in the order listed (the
 * first listed axis is the most significant), so a dimension sharded over
 * axes (a, b) is gathered in the order the sharding means. Communicators are
 * created once at start-up, by every rank of the job in the same order.
 *
 * Collectives take tensors in the arena (cleave_tensor descriptors of
 * cleave_rt.h, `arena` the rank's arena base) and are called by every rank
 * of the group in the same order with matching descriptors. On the MPI
 * engine a collective has completed when it returns. On the NCCL engine it
 * returns once it is enqueued, without waiting on the host: it runs on the
 * engine's communication stream after the kernels called before it, and
 * the kernels called after it run after it (the backend's stream waits for
 * it), so the host sees its results as it sees a kernel's, through arena
 * reads and markers (cleave_rt.h). Layouts (n = the group's size, i = a
 * group rank):
 * - all_reduce: out = op over the group of in (same dtype and shape);
 *   `in` and `out` may be the same tensor.
 * - all_gather along dim 0: in [d, ...] -> out [n*d, ...]; out rows
 *   [i*d, (i+1)*d) hold group rank i's in. Being dim 0 of a row-major
 *   tensor, these are n contiguous blocks in group rank order.
 * - reduce_scatter along dim 0: in [n*d, ...] -> out [d, ...]; group rank i
 *   gets rows [i*d, (i+1)*d) of the reduction of every rank's in.
 * - all_to_all along dim 0: in and out [n*c, ...] (same dtype and shape);
 *   the block of rows [j*c, (j+1)*c) of in goes to group rank j, and out's
 *   block i holds what group rank i sent to this rank.
 * - broadcast: `t` on the group root is copied into `t` on every rank.
 * - send / recv: point to point with a group peer (pipeline stages); the
 *   receiver's descriptor must describe as many bytes as the sender's (the
 *   MPI engine reports a shorter message; NCCL cannot tell). A send may
 *   wait for its receive (NCCL's, on the device), so the two sides of a
 *   pair order them opposite; the MPI engine's returns once it has copied
 *   the bytes out of the arena (up to 256 MiB of sends in flight; beyond,
 *   it waits for the oldest), so that the sender goes on computing.
 * - sendrecv: grouped point to point: sends `send` to group rank send_peer
 *   and receives `recv` from group rank recv_peer at once, so that no
 *   order of the ranks' calls deadlocks (a ring of sendrecvs completes).
 *   Either peer may be -1: no send (`send` may be NULL) or no receive
 *   (`recv` may be NULL). It matches the peers' send, recv or sendrecv,
 *   in program order per pair. A rank sends to itself only when it also
 *   receives from itself (a copy). `send` and `recv` never overlap; sizes
 *   must match as for send / recv.
 * - collective_permute: `pairs` holds num_pairs (source, target) group
 *   ranks (2*num_pairs int64s), the same on every rank of the group; no
 *   rank is a source twice or a target twice. Each source's `in` goes to
 *   its target's `out`, and a rank that is nobody's target gets zeros. A
 *   pair (i, i) copies in to out. `in` and `out` have the same dtype and
 *   shape and do not overlap. Every pair moves at once (grouped sends and
 *   receives), so rings and shifts of any size complete.
 * - barrier: returns on every rank once all have entered it (on the NCCL
 *   engine, once the device work called before it has also completed).
 * Reductions (enum cleave_reduction of cleave_rt.h): CLEAVE_SUM,
 * CLEAVE_MEAN (the group average), CLEAVE_MAX_REDUCE, CLEAVE_MIN_REDUCE.
 * f32, f16 and bf16 take every one: the MPI engine accumulates in f32 (f16
 * and bf16 are converted to f32, reduced, and rounded once); NCCL reduces
 * 16-bit types in its own way (f32 arithmetic, rounded to the type at each
 * step of its ring), so those results may differ by a few units in the last
 * place of the 16-bit type. i64 and i32 take sum (wrapping), max and min;
 * i1 takes no reduction. The data movement collectives copy bytes of any
 * dtype. In and out never overlap except where stated.
 *
 * Nonblocking collectives. all_reduce, all_gather, reduce_scatter and
 * all_to_all also start without completing: cleave_comm_<kind>_start takes
 * the blocking call's arguments (checked, and the bytes counted, at the
 * start) and returns a handle, a positive number, and cleave_comm_wait
 * (handle) completes it. The rules:
 * - Until the wait, the program must not touch the collective's buffers:
 *   no kernel or copy may write `in` or read or write `out`. The engine
 *   checks the collectives against each other (a collective that would
 *   write another's buffers in flight, or read what it writes, fails) but
 *   cannot see kernels. After the wait, `out` holds the result for the
 *   host (MPI engine) or for the kernels called next (NCCL engine: the
 *   backend's stream waits for the collective; the host does not).
 * - Waits may come in any order, and blocking collectives may be called
 *   between a start and its wait.
 * - Every rank of the job starts the same collectives, blocking or not,
 *   in the same order (on every communicator, as the ranks create them).
 *   That is what makes them safe: MPI requires it of its nonblocking
 *   collectives, and the NCCL engine issues every collective on one
 *   communication stream in that order, so the ranks' NCCL kernels meet
 *   in the same order, whatever the order of the waits.
 * - A handle is waited for exactly once. Waiting for an unknown handle,
 *   or for one twice, fails; a handle never waited for fails at
 *   cleave_comm_finalize, naming the collective, instead of hanging.
 * - The watchdog's deadline runs from the start.
 * How far a started collective progresses before its wait: on the NCCL
 * engine, as far as the device takes it (it overlaps the kernels called
 * between the start and the wait); on the MPI engine, as far as MPI moves
 * it inside the engine's calls (every call of this header tests the
 * collectives in flight), unless the MPI library progresses it by itself.
 *
 * Errors end the job, never hang it:
 * - Bad descriptors or arguments fail through cleave_rt_fail with a message
 *   naming the collective ("cleave_comm_all_gather: ..."). Once the engine
 *   is initialized, cleave_rt_fail on any rank ends every rank of the job
 *   (MPI_Abort) after printing its message and a note naming the rank.
 * - The watchdog: a collective (or communicator creation) that has not
 *   completed CLEAVE_COMM_TIMEOUT_S seconds (default 600; a positive number)
 *   after it was called fails on each rank waiting for it with
 *   "error: rank R: cleave_comm_<kind> on <communicator> (group rank G of
 *   N) did not complete within T s (CLEAVE_COMM_TIMEOUT_S; E s elapsed)
 *   ...", naming the ABI call (cleave_comm_all_reduce_start for a started
 *   one) and the communicator's mesh axes, and aborts the job with a
 *   non-zero exit (NCCL communicators are aborted first). Waiting ranks
 *   reach their deadlines moments apart, so most print the error before
 *   the first one's MPI_Abort ends them all.
 * - The deadline is checked from the calling thread, without blocking, at
 *   every collective, wait and host_max call, and while the host waits: in
 *   the MPI engine's waits, and on the NCCL engine in every wait of the
 *   CUDA backend (markers, cleave_rt_synchronize, arena reads and writes),
 *   which polls its event and the engine's watchdog in turn. The NCCL
 *   engine records an event after each collective and checks the oldest
 *   one not yet complete (cudaEventQuery, ncclCommGetAsyncError); a host
 *   that has already called a stuck collective reaches one of these
 *   points, so it reports it. No extra thread: an error must end the job
 *   with MPI_Abort, an MPI call, which MPI_THREAD_FUNNELED allows only on
 *   the main thread, and a watchdog thread that made no MPI call would
 *   still have to hand the failure to a main thread that may be blocked
 *   where it cannot see it (and the emulated NCCL of the tests progresses
 *   inside those queries, over MPI).
 *
 * Byte counting, the same in both engines: per communicator and collective
 * kind, the calls, the payload bytes B and the bytes this rank sends for a
 * ring algorithm over the group's n ranks (integer division):
 *   all_reduce      B = tensor bytes        wire = 2 (n-1) B / n
 *   all_gather      B = out bytes (n in's)  wire = (n-1) B / n
 *   reduce_scatter  B = in bytes (n out's)  wire = (n-1) B / n
 *   all_to_all      B = in bytes            wire = (n-1) B / n
 *   broadcast       B = tensor bytes        wire = B, except 0 on the last
 *                   rank of the chain root, root+1, ... (group rank root-1)
 *   send            B = tensor bytes        wire = B
 *   recv            B = tensor bytes        wire = 0
 *   barrier         B = 0                   wire = 0
 *   collective_permute
 *                   B = in bytes            wire = B on a source, except 0
 *                                           for a pair (i, i); else 0
 * A sendrecv counts as a send of the `send` bytes (wire 0 to itself) when
 * send_peer is not -1, and as a recv of the `recv` bytes when recv_peer is
 * not -1.
 * Bytes are counted at the tensor's dtype whatever an engine converts to
 * internally; a group of one rank sends nothing. A nonblocking collective
 * counts as its blocking form, at its start.
 *
 *===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RUNTIME_CLEAVE_COMM_H
#define CLEAVE_RUNTIME_CLEAVE_COMM_H

#include "cleave/Runtime/cleave_rt.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The communicator of every rank of the job, created by cleave_comm_init. */
#define CLEAVE_COMM_WORLD 0
#define CLEAVE_COMM_MAX_MESH_RANK CLEAVE_RT_MAX_MESH_RANK

/* Collective kinds, for the byte counters. */
enum cleave_comm_kind {
  CLEAVE_COMM_ALL_REDUCE = 0,
  CLEAVE_COMM_ALL_GATHER,
  CLEAVE_COMM_REDUCE_SCATTER,
  CLEAVE_COMM_ALL_TO_ALL,
  CLEAVE_COMM_BROADCAST,
  CLEAVE_COMM_SEND,
  CLEAVE_COMM_RECV,
  CLEAVE_COMM_BARRIER,
  CLEAVE_COMM_COLLECTIVE_PERMUTE,
  CLEAVE_COMM_NUM_KINDS,
};

/* Start-up and shutdown, from the program's main. init starts MPI
 * (MPI_Init_thread, MPI_THREAD_FUNNELED: call every function of this
 * header from the thread that called init), reads CLEAVE_COMM_TIMEOUT_S,
 * makes cleave_rt_fail end the whole job, and creates CLEAVE_COMM_WORLD.
 * The NCCL engine also selects this rank's GPU (its rank among the ranks of
 * its node, modulo the node's device count), so init comes before
 * cleave_rt_backend_init and the arena. finalize fails, naming them, if a
 * nonblocking collective was never waited for; else it waits for the
 * collectives still running on the device (under the watchdog), frees the
 * communicators and ends MPI (if init started it). */
void cleave_comm_init(int *argc, char ***argv);
void cleave_comm_finalize(void);
/* "mpi" or "nccl". */
const char *cleave_comm_engine_name(void);
int32_t cleave_comm_world_rank(void);
int32_t cleave_comm_world_size(void);
/* Fails on every rank, naming both numbers, unless the job has `expected`
 * ranks (the program's mesh size). Every rank prints the error, then the
 * job exits with status 1. */
void cleave_comm_expect_world_size(int32_t expected);

/* The communicator of this rank's group along `axes` (num_axes distinct
 * axes in [0, mesh_rank), in the order that numbers the group, see above)
 * of the row-major mesh `mesh_shape`, whose size must be the job's. Called
 * by every rank; asking twice for the same group returns the same handle.
 * num_axes = mesh_rank with axes in mesh order is CLEAVE_COMM_WORLD. */
int32_t cleave_comm_group(int32_t mesh_rank, const int64_t *mesh_shape,
                          int32_t num_axes, const int64_t *axes);
/* This rank's group rank and the group's size. */
int32_t cleave_comm_rank(int32_t comm);
int32_t cleave_comm_size(int32_t comm);

/* The collectives; `op` is an enum cleave_reduction. */
void cleave_comm_all_reduce(int32_t comm, char *arena, int32_t op,
                            const cleave_tensor *in, const cleave_tensor *out);
void cleave_comm_all_gather(int32_t comm, char *arena, const cleave_tensor *in,
                            const cleave_tensor *out);
void cleave_comm_reduce_scatter(int32_t comm, char *arena, int32_t op,
                                const cleave_tensor *in,
                                const cleave_tensor *out);
void cleave_comm_all_to_all(int32_t comm, char *arena, const cleave_tensor *in,
                            const cleave_tensor *out);
void cleave_comm_broadcast(int32_t comm, char *arena, const cleave_tensor *t,
                           int32_t root);
void cleave_comm_send(int32_t comm, char *arena, const cleave_tensor *t,
                      int32_t peer);
void cleave_comm_recv(int32_t comm, char *arena, const cleave_tensor *t,
                      int32_t peer);
void cleave_comm_sendrecv(int32_t comm, char *arena, const cleave_tensor *send,
                          int32_t send_peer, const cleave_tensor *recv,
                          int32_t recv_peer);
/* A receive started early, completed by cleave_comm_wait(handle) where the
 * blocking receive would be: the MPI engine posts it now, so that the
 * peer's send does not wait for this rank to reach its receive; the NCCL
 * engine issues it at the wait (its stream runs transfers in the order
 * they are issued, and the device overlaps them anyway). It matches the
 * peer's sends in the order of this rank's receives as posted: a program
 * starts no receive before an earlier receive from the same peer. Until
 * the wait nothing may read or write `t` (checked against the other
 * transfers and collectives, as for the nonblocking collectives). Counted
 * as a recv at the start; the timeline records its wait. */
int64_t cleave_comm_recv_start(int32_t comm, char *arena,
                               const cleave_tensor *t, int32_t peer);
void cleave_comm_collective_permute(int32_t comm, char *arena,
                                    const cleave_tensor *in,
                                    const cleave_tensor *out,
                                    const int64_t *pairs, int64_t num_pairs);
void cleave_comm_barrier(int32_t comm);

/* The nonblocking collectives (see above): each starts what its blocking
 * form does and returns a handle for cleave_comm_wait. */
int64_t cleave_comm_all_reduce_start(int32_t comm, char *arena, int32_t op,
                                     const cleave_tensor *in,
                                     const cleave_tensor *out);
int64_t cleave_comm_all_gather_start(int32_t comm, char *arena,
                                     const cleave_tensor *in,
                                     const cleave_tensor *out);
int64_t cleave_comm_reduce_scatter_start(int32_t comm, char *arena, int32_t op,
                                         const cleave_tensor *in,
                                         const cleave_tensor *out);
int64_t cleave_comm_all_to_all_start(int32_t comm, char *arena,
                                     const cleave_tensor *in,
                                     const cleave_tensor *out);
/* The sends and receives of a collective_permute, started at once as the
 * blocking form groups them (a ring never deadlocks): the MPI engine posts
 * both, the NCCL engine issues the group on its stream. A member that is
 * nobody's target has its `out` zeroed at the start. */
int64_t cleave_comm_collective_permute_start(int32_t comm, char *arena,
                                             const cleave_tensor *in,
                                             const cleave_tensor *out,
                                             const int64_t *pairs,
                                             int64_t num_pairs);
/* Completes the collective of `handle`, as far as the program's next work
 * needs (see above); once per handle. */
void cleave_comm_wait(int64_t handle);

/* Byte counters (see above), this rank's, since init or the last reset. */
typedef struct cleave_comm_counter {
  int64_t calls;
  int64_t payload_bytes;
  int64_t wire_bytes;
} cleave_comm_counter;
void cleave_comm_get_counter(int32_t comm, int32_t kind,
                             cleave_comm_counter *out);
void cleave_comm_reset_counters(void);
/* Writes this rank's counters as a table: one row per communicator and
 * collective kind that was called, and a total. */
void cleave_comm_print_stats(FILE *out);

/* The measured timeline of a pipelined program (the trainer's --trace).
 * The compiled stage program calls cleave_comm_trace_phase where each step
 * of its schedule begins (-dist-pipeline-parallel's dist.pipeline_step);
 * the trainer brackets each run of the program with cleave_comm_trace_step.
 * While tracing is on (cleave_comm_trace_start .. cleave_comm_trace_stop),
 * the engine records, in seconds since the start:
 * - a STEP event per run of the program (`step` the training step);
 * - a FORWARD, BACKWARD or OPTIMIZER event per schedule step, from its
 *   mark to the next mark or the end of the run (microbatch, chunk);
 * - a SEND, RECV or SENDRECV event per point-to-point transfer, from its
 *   call to its return (`peer` the group rank sent to, or received from
 *   for a recv; a sendrecv's send peer), the time the rank waits.
 * The NCCL engine waits for the device at each mark and transfer while
 * tracing, so that the host's clock sees when the work ended (tracing
 * slows it); the MPI engine's calls complete when they return. Nothing is
 * recorded, and the calls cost a test, while tracing is off. */
enum cleave_comm_trace_kind {
  CLEAVE_COMM_TRACE_FORWARD = 0,
  CLEAVE_COMM_TRACE_BACKWARD,
  CLEAVE_COMM_TRACE_OPTIMIZER,
  CLEAVE_COMM_TRACE_SEND,
  CLEAVE_COMM_TRACE_RECV,
  CLEAVE_COMM_TRACE_SENDRECV,
  CLEAVE_COMM_TRACE_STEP,
};
typedef struct cleave_comm_trace_event {
  double start, end; /* seconds since cleave_comm_trace_start */
  int32_t kind;      /* enum cleave_comm_trace_kind */
  int32_t step;      /* the training step (of the enclosing run) */
  int32_t microbatch, chunk; /* FORWARD, BACKWARD; else 0 */
  int32_t peer;              /* SEND, RECV, SENDRECV; else -1 */
  int32_t pad;
} cleave_comm_trace_event;
/* Clears the events and starts the clock; stop ends an open event. */
void cleave_comm_trace_start(void);
void cleave_comm_trace_stop(void);
/* The trainer, around each cleave_program_run: begin = 1 before, 0 after. */
void cleave_comm_trace_step(int32_t step, int32_t begin);
/* The compiled program: a schedule step of `kind` (FORWARD, BACKWARD or
 * OPTIMIZER) begins. */
void cleave_comm_trace_phase(int32_t kind, int32_t microbatch, int32_t chunk);
/* The events recorded, in order of their start; valid until the next
 * cleave_comm_trace_start. */
int64_t cleave_comm_trace_events(const cleave_comm_trace_event **events);

/* Gathers `bytes` bytes of host memory from every rank of `comm` into
 * `out` on group rank 0 (size * bytes, in group rank order; ignored on the
 * other ranks), under the watchdog. Not a collective of the program: not
 * counted. */
void cleave_comm_host_gather(int32_t comm, const void *data, int64_t bytes,
                             void *out);

/* The engine's entry points that a program's main uses, as one table: a
 * partitioned program's metadata points at it (cleave_program_info.comm),
 * so linking the program pulls in the engine, and the main, linked into
 * programs for one device as well, needs no reference of its own. */
typedef struct cleave_comm_api {
  void (*init)(int *argc, char ***argv);
  void (*finalize)(void);
  const char *(*engine_name)(void);
  int32_t (*world_rank)(void);
  int32_t (*world_size)(void);
  void (*expect_world_size)(int32_t expected);
  int32_t (*group)(int32_t mesh_rank, const int64_t *mesh_shape,
                   int32_t num_axes, const int64_t *axes);
  int32_t (*rank)(int32_t comm);
  int32_t (*size)(int32_t comm);
  void (*barrier)(int32_t comm);
  /* The maximum of `value` over the ranks of `comm`, on the host: how the
   * ranks agree once per step (to stop after the same step). */
  int64_t (*host_max)(int32_t comm, int64_t value);
  void (*get_counter)(int32_t comm, int32_t kind, cleave_comm_counter *out);
  void (*reset_counters)(void);
  void (*print_stats)(FILE *out);
  const char *(*kind_name)(int32_t kind);
  void (*host_gather)(int32_t comm, const void *data, int64_t bytes,
                      void *out);
  void (*trace_start)(void);
  void (*trace_stop)(void);
  void (*trace_step)(int32_t step, int32_t begin);
  int64_t (*trace_events)(const cleave_comm_trace_event **events);
} cleave_comm_api;
extern const cleave_comm_api cleave_comm_engine;

/* The maximum of `value` over the ranks of `comm` (host memory). */
int64_t cleave_comm_host_max(int32_t comm, int64_t value);
/* The name of collective kind `kind` ("all_reduce", ...), NULL if unknown. */
const char *cleave_comm_kind_name(int32_t kind);

#ifdef __cplusplus
}
#endif

#endif /* CLEAVE_RUNTIME_CLEAVE_COMM_H */
