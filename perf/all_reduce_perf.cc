// all_reduce_perf: nccl-tests' all-reduce benchmark and checker, on braid's shared perf driver.
#include "perf/common/collective.h"

namespace {

using braid::perf::CollCounts;
using braid::perf::DataCtx;

CollCounts counts(size_t bytes, size_t typeSize, int /*nranks*/) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = bytes / typeSize;
  return c;
}

size_t algBytes(const CollCounts& c, size_t typeSize, int /*nranks*/) {
  return c.paramCount * typeSize;
}

// Every rank sends and receives (n-1)/n of the buffer in the reduce-scatter and again in the all-gather phase.
double busBwFactor(int nranks) {
  return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

void input(const DataCtx& ctx, void* send) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

size_t expected(const DataCtx& ctx, void* out) {
  braid::perf::fillReduced(ctx.dataSpec(), 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  braid::perf::CollectiveSpec spec;
  spec.name = "all_reduce_perf";
  spec.kind = braid::perf::CollKind::kAllReduce;
  spec.hasOp = true;
  spec.counts = counts;
  spec.algBytes = algBytes;
  spec.busBwFactor = busBwFactor;
  spec.initInput = input;
  spec.initExpected = expected;
  return braid::perf::runPerf(spec, argc, argv);
}
