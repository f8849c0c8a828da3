//===- FakeNccl.cpp - NCCL's communicators and collectives over MPI ------===//
//
// Lets the NCCL engine (runtime/lib/comm/NcclEngine.cpp) run unchanged on
// several ranks of one machine in CI, each on its emulated GPU (FakeCuda.h),
// whose device memory is host memory that MPI can read and write.
//
// Communicators. ncclGetUniqueId records the calling world rank (the
// bootstrap root) and a serial number. ncclCommInitRankConfig bootstraps
// through the root, as NCCL does: each member sends its (rank, world rank)
// to the root, the root answers with the table of world ranks, and the
// members make an MPI communicator of their own (MPI_Comm_create_group,
// collective over the members only) in which the MPI rank is the NCCL rank.
// The bootstrap messages go over MPI_COMM_WORLD with tags from kBootTag up.
// With config.blocking = 0 the bootstrap moves on each time
// ncclCommGetAsyncError is polled, and the calls return ncclInProgress, as
// NCCL's nonblocking communicators do.
//
// Operations. Each call, or each ncclGroupStart/End group, is host work on
// the call's emulated stream (fake::enqueueHostWork): in stream order it
// copies its inputs, starts nonblocking MPI operations on the communicator
// and, once they have completed, writes its outputs. It moves on only when
// the host polls its stream (a query, a wait, or a stream that waits for an
// event on it). Work after it on the stream waits, and an event recorded
// after it is not complete, so the engine's watchdog sees a collective
// that another rank never joins. Sums of f16 and
// bf16 add in f32 and round once (NCCL rounds at each step of its ring, so
// its sums may differ in the last bits); ncclAvg is the sum divided by the
// size. ncclSend is a synchronous MPI send (MPI_Issend): as in NCCL, a send
// is not done before its peer's receive has started, so that sends and
// receives that must progress together complete only in one group (a ring
// of ungrouped sends hangs, as it does on GPUs). ncclCommAbort abandons the
// communicator's pending work at once.
//
//===----------------------------------------------------------------------===//

#include "nccl.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct ncclComm {
  int rank = 0, size = 1;
  /// The bootstrap root's world rank, and the first of the three tags of
  /// this communicator's bootstrap.
  int root = 0, tag = 0;
  bool ready = false, aborted = false;
  ncclResult_t error = ncclSuccess;
  std::string lastError;
  MPI_Comm mpi = MPI_COMM_NULL;
  /// This member's (rank, world rank), and at the root every other
  /// member's, as they arrive.
  int me[2] = {0, 0};
  std::vector<int> entries;
  /// The world rank of each rank, once known.
  std::vector<int> table;
  std::vector<MPI_Request> pending;
  bool tableSent = false;
};

namespace {

constexpr int kBootTag = 20000;
constexpr unsigned kBootSerials = 3000; // tags up to kBootTag + 9000 < 32767
constexpr int kP2pTag = 7;
constexpr char kMagic[8] = "fknccl1";

struct IdContents {
  char magic[8];
  int root;
  unsigned serial;
};

std::string &globalError() {
  static std::string error;
  return error;
}

ncclResult_t failWith(ncclComm_t comm, ncclResult_t result,
                      const std::string &message) {
  (comm ? comm->lastError : globalError()) = message;
  return result;
}

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

bool mpiRunning() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

/// Moves the bootstrap on; ncclSuccess once the communicator is ready.
ncclResult_t progressBootstrap(ncclComm &c) {
  if (c.ready || c.error != ncclSuccess)
    return c.error;
  int done = 0;
  MPI_Testall(int(c.pending.size()), c.pending.data(), &done,
              MPI_STATUSES_IGNORE);
  if (!done)
    return ncclInProgress;
  c.pending.clear();
  if (worldRank() == c.root && !c.tableSent) {
    // Every member's entry is in: the table, then one copy per member.
    c.table.assign(size_t(c.size), -1);
    c.table[size_t(c.me[0])] = c.me[1];
    for (size_t i = 0; i + 1 < size_t(c.size); ++i) {
      int r = c.entries[2 * i], w = c.entries[2 * i + 1];
      if (r < 0 || r >= c.size || c.table[size_t(r)] != -1) {
        c.error = ncclInvalidUsage;
        return failWith(&c, c.error,
                        "two members of the communicator claim rank " +
                            std::to_string(r));
      }
      c.table[size_t(r)] = w;
    }
    for (int r = 0; r < c.size; ++r)
      if (r != c.me[0]) {
        c.pending.emplace_back();
        MPI_Isend(c.table.data(), c.size, MPI_INT, c.table[size_t(r)],
                  c.tag + 1, MPI_COMM_WORLD, &c.pending.back());
      }
    c.tableSent = true;
    return ncclInProgress;
  }
  // The table is known (and, at the root, sent): every member now makes
  // the communicator, in table order.
  MPI_Group world, members;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, c.size, c.table.data(), &members);
  MPI_Comm_create_group(MPI_COMM_WORLD, members, c.tag + 2, &c.mpi);
  MPI_Group_free(&members);
  MPI_Group_free(&world);
  c.ready = true;
  return ncclSuccess;
}

