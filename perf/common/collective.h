// What a perf tool tells the shared driver about its collective. Each <coll>_perf.cc fills one CollectiveSpec and
// calls runPerf(spec, argc, argv); the driver owns flags, ranks, buffers, timing, checking and the output table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"
#include "perf/common/data_types.h"

namespace braid::perf {

// Buffer shapes of one operation, in elements.
struct CollCounts {
  size_t sendCount = 0;          // one rank's send buffer
  size_t recvCount = 0;          // one rank's receive buffer
  size_t paramCount = 0;         // the count argument passed to NCCL (the table's "count" column)
  size_t sendInPlaceOffset = 0;  // in place, the send buffer starts this many elements into the receive buffer
};

// Everything the data callbacks may depend on.
struct DataCtx {
  const TypeInfo* type = nullptr;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  uint64_t seed = 0;  // differs per size, placement and check iteration
  CollCounts counts;

  DataSpec dataSpec() const { return DataSpec{type, op, nranks, seed}; }
};

// Arguments of one call.
struct RunArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  CollCounts counts;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

struct CollectiveSpec {
  const char* name = nullptr;  // the tool's name, printed in the header and footer ("all_reduce_perf")
  bool hasOp = false;          // reduction collectives: -o is meaningful, "redop" column shows it (else "none")
  bool hasRoot = false;        // rooted collectives: -r is meaningful, "root" column shows it (else -1)
  // Buffer shapes for a message of `bytes` bytes (nccl-tests' sizing: the table's "size" column is
  // max(sendCount, recvCount) * typeSize).
  CollCounts (*counts)(size_t bytes, size_t typeSize, int nranks) = nullptr;
  // S in algbw = S / time.
  size_t (*algBytes)(const CollCounts& counts, size_t typeSize, int nranks) = nullptr;
  // busbw = algbw * factor.
  double (*busBwFactor)(int nranks) = nullptr;
  // Writes this rank's counts.sendCount input elements to `send`.
  void (*initInput)(const DataCtx& ctx, void* send) = nullptr;
  // Writes what this rank's receive buffer must hold afterwards; returns how many leading elements to compare.
  size_t (*initExpected)(const DataCtx& ctx, void* expected) = nullptr;
  // Issues the operation (on a host communicator with a NULL stream it has completed on return).
  ncclResult_t (*run)(const RunArgs& args) = nullptr;
};

// Runs the tool; returns the process exit status.
int runPerf(const CollectiveSpec& spec, int argc, char** argv);

}  // namespace braid::perf
