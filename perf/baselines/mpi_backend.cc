// --baseline mpi: the same table through MPI's own collectives (MPI_Allreduce and friends) on MPI_COMM_WORLD.
//
// Semantics follow the NCCL call each row stands for, so results are checked the same way. Where MPI's in-place
// convention differs from NCCL's, the adaptation is part of the timed operation and is named here:
//   reduce_scatter in place: MPI leaves the block at the start of the buffer; it is moved to rank * count
//                            (1/n of the data, local).
//   broadcast out of place:  MPI broadcasts one buffer; the root copies send to recv (local) and sends from it.
// Types and ops MPI does not have (half, bfloat16, fp8, avg) are refused before anything runs.
// The C bindings only: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/common/backend.h"

namespace braid::perf {
namespace {

bool gStartedMpi = false;

std::string mpiError(const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(what) + " failed: " + std::string(text, static_cast<size_t>(len));
}

bool startMpi(std::string* error) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return true;
  // The driver calls MPI from one rank thread that is not the main thread: SERIALIZED is the least it needs.
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) {
    *error = mpiError("MPI_Init_thread", rc);
    return false;
  }
  gStartedMpi = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_SERIALIZED) {
    *error = "MPI provides thread level " + std::to_string(provided) + ", below MPI_THREAD_SERIALIZED";
    return false;
  }
  return true;
}

MPI_Datatype mpiType(ncclDataType_t t) {
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
    case ncclFloat32:
      return MPI_FLOAT;
    case ncclFloat64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return MPI_SUM;
    case ncclProd:
      return MPI_PROD;
    case ncclMax:
      return MPI_MAX;
    case ncclMin:
      return MPI_MIN;
    default:
      return MPI_OP_NULL;
  }
}

bool mpiCheck(int rc, const char* what, std::string* error) {
  if (rc == MPI_SUCCESS) return true;
  *error = mpiError(what, rc);
  return false;
}

class MpiComms final : public ThreadComms {
 public:
  bool supports(CollKind kind, const TypeInfo& type, const OpInfo& op, std::string* why) const override {
    if (mpiType(type.type) == MPI_DATATYPE_NULL) {
      *why = std::string("MPI has no datatype for ") + type.name + " (use -d with int8..uint64, float or double)";
      return false;
    }
    const bool reduces = kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter || kind == CollKind::kReduce;
    if (reduces && mpiOp(op.op) == MPI_OP_NULL) {
      *why = std::string("MPI has no reduction op ") + op.name + " (use -o sum, prod, max or min)";
      return false;
    }
    return true;
  }