//===----------------------------------------------------------------------===//
// Operations as host work on the stream
//===----------------------------------------------------------------------===//

/// One MPI operation: `start` copies the inputs and posts its requests,
/// `finish` writes the outputs once they completed.
struct Op {
  ncclComm *comm;
  std::function<void(std::vector<MPI_Request> &)> start;
  std::function<void()> finish;
};

/// The operations of one call or group, in stream order.
struct Work {
  std::vector<Op> ops;
  std::vector<MPI_Request> requests;
  bool started = false;
  /// The stream of a group's operations (NCCL requires one per group).
  cudaStream_t stream = nullptr;

  bool poll() {
    for (const Op &op : ops)
      if (op.comm->aborted)
        return true; // abandoned: the job is ending
    if (!started) {
      for (Op &op : ops)
        op.start(requests);
      started = true;
    }
    int done = 0;
    MPI_Testall(int(requests.size()), requests.data(), &done,
                MPI_STATUSES_IGNORE);
    if (!done)
      return false;
    for (Op &op : ops)
      op.finish();
    return true;
  }
};

int groupDepth = 0;
std::shared_ptr<Work> groupWork;

void enqueue(Op op, cudaStream_t stream) {
  if (groupDepth > 0) {
    groupWork->ops.push_back(std::move(op));
    groupWork->stream = stream;
    return;
  }
  auto work = std::make_shared<Work>();
  work->ops.push_back(std::move(op));
  fake::enqueueHostWork([work] { return work->poll(); }, stream);
}

size_t elementBytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

bool is16Bit(ncclDataType_t t) { return t == ncclFloat16 || t == ncclBfloat16; }

/// The MPI type that reductions of `t` run in (f32 for the 16-bit floats).
MPI_Datatype wireType(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
    return MPI_INT8_T;
  case ncclUint8:
    return MPI_UINT8_T;
  case ncclInt32:
    return MPI_INT32_T;
  case ncclUint32:
    return MPI_UINT32_T;
  case ncclInt64:
    return MPI_INT64_T;
  case ncclUint64:
    return MPI_UINT64_T;
  case ncclFloat64:
    return MPI_DOUBLE;
  default:
    return MPI_FLOAT;
  }
}

size_t wireBytes(ncclDataType_t t) { return is16Bit(t) ? 4 : elementBytes(t); }

MPI_Op mpiOp(ncclRedOp_t op) {
  switch (op) {
  case ncclProd:
    return MPI_PROD;
  case ncclMax:
    return MPI_MAX;
  case ncclMin:
    return MPI_MIN;
  default:
    return MPI_SUM;
  }
}

/// `count` elements of `src` in the reduction's wire type.
std::vector<char> toWire(const void *src, ncclDataType_t t, size_t count) {
  std::vector<char> wire(count * wireBytes(t));
  const uint16_t *bits = static_cast<const uint16_t *>(src);
  for (size_t i = 0; is16Bit(t) && i < count; ++i) {
    float v = t == ncclFloat16 ? cleave::rt::halfToFloat(bits[i])
                               : cleave::rt::bf16ToFloat(bits[i]);
    std::memcpy(wire.data() + 4 * i, &v, 4);
  }
  if (!is16Bit(t) && count)
    std::memcpy(wire.data(), src, wire.size());
  return wire;
}

