// reduce_perf: nccl-tests' reduce benchmark and checker, on braid's shared perf driver.
#include "perf/common/spec_parts.h"

namespace {

using braid::perf::DataCtx;

// Only the root's receive buffer is defined afterwards.
size_t expected(const DataCtx& ctx, void* out) {
  if (ctx.rank != ctx.root) return 0;
  braid::perf::fillReduced(ctx.dataSpec(), 0, ctx.counts.recvCount, out);
  return ctx.counts.recvCount;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid::perf;
  CollectiveSpec spec;
  spec.name = "reduce_perf";
  spec.kind = CollKind::kReduce;
  spec.hasOp = true;
  spec.hasRoot = true;
  spec.counts = wholeBufferCounts;
  spec.algBytes = countBytes;
  spec.busBwFactor = unitBusFactor;
  spec.initInput = ownInput;
  spec.initExpected = expected;
  return runPerf(spec, argc, argv);
}
