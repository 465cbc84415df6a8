// What a perf tool tells the shared driver about its collective. Each <coll>_perf.cc fills one CollectiveSpec and
// calls runPerf(spec, argc, argv); the driver owns flags, ranks, buffers, timing, checking and the output table,
// and the backend (braid, or an MPI/Gloo baseline) issues the operation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"
#include "perf/common/backend.h"
#include "perf/common/data_types.h"

namespace braid::perf {

// Everything the data callbacks may depend on.
struct DataCtx {
  const TypeInfo* type = nullptr;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  uint64_t seed = 0;  // differs per size, placement and check iteration
  CollCounts counts;

  // Data movement collectives draw their values as for a sum (any value pattern would do).
  DataSpec dataSpec() const { return DataSpec{type, op, nranks, seed}; }
};

struct CollectiveSpec {
  const char* name = nullptr;  // the tool's name, printed in the header and footer ("all_reduce_perf")
  CollKind kind = CollKind::kAllReduce;
  bool hasOp = false;        // reduction collectives: -o is meaningful, "redop" column shows it (else "none")
  bool hasRoot = false;      // rooted collectives: -r is meaningful, "root" column shows it (else -1)
  bool checkInPlace = true;  // false: the in-place result is not defined (sendrecv), #wrong shows N/A
  // Buffer shapes for a message of `bytes` bytes (nccl-tests' sizing: the table's "size" column is
  // max(sendCount, recvCount) * typeSize).
  CollCounts (*counts)(size_t bytes, size_t typeSize, int nranks) = nullptr;
  // S in algbw = S / time.
  size_t (*algBytes)(const CollCounts& counts, size_t typeSize, int nranks) = nullptr;
  // busbw = algbw * factor.
  double (*busBwFactor)(int nranks) = nullptr;
  // Writes this rank's counts.sendCount input elements to `send`.
  void (*initInput)(const DataCtx& ctx, void* send) = nullptr;
  // Writes what this rank's receive buffer must hold afterwards; returns how many leading elements to compare
  // (0 where the rank receives nothing, e.g. a non-root rank of reduce or gather).
  size_t (*initExpected)(const DataCtx& ctx, void* expected) = nullptr;
};

// Runs the tool; returns the process exit status.
int runPerf(const CollectiveSpec& spec, int argc, char** argv);

}  // namespace braid::perf