template <class T> void divideAll(std::vector<char> &wire, int by) {
  for (size_t i = 0; i < wire.size() / sizeof(T); ++i) {
    T v;
    std::memcpy(&v, wire.data() + i * sizeof(T), sizeof(T));
    v = T(v / T(by));
    std::memcpy(wire.data() + i * sizeof(T), &v, sizeof(T));
  }
}

/// Writes the reduced `wire` to `dst` (divided by `size` for ncclAvg).
void fromWire(std::vector<char> &wire, void *dst, ncclDataType_t t,
              ncclRedOp_t op, int size) {
  if (op == ncclAvg)
    switch (t) {
    case ncclInt8:
      divideAll<int8_t>(wire, size);
      break;
    case ncclUint8:
      divideAll<uint8_t>(wire, size);
      break;
    case ncclInt32:
      divideAll<int32_t>(wire, size);
      break;
    case ncclUint32:
      divideAll<uint32_t>(wire, size);
      break;
    case ncclInt64:
      divideAll<int64_t>(wire, size);
      break;
    case ncclUint64:
      divideAll<uint64_t>(wire, size);
      break;
    case ncclFloat64:
      divideAll<double>(wire, size);
      break;
    default:
      divideAll<float>(wire, size);
    }
  size_t count = wire.size() / wireBytes(t);
  uint16_t *bits = static_cast<uint16_t *>(dst);
  for (size_t i = 0; is16Bit(t) && i < count; ++i) {
    float v;
    std::memcpy(&v, wire.data() + 4 * i, 4);
    bits[i] = t == ncclFloat16 ? cleave::rt::floatToHalf(v)
                               : cleave::rt::floatToBf16(v);
  }
  if (!is16Bit(t) && count)
    std::memcpy(dst, wire.data(), wire.size());
}

/// Checks what every operation needs; ncclSuccess when it may be enqueued.
ncclResult_t checkCall(const char *fn, ncclComm_t comm, size_t count,
                       ncclDataType_t t,
                       std::initializer_list<const void *> buffers,
                       cudaStream_t stream, size_t scale = 1) {
  std::string f = fn;
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, f + ": no communicator");
  if (comm->aborted || !comm->ready)
    return failWith(comm, ncclInvalidUsage,
                    f + ": the communicator is " +
                        (comm->aborted ? "aborted" : "not yet initialized"));
  if (!stream)
    return failWith(comm, ncclInvalidArgument, f + ": no stream");
  if (t < ncclInt8 || t > ncclBfloat16)
    return failWith(comm, ncclInvalidArgument, f + ": unknown datatype");
  if (count > size_t(INT_MAX) / (scale * wireBytes(t)))
    return failWith(comm, ncclInvalidArgument,
                    f + ": more bytes than the emulation's MPI counts hold");
  for (const void *b : buffers)
    if (count && !b)
      return failWith(comm, ncclInvalidArgument, f + ": a null buffer");
  return ncclSuccess;
}

ncclResult_t checkRank(const char *fn, ncclComm_t comm, int r,
                       const char *what) {
  if (r >= 0 && r < comm->size)
    return ncclSuccess;
  return failWith(comm, ncclInvalidArgument,
                  std::string(fn) + ": " + what + " " + std::to_string(r) +
                      " is not a rank of the communicator of " +
                      std::to_string(comm->size));
}

} // namespace

//===----------------------------------------------------------------------===//
// The API
//===----------------------------------------------------------------------===//

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (emulated NCCL)";
  case ncclSystemError:
    return "unhandled system error (emulated NCCL)";
  case ncclInternalError:
    return "internal error (emulated NCCL)";
  case ncclInvalidArgument:
    return "invalid argument (emulated NCCL)";
  case ncclInvalidUsage:
    return "invalid usage (emulated NCCL)";
  case ncclRemoteError:
    return "remote process exited or there was a network error (emulated "
           "NCCL)";
  case ncclInProgress:
    return "NCCL operation in progress (emulated NCCL)";
  }
  return "unknown result code (emulated NCCL)";
}

