// all_reduce_perf: nccl-tests' all-reduce benchmark and checker, on braid's shared perf driver.
#include "nccl.h"
#include "perf/common/collective.h"
#include "perf/common/data_types.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;
using braid::perf::RunArgs;

CollCounts allReduceCounts(size_t bytes, size_t typeSize, int /*nranks*/) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = bytes / typeSize;
  c.sendInPlaceOffset = 0;
  return c;
}

size_t allReduceAlgBytes(const CollCounts& c, size_t typeSize, int /*nranks*/) {
  return c.paramCount * typeSize;
}

// Every rank sends and receives (n-1)/n of the buffer in the reduce-scatter and again in the all-gather phase.
double allReduceBusBwFactor(int nranks) {
  return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

void allReduceInput(const DataCtx& ctx, void* send) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

size_t allReduceExpected(const DataCtx& ctx, void* expected) {
  braid::perf::fillReduced(ctx.dataSpec(), 0, ctx.counts.recvCount, expected);
  return ctx.counts.recvCount;
}

ncclResult_t allReduceRun(const RunArgs& a) {
  return ncclAllReduce(a.send, a.recv, a.counts.paramCount, a.type, a.op, a.comm, a.stream);
}

}  // namespace

int main(int argc, char** argv) {
  braid::perf::CollectiveSpec spec;
  spec.name = "all_reduce_perf";
  spec.hasOp = true;
  spec.hasRoot = false;
  spec.counts = allReduceCounts;
  spec.algBytes = allReduceAlgBytes;
  spec.busBwFactor = allReduceBusBwFactor;
  spec.initInput = allReduceInput;
  spec.initExpected = allReduceExpected;
  spec.run = allReduceRun;
  return braid::perf::runPerf(spec, argc, argv);
}
