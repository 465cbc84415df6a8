// reduce_perf: nccl-tests' reduce benchmark and checker, on braid's shared perf driver.
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

double busBwFactor(int /*nranks*/) {
  return 1.0;
}

void input(const DataCtx& ctx, void* send) {
  braid::perf::fillInput(ctx.dataSpec(), ctx.rank, 0, ctx.counts.sendCount, send);
}

// Only the root's receive buffer is defined afterwards.
size_t expected(const DataCtx& ctx, void* out) {
  if (ctx.rank != ctx.root) return 0;
  braid::perf::fillReduced(ctx.dataSpec(), 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  braid::perf::CollectiveSpec spec;
  spec.name = "reduce_perf";
  spec.kind = braid::perf::CollKind::kReduce;
  spec.hasOp = true;
  spec.hasRoot = true;
  spec.counts = counts;
  spec.algBytes = algBytes;
  spec.busBwFactor = busBwFactor;
  spec.initInput = input;
  spec.initExpected = expected;
  return braid::perf::runPerf(spec, argc, argv);
}