const char *ncclGetLastError(ncclComm_t comm) {
  return (comm ? comm->lastError : globalError()).c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id)
    return failWith(nullptr, ncclInvalidArgument, "ncclGetUniqueId: no id");
  if (!mpiRunning())
    return failWith(nullptr, ncclSystemError,
                    "ncclGetUniqueId: the emulation bootstraps over MPI, "
                    "which is not running");
  static unsigned serial = 0;
  IdContents contents{};
  std::memcpy(contents.magic, kMagic, sizeof(kMagic));
  contents.root = worldRank();
  contents.serial = serial++;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &contents, sizeof(contents));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  const char *fn = "ncclCommInitRankConfig";
  IdContents contents;
  std::memcpy(&contents, id.internal, sizeof(contents));
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument,
                    std::string(fn) + ": no communicator to set");
  *comm = nullptr;
  if (std::memcmp(contents.magic, kMagic, sizeof(kMagic)) != 0)
    return failWith(nullptr, ncclInvalidArgument,
                    std::string(fn) + ": the id is not from ncclGetUniqueId");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return failWith(nullptr, ncclInvalidArgument,
                    std::string(fn) + ": rank " + std::to_string(rank) +
                        " of " + std::to_string(nranks));
  if (!mpiRunning())
    return failWith(nullptr, ncclSystemError,
                    std::string(fn) + ": MPI is not running");
  auto *c = new ncclComm;
  c->rank = rank;
  c->size = nranks;
  c->root = contents.root;
  c->tag = kBootTag + 3 * int(contents.serial % kBootSerials);
  c->me[0] = rank;
  c->me[1] = worldRank();
  if (c->me[1] == c->root) {
    c->entries.assign(2 * size_t(nranks - 1), -1);
    c->pending.resize(size_t(nranks - 1));
    for (int i = 0; i + 1 < nranks; ++i)
      MPI_Irecv(c->entries.data() + 2 * i, 2, MPI_INT, MPI_ANY_SOURCE, c->tag,
                MPI_COMM_WORLD, &c->pending[size_t(i)]);
  } else {
    c->table.assign(size_t(nranks), -1);
    c->pending.resize(2);
    MPI_Isend(c->me, 2, MPI_INT, c->root, c->tag, MPI_COMM_WORLD,
              &c->pending[0]);
    MPI_Irecv(c->table.data(), nranks, MPI_INT, c->root, c->tag + 1,
              MPI_COMM_WORLD, &c->pending[1]);
  }
  *comm = c;
  bool blocking = !config || config->blocking;
  ncclResult_t state = progressBootstrap(*c);
  while (blocking && state == ncclInProgress)
    state = progressBootstrap(*c);
  return state;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  if (!comm || !state)
    return failWith(comm, ncclInvalidArgument,
                    "ncclCommGetAsyncError: no communicator or state");
  *state = comm->aborted ? ncclInvalidUsage : progressBootstrap(*comm);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument,
                    "ncclCommFinalize: no communicator");
  // The communicator's operations are host work on the stream, which the
  // caller waits for; there is nothing else in flight.
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  fake::drainStream(nullptr);
  if (comm->mpi != MPI_COMM_NULL && mpiRunning())
    MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  // Abandons the pending work (Work::poll); the communicator stays
  // allocated, since the stream's abandoned work still names it, and the
  // job is about to end.
  if (comm)
    comm->aborted = true;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  if (groupDepth++ == 0)
    groupWork = std::make_shared<Work>();
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return failWith(nullptr, ncclInvalidUsage,
                    "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth == 0) {
    std::shared_ptr<Work> work = std::move(groupWork);
    if (!work->ops.empty())
      fake::enqueueHostWork([work] { return work->poll(); }, work->stream);
  }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = checkCall("ncclAllReduce", comm, count, datatype,
                                 {sendbuff, recvbuff}, stream))
    return r;
  auto wire = std::make_shared<std::vector<char>>();
  enqueue({comm,
           [=](std::vector<MPI_Request> &requests) {
             *wire = toWire(sendbuff, datatype, count);
             requests.emplace_back();
             MPI_Iallreduce(MPI_IN_PLACE, wire->data(), int(count),
                            wireType(datatype), mpiOp(op), comm->mpi,
                            &requests.back());
           },
           [=] { fromWire(*wire, recvbuff, datatype, op, comm->size); }}, stream);
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (ncclResult_t r = checkCall("ncclReduceScatter", comm, recvcount, datatype,
                                 {sendbuff, recvbuff}, stream,
                                 comm ? size_t(comm->size) : 1))
    return r;
  auto in = std::make_shared<std::vector<char>>();
  auto out = std::make_shared<std::vector<char>>();
  enqueue({comm,
           [=](std::vector<MPI_Request> &requests) {
             *in = toWire(sendbuff, datatype, recvcount * size_t(comm->size));
             out->resize(recvcount * wireBytes(datatype));
             requests.emplace_back();
             MPI_Ireduce_scatter_block(in->data(), out->data(), int(recvcount),
                                       wireType(datatype), mpiOp(op), comm->mpi,
                                       &requests.back());
           },
           [=] { fromWire(*out, recvbuff, datatype, op, comm->size); }}, stream);
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = checkCall("ncclAllGather", comm, sendcount, datatype,
                                 {sendbuff, recvbuff}, stream,
                                 comm ? size_t(comm->size) : 1))
    return r;
  int bytes = int(sendcount * elementBytes(datatype));
  auto in = std::make_shared<std::vector<char>>();
  auto out = std::make_shared<std::vector<char>>();
  enqueue({comm,
           [=](std::vector<MPI_Request> &requests) {
             in->assign(static_cast<const char *>(sendbuff),
                        static_cast<const char *>(sendbuff) + bytes);
             out->resize(size_t(bytes) * size_t(comm->size));
             requests.emplace_back();
             MPI_Iallgather(in->data(), bytes, MPI_BYTE, out->data(), bytes,
                            MPI_BYTE, comm->mpi, &requests.back());
           },
           [=] {
             if (!out->empty())
               std::memcpy(recvbuff, out->data(), out->size());
           }}, stream);
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const char *fn = "ncclBroadcast";
  if (ncclResult_t r = checkCall(fn, comm, count, datatype, {recvbuff}, stream))
    return r;
  if (ncclResult_t r = checkRank(fn, comm, root, "root"))
    return r;
  if (comm->rank == root && count && !sendbuff)
    return failWith(comm, ncclInvalidArgument,
                    std::string(fn) + ": a null buffer at the root");
  size_t bytes = count * elementBytes(datatype);
  auto buf = std::make_shared<std::vector<char>>(bytes);
  enqueue({comm,
           [=](std::vector<MPI_Request> &requests) {
             if (comm->rank == root && bytes)
               std::memcpy(buf->data(), sendbuff, bytes);
             requests.emplace_back();
             MPI_Ibcast(buf->data(), int(bytes), MPI_BYTE, root, comm->mpi,
                        &requests.back());
           },
           [=] {
             if (bytes)
               std::memcpy(recvbuff, buf->data(), bytes);
           }}, stream);
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count,
                      ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  const char *fn = "ncclSend";
  if (ncclResult_t r = checkCall(fn, comm, count, datatype, {sendbuff}, stream))
    return r;
  if (ncclResult_t r = checkRank(fn, comm, peer, "peer"))
    return r;
  size_t bytes = count * elementBytes(datatype);
  auto buf = std::make_shared<std::vector<char>>();
  enqueue({comm,
           [=](std::vector<MPI_Request> &requests) {
             buf->assign(static_cast<const char *>(sendbuff),
                         static_cast<const char *>(sendbuff) + bytes);
             // Synchronous mode: like NCCL's, the send completes only
             // once the peer's receive has started, however small.
             requests.emplace_back();
             MPI_Issend(buf->data(), int(bytes), MPI_BYTE, peer, kP2pTag,
                        comm->mpi, &requests.back());
           },
           [] {}}, stream);
  return ncclSuccess;
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  const char *fn = "ncclRecv";
  if (ncclResult_t r = checkCall(fn, comm, count, datatype, {recvbuff}, stream))
    return r;
  if (ncclResult_t r = checkRank(fn, comm, peer, "peer"))
    return r;
  size_t bytes = count * elementBytes(datatype);
  auto buf = std::make_shared<std::vector<char>>(bytes);
  enqueue({comm,
           [=](std::vector<MPI_Request> &requests) {
             requests.emplace_back();
             MPI_Irecv(buf->data(), int(bytes), MPI_BYTE, peer, kP2pTag,
                       comm->mpi, &requests.back());
           },
           [=] {
             if (bytes)
               std::memcpy(recvbuff, buf->data(), bytes);
           }}, stream);
  return ncclSuccess;
}
