// The library a perf tool measures. braid (through the public nccl.h API) is the default; `--baseline mpi` and
// `--baseline gloo` run the same sizes, table and exact check through MPI's or Gloo's own collectives, so one
// harness compares them side by side.
//
// A backend is used in three phases: startProcess() once on the main thread (MPI_Init, unique-id exchange),
// connect() on every driver thread for the ranks that thread drives (nccl-tests' -g), then finishProcess().
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nccl.h"
#include "perf/common/data_types.h"
#include "perf/common/launch.h"

namespace braid::perf {

enum class CollKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kBroadcast,
  kReduce,
  kSendRecv,
  kGather,
  kScatter
};

// Buffer shapes of one operation, in elements.
struct CollCounts {
  size_t sendCount = 0;          // one rank's send buffer
  size_t recvCount = 0;          // one rank's receive buffer
  size_t paramCount = 0;         // the count argument passed to NCCL (the table's "count" column)
  size_t sendInPlaceOffset = 0;  // in place: the send buffer starts rank * this many elements into the receive one
  size_t recvInPlaceOffset = 0;  // in place: the receive buffer starts rank * this many elements into the send one
};

// One rank's arguments for one operation.
struct RunArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  bool inPlace = false;
  CollCounts counts;
  const TypeInfo* type = nullptr;
  const OpInfo* op = nullptr;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  cudaStream_t stream = nullptr;  // device buffers: the rank's stream (NULL with -y 1); host buffers: NULL
};

// The ranks one driver thread drives, all through one library. Each call covers every rank of the thread (a
// vector entry per rank, in rank order) and returns false with *error on failure. Not thread safe: one thread.
class ThreadComms {
 public:
  virtual ~ThreadComms() = default;
  // Whether `kind` with this type and op can run at all; *why explains a refusal (asked before any size runs).
  virtual bool supports(CollKind kind, const TypeInfo& type, const OpInfo& op, std::string* why) const = 0;
  // Issues the operation on every rank of the thread. On host buffers it is complete on return; on device buffers
  // it is ordered on each rank's args.stream and the driver synchronizes the streams.
  virtual bool run(CollKind kind, const std::vector<RunArgs>& args, std::string* error) = 0;
  // Several run() calls fused into one group (-m); libraries without groups just run them in turn.
  virtual bool groupStart(std::string* error) = 0;
  virtual bool groupEnd(std::string* error) = 0;
  // The driver's own bookkeeping: an in-place all-reduce of `count` elements per rank (float64 sum/min/max,
  // int64 sum, uint8 sum). `streams` is empty for host buffers, else one per rank (the caller synchronizes).
  virtual bool allReduce(const std::vector<void*>& bufs, size_t count, ncclDataType_t type, ncclRedOp_t op,
                         const std::vector<cudaStream_t>& streams, std::string* error) = 0;
  // The device of rank i of this thread as the library reports it (ncclCommCuDevice; -1: host memory).
  virtual int device(size_t i) const = 0;
  // -R 1: registers rank i's buffers with its communicator (ncclCommRegister); -R 2 (windows true): as symmetric
  // windows (ncclCommWindowRegister, collective: the caller groups the ranks of its thread). Deregistered at close().
  // A library without registration says so in *error.
  virtual bool registerBuffers(size_t i, const std::vector<std::pair<void*, size_t>>& buffers, bool windows,
                               std::string* error) {
    *error = "this library has no buffer registration (-R 1 and -R 2 are for braid and NCCL)";
    return false;
  }
  // Tears the communicators down; false with *error when that fails.
  virtual bool close(std::string* error) = 0;
};

// bytes rounded up to whole 4 KB pages (at least one), and zeroed page-aligned host memory of that size (std::free).
size_t pageRounded(size_t bytes);
void* zeroedHostPages(size_t bytes);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;  // "braid", "mpi", "gloo"
  // Once per process, before any thread connects; nprocs/procRank may be corrected from the library (MPI).
  virtual bool startProcess(LaunchInfo* launch, int ranksPerProcess, std::string* error) = 0;
  // Connects ranks [firstRank, firstRank + count) of nranks, driven by the calling thread. devices[i] >= 0: the CUDA
  // device rank firstRank + i should use (made current before its communicator is created, as nccl-tests does).
  virtual std::unique_ptr<ThreadComms> connect(int firstRank, int count, int nranks, const std::vector<int>& devices,
                                               std::string* error) = 0;
  // Whether the library takes device buffers at all (the baselines measure host memory only).
  virtual bool takesDeviceBuffers() const { return false; }
  // How many ranks one thread may drive, and one process may hold (0: no limit).
  virtual int maxRanksPerThread() const { return 0; }
  virtual int maxThreadsPerProcess() const { return 0; }
  virtual void finishProcess() {}
  // The perf buffers: braid uses ncclMemAlloc, as nccl-tests does (on host memory that is memory peers can map);
  // the baselines use plain page-aligned memory. Returns zeroed memory or nullptr.
  virtual void* allocate(size_t bytes);
  virtual void release(void* p);
  // Device buffers on the current CUDA device (braid: ncclMemAlloc, as nccl-tests), zeroed; nullptr with *error.
  virtual void* allocateOnDevice(size_t bytes, std::string* error);
  virtual void releaseOnDevice(void* p);
};

// "braid" (the default), "mpi" or "gloo"; nullptr with *error when the name is unknown or this build lacks it.
std::unique_ptr<Backend> makeBackend(const std::string& name, std::string* error);
// The backends this build has, for the usage text ("braid, mpi, gloo").
std::string availableBackends();

// Factories of the optional backends (defined only when the build has the library).
std::unique_ptr<Backend> makeBraidBackend();
std::unique_ptr<Backend> makeMpiBackend();
std::unique_ptr<Backend> makeGlooBackend();

// When the process was started by an MPI launcher and this build has MPI: initializes MPI (if not yet) and
// broadcasts `bytes` bytes from world rank 0 (braid's unique id, as nccl-tests' MPI build does); false otherwise.
// Fails, naming both, when MPI's rank and size differ from the launcher's variables in `launch`.
bool mpiBroadcastFromRoot(const LaunchInfo& launch, void* data, size_t bytes, std::string* error);
// True when this build has MPI support and the environment is an MPI launch (Open MPI, MPICH/PMI).
bool mpiLaunchDetected();
void mpiFinalizeIfStarted();

}  // namespace braid::perf