  bool run(CollKind kind, const std::vector<RunArgs>& args, std::string* error) override {
    const RunArgs& a = args[0];
    const MPI_Datatype t = mpiType(a.type->type);
    const MPI_Op op = mpiOp(a.op->op);
    const int n = static_cast<int>(a.counts.paramCount);
    if (a.counts.paramCount > static_cast<size_t>(INT32_MAX)) {
      *error = "count " + std::to_string(a.counts.paramCount) + " exceeds MPI's int count";
      return false;
    }
    const size_t ts = a.type->size;
    const MPI_Comm w = MPI_COMM_WORLD;
    const bool isRoot = a.rank == a.root;
    switch (kind) {
      case CollKind::kAllReduce:
        return mpiCheck(MPI_Allreduce(a.inPlace ? MPI_IN_PLACE : a.send, a.recv, n, t, op, w), "MPI_Allreduce", error);
      case CollKind::kAllGather:
        return mpiCheck(MPI_Allgather(a.inPlace ? MPI_IN_PLACE : a.send, n, t, a.recv, n, t, w), "MPI_Allgather",
                        error);
      case CollKind::kReduceScatter: {
        if (!a.inPlace) {
          return mpiCheck(MPI_Reduce_scatter_block(a.send, a.recv, n, t, op, w), "MPI_Reduce_scatter_block", error);
        }
        char* whole = static_cast<char*>(const_cast<void*>(a.send));
        if (!mpiCheck(MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, n, t, op, w), "MPI_Reduce_scatter_block", error)) {
          return false;
        }
        if (a.recv != whole) std::memmove(a.recv, whole, a.counts.paramCount * ts);
        return true;
      }
      case CollKind::kAlltoAll:
        return mpiCheck(MPI_Alltoall(a.inPlace ? MPI_IN_PLACE : a.send, n, t, a.recv, n, t, w), "MPI_Alltoall", error);
      case CollKind::kBroadcast: {
        void* buf = a.recv;
        if (isRoot && a.send != a.recv) std::memcpy(a.recv, a.send, a.counts.paramCount * ts);
        return mpiCheck(MPI_Bcast(buf, n, t, a.root, w), "MPI_Bcast", error);
      }
      case CollKind::kReduce: {
        const void* send = a.inPlace && isRoot ? MPI_IN_PLACE : a.send;
        return mpiCheck(MPI_Reduce(send, a.recv, n, t, op, a.root, w), "MPI_Reduce", error);
      }
      case CollKind::kGather: {
        const void* send = a.inPlace && isRoot ? MPI_IN_PLACE : a.send;
        return mpiCheck(MPI_Gather(send, n, t, a.recv, n, t, a.root, w), "MPI_Gather", error);
      }
      case CollKind::kScatter: {
        void* recv = a.inPlace && isRoot ? MPI_IN_PLACE : a.recv;
        return mpiCheck(MPI_Scatter(a.send, n, t, recv, n, t, a.root, w), "MPI_Scatter", error);
      }
      case CollKind::kSendRecv: {
        const int next = (a.rank + 1) % a.nranks;
        const int prev = (a.rank - 1 + a.nranks) % a.nranks;
        if (a.inPlace) {
          return mpiCheck(MPI_Sendrecv_replace(a.recv, n, t, next, 0, prev, 0, w, MPI_STATUS_IGNORE),
                          "MPI_Sendrecv_replace", error);
        }
        return mpiCheck(MPI_Sendrecv(a.send, n, t, next, 0, a.recv, n, t, prev, 0, w, MPI_STATUS_IGNORE),
                        "MPI_Sendrecv", error);
      }
    }
    *error = "unknown collective";
    return false;
  }

  bool groupStart(std::string*) override { return true; }
  bool groupEnd(std::string*) override { return true; }

  bool allReduce(const std::vector<void*>& bufs, size_t count, ncclDataType_t type, ncclRedOp_t op,
                 const std::vector<cudaStream_t>&, std::string* error) override {
    return mpiCheck(
        MPI_Allreduce(MPI_IN_PLACE, bufs[0], static_cast<int>(count), mpiType(type), mpiOp(op), MPI_COMM_WORLD),
        "MPI_Allreduce (bookkeeping)", error);
  }

  int device(size_t) const override { return -1; }
  bool close(std::string*) override { return true; }
};

class MpiBackend final : public Backend {
 public:
  const char* name() const override { return "mpi"; }
  int maxRanksPerThread() const override { return 1; }
  int maxThreadsPerProcess() const override { return 1; }

  bool startProcess(LaunchInfo* launch, int ranksPerProcess, std::string* error) override {
    if (ranksPerProcess != 1) {
      *error = "--baseline mpi runs one rank per process (-t 1 -g 1); start more processes with mpirun -np";
      return false;
    }
    if (!startMpi(error)) return false;
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!launch->source.empty() && (size != launch->worldSize || rank != launch->procRank)) {
      *error = "MPI says rank " + std::to_string(rank) + " of " + std::to_string(size) + " but " + launch->source +
               " says " + std::to_string(launch->procRank) + " of " + std::to_string(launch->worldSize) +
               "; start --baseline mpi with mpirun";
      return false;
    }
    launch->worldSize = size;
    launch->procRank = rank;
    if (launch->source.empty()) launch->source = "MPI_COMM_WORLD";
    return true;
  }

  std::unique_ptr<ThreadComms> connect(int, int, int, const std::vector<int>&, std::string*) override {
    return std::make_unique<MpiComms>();
  }

  void finishProcess() override { mpiFinalizeIfStarted(); }
};

}  // namespace

bool mpiLaunchDetected() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const char* s = std::getenv(v);
    if (s != nullptr && *s != '\0') return true;
  }
  return false;
}

bool mpiBroadcastFromRoot(const LaunchInfo& launch, void* data, size_t bytes, std::string* error) {
  if (!startMpi(error)) return false;
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size != launch.worldSize || rank != launch.procRank) {
    // Typically a launcher of another MPI (MPICH's PMI variables, this build's Open MPI): MPI_Init then sees
    // singletons, and the id would never reach the other processes.
    *error = "MPI says rank " + std::to_string(rank) + " of " + std::to_string(size) + " but " + launch.source +
             " says " + std::to_string(launch.procRank) + " of " + std::to_string(launch.worldSize) +
             "; start the tools with the mpirun of the MPI they were built with, or unset " + launch.source;
    return false;
  }
  return mpiCheck(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (unique id)",
                  error);
}

void mpiFinalizeIfStarted() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (gStartedMpi && !finalized) MPI_Finalize();
}

std::unique_ptr<Backend> makeMpiBackend() {
  return std::make_unique<MpiBackend>();
}

}  // namespace braid::perf
